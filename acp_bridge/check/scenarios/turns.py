"""Scenarios of a prompt's life beyond Stop: queued prompts, stdin EOF, a
permission request that Stop resolves."""

from __future__ import annotations

import anyio
import orjson

from ...agent_process import describe_process, group_members, wait_group_empty
from ...testing.agent import Agent, TurnEnded, session_update
from ...testing.policies import CANCELLED, wait_for_stop
from ..results import Outcome
from ..run import CheckRun, Json
from .frames import (
    CONVERSATION,
    describe,
    end,
    index_of,
    late_updates,
    sent_index,
    stream,
    updates_between,
)


async def queued(run: CheckRun) -> None:
    opts = run.options
    async with run.agent("queued-prompts") as agent:
        client = agent.client
        await run.initialize(agent)
        session = await agent.new_session(run.project)
        prompt = opts.prompt("stream") or ""
        first = await session.start_prompt(prompt)
        why = await stream(run, first)
        if why is not None:
            run.record("prompt.queued", Outcome.NOT_EXERCISED, why)
            return
        second = await session.start_prompt(prompt)
        await agent.settle(within=opts.timeout)
        told: list[str] = []
        if second.done:
            told.append(f"the second prompt was answered at once with {describe(second.response)}")
        await session.stop()
        problems: list[str] = []
        try:
            await client.wait_until(lambda: first.done, within=opts.stop_timeout)
            told.append(f"the first was answered {describe(first.response)}")
        except TimeoutError:
            problems.append(f"the first prompt was not answered {opts.stop_timeout:g} s after Stop")
        if not second.done and first.done:
            first_at = index_of(agent, first.response)[0]

            def ran() -> bool:
                return second.done or bool(updates_between(agent, session.id, first_at + 1))

            with anyio.move_on_after(opts.stream_timeout):
                await client.wait_until(ran, within=opts.stream_timeout + 1)
            if not second.done:
                told.append("the second ran after the first was stopped (queued)")
                await session.stop()
                try:
                    await client.wait_until(lambda: second.done, within=opts.stop_timeout)
                    told.append(f"and was answered {describe(second.response)} when stopped")
                except TimeoutError:
                    problems.append(
                        f"the second prompt was not answered {opts.stop_timeout:g} s after Stop"
                    )
        if second.done and not any(t.startswith("the second") for t in told):
            told.append(f"the second was answered {describe(second.response)} with the first")
        if opts.watch:
            await anyio.sleep(opts.watch)
        await agent.settle(within=opts.timeout)
        for turn in (first, second):
            answers = len(client.responses.get(orjson.dumps(turn.request_id), []))
            if answers != 1:
                problems.append(f"prompt {turn.request_id} got {answers} responses")
        answered = [index_of(agent, t.response)[0] for t in (first, second) if t.response]
        if len(answered) == 2:
            late = updates_between(agent, session.id, max(answered) + 1, kinds=CONVERSATION)
            if late:
                problems.append(f"{len(late)} session/update after both responses")
                answered += late
        if problems:
            run.record(
                "prompt.queued",
                Outcome.FAIL,
                "; ".join(problems + told),
                evidence=[(agent, answered)],
            )
        else:
            run.record("prompt.queued", Outcome.PASS, "; ".join(told))
        await end(run, agent)


async def left_running(run: CheckRun, agent: Agent, where: str) -> list[str]:
    """The processes of the agent's group still running --exit-timeout after its
    stdin closed (a launcher's child, a helper the agent started), as a problem."""
    pgid = agent.client.agent.pid
    await wait_group_empty(pgid, run.options.exit_timeout)
    left = [describe_process(pid) for pid in group_members(pgid)]
    if not left:
        return []
    return [
        f"exited {where} but left {len(left)} process(es) of its group running "
        f"{run.options.exit_timeout:g} s after stdin closed: {', '.join(left)}"
    ]


async def stdin_eof(run: CheckRun) -> None:
    opts = run.options
    problems: list[str] = []
    told: list[str] = []
    async with run.agent("stdin-eof") as agent:
        await run.initialize(agent)
        await agent.disconnect()
        try:
            told.append(f"exited {await agent.wait_exit(within=opts.exit_timeout)} when idle")
            problems += await left_running(run, agent, "when idle")
        except TimeoutError:
            problems.append(f"still running {opts.exit_timeout:g} s after stdin closed (idle)")
    async with run.agent("stdin-eof") as agent:
        await run.initialize(agent)
        session = await agent.new_session(run.project)
        turn = await session.start_prompt(opts.prompt("stream") or "")
        streaming = await stream(run, turn) is None
        await agent.disconnect()
        where = "mid-stream" if streaming else "during a prompt"
        status: int | None = None
        try:
            status = await agent.wait_exit(within=opts.exit_timeout)
            told.append(f"exited {status} {where}")
            problems += await left_running(run, agent, where)
        except TimeoutError:
            problems.append(f"still running {opts.exit_timeout:g} s after stdin closed {where}")
        if streaming:
            run.disconnect = disconnect_figures(agent, session.id, turn.response, status)
    if problems:
        run.record("stdio.eof", Outcome.FAIL, "; ".join(problems + told))
    else:
        run.record("stdio.eof", Outcome.PASS, "; ".join(told))


def disconnect_figures(
    agent: Agent, session_id: str, response: Json | None, status: int | None
) -> Json:
    """What the agent answered and recorded when the editor went away mid-stream (the
    report's ``"stop"`` ``"disconnect"``).  What it recorded is observable for an agent
    built on acp-bridge run with --scripted: the end of the turn in its event log."""
    result = response.get("result") if response else None
    if isinstance(result, dict) and "stopReason" in result:
        answered = str(result["stopReason"])
    else:
        answered = describe(response) if response else "nothing"
    recorded: str = "not observable"
    logs = agent.logs().get(session_id)
    if logs is not None:
        ends = [r for r in logs if r.get("type") == "turn/end"]
        recorded = str(ends[-1].get("reason")) if ends else "no end of the turn"
    return {"answered": answered, "recorded": recorded, "exit": status}


async def permission(run: CheckRun) -> None:
    opts = run.options
    prompt = opts.prompt("permission")
    if prompt is None:
        run.record(
            "permission.stop",
            Outcome.SKIP,
            "give --permission-prompt TEXT (a prompt that makes the agent ask for permission)",
        )
        return
    async with run.agent("permission", stimulus="permission") as agent:
        agent.permissions = wait_for_stop()
        await run.initialize(agent)
        session = await agent.new_session(run.project)
        turn = await session.start_prompt(prompt)
        try:
            request = await turn.wait_for_permission(within=opts.stream_timeout)
        except TurnEnded as ended:
            run.record(
                "permission.stop",
                Outcome.NOT_EXERCISED,
                f"the prompt was answered {describe(ended.response)} without asking permission",
            )
            return
        except TimeoutError:
            run.record(
                "permission.stop",
                Outcome.NOT_EXERCISED,
                f"no permission request within {opts.stream_timeout:g} s",
            )
            return
        asked_at = len(agent.transcript)
        result = await turn.stop(within=opts.stop_timeout, watch=opts.watch)
        call_id = request.tool_call.get("toolCallId")
        ran = [
            i
            for i in updates_between(agent, session.id, asked_at)
            if (u := session_update(agent.transcript[i][1], session.id)) is not None
            and u.get("sessionUpdate") == "tool_call_update"
            and u.get("toolCallId") == call_id
            and u.get("status") == "completed"
        ]
        if opts.scripted and (run.project / "acp-check-note.txt").exists():
            ran.append(asked_at)
        how = (
            "the checker answered the request cancelled"
            if request.answer == CANCELLED
            else "the agent withdrew the request ($/cancel_request) before the answer"
        )
        response_at = index_of(agent, result.response or None)
        late = late_updates(agent, session.id, result.response or None)
        problems = []
        if result.stop_reason != "cancelled":
            problems.append(f"the prompt was answered {describe(result.response)}")
        if ran:
            problems.append("the tool ran (its call completed)")
        if late:
            problems.append(f"{len(late)} session/update after the response")
        if problems:
            run.record(
                "permission.stop",
                Outcome.FAIL,
                "; ".join(problems) + f" ({how})",
                evidence=[
                    (
                        agent,
                        sent_index(agent, "session/cancel", asked_at) + response_at + ran + late,
                    )
                ],
            )
        else:
            run.record(
                "permission.stop",
                Outcome.PASS,
                f"{how}; the prompt was answered cancelled; the tool did not run",
            )
        await end(run, agent)
