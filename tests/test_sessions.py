"""Whole sessions through the real `acp-bridge` subprocess, snapshot-tested.

The scenarios are written with the public test kit (`acp_bridge.testing`: the
``acp_agent`` fixture, `Session.prompt`, `Turn.stop`, `transcript_snapshot`),
so the kit is proven on every run.  Each scenario plays an editor against a
scripted model and snapshots the
normalized wire transcript (both directions), the event log (stream deltas
coalesced, since their batching depends on timing) and the derived model
history, under ``snapshots/test_sessions/``.  Beyond the snapshot, every
scenario asserts:

* I1: no ``session/update`` reaches the editor for a turn after its
  ``session/prompt`` response (and a cancelled turn answers
  ``{"stopReason": "cancelled"}``);
* I2: what the log keeps of a stream (message or attempt) is exactly the
  text and reasoning delivered to the editor in that step;
* I3: `acp_bridge.log.check.check_log` accepts the log;
* every message the bridge wrote is valid under the official ACP schema.

Cut points are deterministic: a cancel or a disconnect is sent only once the
editor has seen what precedes it, and the script then hangs or pauses for
far longer than the test takes, so nothing more can be delivered.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_schema import AcpSchema
from support.harness import (
    Run,
    SessionSnapshot,
    assert_cancelled,
    cwd_for_tests,
    record_logged,
    report,
    wait_until,
    write_script,
)
from syrupy.assertion import SnapshotAssertion

from acp_bridge.client import PromptResult
from acp_bridge.loop.turn import unavailable_tool_text
from acp_bridge.testing import (
    NO_CAPABILITIES,
    Agent,
    AgentLauncher,
    Session,
    transcript_snapshot,
)

# Cold: these bridges start as an editor starts them (see tests/conftest.py).
pytestmark = [pytest.mark.anyio, pytest.mark.cold]

CWD = cwd_for_tests()
# A pause far longer than any test: a cut made during it is never overtaken.
LONG_MS = 30_000
CHUNK_KINDS = {"agent_message_chunk": "text", "agent_thought_chunk": "reasoning"}


# The updates about the session, not the conversation: the commands it offers
# (sent when it opens) and its title (when its first turn starts).
SESSION_STATE_UPDATES = ("available_commands_update", "session_info_update")


def conversation(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [u for u in updates if u["sessionUpdate"] not in SESSION_STATE_UPDATES]


# -- playing a session ------------------------------------------------------------


@dataclass
class Played:
    run: Run
    session_id: str
    results: list[PromptResult]
    agent: Agent

    @property
    def records(self) -> list[dict[str, Any]]:
        return self.run.logs()[self.session_id]

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.run.history(self.session_id)

    def of_type(self, type: str, turn: int | None = None) -> list[dict[str, Any]]:
        return [
            r for r in self.records if r["type"] == type and (turn is None or r["turn"] == turn)
        ]


Turns = Callable[[Session], Awaitable[list[PromptResult]]]


async def play_session(
    acp_agent: AgentLauncher,
    tmp_path: Path,
    script: dict[str, Any],
    turns: Turns,
    *,
    close_stdin: bool = True,
) -> Played:
    """With the kit: start the bridge on ``script``, initialize, open a session in
    `CWD`, run ``turns``, then end the process (close its stdin, unless ``turns``
    disconnected it) and wait for its exit."""
    async with acp_agent.bridge(script=write_script(tmp_path, script)) as agent:
        with anyio.fail_after(30):
            await agent.initialize(NO_CAPABILITIES)
            session = await agent.new_session(CWD)
            results = await turns(session)
        if close_stdin:
            returncode = await agent.finish(within=15)
        else:
            returncode = await agent.wait_exit(within=15)
    assert agent.state_dir is not None
    return Played(Run(agent.client, agent.state_dir, returncode), session.id, results, agent)


def check_session(played: Played, schema: AcpSchema, snapshot: SnapshotAssertion) -> None:
    """The checks every scenario makes, then the snapshot."""
    run = played.run
    assert run.returncode == 0
    transcript = run.client.transcript
    assert_no_update_after_response(transcript)
    for result in played.results:
        assert result.late == [], "I1: session/update after the prompt response"
    assert_log_keeps_what_was_delivered(transcript, played.records)
    run.check_logs()
    schema.check_transcript(transcript)
    assert snapshot_of(played.agent) == snapshot.use_extension(SessionSnapshot)


def snapshot_of(agent: Agent) -> dict[str, Any]:
    """The kit's snapshot of the session: the wire, the event log, the model history."""
    return transcript_snapshot(agent, logs=True, history=True, paths={CWD: "<cwd>"})


# -- invariants -------------------------------------------------------------------


def assert_no_update_after_response(transcript: list[tuple[str, dict[str, Any]]]) -> None:
    """I1: every session/update arrives while a prompt of its session is unanswered."""
    open_prompts: dict[Any, str] = {}
    for position, (direction, msg) in enumerate(transcript):
        if direction == "send" and msg.get("method") == "session/prompt":
            open_prompts[msg["id"]] = msg["params"]["sessionId"]
        elif direction == "recv" and msg.get("method") == "session/update":
            if msg["params"]["update"]["sessionUpdate"] == "available_commands_update":
                continue  # about the session, not a turn: sent when it opens
            assert msg["params"]["sessionId"] in open_prompts.values(), (
                f"I1: session/update at position {position} while no prompt of its "
                f"session is running: {msg}"
            )
        elif direction == "recv" and "method" not in msg:
            open_prompts.pop(msg.get("id"), None)


def _texts(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Concatenated non-blank text per kind (``text``/``reasoning``)."""
    out: dict[str, str] = {}
    for kind, text in pairs:
        out[kind] = out.get(kind, "") + text
    return {kind: text for kind, text in out.items() if text.strip()}


def delivered_on_wire(transcript: list[tuple[str, dict[str, Any]]]) -> list[dict[str, str]]:
    """Text and reasoning of each streamed message, in order (grouped by messageId)."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for direction, msg in transcript:
        update = msg.get("params", {}).get("update", {}) if direction == "recv" else {}
        kind = CHUNK_KINDS.get(str(update.get("sessionUpdate")))
        if kind is not None:
            groups.setdefault(update["messageId"], []).append((kind, update["content"]["text"]))
    return [_texts(pairs) for pairs in groups.values()]


def delivered_in_log(records: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Text and reasoning of each attempt's stream deltas, by attempt id."""
    pairs: dict[str, list[tuple[str, str]]] = {}
    for rec in records:
        if rec["type"] == "stream/start":
            pairs[rec["attempt"]] = []
        elif rec["type"] == "stream/delta":
            for _, kind, text in rec["parts"]:
                if kind in ("text", "reasoning"):
                    pairs[rec["attempt"]].append((kind, text))
    return {attempt: _texts(p) for attempt, p in pairs.items()}


def content_texts(content: list[dict[str, Any]]) -> dict[str, str]:
    return _texts([(b["type"], b["text"]) for b in content if b["type"] in ("text", "reasoning")])


def assert_log_keeps_what_was_delivered(
    transcript: list[tuple[str, dict[str, Any]]], records: list[dict[str, Any]]
) -> None:
    """I2: the log's deltas are the chunks the editor got, and each assistant
    message or attempt holds exactly the text and reasoning of its own stream."""
    logged = delivered_in_log(records)
    assert [d for d in logged.values() if d] == delivered_on_wire(transcript), (
        "I2: the stream deltas in the log differ from the chunks the editor received"
    )
    for rec in records:
        if rec["type"] in ("assistant/message", "assistant/attempt"):
            assert content_texts(rec["content"]) == logged[rec["attempt"]], (
                f"I2: record {rec['seq']} ({rec['type']}) does not hold what its stream delivered"
            )


def interrupted_message(played: Played, turn: int) -> dict[str, Any]:
    messages = [m for m in played.of_type("assistant/message", turn) if m["interrupted"]]
    assert len(messages) == 1, f"turn {turn} has {len(messages)} interrupted messages"
    return messages[0]


def assert_interrupted_is_delivered(played: Played, turn: int, result: PromptResult) -> None:
    """I2 stated for the editor: the interrupted message is the chunks it showed."""
    message = interrupted_message(played, turn)
    shown = {"text": result.text(), "reasoning": result.text("agent_thought_chunk")}
    assert content_texts(message["content"]) == {k: v for k, v in shown.items() if v}


def user(*texts: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "text", "text": t} for t in texts],
        "interrupted": False,
    }


# -- scenarios --------------------------------------------------------------------


async def test_plain_turn(
    acp_agent: AgentLauncher, tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """Reasoning then text, end_turn; a usage report with a context window
    becomes a usage_update."""
    script = {
        "responses": [
            {
                "events": [
                    {"reasoning": "A greeting deserves a greeting.", "chunk_size": 12},
                    {"text": "Hello! How can I help today?", "chunk_size": 10},
                    {"usage": {"input_tokens": 12, "output_tokens": 24, "context_window": 200000}},
                ]
            }
        ]
    }

    async def turns(session: Session) -> list[PromptResult]:
        return [await session.prompt("Hello")]

    played = await play_session(acp_agent, tmp_path, script, turns)
    (result,) = played.results
    assert result.stop_reason == "end_turn"
    assert result.text("agent_thought_chunk") == "A greeting deserves a greeting."
    assert result.text() == "Hello! How can I help today?"
    assert result.updates[-1] == {"sessionUpdate": "usage_update", "used": 36, "size": 200000}
    (message,) = played.of_type("assistant/message")
    assert message["interrupted"] is False
    assert (message["usage"]["input_tokens"], message["usage"]["output_tokens"]) == (12, 24)
    assert played.history == [
        user("Hello"),
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "text": "A greeting deserves a greeting."},
                {"type": "text", "text": "Hello! How can I help today?"},
            ],
            "interrupted": False,
        },
    ]
    check_session(played, acp_schema, snapshot)


async def test_cancel_mid_text(
    acp_agent: AgentLauncher, tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """A stop after 1 reasoning and 5 text chunks keeps exactly that prefix."""
    script = {
        "responses": [
            {
                "events": [
                    {"reasoning": "Quote the opening line."},
                    {"text": "It is a truth universally", "chunk_size": 5},
                    {"hang": {"seconds": LONG_MS / 1000}},
                    {"text": " acknowledged."},
                ]
            }
        ]
    }

    async def turns(session: Session) -> list[PromptResult]:
        return [await session.prompt("Quote Austen", stop_after=6)]

    played = await play_session(acp_agent, tmp_path, script, turns)
    (result,) = played.results
    assert_cancelled(result)
    assert result.text() == "It is a truth universally"
    assert_interrupted_is_delivered(played, 1, result)
    assert played.history == [
        user("Quote Austen"),
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "text": "Quote the opening line."},
                {"type": "text", "text": "It is a truth universally"},
            ],
            "interrupted": True,
        },
    ]
    check_session(played, acp_schema, snapshot)


async def test_cancel_mid_reasoning(
    acp_agent: AgentLauncher, tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """A stop while the model is still reasoning keeps a reasoning-only message."""
    script = {
        "responses": [
            {
                "events": [
                    {"reasoning": "First, list the primes below ten", "chunk_size": 8},
                    {"hang": {"seconds": LONG_MS / 1000}},
                    {"reasoning": ": 2, 3, 5 and 7."},
                    {"text": "There are four."},
                ]
            }
        ]
    }

    async def turns(session: Session) -> list[PromptResult]:
        return [await session.prompt("How many primes below ten?", stop_after=4)]

    played = await play_session(acp_agent, tmp_path, script, turns)
    (result,) = played.results
    assert_cancelled(result)
    assert result.text() == ""
    assert result.text("agent_thought_chunk") == "First, list the primes below ten"
    assert_interrupted_is_delivered(played, 1, result)
    assert played.history[1] == {
        "role": "assistant",
        "content": [{"type": "reasoning", "text": "First, list the primes below ten"}],
        "interrupted": True,
    }
    check_session(played, acp_schema, snapshot)


async def test_cancel_before_first_token(
    acp_agent: AgentLauncher, tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """A stop before anything was delivered leaves no assistant message, only an
    empty attempt; the next prompt merges with the first in the model history."""
    script = {
        "responses": [
            {"events": [{"hang": True}]},
            {"events": [{"report": ["message_count", "last_user_text"]}]},
        ]
    }
    state = tmp_path / "state"

    async def turns(session: Session) -> list[PromptResult]:
        # The editor sees nothing of the reply before the stop: wait until the
        # log shows that the model stream is open, so the stop lands inside
        # it, and until the session's title (queued before the turn began,
        # written with its first records, after them) has arrived.
        turn = await session.start_prompt("Are you there?")
        await wait_until(record_logged(state, "stream/start", turn=1))
        await turn.wait_for_update("session_info_update")
        first = await turn.stop()
        return [first, await session.prompt("Hello?")]

    played = await play_session(acp_agent, tmp_path, script, turns)
    first, second = played.results
    assert_cancelled(first)
    assert conversation(first.updates) == []
    assert played.of_type("assistant/message", turn=1) == []
    (attempt,) = played.of_type("assistant/attempt", turn=1)
    assert (attempt["outcome"], attempt["content"]) == ("empty", [])
    assert second.stop_reason == "end_turn"
    assert report(second) == {"message_count": 1, "last_user_text": "Are you there?Hello?"}
    assert played.history[0] == user("Are you there?", "Hello?")
    assert len(played.history) == 2
    check_session(played, acp_schema, snapshot)


async def test_cancel_mid_tool_call(
    acp_agent: AgentLauncher, tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """A stop while a tool call's arguments stream keeps the text before it and
    drops the call; the editor gets the call's final (failed) status first."""
    script = {
        "responses": [
            {
                "events": [
                    {"text": "Let me read it.", "chunk_size": 5},
                    {"tool_call_start": {"id": "call_1", "name": "read_file"}},
                    {"tool_args": '{"path": "REA'},
                    {"hang": True},
                ]
            }
        ]
    }

    async def turns(session: Session) -> list[PromptResult]:
        turn = await session.start_prompt("Read the README")
        await turn.wait_for_update("tool_call")
        return [await turn.stop()]

    played = await play_session(acp_agent, tmp_path, script, turns)
    (result,) = played.results
    assert_cancelled(result)
    kinds = [u["sessionUpdate"] for u in conversation(result.updates)]
    assert kinds == ["agent_message_chunk"] * 3 + ["tool_call", "tool_call_update"]
    final = result.updates[-1]
    assert (final["toolCallId"], final["status"]) == ("call_1", "failed")
    assert_interrupted_is_delivered(played, 1, result)
    assert interrupted_message(played, 1)["content"] == [
        {"type": "text", "text": "Let me read it."}
    ]
    assert played.of_type("tool/call") == played.of_type("tool/result") == []
    assert played.history[1]["content"] == [{"type": "text", "text": "Let me read it."}]
    check_session(played, acp_schema, snapshot)


async def test_provider_error_mid_stream(
    acp_agent: AgentLauncher, tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """A provider error after some text answers the prompt with -32603; the
    attempt and the error are logged, and nothing of it enters the history."""
    script = {
        "responses": [
            {
                "events": [
                    {"text": "Let me think about th", "chunk_size": 5},
                    {
                        "error": {
                            "message": "Overloaded",
                            "kind": "overloaded",
                            "status": 529,
                            "retryable": True,
                        }
                    },
                ]
            }
        ]
    }

    async def turns(session: Session) -> list[PromptResult]:
        return [await session.prompt("Think hard")]

    played = await play_session(acp_agent, tmp_path, script, turns)
    (result,) = played.results
    error = result.response["error"]
    assert (error["code"], error["message"]) == (-32603, "Model request failed: Overloaded")
    assert error["data"]["kind"] == "overloaded"
    (attempt,) = played.of_type("assistant/attempt")
    assert attempt["outcome"] == "provider_error"
    assert attempt["content"] == [{"type": "text", "text": "Let me think about th"}]
    (request_error,) = played.of_type("agent/request-error")
    assert request_error["attempt"] == attempt["attempt"] == error["data"]["attempt"]
    assert played.of_type("assistant/message") == []
    assert played.of_type("turn/end")[0]["reason"] == "error"
    assert played.history == [user("Think hard")]
    check_session(played, acp_schema, snapshot)


async def test_cancel_during_delay_between_chunks(
    acp_agent: AgentLauncher, tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """A stop during a long pause before the next chunk ends the turn at once."""
    script = {
        "responses": [
            {
                "events": [
                    {"text": "Slow and ", "chunk_size": 5},
                    {"text": "steady wins.", "chunk_size": 5, "chunk_delay_ms": LONG_MS},
                ]
            }
        ]
    }

    async def turns(session: Session) -> list[PromptResult]:
        # A turn that waited out the pause would outlast `run_bridge`'s bound on
        # the whole play (LONG_MS is that long) and fail there: no timing here.
        return [await session.prompt("Tell me a proverb", stop_after=2)]

    played = await play_session(acp_agent, tmp_path, script, turns)
    (result,) = played.results
    assert_cancelled(result)
    assert result.text() == "Slow and "
    assert_interrupted_is_delivered(played, 1, result)
    check_session(played, acp_schema, snapshot)


async def test_follow_up_after_cancel_sees_the_prefix(
    acp_agent: AgentLauncher, tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """The model request after a stop holds the delivered prefix, marked interrupted."""
    script = {
        "responses": [
            {
                "events": [
                    {"text": "Once upon a time, a lighthouse keeper", "chunk_size": 6},
                    {"hang": {"seconds": LONG_MS / 1000}},
                    {"text": " counted the ships."},
                ]
            },
            {
                "events": [
                    {
                        "report": [
                            "last_user_text",
                            "last_assistant_text",
                            "last_assistant_interrupted",
                        ]
                    }
                ]
            },
        ]
    }

    async def turns(session: Session) -> list[PromptResult]:
        first = await session.prompt("Tell me a story", stop_after=7)
        return [first, await session.prompt("Go on")]

    played = await play_session(acp_agent, tmp_path, script, turns)
    first, second = played.results
    assert_cancelled(first)
    assert first.text() == "Once upon a time, a lighthouse keeper"
    assert_interrupted_is_delivered(played, 1, first)
    assert second.stop_reason == "end_turn"
    assert report(second) == {
        "last_user_text": "Go on",
        "last_assistant_text": first.text(),
        "last_assistant_interrupted": True,
    }
    check_session(played, acp_schema, snapshot)


async def test_disconnect_mid_stream(
    acp_agent: AgentLauncher, tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """Closing stdin mid-stream: the process exits 0, and the turn is logged as
    disconnected, its prefix kept only as an attempt, never in the history."""
    script = {
        "responses": [{"events": [{"text": "Streaming along", "chunk_size": 5}, {"hang": True}]}]
    }

    async def turns(session: Session) -> list[PromptResult]:
        turn = await session.start_prompt("Stream")
        await turn.wait_for_chunks(3)
        return [await turn.disconnect()]

    played = await play_session(acp_agent, tmp_path, script, turns, close_stdin=False)
    (result,) = played.results
    assert played.run.returncode == 0
    assert result.text() == "Streaming along"
    (turn_end,) = played.of_type("turn/end")
    assert turn_end["reason"] == "disconnected"
    (attempt,) = played.of_type("assistant/attempt")
    assert attempt["outcome"] == "disconnected"
    assert attempt["content"] == [{"type": "text", "text": "Streaming along"}]
    assert played.of_type("assistant/message") == []
    assert played.history == [user("Stream")]
    check_session(played, acp_schema, snapshot)


async def test_tool_call_without_tools(
    acp_agent: AgentLauncher, tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """A complete call of a tool the session does not have gets an error result, the
    editor sees the call fail, and a second model response ends the turn."""
    script = {
        "responses": [
            {
                "events": [
                    {"text": "Let me read the file.", "chunk_size": 8},
                    {
                        "tool_call": {
                            "id": "call_1",
                            "name": "lookup",
                            "arguments": {"path": "README.md"},
                            "chunks": 2,
                        }
                    },
                ]
            },
            {"events": [{"report": ["tool_results"]}, {"text": "\nI will answer without it."}]},
        ]
    }

    async def turns(session: Session) -> list[PromptResult]:
        return [await session.prompt("What is in the README?")]

    played = await play_session(acp_agent, tmp_path, script, turns)
    (result,) = played.results
    assert result.stop_reason == "end_turn"
    kinds = [u["sessionUpdate"] for u in conversation(result.updates)]
    assert (
        kinds
        == ["agent_message_chunk"] * 3
        + ["tool_call", "tool_call_update"]
        + ["agent_message_chunk"] * 2
    )
    failed = conversation(result.updates)[4]
    assert (failed["toolCallId"], failed["status"]) == ("call_1", "failed")
    error_text = unavailable_tool_text("lookup")
    (tool_result,) = played.of_type("tool/result")
    assert tool_result["is_error"] is True
    assert tool_result["content"] == [{"type": "text", "text": error_text}]
    first_step, second_step = delivered_on_wire(played.run.client.transcript)
    assert first_step == {"text": "Let me read the file."}
    assert second_step["text"].splitlines()[0] == "tool_results: " + json.dumps(
        [{"tool_call_id": "call_1", "is_error": True, "text": error_text}]
    )
    assert [m["role"] for m in played.history] == ["user", "assistant", "user", "assistant"]
    assert played.history[2]["content"][0]["type"] == "tool_result"
    check_session(played, acp_schema, snapshot)


# -- the schema check itself ---------------------------------------------------------


def test_schema_check_rejects_what_an_editor_would(acp_schema: AcpSchema) -> None:
    """The transcript check is not vacuous: each of these agent messages is caught."""
    prompt = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {}}
    good_update = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "s",
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "hi"},
            },
        },
    }
    bad_update = json.loads(json.dumps(good_update))
    bad_update["params"]["update"]["sessionUpdate"] = "agent_chunk"
    bad_usage = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s", "update": {"sessionUpdate": "usage_update", "used": 1}},
    }
    cases: list[dict[str, Any]] = [
        bad_update,
        bad_usage,
        {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "stopped"}},
        {"jsonrpc": "2.0", "id": 3, "result": {}},
        {"jsonrpc": "2.0", "id": 3, "error": {"code": "oops", "message": "x"}},
        {"jsonrpc": "2.0", "id": 3, "error": {"code": -32603}},
        {"jsonrpc": "1.0", "id": 3, "result": {"stopReason": "end_turn"}},
        {"jsonrpc": "2.0", "method": "session/made_up", "params": {}},
    ]
    assert acp_schema.transcript_errors([("recv", good_update)]) == []
    ok = {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}
    assert acp_schema.transcript_errors([("send", prompt), ("recv", ok)]) == []
    for bad in cases:
        assert acp_schema.transcript_errors([("send", prompt), ("recv", bad)]), bad


# -- regressions -------------------------------------------------------------------


async def test_cancel_right_after_prompt_is_not_lost(
    acp_agent: AgentLauncher, tmp_path: Path
) -> None:
    script = {"responses": [{"events": [{"hang": {"seconds": 1.5}}, {"text": "Too late."}]}]}

    async def turns(session: Session) -> list[PromptResult]:
        # The cancel in the same write as the prompt, as an editor that stops at
        # once may send them.
        turn = await session.start_prompt("Hi", stop_at_once=True)
        return [await turn.result()]

    played = await play_session(acp_agent, tmp_path, script, turns)
    (result,) = played.results
    assert result.response.get("result") == {"stopReason": "cancelled"}, (
        "the cancel sent right after the prompt was ignored: the turn answered "
        f"{result.response} after streaming {[u['content'] for u in played.run.client.updates]}"
    )


async def test_unavailable_tool_call_status_is_in_the_log_vocabulary(
    acp_agent: AgentLauncher, tmp_path: Path
) -> None:
    script = {
        "responses": [
            {"events": [{"tool_call": {"id": "call_1", "name": "lookup"}}]},
            {"events": [{"text": "Done."}]},
        ]
    }

    async def turns(session: Session) -> list[PromptResult]:
        return [await session.prompt("Read")]

    played = await play_session(acp_agent, tmp_path, script, turns)
    (call,) = played.of_type("tool/call")
    assert call["status"] == "unavailable", (
        f"tool/call status {call['status']!r} is not in the documented log vocabulary"
    )
