"""An idle session keeps no model records: its log file holds them.

`SessionLog.drop` lets go of a log's model records once its file holds every
byte the log appended, and the next use of the history reads them back from
the file (`SessionLog.history`, or `SessionLog.read_back` in a worker
thread).  These tests hold the history read back to the eager one on
the session logs of the snapshots, cut at random and continued, with
records appended after the drop; hold that nothing is dropped while bytes
are unwritten or a stream is open; that a file changed behind the log is an
error, not a silently different history; and, through the agent, that a
loaded session, regenerated and forked, sends the model its whole history.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.harness import cwd_for_tests, write_script
from test_log_packed import LIVE_FIELDS, SNAPSHOT_LOGS

from acp_bridge.acp.table import KEEP_UNPACKED
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.logfile import LogFileLost
from acp_bridge.log.reader import read_records
from acp_bridge.log.writer import RecordWriter, SessionLog
from acp_bridge.providers.scripted import parse_report
from acp_bridge.testing import NO_CAPABILITIES, AgentLauncher
from acp_bridge.testing.session import session_update

Record = dict[str, Any]


class FileTarget:
    """A log's file: what the writer has written to it so far (``size``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pending = bytearray()
        self.error: str | None = None
        self.synced_at = 0.0
        self.size = Path(path).stat().st_size if Path(path).exists() else 0
        self.lost: str | None = None


class Writer:
    """A `RecordWriter` that queues records and writes them on `flush`."""

    def __init__(self) -> None:
        self.queue: list[tuple[FileTarget, bytes]] = []

    def open_log(self, path: str, *, create: bool = True) -> FileTarget:
        return FileTarget(path)

    def write_log(self, log: FileTarget, data: bytes) -> None:
        self.queue.append((log, data))

    def add_pre_flush(self, hook: object) -> None:
        pass

    def remove_pre_flush(self, hook: object) -> None:
        pass

    def flush(self) -> None:
        for target, data in self.queue:
            with open(target.path, "ab") as file:
                file.write(data)
            target.size += len(data)
        self.queue.clear()


def continued(slog: SessionLog, writer: Writer, rest: list[Record]) -> None:
    for record in rest:
        fields = {k: v for k, v in record.items() if k not in LIVE_FIELDS}
        slog.append(record["type"], record.get("turn", 0), record.get("step", 0), **fields)
    writer.flush()


def live_log(path: Path, records: list[Record]) -> tuple[SessionLog, Writer]:
    path.touch()
    writer = Writer()
    slog = SessionLog(str(path), cast(RecordWriter, writer))
    continued(slog, writer, records)
    return slog, writer


def loaded_log(path: Path) -> tuple[SessionLog, Writer]:
    """The log at ``path`` as a load opens it (restored), then left to rest."""
    records = read_records(path)
    writer = Writer()
    size = path.stat().st_size
    slog = SessionLog(str(path), cast(RecordWriter, writer), next_seq=len(records), size=size)
    slog.restore(records)
    assert slog.packed
    assert slog.pack()  # rests: the file holds them all, so they are dropped
    return slog, writer


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.sampled_from(SNAPSHOT_LOGS), st.data())
def test_a_dropped_log_reads_back_the_history_of_its_file(
    tmp_path_factory: pytest.TempPathFactory,
    named: tuple[str, list[Record]],
    data: st.DataObject,
) -> None:
    """Written up to a cut, loaded and left to rest (dropped), used or not up
    to another cut, dropped again, continued: the history is the log's."""
    _, records = named
    path = tmp_path_factory.mktemp("log") / "s.jsonl"
    cut = data.draw(st.integers(0, len(records)))
    peek = data.draw(st.integers(cut, len(records)))
    live_log(path, records[:cut])
    slog, writer = loaded_log(path)
    assert slog.dropped
    continued(slog, writer, records[cut:peek])
    assert not slog.dropped or cut == peek
    assert list(slog.history.messages()) == derive_messages(records[:peek])
    assert slog.pack()  # used, then left idle again: packed, not dropped
    assert not slog.dropped
    assert slog.drop()  # the file holds everything: it could be
    continued(slog, writer, records[peek:])
    assert list(slog.history.messages()) == derive_messages(records)


def test_nothing_is_dropped_while_the_file_lacks_some_of_the_log(tmp_path: Path) -> None:
    _, records = SNAPSHOT_LOGS[0]
    slog, writer = live_log(tmp_path / "s.jsonl", records)
    slog.append("turn/start", 99, 0)  # queued, not yet written
    assert not slog.drop()
    assert not slog.dropped
    writer.flush()
    file = cast(FileTarget, slog.file)
    file.pending += b"unwritten"
    assert not slog.drop()
    file.pending.clear()
    slog.open_stream("att_x", 99, 1, "fake")
    writer.flush()
    assert not slog.drop()  # a stream is open
    slog.close_stream("committed")
    writer.flush()
    file.lost = "the file was deleted"  # its records now live in memory alone
    assert not slog.drop()
    file.lost = None
    assert slog.drop()
    assert not slog.drop()  # already


def test_a_log_of_unknown_size_is_never_dropped(tmp_path: Path) -> None:
    _, records = SNAPSHOT_LOGS[0]
    path = tmp_path / "s.jsonl"
    live_log(path, records)
    slog = SessionLog(str(path), cast(RecordWriter, Writer()), next_seq=len(records))
    slog.restore(read_records(path))
    assert not slog.pack()  # packed already, and not to be dropped
    assert not slog.dropped
    assert slog.packed  # packed in memory instead


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda data: data + b'{"v":1}\n', id="a line added"),
        pytest.param(lambda data: data[: data.rindex(b"\n", 0, -1) + 1], id="cut short"),
        pytest.param(lambda data: data[:-3], id="torn"),
        pytest.param(lambda data: b"", id="emptied"),
    ],
)
def test_a_file_changed_behind_a_dropped_log_is_an_error(tmp_path: Path, change: Any) -> None:
    _, records = SNAPSHOT_LOGS[0]
    path = tmp_path / "s.jsonl"
    live_log(path, records)
    slog, _ = loaded_log(path)
    path.write_bytes(change(path.read_bytes()))
    with pytest.raises(LogFileLost, match="cannot be read back"):
        slog.history  # noqa: B018


@pytest.mark.anyio
async def test_read_back_in_a_thread_leaves_the_history_ready(tmp_path: Path) -> None:
    _, records = SNAPSHOT_LOGS[0]
    path = tmp_path / "s.jsonl"
    live_log(path, records)
    slog, _ = loaded_log(path)
    await slog.read_back()
    assert not slog.dropped
    assert list(slog.history.messages()) == derive_messages(records)


@pytest.mark.anyio
async def test_read_back_that_fails_leaves_the_error_to_the_history(tmp_path: Path) -> None:
    _, records = SNAPSHOT_LOGS[0]
    path = tmp_path / "s.jsonl"
    live_log(path, records)
    slog, _ = loaded_log(path)
    await anyio.Path(path).write_bytes(b"")
    await slog.read_back()
    assert slog.dropped
    with pytest.raises(LogFileLost):
        slog.history  # noqa: B018


# -- through the agent ---------------------------------------------------------------

REPORT = ["message_count", "first_user_text", "last_user_text", "last_assistant_text"]
REGENERATE = "_acp-bridge/regenerate"


def report_of(updates: list[Any]) -> dict[str, Any]:
    text = "".join(
        u["content"]["text"] for u in updates if u.get("sessionUpdate") == "agent_message_chunk"
    )
    return parse_report(text)


async def rest_others(agent: Any, cwd: str) -> None:
    """Open more sessions than are kept as they are: the ones used before rest
    (`acp_bridge.acp.table.rest`), their records dropped."""
    for _ in range(KEEP_UNPACKED + 1):
        await agent.new_session(cwd)


@pytest.mark.anyio
async def test_a_loaded_session_sends_the_model_the_history_it_read_back(
    acp_agent: AgentLauncher, tmp_path: Path
) -> None:
    """A session loaded in a second process and left to rest keeps none of its
    records (the file holds them); regenerated, then prompted and forked, the
    model gets them all."""
    first = {
        "responses": [
            {"events": [{"text": "The capital of France is Paris."}]},
            {"events": [{"text": "The Seine."}]},
        ],
        "when_exhausted": "repeat_last",
    }
    reports = {"responses": [{"events": [{"report": REPORT}]}], "when_exhausted": "repeat_last"}
    cwd = cwd_for_tests()
    async with acp_agent.bridge(script=write_script(tmp_path, first)) as agent:
        await agent.initialize(NO_CAPABILITIES)
        session = await agent.new_session(cwd)
        await session.prompt("What is the capital of France?")
        await session.prompt("And its river?")
        await agent.finish(within=30)
    (tmp_path / "reports").mkdir()
    async with acp_agent.bridge(script=write_script(tmp_path / "reports", reports)) as agent:
        await agent.initialize(NO_CAPABILITIES)
        await agent.load_session(session.id, cwd)
        await rest_others(agent, cwd)  # its records dropped before any use
        start = len(agent.client.messages)
        await agent.request(REGENERATE, {"sessionId": session.id})
        updates = [session_update(m, session.id) for m in agent.client.messages[start:]]
        regenerated = report_of([u for u in updates if u is not None])
        loaded = await agent.load_session(session.id, cwd)
        await rest_others(agent, cwd)  # in use since: kept packed, the same history
        asked = report_of((await loaded.prompt("How long is it?")).updates)
        fork = await agent.fork_session(session.id, cwd)
        forked = report_of((await fork.prompt("And its source?")).updates)
        await agent.finish(within=30)
    assert regenerated == {
        "message_count": 3,
        "first_user_text": "What is the capital of France?",
        "last_user_text": "And its river?",
        "last_assistant_text": "The capital of France is Paris.",
    }
    assert asked["message_count"] == 5
    assert asked["first_user_text"] == "What is the capital of France?"
    assert asked["last_user_text"] == "How long is it?"
    assert asked["last_assistant_text"].startswith("message_count: 3")
    assert forked["message_count"] == 7
    assert forked["first_user_text"] == "What is the capital of France?"
    assert forked["last_user_text"] == "And its source?"
    assert forked["last_assistant_text"].startswith("message_count: 5")


def on_event_loop() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def watch(name: str, read: Any, reads: list[tuple[str, bool]]) -> Any:
    """``read``, noting in ``reads`` each call as (``name``, whether on an event loop)."""

    def watched(*args: Any, **kwargs: Any) -> Any:
        reads.append((name, on_event_loop()))
        return read(*args, **kwargs)

    return watched


@contextlib.asynccontextmanager
async def bridge_with(
    state_dir: Path, prepare: Callable[[Any, str], Awaitable[str]]
) -> AsyncIterator[tuple[Any, Any, str, str]]:
    """A bridge on pipes answering `PARIS`, initialized, and a session that
    ``prepare(client, cwd)`` made: (served, client, its id, cwd), inside a
    30 s guard."""
    from support.pipe_peer import bridge_on_pipes

    cwd = cwd_for_tests()
    async with bridge_on_pipes(PARIS, str(state_dir)) as served:
        with anyio.fail_after(30):
            await served.client.initialize()
            sid = await prepare(served.client, cwd)
            yield served, served.client, sid, cwd


async def a_loaded_session_at_rest(client: Any, cwd: str) -> str:
    """A session closed, loaded again, then left to rest: its records dropped."""
    sid: str = await client.new_session(cwd)
    await client.prompt(sid, "The capital of France?")
    await client.request("session/close", {"sessionId": sid})
    await client.request("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
    for _ in range(KEEP_UNPACKED + 1):
        await client.new_session(cwd)
    return sid


PARIS = {"responses": [{"events": [{"text": "Paris."}]}], "when_exhausted": "repeat_last"}


@pytest.mark.anyio
async def test_a_mode_change_reads_a_dropped_log_back_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``session/set_mode`` on a loaded session that dropped its records reads
    them back in a worker thread before it appends its record, not on the
    event loop (a long session's file is megabytes)."""
    from acp_bridge.log import writer

    reads: list[tuple[str, bool]] = []
    async with bridge_with(tmp_path, a_loaded_session_at_rest) as (served, client, sid, _):
        monkeypatch.setattr(writer, "_model_records", watch("back", writer._model_records, reads))
        await client.request("session/set_mode", {"sessionId": sid, "modeId": "read_only"})
    assert reads == [("back", False)]
    modes = [r for r in served.records(sid) if r["type"] == "session/mode"]
    assert [r["mode"] for r in modes] == ["read_only"]


@pytest.mark.anyio
async def test_loading_an_open_session_again_reads_its_file_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second ``session/load`` of a session open here, resting with its
    records dropped, reads them back and reads its file for the replay in
    worker threads."""
    from acp_bridge.acp import stored
    from acp_bridge.log import writer
    from acp_bridge.log.replay_read import read_for_replay

    reads: list[tuple[str, bool]] = []
    async with bridge_with(tmp_path, a_loaded_session_at_rest) as (_, client, sid, cwd):
        monkeypatch.setattr(writer, "_model_records", watch("back", writer._model_records, reads))
        monkeypatch.setattr(stored, "read_for_replay", watch("replay", read_for_replay, reads))
        start = len(client.messages)
        await client.request("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
        replayed = client.messages[start:]
    assert reads == [("back", False), ("replay", False)]
    texts = [
        m["params"]["update"]["content"]["text"]
        for m in replayed
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    assert "".join(texts) == "Paris."
