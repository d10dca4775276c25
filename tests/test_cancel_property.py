"""A user stop at a random point of a random stream keeps invariants I1, I2 and I3.

Each example serves the bridge in-process on two pipes, with a random script
(text and reasoning events, random chunking and pauses, maybe a half-streamed
tool call, then a hang so the turn cannot end by itself), sends a prompt,
and sends ``session/cancel`` once K chunks have arrived.  Then:

I1  the response is ``{"stopReason": "cancelled"}`` and no ``session/update``
    follows it (we read stdout to EOF after closing stdin to be sure);
I2  the model history ends with an interrupted assistant message holding
    exactly the delivered ``agent_message_chunk`` / ``agent_thought_chunk``
    texts, block by block, or with the user message when all that was
    delivered is whitespace;
I3  `check_log` accepts the session log.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from itertools import pairwise
from typing import Any, cast

import anyio
import anyio.abc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.harness import cwd_for_tests
from support.pipe_peer import CorkedSend, InProcess, bridge_on_pipes

from acp_bridge.client import AcpClient, Pipes
from acp_bridge.log.check import check_log
from acp_bridge.log.derive import derive_messages, is_visible_text
from acp_bridge.providers.base import Provider

CHUNK_KINDS = {"agent_message_chunk": "text", "agent_thought_chunk": "reasoning"}
CWD = cwd_for_tests()
Json = dict[str, Any]


# -- the bridge in process, on a pair of pipes -------------------------------------------

Served = InProcess


async def serve_in_process(
    script: Json,
    state_dir: str,
    play: Callable[[AcpClient], Any],
    *,
    cancel_deadline: float = 5.0,
    provider: Callable[[], Provider] | None = None,
) -> Served:
    """Serve ``script`` (or the providers ``provider`` makes) on pipes, run
    ``play(client)``, close stdin, read stdout to EOF."""
    async with bridge_on_pipes(
        script, state_dir, cancel_deadline=cancel_deadline, provider=provider
    ) as served:
        with anyio.fail_after(20):
            await play(served.client)
    return served


# -- random scripts -----------------------------------------------------------------

ALPHABET = st.sampled_from([*"abcxyz .,\n\t", "é", "世", "🙂", "\u2028", "  "])
WHITESPACE = st.sampled_from([" ", "  ", "\n", "\t", "\u2028", "\r\n"])
texts = st.one_of(
    st.lists(ALPHABET, min_size=1, max_size=24).map("".join),
    # Whitespace-only blocks: they must never become history blocks.
    st.lists(WHITESPACE, min_size=1, max_size=6).map("".join),
)
text_events = st.builds(
    lambda kind, text, size, delay: {
        kind: text,
        **({"chunk_size": size} if size else {}),
        "chunk_delay_ms": delay,
    },
    st.sampled_from(["text", "reasoning"]),
    texts,
    st.one_of(st.none(), st.integers(min_value=1, max_value=6)),
    st.sampled_from([0, 0, 0.5, 1, 2]),
)
TOOL_ARGS = '{"path": "README.md", "line": 12}'
tool_calls = st.one_of(
    st.none(),
    st.lists(st.integers(min_value=1, max_value=len(TOOL_ARGS) - 1), max_size=3, unique=True).map(
        lambda cuts: [TOOL_ARGS[a:b] for a, b in pairwise([0, *sorted(cuts)])]
    ),
)


@st.composite
def scripts(draw: st.DrawFn) -> tuple[Json, int]:
    """A script that streams, maybe starts a tool call, then hangs; and its chunk count."""
    events: list[Json] = draw(st.lists(text_events, min_size=1, max_size=5))
    chunk_count = sum(len(chunks(e)) for e in events)
    tool = draw(tool_calls)
    script_events = list(events)
    if tool is not None:
        script_events.append({"tool_call_start": {"id": "call_half", "name": "read_file"}})
        script_events.extend({"tool_args": piece} for piece in tool)
    script_events.append({"hang": True})
    return {"responses": [{"events": script_events}]}, chunk_count


def chunks(event: Json) -> list[str]:
    """The chunks of a text or reasoning event, split as the script format says."""
    text = event.get("text", event.get("reasoning"))
    assert isinstance(text, str)
    size = event.get("chunk_size")
    if not size or len(text) <= size:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


# -- checking one cancelled turn ----------------------------------------------------


def delivered_blocks(updates: list[Json]) -> list[tuple[str, str]]:
    """The delivered text per block: runs of chunks of one kind (a tool call ends a run)."""
    blocks: list[tuple[str, str]] = []
    current: tuple[str, list[str]] | None = None
    for update in updates:
        kind = CHUNK_KINDS.get(update.get("sessionUpdate", ""))
        if kind is None:
            if update.get("sessionUpdate") != "usage_update":
                current = None
            continue
        if current is None or current[0] != kind:
            current = (kind, [])
            blocks.append((kind, ""))
        current[1].append(update["content"]["text"])
        blocks[-1] = (kind, "".join(current[1]))
    return blocks


def check_cancelled_turn(served: Served, session_id: str, k: int) -> None:
    transcript = served.client.transcript
    prompt_ids = [
        msg["id"]
        for way, msg in transcript
        if way == "send" and msg.get("method") == "session/prompt"
    ]
    assert len(prompt_ids) == 1
    responses = [
        i
        for i, (way, msg) in enumerate(transcript)
        if way == "recv" and msg.get("id") == prompt_ids[0] and "method" not in msg
    ]
    assert len(responses) == 1, f"expected one prompt response, got {len(responses)}"
    at = responses[0]
    response = transcript[at][1]

    # I1: cancelled, and nothing after the response.
    assert response.get("result") == {"stopReason": "cancelled"}, f"I1: {response}"
    late = [m for way, m in transcript[at + 1 :] if way == "recv" and m.get("method")]
    assert late == [], f"I1: updates after the prompt response: {late}"
    updates = [
        m["params"]["update"]
        for way, m in transcript[:at]
        if way == "recv" and m.get("method") == "session/update"
    ]
    seen_chunks = sum(1 for u in updates if u.get("sessionUpdate") in CHUNK_KINDS)
    assert seen_chunks >= k
    announced = {u["toolCallId"] for u in updates if u.get("sessionUpdate") == "tool_call"}
    finished = {
        u["toolCallId"]
        for u in updates
        if u.get("sessionUpdate") == "tool_call_update"
        and u.get("status") in ("failed", "completed")
    }
    assert announced <= finished, f"tool calls without a final update: {announced - finished}"

    # I3: the log is valid (this also checks the derived history).
    records = served.records(session_id)
    check_log(records)

    # I2: the history ends with exactly what was delivered.
    expected = [
        {"type": kind, "text": text}
        for kind, text in delivered_blocks(updates)
        if is_visible_text(text)
    ]
    history = derive_messages(records)
    last = history[-1]
    if not expected:
        assert last["role"] == "user", (
            f"I2: nothing visible was delivered ({delivered_blocks(updates)!r}), "
            f"yet the history ends with {last}"
        )
        assert not any(m["role"] == "assistant" for m in history)
        return
    assert last["role"] == "assistant", f"I2: the history ends with {last}"
    assert last["interrupted"] is True, f"I2: not marked interrupted: {last}"
    assert last["content"] == expected, (
        f"I2: the interrupted message differs from what the editor saw:\n"
        f"  history:   {last['content']!r}\n  delivered: {expected!r}"
    )
    for kind, chunk_kind in (("text", "agent_message_chunk"), ("reasoning", "agent_thought_chunk")):
        shown = "".join(
            u["content"]["text"] for u in updates if u.get("sessionUpdate") == chunk_kind
        )
        kept = "".join(b["text"] for b in last["content"] if b["type"] == kind)
        visible_runs = "".join(
            t for kd, t in delivered_blocks(updates) if kd == kind and is_visible_text(t)
        )
        assert kept == visible_runs
        if all(is_visible_text(t) for kd, t in delivered_blocks(updates) if kd == kind):
            assert kept == shown, f"I2: {kind} {kept!r} != delivered {shown!r}"


async def cancel_after(client: AcpClient, k: int) -> str:
    """Initialize, open a session, prompt, and cancel once ``k`` chunks have arrived."""
    init = await client.initialize()
    assert init["result"]["protocolVersion"] == 1
    session_id = await client.new_session(CWD)
    await client.prompt(session_id, "Tell me a story.", cancel_after=k, settle=0)
    return session_id


# -- the property -------------------------------------------------------------------


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data(), script_and_count=scripts())
def test_cancel_at_a_random_point_keeps_i1_i2_i3(
    data: st.DataObject, script_and_count: tuple[Json, int]
) -> None:
    script, chunk_count = script_and_count
    k = data.draw(st.integers(min_value=1, max_value=chunk_count), label="cancel after K chunks")
    with tempfile.TemporaryDirectory() as state_dir:
        box: dict[str, Any] = {}

        async def play(client: AcpClient) -> None:
            box["session"] = await cancel_after(client, k)

        async def main() -> Served:
            return await serve_in_process(script, state_dir, play)

        served = anyio.run(main)
        assert served.status == 0
        check_cancelled_turn(served, box["session"], k)


# -- fixed cases -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("events", "k"),
    [
        # Whitespace only: no assistant message at all.
        ([{"text": "  \n\t ", "chunk_size": 2}], 3),
        # Reasoning, then text; stop in the text.
        (
            [
                {"reasoning": "think hard", "chunk_size": 3},
                {"text": "Hello world", "chunk_size": 4},
            ],
            5,
        ),
        # A blank reasoning block before visible text: only the text survives.
        ([{"reasoning": "   "}, {"text": "ok"}], 2),
        # Text then a half-streamed tool call: the call is dropped, the text kept.
        (
            [
                {"text": "Let me look.", "chunk_size": 5},
                {"tool_call_start": {"id": "call_1", "name": "read_file"}},
                {"tool_args": '{"pa'},
            ],
            3,
        ),
    ],
)
def test_cancel_fixed_cases(events: list[Json], k: int) -> None:
    script = {"responses": [{"events": [*events, {"hang": True}]}]}
    with tempfile.TemporaryDirectory() as state_dir:
        box: dict[str, Any] = {}

        async def play(client: AcpClient) -> None:
            box["session"] = await cancel_after(client, k)

        async def main() -> Served:
            return await serve_in_process(script, state_dir, play)

        served = anyio.run(main)
        check_cancelled_turn(served, box["session"], k)


def test_cancel_sent_with_the_prompt_stops_the_turn() -> None:
    """An editor that sends session/cancel right behind session/prompt (one write)
    must get ``cancelled``: the prompt is ongoing from the editor's point of view."""
    script = {"responses": [{"events": [{"text": "never ends", "chunk_size": 3}, {"hang": True}]}]}
    with tempfile.TemporaryDirectory() as state_dir:
        box: dict[str, Any] = {}

        async def play(client: AcpClient) -> None:
            await client.initialize()
            session_id = box["session"] = await client.new_session(CWD)
            stdin = cast(CorkedSend, cast(Pipes, client.process).stdin)
            params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
            answered = anyio.Event()

            async def prompt() -> None:
                await client.request("session/prompt", params)
                answered.set()

            async with anyio.create_task_group() as tg:
                stdin.cork()
                tg.start_soon(prompt)
                await anyio.wait_all_tasks_blocked()
                await client.notify("session/cancel", {"sessionId": session_id})
                await stdin.uncork()  # the prompt and the cancel in one write
                with anyio.move_on_after(3):
                    await answered.wait()
                box["answered"] = answered.is_set()
                if not answered.is_set():
                    # Unstick the turn so that the bridge can shut down.
                    await client.notify("session/cancel", {"sessionId": session_id})

        async def main() -> Served:
            return await serve_in_process(script, state_dir, play)

        served = anyio.run(main)
        assert box["answered"], (
            "session/cancel sent in the same write as its session/prompt was dropped: "
            "the prompt's handler had not set session.active yet, so Agent.cancel "
            "treated the session as idle and the turn ran on (here: hung) until a second cancel"
        )
        check_cancelled_turn(served, box["session"], 0)
