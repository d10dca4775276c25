"""Backpressure both ways: an editor that does not read holds the bridge back.

An editor that writes without reading cannot make the bridge grow without bound,
and what waits for a slow editor ahead of the answer to a Stop stays small.

Each junk line costs two bytes in and a 166-byte error frame out.  An
editor that never reads stdout would, without input backpressure, make the
bridge read on and keep every answer in memory.  The bridge must stop reading
stdin while too much output waits, so the editor's writes block; once the
editor reads, everything is answered and the process exits cleanly.
"""

from __future__ import annotations

import fcntl
import re
from pathlib import Path

import anyio
import orjson
import pytest
from support.harness import EXAMPLES, wait_for_a_full_pipe

from acp_bridge.client import bridge_command, prompt_params, running
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records
from acp_bridge.transport.outbox import HIGH_WATER, STDOUT_PIPE_SIZE

pytestmark = pytest.mark.anyio

LINE = b"x\n"
# Far more input than a bridge that pauses reading accepts: its pause bound
# (1 MiB of output, about 13 KB of these lines), one read (256 KiB) and the
# stdin pipe (64 KiB).
UNBOUNDED = 2 * 1024 * 1024
QUIET = 3.0  # seconds with no byte taken: the bridge stopped reading (not a speed limit)


@pytest.mark.slow
async def test_stdin_is_not_read_while_output_waits_for_the_editor(tmp_path: Path) -> None:
    command = bridge_command("--provider", "fake", "--state-dir", str(tmp_path / "state"))
    async with running(command, paused=True) as client:  # the editor reads nothing
        stdin = client.agent.stdin
        block = LINE * 4096

        async def flood() -> None:
            while stdin.written < UNBOUNDED:
                await client.send_raw(block)

        async with anyio.create_task_group() as tg:
            tg.start_soon(flood)
            while True:  # until no byte is taken for QUIET seconds
                taken = stdin.written
                await anyio.sleep(0.1)  # a first look: writes still moving?
                if stdin.written == taken:
                    await anyio.sleep(QUIET)
                    if stdin.written == taken:
                        break
            tg.cancel_scope.cancel()
        accepted = stdin.written
        assert accepted < UNBOUNDED, "the bridge kept reading while nobody read its answers"
        assert accepted % len(LINE) == 0
        lines = accepted // len(LINE)

        # The editor reads again: the bridge resumes and answers every line.
        client.agent.stdout.resume()
        await client.wait_response(None, nth=lines, within=60)
        assert await client.finish() == 0
    answers = client.responses[b"null"]
    assert len(answers) == lines
    assert all(answer["error"]["code"] == -32700 for answer in answers)


async def test_few_bytes_wait_ahead_of_the_answer_to_a_stop(tmp_path: Path) -> None:
    """What sits in the stdout pipe and the writer's queue is read before the
    answer to a Stop: the bridge bounds both (a small pipe, a high-water mark),
    so an editor that reads at its own pace gets its answer after a few dozen
    chunks, not after a whole default pipe of them.

    The Stop must find chunks still queued behind the full pipe (they are taken
    back): on a starved machine the turn may not have queued any yet when the
    pipe is full, so the scene is played again, up to five times, until it does.
    Every play keeps the bound."""
    for attempt in range(5):
        if await _stop_behind_a_full_pipe(tmp_path / f"play-{attempt}") > 0:
            return
    raise AssertionError("no Stop in five found a chunk still queued behind the full pipe")


async def _stop_behind_a_full_pipe(tmp_path: Path) -> int:
    """One play: the bound holds; how many queued chunks the Stop took back."""
    await anyio.Path(tmp_path).mkdir(parents=True)
    state = tmp_path / "state"
    command = bridge_command(
        "--provider",
        "fake",
        "--script",
        str(EXAMPLES / "endless.json"),
        "--state-dir",
        str(state),
        "--log-level",
        "debug",
    )
    stderr = tmp_path / "stderr.txt"
    async with running(command, stderr=stderr) as client:
        await client.initialize()
        session = await client.new_session(str(tmp_path))
        params = prompt_params(session, "go")
        prompt = await client.send_request("session/prompt", params)
        # A chunk of the reply (the commands announced after session/new came first).
        first = await client.wait_for(
            lambda m: (
                m.get("method") == "session/update"
                and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            )
        )
        frame_size = len(orjson.dumps(first)) + 1
        # The editor is busy: it reads nothing while the bridge streams on until
        # the pipe is full, then presses Stop.  (It sees everything already read.)
        client.agent.stdout.pause()
        await wait_for_a_full_pipe(client)
        seen = len(client.messages)
        await client.notify("session/cancel", {"sessionId": session})
        client.agent.stdout.resume()
        answer = await client.wait_response(prompt)
        assert answer["result"]["stopReason"] == "cancelled"
        ahead = client.messages.index(answer, seen) - seen
        if hasattr(fcntl, "F_GETPIPE_SZ"):
            pipe_size = fcntl.fcntl(client.agent.stdout.fd, fcntl.F_GETPIPE_SZ)
            assert pipe_size == STDOUT_PIPE_SIZE
        # The pipe and the batch the writer took (at most the high-water mark
        # and a frame); the frames still queued behind them were taken back.
        bound = (STDOUT_PIPE_SIZE + HIGH_WATER) // frame_size + 10
        assert ahead <= bound, f"{ahead} chunks were ahead of the answer to a Stop (bound {bound})"
        assert await client.finish() == 0
    taken_back = re.search(r"(\d+) queued chunk\(s\) taken back", stderr.read_text())
    return 0 if taken_back is None else int(taken_back[1])
    # What the editor got is what the interrupted message and the log hold.
    seen_text = "".join(
        u["content"]["text"] for u in client.updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    (log,) = (state / "sessions").glob("*.jsonl")
    records = read_records(log)
    (message,) = [r for r in records if r["type"] == "assistant/message"]
    assert message["interrupted"] is True
    assert message["content"] == [{"type": "text", "text": seen_text}]
    delivered = [t for r in records if r["type"] == "stream/delta" for _, _, t in r["parts"]]
    assert "".join(delivered) == seen_text
    check_log(records)
