"""What the scenarios share: finding frames in a transcript, streaming a turn
until it can be stopped, and ending an agent."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence

import anyio

from ...client import CHUNK_KINDS, PromptResult, id_key
from ...testing.agent import SETTLE_METHOD, Agent, Turn, TurnEnded, session_update
from ..run import CheckRun, Json
from ..spool import Spool

UNKNOWN_SESSION = "sess_acp_check_unknown"
NOTE_METHOD = "_acp_bridge_check/note"

# What to do when a turn ends before it can be stopped mid-stream.  An agent
# built on acp-bridge ignores the prompt on its keyless provider (a short
# greeting): ``--scripted`` gives it a stream long enough to stop.
STREAM_LONGER = (
    "give a --stream-prompt that streams for longer; for an agent built on acp-bridge, "
    "whose keyless provider only greets, --scripted"
)


# -- finding frames --------------------------------------------------------------------


def index_of(agent: Agent, msg: Json | None) -> list[int]:
    """The transcript index of ``msg`` (the very object received), as a list of marks."""
    if msg is None:
        return []
    transcript = agent.transcript
    if isinstance(transcript, Spool):
        at = transcript.position(msg)
        return [] if at is None else [at]
    for i in range(len(agent.transcript) - 1, -1, -1):
        if agent.transcript[i][1] is msg:
            return [i]
    return []


def sent_index(agent: Agent, method: str, start: int) -> list[int]:
    """The first message of ``method`` the checker sent from transcript index ``start`` on."""
    for i, (direction, msg) in enumerate(agent.transcript[start:], start):
        if direction == "send" and msg.get("method") == method:
            return [i]
    return []


CONVERSATION = frozenset(
    {
        "user_message_chunk",
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
        # ACP v2's: message upserts, tool-call content, the agent's own terminals, plans.
        "user_message",
        "agent_message",
        "agent_thought",
        "tool_call_content_chunk",
        "terminal_update",
        "terminal_output_chunk",
        "plan_update",
    }
)
"""The updates that carry the conversation (content and tool calls); the others
(commands, modes, config options, title, usage, v2's state) describe the session."""


def updates_between(
    agent: Agent,
    session_id: str,
    start: int,
    end: int | None = None,
    *,
    kinds: frozenset[str] | None = None,
) -> list[int]:
    """Transcript indices of the session's updates (of ``kinds``, default all) from
    ``start`` up to ``end``."""
    out = []
    for i, (direction, msg) in enumerate(agent.transcript[start:end], start):
        update = session_update(msg, session_id) if direction == "recv" else None
        if update is not None and (kinds is None or update.get("sessionUpdate") in kinds):
            out.append(i)
    return out


def late_updates(agent: Agent, session_id: str, response: Json | None) -> list[int]:
    """Transcript indices of the session's conversation updates after ``response``
    (none when it never came): what must not follow a turn's end."""
    response_at = index_of(agent, response)
    if not response_at:
        return []
    return updates_between(agent, session_id, response_at[0] + 1, kinds=CONVERSATION)


def ms_between(agent: Agent, first: int, second: int) -> float:
    times = agent.client.times
    return round((times[second] - times[first]) * 1000, 1)


def stop_reason(response: Json | None) -> str | None:
    """The stop reason of what ended a turn: the prompt's response, or in ACP v2
    its idle ``state_update``."""
    return PromptResult(response or {}, []).stop_reason


def describe(response: Json | None) -> str:
    """What ended a turn, for a report: a v1 result, a v2 idle state_update, an error."""
    if not response:
        return "no response (the agent exited)"
    if "error" in response:
        return f"an error {json.dumps(response['error'])[:300]}"
    if response.get("method") == "session/update":
        return "idle " + json.dumps(response.get("params", {}).get("update"))[:300]
    return json.dumps(response.get("result"))[:300]


def texts(updates: Sequence[Json], kind: str) -> str:
    return "".join(
        str(u["content"].get("text", ""))
        for u in updates
        if u.get("sessionUpdate") == kind and isinstance(u.get("content"), dict)
    )


async def stream(run: CheckRun, turn: Turn) -> str | None:
    """Wait for the turn's first ``--stop-after`` chunks; None when they came, else
    why the turn cannot be stopped mid-stream."""
    n = run.options.stop_after
    try:
        await turn.wait_for_chunks(n, within=run.options.stream_timeout)
    except TurnEnded as ended:
        return (
            f"the prompt was answered {describe(ended.response)} after {turn.chunks()} "
            f"chunk(s), before {n}: it never streamed long enough to be stopped "
            f"({STREAM_LONGER})"
        )
    except TimeoutError:
        return (
            f"{turn.chunks()} chunk(s) within {run.options.stream_timeout:g} s, not {n} "
            "(a slow model? raise --stream-timeout)"
        )
    return None


_behind_ids = itertools.count(1)


async def send_stop(agent: Agent, turn: Turn, stop: Json) -> str:
    """Send ``stop`` (the ``session/cancel`` notification, or a ``session/close``
    request) and, in the same write, a barrier request right behind it; the
    barrier's id, for `crossed`."""
    rid = f"behind-stop-{next(_behind_ids)}"
    barrier = {"jsonrpc": "2.0", "id": rid, "method": SETTLE_METHOD, "params": {}}
    agent.barrier_ids.add(rid)
    turn.stop_sent = True
    await agent.client.send(stop, barrier)
    agent._stopped(turn.session.id)
    return rid


async def send_cancel(agent: Agent, turn: Turn) -> str:
    """`send_stop` with ``session/cancel``: the user pressed Stop."""
    return await send_stop(
        agent,
        turn,
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": turn.session.id}},
    )


def crossed(agent: Agent, response: Json | None, behind: str) -> bool:
    """Whether the prompt's ``response`` came before the agent answered the barrier
    ``behind`` the Stop (`send_stop`).  An agent reads its input in order, so until
    it answers that barrier it may not have read the Stop: a turn answered
    otherwise (``end_turn``) by then may have ended as the Stop crossed it, and the
    Stop was not exercised.  A turn answered after it went on once the agent had
    read the Stop."""
    answers = agent.client.responses.get(id_key(behind))
    response_at = index_of(agent, response)
    if not answers or not response_at:
        return False
    barrier_at = index_of(agent, answers[0])
    return bool(barrier_at) and response_at[0] < barrier_at[0]


def stop_reading(agent: Agent) -> None:
    """Read no more of the agent's stdout: a cancel it ignored for --stop-timeout is the
    finding, and what it streams after that need not be read (nor kept)."""
    agent.client.agent.stdout.pause()


async def end(run: CheckRun, agent: Agent) -> None:
    """Close the agent's stdin and give it --exit-timeout to exit (it is killed after)."""
    await agent.client.close_stdin()
    with anyio.move_on_after(run.options.exit_timeout):
        await agent.client.agent.wait(within=run.options.exit_timeout + 1)


def is_chunk(agent: Agent, index: int) -> bool:
    direction, msg = agent.transcript[index]
    update = session_update(msg, str(msg.get("params", {}).get("sessionId")))
    return direction == "recv" and update is not None and update.get("sessionUpdate") in CHUNK_KINDS


async def probe(run: CheckRun) -> None:
    """Learn the agent's capabilities when the basics scenario did not run."""
    if run.agent_info is None:
        async with run.agent("capabilities") as agent:
            run.agent_info = await run.initialize(agent)
            await end(run, agent)
