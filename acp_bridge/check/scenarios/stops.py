"""The Stop scenarios: cancel mid-stream, cancel while idle, cancel racing the end."""

from __future__ import annotations

from ...testing.agent import Agent, Session
from ..results import Outcome
from ..run import CheckRun, Json
from .frames import (
    CONVERSATION,
    NOTE_METHOD,
    UNKNOWN_SESSION,
    describe,
    end,
    index_of,
    is_chunk,
    ms_between,
    sent_index,
    stop_reading,
    stream,
    updates_between,
)
from .stop_figures import measure


def judge_stop(
    run: CheckRun,
    agent: Agent,
    session: Session,
    turn_at: int,
    result_response: Json,
    stop_at: int,
    *,
    cancelled_check: str,
    ordering_check: str | None,
    how: str = "session/cancel",
) -> dict[str, float | int]:
    """Record whether a stopped turn was answered cancelled and nothing followed; the
    turn's figures."""
    response = result_response or None
    response_at = index_of(agent, response)
    stop_mark = sent_index(agent, how, stop_at) or [stop_at]
    figures: dict[str, float | int] = {}
    prompt_at = [i for i in sent_index(agent, "session/prompt", turn_at) if i <= stop_at]
    chunks = [i for i in updates_between(agent, session.id, turn_at) if is_chunk(agent, i)]
    if chunks and prompt_at:
        figures["first_chunk_ms"] = ms_between(agent, prompt_at[-1], chunks[0])
    figures["chunks_before_stop"] = sum(1 for i in chunks if i < stop_mark[0])
    if response_at:
        figures["updates_after_stop"] = len(
            updates_between(agent, session.id, stop_mark[0], response_at[0])
        )
        figures["stop_to_response_ms"] = ms_between(agent, stop_mark[0], response_at[0])
    result = response.get("result") if response else None
    reason = result.get("stopReason") if isinstance(result, dict) else None
    marks = stop_mark + response_at
    if response_at and response_at[0] < stop_mark[0]:
        why = (
            f"the turn ended (answered {describe(response)}) {-figures['stop_to_response_ms']:g} "
            f"ms before {how} was sent: a Stop mid-stream was not exercised (give a "
            "--stream-prompt that streams for longer)"
        )
        run.record(cancelled_check, Outcome.NOT_EXERCISED, why, evidence=[(agent, marks)])
        if ordering_check is not None:
            run.record(ordering_check, Outcome.NOT_EXERCISED, why)
        return figures
    if response is None:
        run.record(
            cancelled_check,
            Outcome.FAIL,
            f"no response after {how}: the agent exited",
            evidence=[(agent, stop_mark)],
            figures=figures,
        )
        if ordering_check is not None:
            run.record(ordering_check, Outcome.NOT_EXERCISED, "the agent exited before answering")
    elif reason != "cancelled":
        run.record(
            cancelled_check,
            Outcome.FAIL,
            f"stopped with {how} after {figures['chunks_before_stop']} chunk(s), the prompt "
            f"was answered {describe(response)}, not cancelled",
            evidence=[(agent, marks)],
            figures=figures,
        )
    else:
        run.record(
            cancelled_check,
            Outcome.PASS,
            f"answered cancelled {figures.get('stop_to_response_ms', 0):g} ms after {how}",
            figures=figures,
        )
    if ordering_check is not None and response_at:
        late_at = updates_between(agent, session.id, response_at[0] + 1, kinds=CONVERSATION)
        figures["late_updates"] = len(late_at)
        if late_at:
            first_ms = ms_between(agent, response_at[0], late_at[0]) if late_at else 0.0
            run.record(
                ordering_check,
                Outcome.FAIL,
                f"{len(late_at)} session/update after the prompt's response, the first "
                f"{first_ms:g} ms after it",
                evidence=[(agent, response_at + late_at)],
                figures=figures,
            )
        else:
            run.record(
                ordering_check,
                Outcome.PASS,
                f"no update after the response (watched {run.options.watch:g} s, then a "
                "barrier request)",
                figures=figures,
            )
    return figures


async def stop(run: CheckRun) -> None:
    opts = run.options
    checks = ("stop.cancelled", "stop.ordering", "stop.next-turn")
    async with run.agent("stop") as agent:
        await run.initialize(agent)
        session = await agent.new_session(run.project)
        turn_at = len(agent.transcript)
        turn = await session.start_prompt(opts.prompt("stream") or "")
        why = await stream(run, turn)
        if why is not None:
            for check in checks:
                run.record(
                    check,
                    Outcome.NOT_EXERCISED,
                    why,
                    evidence=[(agent, index_of(agent, turn.response))],
                )
            return
        stop_at = len(agent.transcript)
        try:
            result = await turn.stop(within=opts.stop_timeout, watch=opts.watch)
        except TimeoutError:
            stop_reading(agent)
            streamed = len(updates_between(agent, session.id, stop_at))
            run.record(
                "stop.cancelled",
                Outcome.FAIL,
                f"no response within {opts.stop_timeout:g} s of session/cancel "
                f"({streamed} updates since)",
                evidence=[(agent, sent_index(agent, "session/cancel", stop_at))],
            )
            for check in checks[1:]:
                run.record(check, Outcome.NOT_EXERCISED, "the stopped prompt was never answered")
            return
        judge_stop(
            run,
            agent,
            session,
            turn_at,
            result.response,
            stop_at,
            cancelled_check="stop.cancelled",
            ordering_check="stop.ordering",
        )
        measure_stop(run, agent, session.id, stop_at, result.response, "stop")
        if run.results["stop.cancelled"].outcome is Outcome.NOT_EXERCISED:
            run.record("stop.next-turn", Outcome.NOT_EXERCISED, "the first Stop was not exercised")
            await more_stops(run, agent, session)
            await end(run, agent)
            return
        second = await session.start_prompt(opts.prompt("stream") or "")
        why = await stream(run, second)
        if why is not None:
            outcome = Outcome.FAIL if second.response else Outcome.NOT_EXERCISED
            run.record(
                "stop.next-turn",
                outcome,
                "the prompt after the Stop: " + why,
                evidence=[(agent, index_of(agent, second.response))],
            )
            return
        stop_at = len(agent.transcript)
        result = await second.stop(within=opts.stop_timeout, watch=opts.watch)
        response_at = index_of(agent, result.response or None)
        measure_stop(run, agent, session.id, stop_at, result.response, "stop")
        late = (
            updates_between(agent, session.id, response_at[0] + 1, kinds=CONVERSATION)
            if response_at
            else []
        )
        if response_at and response_at[0] < stop_at:
            run.record(
                "stop.next-turn",
                Outcome.NOT_EXERCISED,
                f"the prompt after the Stop ended (answered {describe(result.response)}) "
                "before the second Stop was sent",
                evidence=[(agent, response_at)],
            )
        elif result.stop_reason == "cancelled" and not late:
            run.record(
                "stop.next-turn",
                Outcome.PASS,
                f"the next prompt streamed {second.chunks()} chunk(s) and was stopped",
            )
        else:
            run.record(
                "stop.next-turn",
                Outcome.FAIL,
                f"the prompt after the Stop, stopped in turn, was answered "
                f"{describe(result.response)} with {len(late)} update(s) after it",
                evidence=[
                    (agent, sent_index(agent, "session/cancel", stop_at) + response_at + late)
                ],
            )
        await more_stops(run, agent, session)
        await end(run, agent)


def measure_stop(
    run: CheckRun, agent: Agent, session_id: str, stop_at: int, response: Json | None, scenario: str
) -> Json | None:
    """`stop_figures.measure` for the Stop sent from transcript index ``stop_at`` on."""
    cancel = sent_index(agent, "session/cancel", stop_at)
    answered = index_of(agent, response or None)
    return measure(
        run,
        agent,
        session_id,
        cancel[0] if cancel else None,
        answered[0] if answered else None,
        scenario,
    )


async def more_stops(run: CheckRun, agent: Agent, session: Session) -> None:
    """Stop the session again and again until the run has made ``--stops`` Stops (the
    other Stop scenarios make one each): the figures of the report's ``"stop"``, and
    each Stop one more chance to see a cancel leak (``stop.ordering``)."""
    opts = run.options
    others = sum(run.wanted((check,)) for check in ("stop.idle", "stop.race"))
    for _ in range(2 * opts.stops):
        if len(run.stop_samples) + others >= opts.stops:
            return
        turn = await session.start_prompt(opts.prompt("stream") or "")
        if await stream(run, turn) is not None:
            return
        stop_at = len(agent.transcript)
        try:
            result = await turn.stop(within=opts.stop_timeout)
        except TimeoutError:
            stop_reading(agent)
            measure_stop(run, agent, session.id, stop_at, None, "stop")
            return
        sample = measure_stop(run, agent, session.id, stop_at, result.response, "stop")
        if sample is not None and sample.get("updates_after_response"):
            response_at = index_of(agent, result.response or None)
            late = updates_between(agent, session.id, response_at[0] + 1, kinds=CONVERSATION)
            run.record(
                "stop.ordering",
                Outcome.FAIL,
                f"Stop {len(run.stop_samples)}: {len(late)} session/update after the "
                "prompt's response",
                evidence=[(agent, response_at + late)],
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
            kept = turn.response and (turn.response.get("result") or {}).get("stopReason")
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
        measure_stop(run, agent, session.id, stop_at, stopped.response, "idle-cancel")
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
        measure_stop(run, agent, session.id, start, result.response, "cancel-race")
        response_at = index_of(agent, result.response or None)
        late_at = (
            updates_between(agent, session.id, response_at[0] + 1, kinds=CONVERSATION)
            if response_at
            else []
        )
        reason = (result.response or {}).get("result", {}).get("stopReason")
        if reason not in (None, "cancelled") and turn.chunks() <= opts.stop_after:
            # A turn this short may have ended before the agent read the cancel
            # behind it: the race was not run, whatever the agent does with one.
            run.record(
                "stop.race",
                Outcome.NOT_EXERCISED,
                f"answered {describe(result.response)} after {turn.chunks()} chunk(s), no more "
                f"than --stop-after {opts.stop_after}: the turn may have ended before the "
                "cancel was read (give a --stream-prompt that streams for longer)",
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
