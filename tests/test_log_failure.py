"""A session log that fails: said at once, bounded in memory, never lost in silence.

Through the real subprocess:

* the first prompt whose records cannot be written is answered with
  ``_meta.acpBridge.logError`` (the answer is built after its records were
  tried);
* a log whose file was deleted, or whose state folder was removed, mid-session
  is a log failure like a full disk: reported once on stderr, ``logError`` in
  the answer, new prompts refused; no new file is started in its place (it
  would begin with a ``seq`` other than 0, which no reader accepts);
* a turn streaming into a failing log pauses once the log holds its limit in
  memory, instead of growing without bound;
* at exit, stderr says exactly which records were not written (count, bytes,
  session, path) and where a copy went (a private sibling file, else stderr),
  and the exit status is non-zero.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import stat
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.bridge import size_limited_env, start_bridge
from support.harness import write_script

from acp_bridge.client import AcpClient, RequestId, prompt_params
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records
from acp_bridge.log.writer import SessionLog
from acp_bridge.stderr_log import BUFFER_BYTES
from acp_bridge.transport.outbox import LOG_HOLD_LIMIT, Outbox

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux prlimit")

EXIT_RECORDS_LOST = 3
LIMIT = 3000  # bytes: session/start and a first short turn fit, a long answer does not

SCRIPT: dict[str, Any] = {
    "responses": [
        {"events": [{"text": "Short."}]},
        {"events": [{"text": "A long answer. " * 40, "chunk_size": 15}]},
    ],
    "when_exhausted": "repeat_last",
}

BIG_CHUNK = "x" * 2000
ENDLESS_SMALL: dict[str, Any] = {
    "responses": [
        {"events": [{"text": "Short."}]},
        {"events": [{"endless": {"text": "tok "}}]},
    ],
    "when_exhausted": "repeat_last",
}
ENDLESS_BIG: dict[str, Any] = {
    "responses": [
        {"events": [{"text": "Short."}]},
        {"events": [{"endless": {"text": BIG_CHUNK}}]},
    ],
    "when_exhausted": "repeat_last",
}


def log_error(answer: dict[str, Any]) -> str | None:
    meta = answer.get("result", {}).get("_meta", {})
    error = meta.get("acpBridge", {}).get("logError")
    return error if isinstance(error, str) else None


async def start_session(client: AcpClient, cwd: Path) -> str:
    await client.initialize()
    return await client.new_session(str(cwd))


async def send_prompt(client: AcpClient, session: str, text: str) -> RequestId:
    params = prompt_params(session, text)
    return await client.send_request("session/prompt", params)


async def prompt(client: AcpClient, session: str, text: str) -> dict[str, Any]:
    return await client.wait_response(await send_prompt(client, session, text))


def unwritten_report(stderr: str) -> re.Match[str]:
    found = re.search(
        r"(\d+) record\(s\) \((\d+) bytes\) of session (\S+) could not be written to (\S+):",
        stderr,
    )
    assert found is not None, stderr
    return found


def test_the_first_failing_turn_says_so_and_exit_saves_what_was_lost(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path, SCRIPT)
    state = tmp_path / "state"
    err = tmp_path / "stderr.txt"

    async def drive() -> tuple[str, int]:
        async with start_bridge(state, script=script, stderr=err, env=size_limited_env()) as client:
            pid = client.agent.pid
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (LIMIT, resource.RLIM_INFINITY))
            session = await start_session(client, tmp_path)
            first = await prompt(client, session, "Hi")
            assert first["result"]["stopReason"] == "end_turn"
            assert log_error(first) is None
            second = await prompt(client, session, "Tell me more")
            assert second["result"]["stopReason"] == "end_turn"
            assert log_error(second) is not None, (
                f"the failing turn's answer hides the failure: {second}"
            )
            third = await prompt(client, session, "And then?")
            assert third["error"]["code"] == -32603
            # The editor leaves while the disk is still full.
            assert await client.finish() == EXIT_RECORDS_LOST
            return session, pid

    session, pid = anyio.run(drive)

    stderr = err.read_text()
    found = unwritten_report(stderr)
    path = state / "sessions" / f"{session}.jsonl"
    assert found.group(3) == session
    assert found.group(4) == str(path)
    copy = Path(f"{path}.unwritten-{pid}")
    assert f"a copy of them is in {copy}" in stderr
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    kept = copy.read_bytes()
    assert int(found.group(2)) == len(kept)
    assert int(found.group(1)) == kept.count(b"\n")
    # The file and the copy, joined, are the whole session.
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(path.read_bytes() + kept)
    records = read_records(whole)
    check_log(records)
    assert records[-1]["type"] == "turn/end"
    assert sum(1 for r in records if r["type"] == "turn/start") == 2


def test_a_deleted_log_is_a_failure_and_a_streaming_turn_pauses_at_a_bound(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path, ENDLESS_BIG)
    state = tmp_path / "state"
    err = tmp_path / "stderr.txt"

    async def drive() -> tuple[str, int]:
        async with start_bridge(state, script=script, stderr=err) as client:
            pid = client.agent.pid
            session = await start_session(client, tmp_path)
            assert (await prompt(client, session, "Hi"))["result"]["stopReason"] == "end_turn"
            path = state / "sessions" / f"{session}.jsonl"
            streaming = await send_prompt(client, session, "Stream")
            start = len(client.updates)
            await client.wait_until(lambda: len(client.updates) >= start + 50)
            path.unlink()  # while the file is open and being written
            # Every chunk from here on can only be kept in memory: the turn must
            # pause once the log holds its limit, not stream on without bound.
            bound = 2 * LOG_HOLD_LIMIT // len(BIG_CHUNK) + 500
            unlinked = len(client.updates)
            while len(client.updates) - unlinked < 10 * bound:
                seen = len(client.updates)
                with anyio.move_on_after(1.5) as quiet:
                    await client.wait_until(lambda: len(client.updates) > seen)  # noqa: B023
                if quiet.cancelled_caught:
                    break  # the stream paused
            after = len(client.updates) - unlinked
            assert after < bound, f"{after} chunks streamed into a deleted log"
            await client.notify("session/cancel", {"sessionId": session})
            answer = await client.wait_response(streaming)
            assert answer["result"]["stopReason"] == "cancelled"
            assert "deleted" in (log_error(answer) or ""), answer
            refused = await prompt(client, session, "Again")
            assert refused["error"]["code"] == -32603
            assert await client.finish() == EXIT_RECORDS_LOST
            return session, pid

    session, pid = anyio.run(drive)

    path = state / "sessions" / f"{session}.jsonl"
    assert not path.exists(), "a new log file was started in the middle of the session"
    stderr = err.read_text()
    assert stderr.count("cannot write") == 1, stderr
    found = unwritten_report(stderr)
    copy = Path(f"{path}.unwritten-{pid}")
    assert copy.stat().st_size == int(found.group(2))
    # The limit, then what the Stop recorded: the interrupted message holds
    # the delivered text twice (its content and its timed stream).
    assert int(found.group(2)) <= 4 * LOG_HOLD_LIMIT


def test_a_removed_state_folder_leaves_the_records_on_stderr(tmp_path: Path) -> None:
    script = write_script(tmp_path, ENDLESS_SMALL)
    state = tmp_path / "state"
    err = tmp_path / "stderr.txt"

    async def drive() -> str:
        async with start_bridge(state, script=script, stderr=err) as client:
            session = await start_session(client, tmp_path)
            assert (await prompt(client, session, "Hi"))["result"]["stopReason"] == "end_turn"
            streaming = await send_prompt(client, session, "Stream")
            start = len(client.updates)
            await client.wait_until(lambda: len(client.updates) >= start + 20)
            shutil.rmtree(state)  # while the turn streams into the log
            removed = len(client.updates)
            await client.wait_until(lambda: len(client.updates) >= removed + 20)
            await client.notify("session/cancel", {"sessionId": session})
            answer = await client.wait_response(streaming)
            assert answer["result"]["stopReason"] == "cancelled"
            assert log_error(answer) is not None, answer
            assert (await prompt(client, session, "And then?"))["error"]["code"] == -32603
            assert await client.finish() == EXIT_RECORDS_LOST
            return session

    session = anyio.run(drive)

    assert not state.exists(), "the state folder was created again"
    stderr = err.read_text()
    found = unwritten_report(stderr)
    assert found.group(3) == session
    begin, end = (
        f"--- unwritten records of {session} ---",
        f"--- end of unwritten records of {session} ---",
    )
    dumped = re.search(rf"{begin}\n(.*){end}", stderr, re.S)
    assert dumped is not None, stderr
    lines = dumped.group(1).splitlines()
    assert len(lines) == int(found.group(1))
    # What stderr kept is the rest of the stopped turn, in order, to its end.
    records = [json.loads(line) for line in lines]
    seqs = [r["seq"] for r in records]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert records[-1]["type"] == "turn/end"
    assert records[-1]["reason"] == "cancelled"


def test_records_too_many_for_stderr_s_buffer_still_reach_it_at_exit(tmp_path: Path) -> None:
    """The disk is full at exit, and what the log could not take is larger than
    the stderr handler's buffer: no copy can be saved beside the log, and the
    records still reach stderr, whole (they used to be dropped for their size,
    so the exit said nothing at all of them)."""
    script = write_script(tmp_path, ENDLESS_BIG)
    state = tmp_path / "state"
    # A pipe, not a file: the file size limit would cut a stderr file short.
    read_end, write_end = os.pipe()
    received: list[bytes] = []

    def read_stderr() -> None:
        while chunk := os.read(read_end, 1 << 16):
            received.append(chunk)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()

    async def drive() -> str:
        async with start_bridge(
            state, script=script, provider=None, stderr=write_end, env=size_limited_env()
        ) as client:
            os.close(write_end)
            limit = (LIMIT, resource.RLIM_INFINITY)
            resource.prlimit(client.agent.pid, resource.RLIMIT_FSIZE, limit)
            session = await start_session(client, tmp_path)
            assert (await prompt(client, session, "Hi"))["result"]["stopReason"] == "end_turn"
            await send_prompt(client, session, "Stream")
            start = len(client.updates)
            # Twice the buffer's bound, in 2,000-byte chunks, all kept in memory.
            chunks = 2 * BUFFER_BYTES // len(BIG_CHUNK)
            await client.wait_until(lambda: len(client.updates) >= start + chunks)
            # The editor leaves mid-stream while the disk is still full.
            assert await client.finish() == EXIT_RECORDS_LOST
            return session

    session = anyio.run(drive)
    reader.join(timeout=30)
    os.close(read_end)
    stderr = b"".join(received).decode()
    found = unwritten_report(stderr)
    assert int(found.group(2)) > BUFFER_BYTES
    assert "no copy could be saved beside it" in stderr
    begin, end = (
        f"--- unwritten records of {session} ---\n",
        f"--- end of unwritten records of {session} ---",
    )
    dumped = re.search(rf"{begin}(.*){end}", stderr, re.S)
    assert dumped is not None, stderr[-2000:]
    assert len(dumped.group(1).encode()) == int(found.group(2))
    # The file and what stderr kept, joined, are the whole session.
    path = state / "sessions" / f"{session}.jsonl"
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(path.read_bytes() + dumped.group(1).encode())
    records = read_records(whole)
    check_log(records)
    assert records[-1]["type"] == "turn/end"
    assert records[-1]["reason"] == "disconnected"


def test_a_continued_log_is_never_started_anew(tmp_path: Path) -> None:
    """A log continued from its records (``next_seq`` > 0) whose file is gone is
    lost: writing would start a file in the middle of the session."""
    path = tmp_path / "s.jsonl"
    devnull = os.open(os.devnull, os.O_WRONLY)
    outbox = Outbox(devnull)
    slog = SessionLog(str(path), outbox, next_seq=7)
    slog.append("turn/start", 3, 0)
    outbox.flush_now()
    assert not path.exists()
    assert slog.file.error is not None
    assert "deleted" in slog.file.error
    assert outbox.unwritten_logs() == [slog.file]
    os.close(devnull)
