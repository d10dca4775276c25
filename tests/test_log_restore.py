"""A log read back (`SessionLog.restore`) and continued derives the history of the whole log.

The incremental projection a session keeps must equal `derive_messages`
(the reference) on every session log of the snapshots, cut at every record
and continued with the rest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.harness import cwd_for_tests, write_script

from acp_bridge.log.derive import derive_messages
from acp_bridge.log.model_records import MODEL_TYPES
from acp_bridge.log.projection import HistoryProjection
from acp_bridge.log.writer import RecordWriter, SessionLog
from acp_bridge.providers.scripted import parse_report
from acp_bridge.testing import NO_CAPABILITIES, AgentLauncher
from acp_bridge.testing.session import session_update

Record = dict[str, Any]
SNAPSHOTS = Path(__file__).resolve().parent.parent / "snapshots"
LIVE_FIELDS = ("v", "seq", "at", "type", "turn", "step")


class Target:
    def __init__(self, path: str) -> None:
        self.path = path
        self.pending = bytearray()
        self.error: str | None = None
        self.synced_at = 0.0


class Writer:
    """A `RecordWriter` that keeps what is written in memory."""

    def __init__(self) -> None:
        self.data = bytearray()

    def open_log(self, path: str, *, create: bool = True) -> Target:
        return Target(path)

    def write_log(self, log: object, data: bytes) -> None:
        self.data += data

    def add_pre_flush(self, hook: object) -> None:
        pass


def reopened(records: list[Record]) -> SessionLog:
    slog = SessionLog("memory.jsonl", cast(RecordWriter, Writer()), next_seq=len(records))
    slog.restore(records)
    return slog


def continued(slog: SessionLog, rest: list[Record]) -> None:
    """Append ``rest`` as the live session would (same types and fields)."""
    for record in rest:
        fields = {k: v for k, v in record.items() if k not in LIVE_FIELDS}
        slog.append(record["type"], record["turn"], record["step"], **fields)


def snapshot_logs() -> list[tuple[str, list[Record]]]:
    found = []
    for path in sorted(SNAPSHOTS.rglob("*.json")):
        data = json.loads(path.read_text())
        for i, log in enumerate(data.get("logs") or [] if isinstance(data, dict) else []):
            if isinstance(log, list) and any(r.get("type") in MODEL_TYPES for r in log):
                found.append((f"{path.relative_to(SNAPSHOTS)}[{i}]", log))
    return found


SNAPSHOT_LOGS = snapshot_logs()


def test_an_append_after_a_restore_is_in_the_history() -> None:
    _, records = SNAPSHOT_LOGS[0]
    slog = reopened(records)
    content = [{"type": "text", "text": "And now?"}]
    slog.append("user/message", 99, 0, content=content)
    assert slog.records[-1]["content"] == content
    expected = derive_messages([*records, {"type": "user/message", "turn": 99, "content": content}])
    assert list(slog.history.messages()) == expected


@pytest.mark.parametrize(("name", "records"), SNAPSHOT_LOGS, ids=[n for n, _ in SNAPSHOT_LOGS])
def test_every_cut_derives_the_eager_history(name: str, records: list[Record]) -> None:
    for cut in range(len(records) + 1):
        slog = reopened(records[:cut])
        eager = HistoryProjection([r for r in records[:cut] if r.get("type") in MODEL_TYPES])
        continued(slog, records[cut:])
        for record in records[cut:]:
            if record.get("type") in MODEL_TYPES:
                eager.append(record)
        expected = derive_messages(records)
        assert list(slog.history.messages()) == expected, cut
        assert list(eager.messages()) == expected, cut


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(SNAPSHOT_LOGS), st.data())
def test_loaded_then_used_is_the_history_of_the_log(
    named: tuple[str, list[Record]], data: st.DataObject
) -> None:
    """Restored at a random cut, asked for the history at another, continued."""
    _, records = named
    cut = data.draw(st.integers(0, len(records)))
    peek = data.draw(st.integers(cut, len(records)))
    slog = reopened(records[:cut])
    continued(slog, records[cut:peek])
    assert list(slog.history.messages()) == derive_messages(records[:peek])
    continued(slog, records[peek:])
    assert list(slog.history.messages()) == derive_messages(records)


def live(records: list[Record]) -> SessionLog:
    """A new session's log that appended ``records`` itself."""
    slog = SessionLog("memory.jsonl", cast(RecordWriter, Writer()))
    continued(slog, records)
    return slog


# -- through the agent ---------------------------------------------------------------

REPORT = ["message_count", "first_user_text", "last_user_text", "last_assistant_text"]
REGENERATE = "_acp-bridge/regenerate"


def report_of(updates: list[Any]) -> dict[str, Any]:
    text = "".join(
        u["content"]["text"] for u in updates if u.get("sessionUpdate") == "agent_message_chunk"
    )
    return parse_report(text)


@pytest.mark.anyio
async def test_a_loaded_session_sends_the_model_the_history_of_its_log(
    acp_agent: AgentLauncher, tmp_path: Path
) -> None:
    """A session loaded in a second process, regenerated, then prompted and
    forked: the model gets its whole history."""
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
        start = len(agent.client.messages)
        await agent.request(REGENERATE, {"sessionId": session.id})
        updates = [session_update(m, session.id) for m in agent.client.messages[start:]]
        regenerated = report_of([u for u in updates if u is not None])
        loaded = await agent.load_session(session.id, cwd)
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
