"""The scenarios of stored sessions: load, resume, list and close."""

from __future__ import annotations

import anyio

from ...testing.agent import Agent, Session, Turn, session_update
from ..results import Outcome
from ..run import CheckRun, Json
from .frames import (
    CONVERSATION,
    STREAM_LONGER,
    crossed,
    describe,
    end,
    index_of,
    late_updates,
    probe,
    send_stop,
    stop_reason,
    stream,
    texts,
    updates_between,
)


async def stored_sessions(run: CheckRun) -> None:
    opts = run.options
    await probe(run)
    wants = {
        "load.replay": "loadSession",
        "load.after-stop": "loadSession",
        "resume.no-replay": "sessionCapabilities.resume",
        "list.sessions": "sessionCapabilities.list",
    }
    advertised = {check for check, path in wants.items() if run.advertised(path)}
    for check, path in wants.items():
        if check not in advertised:
            run.record(check, Outcome.SKIP, f"not advertised ({path})")
    if not advertised:
        return
    state = run.tmp / "stored-sessions-state"
    prompt = opts.prompt("stream") or ""
    async with run.agent("stored-sessions", state=state) as agent:
        await run.initialize(agent)
        session = await agent.new_session(run.project)
        turn = await session.start_prompt(prompt)
        why = await stream(run, turn)
        if why is not None:
            for check in advertised:
                run.record(check, Outcome.NOT_EXERCISED, why)
            return
        result = await turn.stop(within=opts.stop_timeout)
        delivered = result.text()
        if "list.sessions" in advertised:
            await check_list(run, agent, session)
        await end(run, agent)
    reopen = {"load.replay": "session/load", "resume.no-replay": "session/resume"}
    for check, method in reopen.items():
        if check not in advertised:
            continue
        async with run.agent("stored-sessions", state=state) as agent:
            await run.initialize(agent)
            start = len(agent.transcript)
            response = await agent.client.request(
                method,
                {"sessionId": session.id, "cwd": str(run.project), "mcpServers": []},
                within=opts.timeout,
            )
            response_at = index_of(agent, response)
            if opts.watch:
                await anyio.sleep(opts.watch)
            await agent.settle(within=opts.timeout)
            end_at = response_at[0] if response_at else None
            before = updates_between(agent, session.id, start, end_at, kinds=CONVERSATION)
            after = late_updates(agent, session.id, response)
            replayed = [session_update(agent.transcript[i][1], session.id) or {} for i in before]
            if "result" not in response:
                run.record(
                    check,
                    Outcome.FAIL,
                    f"{method} in a new process was answered {describe(response)}",
                    evidence=[(agent, response_at)],
                )
                if method == "session/load":
                    run.record("load.after-stop", Outcome.NOT_EXERCISED, "the load failed")
            elif method == "session/resume":
                # What is counted is the conversation (what a replay is made of); an
                # update that describes the session (commands, title) is no replay.
                other = len(updates_between(agent, session.id, start, end_at)) - len(before)
                besides = (
                    f"; {other} update(s) describing the session, not counted" if other else ""
                )
                if before:
                    run.record(
                        check,
                        Outcome.FAIL,
                        f"{len(before)} conversation update(s) (message, thought, tool call, "
                        f"plan) before the resume response{besides}",
                        evidence=[(agent, before + response_at)],
                    )
                else:
                    run.record(
                        check,
                        Outcome.PASS,
                        "no conversation update (message, thought, tool call, plan) before the "
                        f"response{besides}",
                    )
            else:
                judge_load(run, agent, replayed, before, after, response_at, prompt, delivered)
            await end(run, agent)


async def check_list(run: CheckRun, agent: Agent, session: Session) -> None:
    opts = run.options
    mine = await agent.client.request(
        "session/list", {"cwd": str(run.project)}, within=opts.timeout
    )
    none = await agent.client.request(
        "session/list", {"cwd": str(run.empty_project)}, within=opts.timeout
    )
    listed = (mine.get("result") or {}).get("sessions")
    ids = [s.get("sessionId") for s in listed or [] if isinstance(s, dict)]
    empty = (none.get("result") or {}).get("sessions")
    marks = index_of(agent, mine) + index_of(agent, none)
    if session.id not in ids:
        run.record(
            "list.sessions",
            Outcome.FAIL,
            f"session/list for the session's cwd does not list it: {describe(mine)}",
            evidence=[(agent, marks)],
        )
    elif empty != []:
        run.record(
            "list.sessions",
            Outcome.FAIL,
            f"session/list for a cwd with no sessions answered {describe(none)}",
            evidence=[(agent, marks)],
        )
    else:
        run.record(
            "list.sessions",
            Outcome.PASS,
            f"listed the session among {len(ids)}; an empty array for an empty cwd",
        )


def judge_load(
    run: CheckRun,
    agent: Agent,
    replayed: list[Json],
    before: list[int],
    after: list[int],
    response_at: list[int],
    prompt: str,
    delivered: str,
) -> None:
    user = texts(replayed, "user_message_chunk")
    shown = texts(replayed, "agent_message_chunk")
    if prompt not in user:
        run.record(
            "load.replay",
            Outcome.FAIL,
            f"the replay before the response ({len(before)} updates) does not hold the "
            f"user's prompt (replayed user text: {user[:200]!r})",
            evidence=[(agent, before + response_at)],
        )
    elif delivered and not shown:
        run.record(
            "load.replay",
            Outcome.FAIL,
            f"the replay before the response ({len(before)} updates) holds no agent text, "
            f"although {len(delivered)} characters were delivered before the Stop",
            evidence=[(agent, before + response_at)],
        )
    elif after:
        run.record(
            "load.replay",
            Outcome.FAIL,
            f"{len(after)} session/update after the load response",
            evidence=[(agent, response_at + after)],
        )
    else:
        run.record(
            "load.replay",
            Outcome.PASS,
            f"{len(before)} updates replayed before the response, none after",
        )
    if shown == delivered:
        run.record(
            "load.after-stop",
            Outcome.PASS,
            f"replayed exactly the {len(delivered)} characters delivered before the Stop",
        )
    else:
        same = next(
            (i for i, (a, b) in enumerate(zip(shown, delivered, strict=False)) if a != b),
            min(len(shown), len(delivered)),
        )
        run.record(
            "load.after-stop",
            Outcome.FAIL,
            f"delivered before the Stop: {len(delivered)} characters; replayed: {len(shown)} "
            f"(they differ from character {same}: delivered {delivered[same : same + 40]!r}, "
            f"replayed {shown[same : same + 40]!r})",
            evidence=[(agent, before)],
        )


CLOSE_TRIES = 20
"""Sessions the close scenario closes mid-stream before it calls the close not
exercised: each whose turn ended before (or as) the close reached the agent."""


async def close_mid_stream(
    run: CheckRun, agent: Agent
) -> tuple[Session, Turn, int, str, Json] | str | None:
    """A new session's prompt streamed ``--stop-after`` chunks, then session/close
    with a barrier right behind it (`send_stop`); the session, the turn, where the
    close was sent, the barrier's id and the close's answer.  A string says why the
    turn could not be closed mid-stream; None: the close was not answered within
    ``--stop-timeout`` (recorded)."""
    opts = run.options
    client = agent.client
    session = await agent.new_session(run.project)
    turn = await session.start_prompt(opts.prompt("stream") or "")
    why = await stream(run, turn)
    if why is not None:
        return why
    stop_at = len(agent.transcript)
    rid = client.next_id()
    close_request = {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "session/close",
        "params": {"sessionId": session.id},
    }
    behind = await send_stop(agent, turn, close_request)
    try:
        await client.wait_until(lambda: turn.done, within=opts.stop_timeout)
        closed = await client.wait_response(rid, within=opts.stop_timeout)
    except TimeoutError:
        run.record(
            "close.cancels",
            Outcome.FAIL,
            f"no answer to the prompt and the close within {opts.stop_timeout:g} s",
            evidence=[(agent, [stop_at])],
        )
        return None
    await client.wait_response(behind, within=opts.timeout)
    if closed_nothing(agent, turn, stop_at, behind) is None:
        # Watched only when it stopped something: the next try comes at once.
        if opts.watch:
            await anyio.sleep(opts.watch)
        await agent.settle(within=opts.timeout)
    return session, turn, stop_at, behind, closed


def closed_nothing(agent: Agent, turn: Turn, stop_at: int, behind: str) -> str | None:
    """Why a close stopped nothing: the turn ended before it was sent, or as it
    crossed it (`crossed`); None when it was exercised."""
    response_at = index_of(agent, turn.response)
    reason = stop_reason(turn.response)
    if response_at and response_at[0] < stop_at:
        return f"the turn ended (answered {describe(turn.response)}) before session/close was sent"
    if reason != "cancelled" and crossed(agent, turn.response, behind):
        return (
            f"the prompt was answered {describe(turn.response)} before the agent answered "
            "the request sent right behind session/close: the turn may have ended as the "
            "close crossed it"
        )
    return None


async def close(run: CheckRun) -> None:
    await probe(run)
    if not run.advertised("sessionCapabilities.close"):
        run.record("close.cancels", Outcome.SKIP, "not advertised (sessionCapabilities.close)")
        return
    async with run.agent("close") as agent:
        await run.initialize(agent)
        for _ in range(CLOSE_TRIES):
            tried = await close_mid_stream(run, agent)
            if tried is None or isinstance(tried, str):
                if tried is not None:
                    run.record("close.cancels", Outcome.NOT_EXERCISED, tried)
                return
            session, turn, stop_at, behind, closed = tried
            why = closed_nothing(agent, turn, stop_at, behind)
            if why is None:
                break
        else:
            run.record(
                "close.cancels",
                Outcome.NOT_EXERCISED,
                f"{why} (the last of {CLOSE_TRIES} sessions, none closed mid-stream): a "
                f"close was not exercised ({STREAM_LONGER})",
                evidence=[(agent, [stop_at, *index_of(agent, turn.response)])],
            )
            await end(run, agent)
            return
        response_at = index_of(agent, turn.response)
        late = late_updates(agent, session.id, turn.response)
        reason = stop_reason(turn.response)
        problems = []
        if reason != "cancelled":
            problems.append(f"the prompt was answered {describe(turn.response)}")
        if "result" not in closed:
            problems.append(f"session/close was answered {describe(closed)}")
        if late:
            problems.append(f"{len(late)} session/update after the prompt's response")
        if problems:
            run.record(
                "close.cancels",
                Outcome.FAIL,
                "; ".join(problems),
                evidence=[(agent, [stop_at, *response_at, *index_of(agent, closed), *late])],
            )
        else:
            run.record(
                "close.cancels",
                Outcome.PASS,
                "the prompt was answered cancelled, then the close; nothing after",
            )
        await end(run, agent)
