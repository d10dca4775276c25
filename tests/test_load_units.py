"""Units of a long ``session/load``: the log read into the buffer of its JSON
array whatever the file's size said, and what the load held freed once its
answer is written, the garbage collector running again after."""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from acp_bridge.acp import stored
from acp_bridge.log.upcast import load_log, pause_gc


def write_log(path: Path, count: int) -> list[dict[str, Any]]:
    records = [
        {"v": 1, "seq": i, "at": 1.0, "type": "turn/start", "turn": i + 1, "step": 0}
        for i in range(count)
    ]
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return records


@pytest.mark.parametrize("shift", [-100, -1, 0, 1, 100])
def test_a_log_is_read_whole_whatever_its_size_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shift: int
) -> None:
    """A file that grew (or shrank) between the stat and the read is read as it is."""
    path = tmp_path / "s.jsonl"
    records = write_log(path, 50)
    real_fstat = os.fstat

    class Stat:
        def __init__(self, fd: int) -> None:
            self.st_size = max(real_fstat(fd).st_size + shift, 0)

    monkeypatch.setattr(os, "fstat", Stat)
    loaded = load_log(path)
    assert loaded.records == records
    assert loaded.valid_size == path.stat().st_size
    assert not loaded.torn


def test_a_torn_tail_is_still_found(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    records = write_log(path, 3)
    with path.open("ab") as file:
        file.write(b'{"v":1,"seq":3,')
    loaded = load_log(path)
    assert loaded.records == records
    assert loaded.torn
    assert loaded.valid_size == path.stat().st_size - len(b'{"v":1,"seq":3,')


class Outbox:
    def __init__(self) -> None:
        self.drained = False

    async def drain(self) -> None:
        self.drained = True


@pytest.mark.anyio
async def test_a_load_frees_what_it_held_once_written_then_collection_resumes() -> None:
    assert gc.isenabled()
    resume = pause_gc()
    held: list[Any] = [[{"a": 1}], [{"b": 2}]]
    outbox = Outbox()
    await stored._release(outbox, held, resume)
    assert outbox.drained
    assert held == []
    assert gc.isenabled()


def test_a_record_whose_type_is_not_a_string_is_named(tmp_path: Path) -> None:
    """Such a line takes the line-by-line path, which says which line it is."""
    from acp_bridge.log.errors import LogCorrupt

    path = tmp_path / "s.jsonl"
    records = write_log(path, 3)
    records[1]["type"] = []
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    with pytest.raises(LogCorrupt) as caught:
        load_log(path)
    assert caught.value.line_no == 2
    assert "type" in str(caught.value)
