"""The replay of a log equals what the editor was sent live (invariant I4).

Each example serves the bridge in-process with a random multi-turn script:
turns that end normally, turns with tool calls (refused: no tools yet),
usage reports with a context window, turns that fail with a provider error,
and turns the user stops after a random number of chunks.  The
``session/update`` notifications the editor received, with each prompt's
blocks as ``user_message_chunk`` in front, must equal `replay_updates` of the
session log, modulo chunking: consecutive chunks of one message and kind are
merged on both sides before comparing.  The replay's ``_meta.acpBridge``
markers must sit exactly on the chunks of stopped and abandoned messages.
"""

from __future__ import annotations

import tempfile
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cancel_property import CWD, Served, chunks, serve_in_process, text_events

from acp_bridge.client import AcpClient
from acp_bridge.log.check import check_log
from acp_bridge.log.replay import replay_updates

Json = dict[str, Any]
CHUNK_UPDATES = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")


# -- comparing ---------------------------------------------------------------------


def merged(updates: list[Json]) -> list[Json]:
    """Join consecutive text chunks of one kind, message and ``_meta``."""
    out: list[Json] = []
    for update in updates:
        previous = out[-1] if out else None
        if (
            previous is not None
            and update["sessionUpdate"] in CHUNK_UPDATES
            and update["sessionUpdate"] != "user_message_chunk"
            and previous["sessionUpdate"] == update["sessionUpdate"]
            and previous.get("messageId") == update.get("messageId")
            and previous.get("_meta") == update.get("_meta")
        ):
            text = previous["content"]["text"] + update["content"]["text"]
            out[-1] = {**previous, "content": {"type": "text", "text": text}}
        else:
            out.append(update)
    return out


def without_markers(update: Json) -> Json:
    """The update without the replay's interrupted/abandoned marker."""
    meta = update.get("_meta")
    if not isinstance(meta, dict) or "acpBridge" not in meta:
        return update
    marks = {k: v for k, v in meta["acpBridge"].items() if k not in ("interrupted", "abandoned")}
    rest = {k: v for k, v in update.items() if k != "_meta"}
    if marks:
        rest["_meta"] = {**meta, "acpBridge": marks}
    return rest


def live_updates(client: AcpClient) -> list[Json]:
    """What the editor saw: its prompts' blocks, then the updates it received, in order."""
    out: list[Json] = []
    for way, msg in client.transcript:
        if way == "send" and msg.get("method") == "session/prompt":
            for block in msg["params"]["prompt"]:
                out.append({"sessionUpdate": "user_message_chunk", "content": block})
        elif way == "recv" and msg.get("method") == "session/update":
            if msg["params"]["update"]["sessionUpdate"] == "available_commands_update":
                # Sent as the session opens, not replayed (at a load's end, before its answer).
                continue
            out.append(msg["params"]["update"])
    return out


def check_replay(records: list[Json], client: AcpClient, stopped: set[int]) -> None:
    """The replay of ``records`` equals what ``client`` saw; ``stopped``: the turns
    the user stopped (the only ones that may hold an interrupted message)."""
    check_log(records)
    replayed = replay_updates(records)
    assert all(params["sessionId"] == records[0]["session_id"] for params in replayed)
    updates = [params["update"] for params in replayed]
    live = live_updates(client)
    assert merged([without_markers(u) for u in updates]) == merged(live)

    # The markers: on the chunks of each attempt that left an interrupted
    # message or an attempt record, and nowhere else.
    marks: dict[str, Any] = {}
    for record in records:
        if record["type"] == "assistant/message" and record["interrupted"]:
            marks[record["message_id"]] = {"interrupted": True}
        elif record["type"] == "assistant/attempt":
            marks[record["message_id"]] = {"abandoned": record["outcome"]}
    for update in updates:
        if "messageId" in update:
            mark = marks.get(update["messageId"])
            got = update.get("_meta", {}).get("acpBridge")
            assert got == mark, f"marker {got!r} on {update!r}, expected {mark!r}"
    interrupted_turns = {
        r["turn"] for r in records if r["type"] == "assistant/message" and r["interrupted"]
    }
    assert interrupted_turns <= stopped


# -- random sessions ---------------------------------------------------------------

usages = st.builds(
    lambda i, o, w: {"usage": {"input_tokens": i, "output_tokens": o, "context_window": w}},
    st.integers(0, 500),
    st.integers(0, 500),
    st.integers(1000, 200_000),
)


@st.composite
def turn_plans(draw: st.DrawFn, number: int) -> tuple[str, list[Json], int]:
    """One turn: its kind, its script responses, and its chunk count (for a stop)."""
    kind = draw(st.sampled_from(["end", "tools", "stop", "error"]))
    calls = iter(range(1, 100))

    def events() -> list[Json]:
        body: list[Json] = list(draw(st.lists(text_events, min_size=1, max_size=4)))
        if draw(st.booleans()):
            body.insert(draw(st.integers(0, len(body))), draw(usages))
        return body

    def tool_call() -> Json:
        return {
            "tool_call": {
                "id": f"call_{number}_{next(calls)}",
                "name": "read_file",
                "arguments": {"path": "README.md"},
            }
        }

    if kind == "end":
        responses = [{"events": events()}]
    elif kind == "tools":
        steps = draw(st.integers(1, 2))
        responses = [{"events": [*events(), tool_call()]} for _ in range(steps)]
        responses.append({"events": events()})
    elif kind == "error":
        failure = {"error": {"message": "Overloaded", "kind": "overloaded", "retryable": True}}
        responses = [{"events": [*events(), failure]}]
    else:
        body = events()
        tail = draw(st.sampled_from(["none", "complete", "half"]))
        if tail == "complete":
            body.append(tool_call())
        elif tail == "half":
            body.append({"tool_call_start": {"id": f"call_{number}_half", "name": "read_file"}})
            body.append({"tool_args": '{"pa'})
        responses = [{"events": [*body, {"hang": True}]}]
    count = sum(len(chunks(e)) for r in responses for e in r["events"] if _is_text(e))
    return kind, responses, count


def _is_text(event: Json) -> bool:
    return "text" in event or "reasoning" in event


@st.composite
def sessions(draw: st.DrawFn) -> tuple[Json, list[tuple[str, int]]]:
    """A script for 1-3 turns and, per turn, its kind and when to stop it (0: never)."""
    plans = [draw(turn_plans(n)) for n in range(1, draw(st.integers(1, 3)) + 1)]
    responses = [r for _, rs, _ in plans for r in rs]
    turns = [
        (kind, draw(st.integers(1, count), label="stop after K chunks") if kind == "stop" else 0)
        for kind, _, count in plans
    ]
    return {"responses": responses}, turns


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions())
@pytest.mark.slow
def test_replay_equals_what_was_sent_live(session: tuple[Json, list[tuple[str, int]]]) -> None:
    script, turns = session
    with tempfile.TemporaryDirectory() as state_dir:
        box: dict[str, Any] = {}

        async def play(client: AcpClient) -> None:
            await client.initialize()
            session_id = box["session"] = await client.new_session(CWD)
            for n, (kind, k) in enumerate(turns, start=1):
                result = await client.prompt(
                    session_id, f"Prompt {n}", cancel_after=k or None, settle=0
                )
                if kind == "stop":
                    assert result.stop_reason == "cancelled"
                elif kind == "error":
                    assert result.response["error"]["data"]["kind"] == "overloaded"
                else:
                    assert result.stop_reason == "end_turn"

        async def main() -> Served:
            return await serve_in_process(script, state_dir, play)

        served = anyio.run(main)
        assert served.status == 0
        stopped = {n for n, (kind, _) in enumerate(turns, start=1) if kind == "stop"}
        check_replay(served.records(box["session"]), served.client, stopped)
