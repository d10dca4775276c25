"""stderr never blocks the bridge, even when the editor never reads it.

The subprocess test is the one that matters: an editor that never reads
stderr floods the bridge with junk lines, responses to requests never made
(whose warnings echo a long id: far more than the pipe holds) and
``session/new`` requests that each log a warning, and streaming, Stop and
new requests keep working.  The
in-process tests pin the two mechanisms: the bounded buffer that drops (and
counts) what stderr does not take, and the rate limit of repeated warnings.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest
from support.harness import ROOT

from acp_bridge.client import bridge_command, running
from acp_bridge.stderr_log import MUST_DELIVER, RepeatFilter, StderrHandler

HANG = 60.0  # seconds: only to turn a hang into a failure, never a speed limit


def _record(msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("acp_bridge.test", logging.WARNING, __file__, 1, msg, args, None)


@pytest.mark.parametrize("blocking", [True, False], ids=["blocking-fd", "non-blocking-fd"])
def test_a_full_stderr_drops_and_counts_instead_of_blocking(blocking: bool) -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, blocking)  # an inherited O_NONBLOCK must not lose stderr
    # A buffer larger than the pipe, so the writer meets a full pipe.
    handler = StderrHandler(write_end, buffer_bytes=128 * 1024)
    handler.setFormatter(logging.Formatter("%(message)s"))
    total = 5_000
    done = threading.Event()

    def flood() -> None:
        for i in range(total):
            handler.handle(_record("message %d %s", i, "x" * 80))
        done.set()

    threading.Thread(target=flood, daemon=True).start()
    # Nobody reads the pipe while the flood runs: 5,000 lines of ~95 bytes are
    # far more than the pipe and the buffer hold, and still every call returns.
    assert done.wait(HANG), "logging blocked on a stderr nobody reads"
    assert handler.dropped > 0
    os.set_blocking(read_end, False)
    received = b""
    for _ in range(100_000):  # bounded: a stuck writer fails the test, never hangs it
        handler.flush(timeout=0.2)
        try:
            chunk = os.read(read_end, 1 << 16)
        except BlockingIOError:
            if not handler._queue and not handler._writing:
                break
            continue
        received += chunk
    else:
        pytest.fail("the stderr writer never finished")
    lines = received.decode().splitlines()
    delivered = [line for line in lines if line.startswith("message ")]
    notes = [line for line in lines if "log message(s) dropped" in line]
    assert notes, lines[-3:]
    dropped = sum(int(note.split()[1]) for note in notes)
    assert len(delivered) + dropped == total
    assert delivered[0].startswith("message 0 ")  # in order, oldest first
    os.close(read_end)
    os.close(write_end)


def test_a_line_too_long_for_the_buffer_is_counted_at_once_unless_it_must_be_delivered() -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    handler = StderrHandler(write_end, buffer_bytes=1024)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.handle(_record("y" * 4000))  # the queue was empty: nothing else wakes the writer
    handler.flush(timeout=HANG)  # returns once the count is written (a hang-guard only)
    assert not handler._queue
    assert os.read(read_end, 1 << 16) == (
        b"acp-bridge: 1 log message(s) dropped: stderr was not being read\n"
    )
    must = _record("z" * 4000)
    setattr(must, MUST_DELIVER, True)
    handler.handle(must)
    handler.flush(timeout=HANG)
    assert os.read(read_end, 1 << 16) == b"z" * 4000 + b"\n"
    os.close(read_end)
    os.close(write_end)


def test_repeated_warnings_are_rate_limited() -> None:
    now = [0.0]
    limit = RepeatFilter(burst=3, interval=1.0, clock=lambda: now[0])
    records = [_record("rejected frame: %s", i) for i in range(100)]
    passed = [limit.filter(record) for record in records]
    assert passed[:4] == [True, True, True, True]
    assert records[3].getMessage() == "rejected frame: 3 (repeated; now at most one every 1s)"
    assert not any(passed[4:])
    assert limit.filter(_record("another message"))  # other templates are not affected
    now[0] = 1.0  # one interval later: one more gets through, with the count
    record = _record("rejected frame: %s", 100)
    assert limit.filter(record)
    assert record.getMessage() == "rejected frame: 100 (96 similar message(s) suppressed)"
    assert not limit.filter(_record("rejected frame: %s", 101))


@pytest.mark.anyio
@pytest.mark.slow
async def test_an_editor_that_never_reads_stderr_cannot_freeze_the_bridge(tmp_path: Path) -> None:
    script = str(ROOT / "examples" / "endless.json")
    command = bridge_command(
        "--provider", "fake", "--script", script, "--state-dir", str(tmp_path / "state")
    )
    read_end, write_end = os.pipe()  # the bridge's stderr: nobody reads it until the end
    try:
        async with running(command, stderr=write_end) as client:
            os.close(write_end)
            write_end = -1
            await client.initialize()
            session_id = await client.new_session("/")
            # 3,000 junk lines: each is answered -32700 and logs a warning.
            await client.send_raw(b"".join(b"this is not json %d\n" % i for i in range(3_000)))
            # Responses to requests never made: each warning echoes the id, so
            # the ones before the rate limit are several times what the pipe holds.
            long_id = "x" * 20_000
            unasked = [{"jsonrpc": "2.0", "id": f"{i}{long_id}", "result": {}} for i in range(20)]
            await client.send(*unasked)
            # Many session/new with an MCP server: each logs "not supported".
            server = {"name": "files", "command": "/bin/true", "args": [], "env": []}
            params = {"cwd": "/", "mcpServers": [server]}
            ids = [await client.send_request("session/new", params) for _ in range(300)]
            for request_id in ids:
                assert "result" in await client.wait_response(request_id, within=HANG)
            # Streaming, Stop and a new request still work.
            result = await client.prompt(session_id, "go", cancel_after=20, settle=0)
            assert result.response["result"] == {"stopReason": "cancelled"}
            assert (await client.new_session("/")).startswith("sess_")
            parse_errors = [m for m in client.messages if m.get("error", {}).get("code") == -32700]
            assert len(parse_errors) == 3_000
            assert await client.finish() == 0
        # Only now read what reached stderr: the repeats were summarized.
        with os.fdopen(read_end, "rb") as pipe:
            read_end = -1
            stderr = pipe.read().decode()
    finally:
        for fd in (read_end, write_end):
            if fd >= 0:
                os.close(fd)
    assert "rejected frame" in stderr
    assert "response to unknown request id" in stderr
    assert "(repeated; now at most one every 1s)" in stderr
    assert stderr.count("rejected frame") < 100
