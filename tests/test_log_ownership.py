"""A session log belongs to one process, and is the file that process wrote.

Through the real subprocess:

* the lock is the log's own: deleting every other file beside the logs does
  not let a second process open a session that is in use;
* a log whose descriptor was closed to spare descriptors (the process keeps
  only a share of its limit open) is not locked while idle, so another
  process may open it; then whichever process writes second notices (the lock
  is taken, or the file's size is not what it wrote) and writes nothing, so
  ``seq`` never repeats and the log stays readable;
* a log deleted, replaced or cut short while the session is idle is noticed
  before the next prompt streams anything: the prompt gets an error and not a
  single chunk;
* a log cut short while a turn streams is lost like a deleted one: the answer
  says so, nothing more is written to it, and the exit saves the rest.
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.bridge import start_bridge
from support.harness import write_script

from acp_bridge.client import AcpClient, RequestId, prompt_params
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records
from acp_bridge.log.writer.files import LogFiles
from acp_bridge.log.writer.lock import SessionLocked

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux")

EXIT_RECORDS_LOST = 3

SHORT: dict[str, Any] = {
    "responses": [{"events": [{"text": "Short answer."}]}],
    "when_exhausted": "repeat_last",
}
ENDLESS: dict[str, Any] = {
    "responses": [
        {"events": [{"text": "Short answer."}]},
        {"events": [{"endless": {"text": "tok "}}]},
    ],
    "when_exhausted": "repeat_last",
}


def log_path(state: Path, session: str) -> Path:
    return state / "sessions" / f"{session}.jsonl"


async def send_prompt(client: AcpClient, session: str, text: str) -> RequestId:
    return await client.send_request("session/prompt", prompt_params(session, text))


async def prompt(client: AcpClient, session: str, text: str) -> dict[str, Any]:
    return await client.wait_response(await send_prompt(client, session, text))


async def refused_before_streaming(client: AcpClient, session: str) -> dict[str, Any]:
    """A prompt that must be refused before its turn sends anything; its error."""
    before = len(client.updates)
    answer = await prompt(client, session, "Again")
    # Every update of a turn reaches the editor before its answer (I1), so
    # the answer is the barrier: whatever the turn sent is in by now.
    assert client.updates[before:] == [], "the prompt streamed before it was refused"
    assert "error" in answer, answer
    assert answer["error"]["code"] == -32603
    error: dict[str, Any] = answer["error"]
    return error


def test_deleting_what_lies_beside_a_log_does_not_unlock_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    script = write_script(tmp_path, SHORT)

    async def drive() -> str:
        async with start_bridge(
            state, script=script, provider=None, stderr=tmp_path / "holder.txt"
        ) as holder:
            await holder.initialize()
            session = await holder.new_session(str(tmp_path))
            assert (await prompt(holder, session, "Hi"))["result"]["stopReason"] == "end_turn"
            # Whatever a user might clear away as leftovers (lock files of
            # earlier versions were here), the session stays locked.
            for path in (state / "sessions").iterdir():
                if path.suffix != ".jsonl":
                    path.unlink()
            async with start_bridge(
                state, script=script, provider=None, stderr=tmp_path / "intruder.txt"
            ) as intruder:
                await intruder.initialize()
                for method in ("session/load", "session/resume"):
                    params = {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []}
                    error = (await intruder.request(method, params))["error"]
                    assert error["data"]["kind"] == "session_locked", error
                    assert f"pid {holder.agent.pid}" in error["message"], error
                deleted = await intruder.request("session/delete", {"sessionId": session})
                assert deleted["error"]["data"]["kind"] == "session_locked", deleted
                assert await intruder.finish() == 0
            assert (await prompt(holder, session, "More"))["result"]["stopReason"] == "end_turn"
            assert await holder.finish() == 0
            return session

    session = anyio.run(drive)
    records = read_records(log_path(state, session))
    check_log(records)
    assert sum(r["type"] == "turn/start" for r in records) == 2


def test_a_session_idle_here_and_written_elsewhere_is_never_written_twice(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    script = write_script(tmp_path, SHORT)
    cwd = str(tmp_path)

    async def drive() -> str:
        async with start_bridge(
            state, script=script, provider=None, stderr=tmp_path / "first.txt"
        ) as first:
            await first.initialize()
            # 64 descriptors: the first process keeps 16 logs open, so the
            # oldest session's log is closed (and unlocked) once 16 more open.
            resource.prlimit(first.agent.pid, resource.RLIMIT_NOFILE, (64, 64))
            session = await first.new_session(cwd)
            assert (await prompt(first, session, "Hi"))["result"]["stopReason"] == "end_turn"
            for _ in range(20):
                await first.new_session(cwd)
            async with start_bridge(
                state, script=script, provider=None, stderr=tmp_path / "second.txt"
            ) as second:
                await second.initialize()
                params = {"sessionId": session, "cwd": cwd, "mcpServers": []}
                assert "result" in await second.request("session/resume", params)
                answer = await prompt(second, session, "From the second process")
                assert answer["result"]["stopReason"] == "end_turn"
                # The second process holds the log open: the first is refused.
                error = await refused_before_streaming(first, session)
                assert error["data"]["kind"] == "session_locked", error
                assert f"pid {second.agent.pid}" in error["message"], error
                closed = await second.request("session/close", {"sessionId": session})
                assert closed["result"] == {}, closed
                # Free again, but changed behind the first process's back.
                error = await refused_before_streaming(first, session)
                assert error["data"]["kind"] == "log_lost", error
                assert "something else wrote to the file" in error["message"], error
                assert await second.finish() == 0
            assert await first.finish() == 0  # refused before anything was recorded
            return session

    session = anyio.run(drive)
    records = read_records(log_path(state, session))  # contiguous seq, or this raises
    check_log(records)
    users = [r for r in records if r["type"] == "user/message"]
    assert [u["content"][0]["text"] for u in users] == ["Hi", "From the second process"]


def _delete(path: Path) -> None:
    path.unlink()


def _replace(path: Path) -> None:
    other = path.with_suffix(".new")
    other.write_bytes(path.read_bytes())
    other.replace(path)


def _cut_short(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)  # in place: the same file


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (_delete, "deleted"),
        (_replace, "another file was put in its place"),
        (_cut_short, "cut short"),
    ],
)
def test_a_log_damaged_while_idle_fails_the_next_prompt_before_it_streams(
    tmp_path: Path, damage: Any, said: str
) -> None:
    state = tmp_path / "state"
    script = write_script(tmp_path, SHORT)
    err = tmp_path / "stderr.txt"

    async def drive() -> tuple[str, bytes | None]:
        async with start_bridge(state, script=script, provider=None, stderr=err) as client:
            await client.initialize()
            session = await client.new_session(str(tmp_path))
            assert (await prompt(client, session, "Hi"))["result"]["stopReason"] == "end_turn"
            path = log_path(state, session)
            damage(path)
            left = path.read_bytes() if path.exists() else None
            error = await refused_before_streaming(client, session)
            assert error["data"]["kind"] == "log_lost", error
            assert said in error["message"], error
            # Refused for good: the file is never written again.
            await refused_before_streaming(client, session)
            assert await client.finish() == 0  # nothing was recorded, so nothing lost
            return session, left

    session, left = anyio.run(drive)
    path = log_path(state, session)
    assert (path.read_bytes() if path.exists() else None) == left
    said_on_stderr = err.read_text()
    assert said_on_stderr.count("cannot write") == 1, said_on_stderr
    # What stderr says is true: nothing was waiting, so nothing is saved anywhere,
    # and what the file lost is said to be gone, not kept.
    assert "No record was waiting to be written" in said_on_stderr, said_on_stderr
    assert "cannot be restored from here" in said_on_stderr, said_on_stderr
    assert list(path.parent.glob("*.unwritten-*")) == []


def test_a_log_cut_short_mid_stream_is_lost_like_a_deleted_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    script = write_script(tmp_path, ENDLESS)

    async def drive() -> tuple[str, int]:
        async with start_bridge(
            state, script=script, provider=None, stderr=tmp_path / "stderr.txt"
        ) as client:
            await client.initialize()
            session = await client.new_session(str(tmp_path))
            assert (await prompt(client, session, "Hi"))["result"]["stopReason"] == "end_turn"
            streaming = await send_prompt(client, session, "Stream")
            start = len(client.updates)
            await client.wait_until(lambda: len(client.updates) >= start + 20)
            os.truncate(log_path(state, session), 0)
            cut = len(client.updates)
            await client.wait_until(lambda: len(client.updates) >= cut + 20)
            await client.notify("session/cancel", {"sessionId": session})
            answer = await client.wait_response(streaming)
            assert answer["result"]["stopReason"] == "cancelled"
            log_error = answer["result"].get("_meta", {}).get("acpBridge", {}).get("logError")
            assert "cut short" in (log_error or ""), answer
            error = await refused_before_streaming(client, session)
            assert error["data"]["kind"] == "log_lost", error
            assert await client.finish() == EXIT_RECORDS_LOST
            return session, client.agent.pid

    session, pid = anyio.run(drive)
    path = log_path(state, session)
    copy = Path(f"{path}.unwritten-{pid}")
    kept = copy.read_bytes().splitlines()
    assert kept, "the records the file could not take were not saved"
    said_on_stderr = (tmp_path / "stderr.txt").read_text()
    assert "kept in memory and saved beside it at exit" in said_on_stderr, said_on_stderr
    assert f"a copy of them is in {copy}" in said_on_stderr, said_on_stderr
    assert b'"type":"turn/end"' in kept[-1]


def test_a_closed_session_s_lock_goes_at_once_though_its_sync_still_runs(tmp_path: Path) -> None:
    """``session/close`` then ``session/resume`` at once: the resume is never refused
    as locked because a worker thread was still syncing the closed session's log."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"")
    pool = LogFiles()
    file = pool.claim(str(path))
    job = file.begin_sync()  # a worker thread syncs the descriptor now
    pool.release(file)  # the session is closed meanwhile
    assert file.syncing
    again = LogFiles().claim(str(path))  # another descriptor, as a new open would
    job()
    file.end_sync()
    assert not file.syncing
    again.close()
    # While it was held, the same claim was refused: the test can tell.
    held = LogFiles().claim(str(path))
    with pytest.raises(SessionLocked):
        LogFiles().claim(str(path))
    held.close()
