"""The scenarios of a first contact: initialize, session/new, and bad input."""

from __future__ import annotations

import json
from typing import Any

import orjson

from ..results import Outcome
from ..run import CheckRun, Json
from .frames import (
    describe,
    end,
    index_of,
)


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
        # Every answer, with an id or without one (the id is what is judged).
        answers = [
            i
            for i, (d, m) in enumerate(client.transcript[start:], start)
            if d == "recv" and "method" not in m and m.get("id") not in agent.barrier_ids
        ]
        parse_ok = [
            i
            for i in answers
            if "id" in client.transcript[i][1]
            and client.transcript[i][1]["id"] is None
            and (client.transcript[i][1].get("error") or {}).get("code") == -32700
        ]
        if parse_ok:
            run.record("jsonrpc.parse-error", Outcome.PASS, "answered -32700 with id null")
        else:
            found = "nothing"
            if answers:
                first = client.transcript[answers[0]][1]
                found = describe(first) + (
                    " without an id (it MUST be null)"
                    if "id" not in first
                    else f" with id {json.dumps(first['id'])}"
                )
            run.record(
                "jsonrpc.parse-error",
                Outcome.FAIL,
                f"a line that is not JSON was answered with {found}",
                evidence=[(agent, [start, *answers])],
            )
        bad: list[str] = []
        marks: list[int] = []
        wrong: list[str] = []
        wrong_marks: list[int] = []
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
                # No answer at all breaks the JSON-RPC MUST (jsonrpc.bad-input); a
                # wrong answer only the SHOULD of method-not-found: one count each.
                bad.append(f"{method} was not answered within {opts.timeout:g} s")
                marks.append(at)
                continue
            error = response.get("error")
            codes[method] = error.get("code") if isinstance(error, dict) else None
            if codes[method] != -32601:
                wrong.append(f"{method} was answered {describe(response)}")
                wrong_marks += [at, *index_of(agent, response)]
        if bad or wrong:
            run.record(
                "jsonrpc.method-not-found",
                Outcome.FAIL,
                "; ".join(bad + wrong),
                evidence=[(agent, marks + wrong_marks)],
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
