"""The Stop scenarios: cancel mid-stream, cancel while idle, cancel racing the end.

Why this module is over 400 lines: the Stop scenarios share what a Stop met
(`Stopped`, `stop_kind`) and how it is judged and measured; apart, each
scenario's verdict would be read in two places.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from ...testing.agent import Agent, Session
from ..results import Outcome
from ..run import CheckRun, Json
from .frames import (
    CONVERSATION,
    NOTE_METHOD,
    STREAM_LONGER,
    UNKNOWN_SESSION,
    crossed,
    describe,
    end,
    index_of,
    is_chunk,
    late_updates,
    ms_between,
    send_cancel,
    sent_index,
    stop_reading,
    stop_reason,
    stream,
    updates_between,
)
from .stop_figures import measure


@dataclass
class Stopped:
    """One Stop of the ``stop`` scenario: a turn streamed ``--stop-after`` chunks,
    then ``session/cancel`` (with a barrier right behind it, `send_cancel`)."""

    turn_at: int
    stop_at: int
    behind: str
    response: Json | None
    """The prompt's response; None when the agent exited without one."""
    kind: str
    """``before`` (answered before the cancel was sent: nothing stopped), ``crossed``
    (answered otherwise before the barrier behind the cancel: the turn may have
    ended as the cancel crossed it), ``cancelled``, ``otherwise`` (answered
    otherwise once the agent had read the cancel), ``exited``, ``unanswered``
    (not within ``--stop-timeout``) or ``unstreamed`` (no Stop: the turn did not
    stream ``--stop-after`` chunks)."""
    chunks: int
    """The turn's chunks, up to its response."""
    note: str = ""
    """For ``unstreamed`` (kind): why the turn could not be stopped."""

    def marks(self, agent: Agent) -> list[int]:
        return sent_index(agent, "session/cancel", self.stop_at) + index_of(agent, self.response)

    def why_unexercised(self, agent: Agent) -> str:
        """Why a ``before`` or ``crossed`` Stop stopped nothing."""
        cancel_at = sent_index(agent, "session/cancel", self.stop_at) or [self.stop_at]
        response_at = index_of(agent, self.response)
        ms = ms_between(agent, cancel_at[0], response_at[0]) if response_at else 0.0
        answer = describe(self.response)
        if self.kind == "before":
            why = f"the turn ended (answered {answer}) {-ms:g} ms before session/cancel was sent"
        else:
            why = CROSSED.format(answer=answer, ms=ms)
        return f"{why}: {LONGER}"


def stop_kind(agent: Agent, stop_at: int, response: Json | None, behind: str) -> str:
    """What a Stop sent at ``stop_at`` met (see `Stopped.kind`)."""
    response_at = index_of(agent, response)
    if not response_at:
        return "exited"
    if response_at[0] < stop_at:
        return "before"
    if stop_reason(response) == "cancelled":
        return "cancelled"
    return "crossed" if crossed(agent, response, behind) else "otherwise"


def turn_figures(agent: Agent, session: Session, stopped: Stopped) -> dict[str, float | int]:
    """The figures of a Stop: first chunk, chunks before the Stop, Stop to response."""
    figures: dict[str, float | int] = {}
    stop_mark = sent_index(agent, "session/cancel", stopped.stop_at) or [stopped.stop_at]
    prompt_at = sent_index(agent, "session/prompt", stopped.turn_at)
    chunks = [
        i
        for i in updates_between(agent, session.id, stopped.turn_at, stopped.stop_at)
        if is_chunk(agent, i)
    ]
    if chunks and prompt_at:
        figures["first_chunk_ms"] = ms_between(agent, prompt_at[0], chunks[0])
    figures["chunks_before_stop"] = len(chunks)
    response_at = index_of(agent, stopped.response)
    if response_at:
        figures["updates_after_stop"] = len(
            updates_between(agent, session.id, stop_mark[0], response_at[0])
        )
        figures["stop_to_response_ms"] = ms_between(agent, stop_mark[0], response_at[0])
    return figures


def judge_cancelled(
    run: CheckRun, agent: Agent, check: str, stopped: Stopped, session: Session
) -> None:
    """Record ``check`` for a Stop that stopped something (not ``before`` nor ``crossed``)."""
    figures = turn_figures(agent, session, stopped)
    if stopped.kind == "exited":
        run.record(
            check,
            Outcome.FAIL,
            "no response after session/cancel: the agent exited",
            evidence=[(agent, stopped.marks(agent))],
            figures=figures,
        )
    elif stopped.kind == "otherwise":
        run.record(
            check,
            Outcome.FAIL,
            f"stopped with session/cancel after {figures['chunks_before_stop']} chunk(s), the "
            f"prompt was answered {describe(stopped.response)}, not cancelled (after the agent "
            "had answered the request sent right behind the cancel: it had read the cancel)",
            evidence=[(agent, stopped.marks(agent))],
            figures=figures,
        )
    else:
        run.record(
            check,
            Outcome.PASS,
            f"answered cancelled {figures.get('stop_to_response_ms', 0):g} ms after session/cancel",
            figures=figures,
        )


def judge_ordering(run: CheckRun, agent: Agent, session: Session, stopped: Stopped, n: int) -> int:
    """Record ``stop.ordering`` for a Stop answered after its cancel; the late updates.
    A turn the Stop crossed (``crossed``) stopped nothing: it can fail the check (an
    update after a response is a leak however the turn ended), not pass it."""
    response_at = index_of(agent, stopped.response)
    if not response_at:
        return 0
    late = updates_between(agent, session.id, response_at[0] + 1, kinds=CONVERSATION)
    if late:
        first_ms = ms_between(agent, response_at[0], late[0])
        run.record(
            "stop.ordering",
            Outcome.FAIL,
            f"{len(late)} session/update after the prompt's response, the first {first_ms:g} "
            f"ms after it (Stop {n})",
            evidence=[(agent, response_at + late)],
        )
    elif stopped.kind != "crossed":
        run.record(
            "stop.ordering",
            Outcome.PASS,
            f"no update after the response (watched {run.options.watch:g} s, then a barrier "
            "request)",
        )
    return len(late)


CROSSED = (
    "answered {answer} {ms:g} ms after session/cancel was sent, before the agent answered "
    "the request sent right behind the cancel: the turn may have ended as the cancel crossed "
    "it"
)
LONGER = f"a Stop mid-stream was not exercised ({STREAM_LONGER})"
STOP_CHECKS = ("stop.cancelled", "stop.ordering", "stop.next-turn")


async def stop(run: CheckRun) -> None:
    """Stop one session's turns again and again, ``--stops`` times in all (with the
    other Stop scenarios' one each).  The first Stop that stopped something decides
    ``stop.cancelled`` (a later one answered otherwise fails it), the next one
    ``stop.next-turn``; every Stop answered after its cancel is watched for
    ``stop.ordering``.  A turn that ended before its Stop, or as the Stop crossed
    it, stopped nothing and decides nothing: the next Stop tries again."""
    opts = run.options
    others = sum(run.wanted((check,)) for check in ("stop.idle", "stop.race"))
    first: Stopped | None = None
    unexercised: list[str] = []
    async with run.agent("stop") as agent:
        await run.initialize(agent)
        session = await agent.new_session(run.project)
        for _ in range(max(2 * opts.stops, 10)):
            deciding = first is None or "stop.next-turn" not in run.results
            if not deciding and len(run.stop_samples) + others >= opts.stops:
                break
            stopped = await stop_once(run, agent, session, watch=opts.watch if deciding else 0)
            if stopped.kind in ("unstreamed", "unanswered"):
                if first is None and stopped.kind == "unstreamed":
                    unexercised.append(stopped.note)
                else:
                    record_broken(run, agent, session, stopped, deciding)
                break
            if stopped.kind in ("before", "crossed"):
                unexercised.append(stopped.why_unexercised(agent))
            elif first is None:
                first = stopped
                judge_cancelled(run, agent, "stop.cancelled", stopped, session)
            elif "stop.next-turn" not in run.results:
                judge_next_turn(run, agent, session, stopped)
            elif stopped.kind == "otherwise":
                judge_cancelled(run, agent, "stop.cancelled", stopped, session)
        record_unexercised(run, first is not None, unexercised)
        if stopped.kind != "unanswered":
            await end(run, agent)


def record_broken(
    run: CheckRun, agent: Agent, session: Session, stopped: Stopped, deciding: bool
) -> None:
    """A turn that could not be stopped after a Stop that was (``unstreamed``), or a
    Stop not answered within ``--stop-timeout`` (``unanswered``)."""
    opts = run.options
    if stopped.kind == "unstreamed":
        if deciding:
            run.record(
                "stop.next-turn",
                Outcome.FAIL if stopped.response else Outcome.NOT_EXERCISED,
                "the prompt after the Stop: " + stopped.note,
                evidence=[(agent, index_of(agent, stopped.response))],
            )
        return
    run.record(
        "stop.next-turn" if deciding and "stop.cancelled" in run.results else "stop.cancelled",
        Outcome.FAIL,
        f"no response within {opts.stop_timeout:g} s of session/cancel "
        f"({len(updates_between(agent, session.id, stopped.stop_at))} updates since)",
        evidence=[(agent, sent_index(agent, "session/cancel", stopped.stop_at))],
    )
    for check in STOP_CHECKS:
        run.record(check, Outcome.NOT_EXERCISED, "the stopped prompt was never answered")


def record_unexercised(run: CheckRun, stopped_any: bool, whys: list[str]) -> None:
    """The Stop checks no Stop decided: not exercised, with the last Stop's reason."""
    last = whys[-1] if whys else "no Stop was made"
    if not stopped_any:
        many = f" ({len(whys)} Stops, none stopped a turn mid-stream)" if len(whys) > 1 else ""
        for check in STOP_CHECKS:
            run.record(check, Outcome.NOT_EXERCISED, last + many)
    elif "stop.next-turn" not in run.results:
        run.record(
            "stop.next-turn",
            Outcome.NOT_EXERCISED,
            "no Stop after the first stopped anything; the last: " + last,
        )


async def stop_once(run: CheckRun, agent: Agent, session: Session, *, watch: float) -> Stopped:
    """Prompt, wait for ``--stop-after`` chunks, Stop (`send_cancel`) and wait for the
    answer and a barrier; the Stop, measured and watched for ``stop.ordering``.  A
    Stop that stopped something is watched ``watch`` seconds more (then another
    barrier); one that did not is not waited on: the next is tried at once."""
    opts = run.options
    turn_at = len(agent.transcript)
    turn = await session.start_prompt(opts.prompt("stream") or "")
    why = await stream(run, turn)
    if why is not None:
        return Stopped(turn_at, turn_at, "", turn.response, "unstreamed", turn.chunks(), why)
    stop_at = len(agent.transcript)
    behind = await send_cancel(agent, turn)
    try:
        result = await turn.stop(within=opts.stop_timeout)
    except TimeoutError:
        stop_reading(agent)
        measure(run, agent, session.id, stop_at, None, "stop")
        return Stopped(turn_at, stop_at, behind, None, "unanswered", turn.chunks())
    response = result.response or None
    kind = stop_kind(agent, stop_at, response, behind)
    stopped = Stopped(turn_at, stop_at, behind, response, kind, turn.chunks())
    if watch and kind in ("cancelled", "otherwise"):
        # Watching for something that must not happen: only a time window can.
        await anyio.sleep(watch)
        await agent.settle(within=opts.timeout)
    measure(run, agent, session.id, stop_at, response, "stop")
    if kind == "exited":
        run.record("stop.ordering", Outcome.NOT_EXERCISED, "the agent exited before answering")
    elif kind != "before":
        judge_ordering(run, agent, session, stopped, len(run.stop_samples))
    return stopped


def judge_next_turn(run: CheckRun, agent: Agent, session: Session, stopped: Stopped) -> None:
    """Record ``stop.next-turn`` for the first Stop that stopped something after the
    one that decided ``stop.cancelled``."""
    late = late_updates(agent, session.id, stopped.response)
    if stopped.kind == "cancelled" and not late:
        run.record(
            "stop.next-turn",
            Outcome.PASS,
            f"the next prompt streamed {stopped.chunks} chunk(s) and was stopped",
        )
    else:
        run.record(
            "stop.next-turn",
            Outcome.FAIL,
            f"the prompt after the Stop, stopped in turn, was answered "
            f"{describe(stopped.response)} with {len(late)} update(s) after it",
            evidence=[(agent, stopped.marks(agent) + late)],
        )


async def idle_cancel(run: CheckRun) -> None:
    opts = run.options
    async with run.agent("idle-cancel") as agent:
        client = agent.client
        await run.initialize(agent)
        session = await agent.new_session(run.project)
        start = len(client.transcript)
        await client.notify("session/cancel", {"sessionId": session.id})
        await client.notify("session/cancel", {"sessionId": UNKNOWN_SESSION})
        await client.notify(NOTE_METHOD, {})
        try:
            await agent.settle(within=opts.timeout)
        except TimeoutError:
            detail = f"no answer to a request within {opts.timeout:g} s after the cancels"
            run.record("stop.idle", Outcome.FAIL, detail, evidence=[(agent, [start])])
            run.record("notification.no-response", Outcome.NOT_EXERCISED, detail)
            return
        replies = [
            i
            for i, (d, m) in enumerate(client.transcript[start:], start)
            # Any answer: an error response to a notification may carry id null or none.
            if d == "recv" and "method" not in m and m.get("id") not in agent.barrier_ids
        ]
        if replies:
            run.record(
                "notification.no-response",
                Outcome.FAIL,
                f"{len(replies)} response(s) to notifications: "
                + "; ".join(describe(client.transcript[i][1]) for i in replies[:3]),
                evidence=[(agent, list(range(start, start + 3)) + replies)],
            )
        else:
            run.record(
                "notification.no-response",
                Outcome.PASS,
                "two session/cancel with nothing to stop and an unknown notification: no answer",
            )
        turn = await session.start_prompt(opts.prompt("stream") or "")
        why = await stream(run, turn)
        if why is not None:
            kept = stop_reason(turn.response)
            if kept == "cancelled":
                asked = any(r.session_id == session.id for r in agent.permission_requests)
                run.record(
                    "stop.idle",
                    Outcome.FAIL,
                    f"the first prompt after a session/cancel sent while idle was answered "
                    f"cancelled after {turn.chunks()} chunk(s), before any Stop: the cancel "
                    "was kept for the next turn"
                    + (
                        " (or: it asked for a permission, the checker dismissed it, and a "
                        "dismissal was answered as if the user had pressed Stop)"
                        if asked
                        else ""
                    ),
                    evidence=[(agent, [start, *index_of(agent, turn.response)])],
                )
            else:
                run.record("stop.idle", Outcome.NOT_EXERCISED, why)
            return
        stop_at = len(agent.transcript)
        stopped = await turn.stop(within=opts.stop_timeout, watch=0)
        measure(run, agent, session.id, stop_at, stopped.response, "idle-cancel")
        run.record(
            "stop.idle",
            Outcome.PASS,
            f"still serving; the next prompt streamed {turn.chunks()} chunk(s) until stopped",
        )
        await end(run, agent)


async def cancel_race(run: CheckRun) -> None:
    opts = run.options
    async with run.agent("cancel-race") as agent:
        await run.initialize(agent)
        session = await agent.new_session(run.project)
        start = len(agent.transcript)
        turn = await session.start_prompt(opts.prompt("stream") or "", stop_at_once=True)
        try:
            result = await turn.result(within=opts.stop_timeout, watch=opts.watch)
        except TimeoutError:
            stop_reading(agent)
            run.record(
                "stop.race",
                Outcome.FAIL,
                f"no response within {opts.stop_timeout:g} s: the session/cancel sent right "
                f"behind the prompt was lost ({turn.chunks()} chunks streamed since)",
                evidence=[(agent, [start, start + 1])],
            )
            return
        measure(run, agent, session.id, start, result.response, "cancel-race")
        response_at = index_of(agent, result.response or None)
        late_at = late_updates(agent, session.id, result.response or None)
        reason = stop_reason(result.response)
        if reason not in (None, "cancelled") and turn.chunks() <= opts.stop_after:
            # A turn this short may have ended before the agent read the cancel
            # behind it: the race was not run, whatever the agent does with one.
            run.record(
                "stop.race",
                Outcome.NOT_EXERCISED,
                f"answered {describe(result.response)} after {turn.chunks()} chunk(s), no more "
                f"than --stop-after {opts.stop_after}: the turn may have ended before the "
                f"cancel was read ({STREAM_LONGER})",
                evidence=[(agent, [start, start + 1, *response_at])],
            )
        elif result.stop_reason != "cancelled":
            run.record(
                "stop.race",
                Outcome.FAIL,
                f"answered {describe(result.response)}, not cancelled",
                evidence=[(agent, [start, start + 1, *response_at])],
            )
        elif late_at:
            run.record(
                "stop.race",
                Outcome.FAIL,
                f"answered cancelled, then {len(late_at)} session/update after the response",
                evidence=[(agent, response_at + late_at)],
            )
        else:
            ms = ms_between(agent, start + 1, response_at[0])
            run.record(
                "stop.race",
                Outcome.PASS,
                f"answered cancelled {ms:g} ms after the cancel, {turn.chunks()} chunk(s) before",
            )
        await end(run, agent)
