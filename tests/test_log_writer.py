"""The writer side of the log, through the real ordered writer and a real file."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import orjson
import pytest

from acp_bridge.log.check import check_log
from acp_bridge.log.derive import delivered_prefix, derive_messages
from acp_bridge.log.reader import read_records
from acp_bridge.log.writer import SessionLog
from acp_bridge.transport.outbox import Outbox

pytestmark = pytest.mark.anyio


async def write_session(path: Path, chunks: list[str], *, flush_every: int) -> SessionLog:
    devnull = os.open(os.devnull, os.O_WRONLY)
    outbox = Outbox(devnull)
    slog = SessionLog(str(path), outbox)
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        slog.append("session/start", 0, 0, session_id="s", cwd="/", provider="fake")
        slog.append("turn/start", 1, 0)
        slog.append("user/message", 1, 0, content=[{"type": "text", "text": "Hi"}])
        slog.append("step/start", 1, 1)
        # The step's model request asks for the history here; what is
        # appended later is taken in when it is asked for again.
        assert [m["role"] for m in slog.history.messages()] == ["user"]
        slog.open_stream("att_1", 1, 1, "fake")
        for i, chunk in enumerate(chunks):
            outbox.send(b"{}\n")
            slog.delta(0, "text", chunk)
            if i % flush_every == 0:
                await outbox.drain()  # a write to the editor: the pending delta goes with it
        text = "".join(chunks)
        slog.append(
            "assistant/message",
            1,
            1,
            attempt="att_1",
            content=[{"type": "text", "text": text}],
            interrupted=True,
            finish=None,
            usage=None,
        )
        slog.close_stream("committed")
        slog.append("step/end", 1, 1, reason="cancelled")
        slog.append("turn/end", 1, 0, reason="cancelled", forced=False)
        await outbox.drain()
        outbox.close()
    os.close(devnull)
    return slog


@pytest.mark.parametrize("flush_every", [1, 3, 1000])
async def test_file_and_memory_project_to_the_same_history(
    tmp_path: Path, flush_every: int
) -> None:
    chunks = [f"w{i} " for i in range(25)]
    path = tmp_path / "s.jsonl"
    slog = await write_session(path, chunks, flush_every=flush_every)
    records = read_records(path)
    check_log(records)
    assert [r["seq"] for r in records] == list(range(len(records)))
    # Memory holds only what the projection reads, and projects identically.
    assert derive_messages(slog.records) == derive_messages(records)
    assert list(slog.history.messages()) == derive_messages(records)
    assert len(slog.records) < len(records)
    assert all("stream" not in r for r in slog.records)
    # The delta frames rebuild exactly the delivered text, however they were batched.
    assert delivered_prefix(records, "att_1") == {(0, "text"): "".join(chunks)}
    deltas = [r for r in records if r["type"] == "stream/delta"]
    # One delta record per write to the editor, plus one for chunks after the last write.
    writes = len(range(0, len(chunks), flush_every))
    assert len(deltas) == writes + ((len(chunks) - 1) % flush_every != 0)


@pytest.mark.parametrize("replaced_by", ["file", "folder"])
def test_a_record_the_path_cannot_take_is_kept_in_memory(tmp_path: Path, replaced_by: str) -> None:
    """The log's folder renamed and something else put at its name.  The open
    file is still the log's own and whole, so the batch being written goes on
    into it; the check before the next turn (`verify`) finds that the path no
    longer names it, and from then on every record is kept, never dropped."""
    from acp_bridge.log.writer.files import LogFile, LogFileLost

    folder = tmp_path / "sessions"
    folder.mkdir()
    log = LogFile(str(folder / "s.jsonl"))
    log.write(b'{"seq":0}\n')  # opened and written: the file is known
    folder.rename(tmp_path / "moved")
    if replaced_by == "file":
        folder.write_text("not a folder")
    else:
        folder.mkdir()
    log.write(b'{"seq":1}\n')
    with pytest.raises(LogFileLost, match="deleted or moved"):
        log.verify()
    with pytest.raises(LogFileLost):
        log.write(b'{"seq":2}\n')
    assert bytes(log.pending) == b'{"seq":2}\n'
    assert (tmp_path / "moved" / "s.jsonl").read_bytes() == b'{"seq":0}\n{"seq":1}\n'
    log.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_log_being_synced_keeps_its_descriptor_until_the_sync_is_done(tmp_path: Path) -> None:
    """Few logs stay open (here one): the oldest is closed when another opens,
    unless a worker thread is syncing it; a close waits for the sync too."""
    from acp_bridge.log.writer.files import LogFiles

    pool = LogFiles(limit=lambda: 1)
    first = pool.take(str(tmp_path / "a.jsonl"))
    second = pool.take(str(tmp_path / "b.jsonl"))
    before = _open_fds()
    first.write(b'{"seq":0}\n')
    job = first.begin_sync()  # taken on the loop; runs in a worker thread
    second.write(b'{"seq":0}\n')  # over the limit, but the first is being synced
    assert _open_fds() == before + 2
    first.close()  # the session closes meanwhile
    assert _open_fds() == before + 2
    job()  # the sync, on a descriptor that is still the first log's
    first.end_sync()
    assert _open_fds() == before + 1
    second.write(b'{"seq":1}\n')
    first.write(b'{"seq":1}\n')  # opened, locked and checked again; the second closes
    assert _open_fds() == before + 1
    assert (tmp_path / "a.jsonl").read_bytes() == b'{"seq":0}\n{"seq":1}\n'
    assert (tmp_path / "b.jsonl").read_bytes() == b'{"seq":0}\n{"seq":1}\n'
    first.close()
    second.close()


class _Queued:
    """A `RecordWriter` that keeps the lines it is given."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def open_log(self, path: str, *, create: bool = True) -> object:
        return path

    def write_log(self, log: object, data: bytes) -> None:
        self.lines.append(data)

    def add_pre_flush(self, hook: object) -> None:
        pass

    def remove_pre_flush(self, hook: object) -> None:
        pass


def test_each_line_is_the_record_head_then_its_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    """`SessionLog.add` makes each record the common head (now as its time), then
    the fields handed to it (not copied on the way), one JSON line each."""
    from acp_bridge.log import writer
    from acp_bridge.log.records import FORMAT_VERSION

    monkeypatch.setattr(writer, "_now", lambda: 1700000000.25)
    queued = _Queued()
    slog = SessionLog("session.jsonl", queued)  # type: ignore[arg-type]
    cases: list[tuple[str, int, int, dict[str, object]]] = [
        ("session/start", 0, 0, {"session_id": "s", "cwd": "/", "provider": "fake"}),
        ("turn/start", 1, 0, {}),
        ("user/message", 1, 0, {"content": [{"type": "text", "text": "é\n"}], "prompt": []}),
        ("step/end", 1, 1, {"reason": "end_turn", "turn": 7}),  # a field that repeats the head
    ]
    for seq, (kind, turn, step, fields) in enumerate(cases):
        record = slog.add(kind, turn, step, dict(fields))
        head = {"v": FORMAT_VERSION, "seq": seq, "at": 1700000000.25, "type": kind}
        expected = {**head, "turn": turn, "step": step, **fields}
        assert record == expected
        assert list(record) == list(expected)
        assert queued.lines[seq] == orjson.dumps(expected) + b"\n"
