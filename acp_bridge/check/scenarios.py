"""The scenarios `acp-bridge check` plays, each against fresh agent processes.

Each scenario drives the agent through the test kit (`acp_bridge.testing`),
then records the results of the checks it decides, with the frames that show
them (see `acp_bridge.check.requirements` for what each check requires).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import orjson

from ..client import CHUNK_KINDS, is_response
from ..testing.agent import Agent, Session, Turn, TurnEnded, session_update
from ..testing.policies import CANCELLED, wait_for_stop
from .results import Outcome
from .runner import CheckRun, Scenario

Json = dict[str, Any]

UNKNOWN_SESSION = "sess_acp_check_unknown"
NOTE_METHOD = "_acp_bridge_check/note"


# -- finding frames --------------------------------------------------------------------


def index_of(agent: Agent, msg: Json | None) -> list[int]:
    """The transcript index of ``msg`` (the very object received), as a list of marks."""
    if msg is None:
        return []
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
    }
)
"""The updates that carry the conversation (content and tool calls); the others
(commands, modes, config options, title, usage) describe the session."""


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


def ms_between(agent: Agent, first: int, second: int) -> float:
    times = agent.client.times
    return round((times[second] - times[first]) * 1000, 1)


def describe(response: Json | None) -> str:
    if not response:
        return "no response (the agent exited)"
    if "error" in response:
        return f"an error {json.dumps(response['error'])[:300]}"
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
            "(give a --stream-prompt that streams for a few seconds)"
        )
    except TimeoutError:
        return (
            f"{turn.chunks()} chunk(s) within {run.options.stream_timeout:g} s, not {n} "
            "(a slow model? raise --stream-timeout)"
        )
    return None


async def end(run: CheckRun, agent: Agent) -> None:
    """Close the agent's stdin and give it --exit-timeout to exit (it is killed after)."""
    await agent.client.close_stdin()
    with anyio.move_on_after(run.options.exit_timeout):
        await agent.client.agent.wait(within=run.options.exit_timeout + 1)


# -- the scenarios -----------------------------------------------------------------------


async def basics(run: CheckRun) -> None:
    opts = run.options
    async with run.agent("basics") as agent:
        response = await run.initialize_response(agent)
        marks = index_of(agent, response)
        result = response.get("result")
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if not isinstance(result, dict):
            run.record(
                "initialize.version",
                Outcome.FAIL,
                f"initialize was answered {describe(response)}",
                evidence=[(agent, marks)],
            )
        elif type(version) is not int or version != 1:
            run.record(
                "initialize.version",
                Outcome.FAIL,
                f"asked for protocolVersion 1, answered {version!r}",
                evidence=[(agent, marks)],
            )
        else:
            run.agent_info = result
            run.record("initialize.version", Outcome.PASS, "answered protocolVersion 1")
        info = result.get("agentInfo") if isinstance(result, dict) else None
        if (
            isinstance(info, dict)
            and isinstance(info.get("name"), str)
            and isinstance(info.get("version"), str)
        ):
            run.record("initialize.info", Outcome.PASS, f"{info['name']} {info['version']}")
        else:
            run.record(
                "initialize.info",
                Outcome.FAIL,
                f"agentInfo is {json.dumps(info)}",
                evidence=[(agent, marks)],
            )
        ids = []
        for _ in range(2):
            new = await agent.client.request(
                "session/new", {"cwd": str(run.project), "mcpServers": []}, within=opts.timeout
            )
            answer = new.get("result")
            ids.append(answer.get("sessionId") if isinstance(answer, dict) else None)
            if not isinstance(ids[-1], str) or not ids[-1]:
                run.record(
                    "session.new",
                    Outcome.FAIL,
                    f"session/new was answered {describe(new)}",
                    evidence=[(agent, index_of(agent, new))],
                )
                break
        else:
            if ids[0] == ids[1]:
                run.record(
                    "session.new", Outcome.FAIL, f"two session/new answered the same id {ids[0]!r}"
                )
            else:
                run.record("session.new", Outcome.PASS, "two sessions, two different ids")
        await end(run, agent)
    async with run.agent("basics") as agent:
        asked = 999
        response = await run.initialize_response(agent, version=asked)
        result = response.get("result")
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if type(version) is int and 1 <= version < asked:
            run.record(
                "initialize.negotiation", Outcome.PASS, f"asked for {asked}, answered {version}"
            )
        else:
            run.record(
                "initialize.negotiation",
                Outcome.FAIL,
                f"asked for protocolVersion {asked}, answered {describe(response)}",
                evidence=[(agent, index_of(agent, response))],
            )
        await end(run, agent)


async def bad_input(run: CheckRun) -> None:
    opts = run.options
    async with run.agent("bad-input") as agent:
        client = agent.client
        await run.initialize(agent)
        # A line that is not JSON (the barrier's answer shows it was read).
        start = len(client.transcript)
        await client.send_raw(b"this line is not JSON\n")
        await agent.settle(within=opts.timeout)
        answers = [
            i
            for i, (d, m) in enumerate(client.transcript[start:], start)
            if d == "recv" and is_response(m) and m.get("id") not in agent.barrier_ids
        ]
        parse_ok = [
            i
            for i in answers
            if client.transcript[i][1].get("id") is None
            and (client.transcript[i][1].get("error") or {}).get("code") == -32700
        ]
        if parse_ok:
            run.record("jsonrpc.parse-error", Outcome.PASS, "answered -32700 with id null")
        else:
            found = describe(client.transcript[answers[0]][1]) if answers else "nothing"
            run.record(
                "jsonrpc.parse-error",
                Outcome.FAIL,
                f"a line that is not JSON was answered with {found}",
                evidence=[(agent, [start, *answers])],
            )
        bad: list[str] = []
        marks: list[int] = []
        codes: dict[str, Any] = {}
        for rid, method in (
            ("check-unknown-1", "_acp_bridge_check/unknown"),
            ("check-unknown-2", "acp_bridge_check/unknown"),
        ):
            frame = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {}}
            at = len(client.transcript)
            await client.send_raw(orjson.dumps(frame) + b"\n")
            try:
                response = await client.wait_response(rid, within=opts.timeout)
            except TimeoutError:
                bad.append(f"{method} was not answered within {opts.timeout:g} s")
                marks.append(at)
                continue
            error = response.get("error")
            codes[method] = error.get("code") if isinstance(error, dict) else None
            if codes[method] != -32601:
                bad.append(f"{method} was answered {describe(response)}")
                marks += [at, *index_of(agent, response)]
        if bad:
            run.record(
                "jsonrpc.method-not-found",
                Outcome.FAIL,
                "; ".join(bad),
                evidence=[(agent, marks)],
            )
        else:
            run.record(
                "jsonrpc.method-not-found",
                Outcome.PASS,
                "an unknown extension method and an unknown method: -32601",
            )
        session = await agent.new_session(run.project)
        rid = "check-invalid-1"
        frame = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "session/prompt",
            "params": {"sessionId": session.id, "prompt": "a string, not content blocks"},
        }
        at = len(client.transcript)
        await client.send_raw(orjson.dumps(frame) + b"\n")
        invalid: Json | None = None
        try:
            invalid = await client.wait_response(rid, within=opts.timeout)
        except TimeoutError:
            bad.append(f"session/prompt with invalid params was not answered in {opts.timeout:g} s")
            marks.append(at)
        if invalid is not None:
            error = invalid.get("error")
            code = error.get("code") if isinstance(error, dict) else None
            if code == -32602:
                run.record("jsonrpc.invalid-params", Outcome.PASS, "answered -32602")
            else:
                run.record(
                    "jsonrpc.invalid-params",
                    Outcome.FAIL,
                    f"session/prompt with a string prompt was answered {describe(invalid)}",
                    evidence=[(agent, [at, *index_of(agent, invalid)])],
                )
            if not isinstance(error, dict):
                bad.append(f"session/prompt with invalid params was answered {describe(invalid)}")
                marks += [at, *index_of(agent, invalid)]
        else:
            run.record(
                "jsonrpc.invalid-params", Outcome.FAIL, "no answer", evidence=[(agent, [at])]
            )
        # Still serving?
        after = len(client.transcript)
        try:
            await agent.new_session(run.project)
        except Exception as exc:
            bad.append(f"a valid session/new after the bad input failed: {exc}")
            marks.append(after)
        if bad:
            run.record("jsonrpc.bad-input", Outcome.FAIL, "; ".join(bad), evidence=[(agent, marks)])
        else:
            run.record(
                "jsonrpc.bad-input",
                Outcome.PASS,
                "every bad request got an error response; a valid request was answered after",
            )
        await end(run, agent)


def is_chunk(agent: Agent, index: int) -> bool:
    direction, msg = agent.transcript[index]
    update = session_update(msg, str(msg.get("params", {}).get("sessionId")))
    return direction == "recv" and update is not None and update.get("sessionUpdate") in CHUNK_KINDS


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
        late = (
            updates_between(agent, session.id, response_at[0] + 1, kinds=CONVERSATION)
            if response_at
            else []
        )
        if result.stop_reason == "cancelled" and not late:
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
        await end(run, agent)


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
            if d == "recv" and is_response(m) and m.get("id") not in agent.barrier_ids
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
        await turn.stop(within=opts.stop_timeout, watch=0)
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
            run.record(
                "stop.race",
                Outcome.FAIL,
                f"no response within {opts.stop_timeout:g} s: the session/cancel sent right "
                f"behind the prompt was lost ({turn.chunks()} chunks streamed since)",
                evidence=[(agent, [start, start + 1])],
            )
            return
        response_at = index_of(agent, result.response or None)
        late_at = (
            updates_between(agent, session.id, response_at[0] + 1, kinds=CONVERSATION)
            if response_at
            else []
        )
        if result.stop_reason != "cancelled":
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


async def stdin_eof(run: CheckRun) -> None:
    opts = run.options
    problems: list[str] = []
    told: list[str] = []
    async with run.agent("stdin-eof") as agent:
        await run.initialize(agent)
        await agent.disconnect()
        try:
            told.append(f"exited {await agent.wait_exit(within=opts.exit_timeout)} when idle")
        except TimeoutError:
            problems.append(f"still running {opts.exit_timeout:g} s after stdin closed (idle)")
    async with run.agent("stdin-eof") as agent:
        await run.initialize(agent)
        session = await agent.new_session(run.project)
        turn = await session.start_prompt(opts.prompt("stream") or "")
        streaming = await stream(run, turn) is None
        await agent.disconnect()
        where = "mid-stream" if streaming else "during a prompt"
        try:
            told.append(f"exited {await agent.wait_exit(within=opts.exit_timeout)} {where}")
        except TimeoutError:
            problems.append(f"still running {opts.exit_timeout:g} s after stdin closed {where}")
    if problems:
        run.record("stdio.eof", Outcome.FAIL, "; ".join(problems + told))
    else:
        run.record("stdio.eof", Outcome.PASS, "; ".join(told))


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
        late = (
            updates_between(agent, session.id, response_at[0] + 1, kinds=CONVERSATION)
            if response_at
            else []
        )
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


async def probe(run: CheckRun) -> None:
    """Learn the agent's capabilities when the basics scenario did not run."""
    if run.agent_info is None:
        async with run.agent("capabilities") as agent:
            run.agent_info = await run.initialize(agent)
            await end(run, agent)


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
            after = (
                updates_between(agent, session.id, end_at + 1, kinds=CONVERSATION)
                if end_at is not None
                else []
            )
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
                if before:
                    run.record(
                        check,
                        Outcome.FAIL,
                        f"{len(before)} session/update before the resume response",
                        evidence=[(agent, before + response_at)],
                    )
                else:
                    run.record(check, Outcome.PASS, "no update before the response")
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
    if prompt not in user:
        run.record(
            "load.replay",
            Outcome.FAIL,
            f"the replay before the response ({len(before)} updates) does not hold the "
            f"user's prompt (replayed user text: {user[:200]!r})",
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
    shown = texts(replayed, "agent_message_chunk")
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


async def close(run: CheckRun) -> None:
    opts = run.options
    await probe(run)
    if not run.advertised("sessionCapabilities.close"):
        run.record("close.cancels", Outcome.SKIP, "not advertised (sessionCapabilities.close)")
        return
    async with run.agent("close") as agent:
        client = agent.client
        await run.initialize(agent)
        session = await agent.new_session(run.project)
        turn = await session.start_prompt(opts.prompt("stream") or "")
        why = await stream(run, turn)
        if why is not None:
            run.record("close.cancels", Outcome.NOT_EXERCISED, why)
            return
        stop_at = len(agent.transcript)
        rid = await client.send_request("session/close", {"sessionId": session.id})
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
            return
        if opts.watch:
            await anyio.sleep(opts.watch)
        await agent.settle(within=opts.timeout)
        response_at = index_of(agent, turn.response)
        late = (
            updates_between(agent, session.id, response_at[0] + 1, kinds=CONVERSATION)
            if response_at
            else []
        )
        reason = ((turn.response or {}).get("result") or {}).get("stopReason")
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


SCENARIOS: list[Scenario] = [
    Scenario(
        "basics",
        ("initialize.version", "initialize.negotiation", "initialize.info", "session.new"),
        basics,
    ),
    Scenario(
        "bad-input",
        (
            "jsonrpc.parse-error",
            "jsonrpc.method-not-found",
            "jsonrpc.invalid-params",
            "jsonrpc.bad-input",
        ),
        bad_input,
    ),
    Scenario("stop", ("stop.cancelled", "stop.ordering", "stop.next-turn"), stop),
    Scenario("idle-cancel", ("notification.no-response", "stop.idle"), idle_cancel),
    Scenario("cancel-race", ("stop.race",), cancel_race),
    Scenario("queued-prompts", ("prompt.queued",), queued),
    Scenario("permission", ("permission.stop",), permission),
    Scenario(
        "stored-sessions",
        ("load.replay", "load.after-stop", "resume.no-replay", "list.sessions"),
        stored_sessions,
    ),
    Scenario("close", ("close.cancels",), close),
    Scenario("stdin-eof", ("stdio.eof",), stdin_eof),
]

__all__ = ["SCENARIOS"]
