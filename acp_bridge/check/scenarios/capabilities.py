"""The scenarios of what an agent advertises beyond the baseline: authentication,
modes and config options, session/delete, additional directories.

A check whose capability is not advertised is skipped, with the capability named.
``logout`` is sent only where it forgets nothing of the user's: to an agent on
acp-bridge's scripted provider, given a config folder of its own, or with
``--logout``.
"""

from __future__ import annotations

from typing import Any

from ...testing.agent import Agent, session_update
from ..results import Outcome
from ..run import CheckRun, Json
from .frames import UNKNOWN_SESSION, describe, end, index_of, probe

SESSION_CHECKS = (
    "session.modes",
    "session.config-options",
    "session.additional-directories",
    "session.delete",
    "session.delete-unknown",
)


async def authentication(run: CheckRun) -> None:
    async with run.agent("authentication") as agent:
        response = await run.initialize_response(agent)
        result = response.get("result")
        if not isinstance(result, dict):
            raise RuntimeError(f"initialize was answered {describe(response)}")
        if run.agent_info is None:
            run.agent_info = result
        methods = result.get("authMethods", [])
        check_methods(run, agent, methods, index_of(agent, response))
        usable = [
            m
            for m in methods or []
            if isinstance(m, dict) and m.get("type", "agent") == "agent" and "id" in m
        ]
        if not usable:
            run.record("auth.authenticate", Outcome.SKIP, "no agent method in authMethods")
        else:
            await check_authenticate(run, agent, usable[0])
        await end(run, agent)
    await logout(run)


def check_methods(run: CheckRun, agent: Agent, methods: Any, marks: list[int]) -> None:
    problems: list[str] = []
    if not isinstance(methods, list):
        problems.append(f"authMethods is {methods!r}, not a list")
    else:
        ids = [m.get("id") if isinstance(m, dict) else None for m in methods]
        names = [m.get("name") if isinstance(m, dict) else None for m in methods]
        if not all(isinstance(i, str) and i for i in ids):
            problems.append(f"a method without a string id: ids {ids!r}")
        elif len(set(ids)) != len(ids):
            problems.append(f"two methods share an id: {ids!r}")
        if not all(isinstance(n, str) for n in names):
            problems.append("a method without a name")
        terminal = [
            i
            for i, m in zip(ids, methods, strict=True)
            if isinstance(m, dict) and m.get("type") == "terminal"
        ]
        if terminal:
            problems.append(
                f"terminal method {terminal[0]!r} although the checker did not enable "
                "clientCapabilities.auth.terminal"
            )
    if problems:
        run.record("auth.methods", Outcome.FAIL, "; ".join(problems), evidence=[(agent, marks)])
    else:
        count = len(methods)
        run.record("auth.methods", Outcome.PASS, f"{count} method(s), none of type terminal")


async def check_authenticate(run: CheckRun, agent: Agent, method: Json) -> None:
    client = agent.client
    at = len(client.transcript)
    rid = await client.send_request("authenticate", {"methodId": method["id"]})
    try:
        response = await client.wait_response(rid, within=run.options.timeout)
    except TimeoutError:
        run.record(
            "auth.authenticate",
            Outcome.NOT_EXERCISED,
            f"authenticate {method['id']!r} was not answered within {run.options.timeout:g} s "
            "(a login that waits for the user?)",
            evidence=[(agent, [at])],
        )
        return
    error = response.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    if "result" in response or (isinstance(error, dict) and code != -32601):
        run.record(
            "auth.authenticate",
            Outcome.PASS,
            f"authenticate {method['id']!r} was answered {describe(response)}",
        )
    else:
        run.record(
            "auth.authenticate",
            Outcome.FAIL,
            f"authenticate {method['id']!r} (an advertised method) was answered "
            f"{describe(response)}",
            evidence=[(agent, [at, *index_of(agent, response)])],
        )


async def logout(run: CheckRun) -> None:
    if not run.advertised("auth.logout"):
        run.record("auth.logout", Outcome.SKIP, "not advertised (agentCapabilities.auth.logout)")
        return
    env: dict[str, str] = {}
    if run.options.scripted:
        # acp-bridge forgets what `acp-bridge setup` stored in its config folder.
        env["ACP_BRIDGE_CONFIG_DIR"] = str(run.tmp / "logout-config")
    elif not run.options.logout:
        run.record(
            "auth.logout",
            Outcome.SKIP,
            "logout may forget the credentials the agent keeps for its user: give --logout "
            "to check it",
        )
        return
    async with run.agent("authentication", env=env) as agent:
        await run.initialize(agent)
        response = await agent.client.request("logout", {}, within=run.options.timeout)
        if response.get("result") == {} or isinstance(response.get("result"), dict):
            run.record("auth.logout", Outcome.PASS, "answered {}")
        else:
            run.record(
                "auth.logout",
                Outcome.FAIL,
                f"logout was answered {describe(response)}",
                evidence=[(agent, index_of(agent, response))],
            )
        await end(run, agent)


async def session_features(run: CheckRun) -> None:
    await probe(run)
    async with run.agent("session-features") as agent:
        await run.initialize(agent)
        client = agent.client
        new = await client.request(
            "session/new", {"cwd": str(run.project), "mcpServers": []}, within=run.options.timeout
        )
        result = new.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
            raise RuntimeError(f"session/new was answered {describe(new)}")
        await check_modes(run, agent, result)
        await check_config_options(run, agent, result)
        await check_additional_directories(run, agent)
        await check_delete(run, agent)
        await end(run, agent)


def _other(current: Any, values: list[Any]) -> Any:
    return next((v for v in values if v != current), current)


async def check_modes(run: CheckRun, agent: Agent, new: Json) -> None:
    modes = new.get("modes")
    available = modes.get("availableModes") if isinstance(modes, dict) else None
    ids = [m.get("id") for m in available or [] if isinstance(m, dict)]
    if not ids:
        run.record("session.modes", Outcome.SKIP, "session/new answered no modes")
        return
    assert isinstance(modes, dict)
    session_id = new["sessionId"]
    mode = _other(modes.get("currentModeId"), ids)
    at = len(agent.transcript)
    response = await agent.client.request(
        "session/set_mode", {"sessionId": session_id, "modeId": mode}, within=run.options.timeout
    )
    await agent.settle(within=run.options.timeout)
    named = [
        (i, u.get("currentModeId"))
        for i, (d, m) in enumerate(agent.transcript[at:], at)
        if d == "recv"
        and (u := session_update(m, session_id)) is not None
        and u.get("sessionUpdate") == "current_mode_update"
    ]
    marks = [at, *index_of(agent, response)]
    if "result" not in response:
        run.record(
            "session.modes",
            Outcome.FAIL,
            f"session/set_mode {mode!r} (an advertised mode) was answered {describe(response)}",
            evidence=[(agent, marks)],
        )
    elif any(name != mode for _, name in named):
        run.record(
            "session.modes",
            Outcome.FAIL,
            f"session/set_mode {mode!r} was followed by current_mode_update "
            f"{[name for _, name in named]!r}",
            evidence=[(agent, marks + [i for i, _ in named])],
        )
    else:
        run.record("session.modes", Outcome.PASS, f"switched to {mode!r} of {ids!r}")


def select_values(option: Json) -> list[Any]:
    """The values of a select option (its options may be grouped)."""
    values: list[Any] = []
    for entry in option.get("options") or []:
        if isinstance(entry, dict) and "value" in entry:
            values.append(entry["value"])
        elif isinstance(entry, dict):
            values += [v.get("value") for v in entry.get("options") or [] if isinstance(v, dict)]
    return values


async def check_config_options(run: CheckRun, agent: Agent, new: Json) -> None:
    options = [o for o in new.get("configOptions") or [] if isinstance(o, dict)]
    selects = [o for o in options if o.get("type") == "select" and select_values(o)]
    if not selects:
        run.record(
            "session.config-options",
            Outcome.SKIP,
            "session/new answered no select option in configOptions",
        )
        return
    # A model switch may cost the user more: another option first.
    option = next((o for o in selects if o.get("category") != "model"), selects[0])
    value = _other(option.get("currentValue"), select_values(option))
    params = {"sessionId": new["sessionId"], "configId": option.get("id"), "value": value}
    at = len(agent.transcript)
    response = await agent.client.request(
        "session/set_config_option", params, within=run.options.timeout
    )
    marks = [at, *index_of(agent, response)]
    answered = (response.get("result") or {}).get("configOptions")
    problems: list[str] = []
    if not isinstance(answered, list):
        problems.append(f"was answered {describe(response)}")
    else:
        got = {o.get("id"): o for o in answered if isinstance(o, dict)}
        missing = [o.get("id") for o in options if o.get("id") not in got]
        if missing:
            problems.append(f"answered configOptions without {missing!r}")
        now = got.get(option.get("id"), {}).get("currentValue")
        if option.get("id") in got and now != value:
            problems.append(f"answered {option.get('id')!r} at {now!r}, not {value!r}")
    what = f"session/set_config_option {option.get('id')!r} = {value!r}"
    if problems:
        run.record(
            "session.config-options",
            Outcome.FAIL,
            f"{what} " + "; ".join(problems),
            evidence=[(agent, marks)],
        )
    else:
        run.record(
            "session.config-options",
            Outcome.PASS,
            f"{what}: all {len(options)} option(s) answered, that one at its new value",
        )


async def check_additional_directories(run: CheckRun, agent: Agent) -> None:
    if not run.advertised("sessionCapabilities.additionalDirectories"):
        run.record(
            "session.additional-directories",
            Outcome.SKIP,
            "not advertised (sessionCapabilities.additionalDirectories)",
        )
        return
    extra = run.tmp / "additional-directory"
    extra.mkdir(exist_ok=True)
    params = {"cwd": str(run.project), "mcpServers": [], "additionalDirectories": [str(extra)]}
    new = await agent.client.request("session/new", params, within=run.options.timeout)
    session_id = (new.get("result") or {}).get("sessionId")
    if not isinstance(session_id, str):
        run.record(
            "session.additional-directories",
            Outcome.FAIL,
            f"session/new with additionalDirectories was answered {describe(new)}",
            evidence=[(agent, index_of(agent, new))],
        )
        return
    told = "session/new with an additional directory answered"
    if run.advertised("sessionCapabilities.list"):
        listed = await agent.client.request(
            "session/list", {"cwd": str(run.project)}, within=run.options.timeout
        )
        sessions = (listed.get("result") or {}).get("sessions") or []
        mine = [s for s in sessions if isinstance(s, dict) and s.get("sessionId") == session_id]
        reported = mine[0].get("additionalDirectories") if mine else None
        if reported is not None and reported != [str(extra)]:
            run.record(
                "session.additional-directories",
                Outcome.FAIL,
                f"session/list reports additionalDirectories {reported!r}, not {[str(extra)]!r}",
                evidence=[(agent, index_of(agent, new) + index_of(agent, listed))],
            )
            return
        if reported is not None:
            told += "; session/list reports it"
    run.record("session.additional-directories", Outcome.PASS, told)


async def check_delete(run: CheckRun, agent: Agent) -> None:
    if not run.advertised("sessionCapabilities.delete"):
        for check_id in ("session.delete", "session.delete-unknown"):
            run.record(check_id, Outcome.SKIP, "not advertised (sessionCapabilities.delete)")
        return
    client = agent.client
    session = await agent.new_session(run.project)
    deleted = await client.request(
        "session/delete", {"sessionId": session.id}, within=run.options.timeout
    )
    marks = index_of(agent, deleted)
    if "result" not in deleted:
        run.record(
            "session.delete",
            Outcome.FAIL,
            f"session/delete of a session just made was answered {describe(deleted)}",
            evidence=[(agent, marks)],
        )
    elif run.advertised("sessionCapabilities.list"):
        listed = await client.request(
            "session/list", {"cwd": str(run.project)}, within=run.options.timeout
        )
        sessions = (listed.get("result") or {}).get("sessions") or []
        if any(isinstance(s, dict) and s.get("sessionId") == session.id for s in sessions):
            run.record(
                "session.delete",
                Outcome.FAIL,
                "session/list still lists the deleted session",
                evidence=[(agent, marks + index_of(agent, listed))],
            )
        else:
            run.record("session.delete", Outcome.PASS, "answered {}; session/list no longer has it")
    else:
        run.record("session.delete", Outcome.PASS, "answered {}")
    problems: list[str] = []
    wrong: list[int] = []
    for what, session_id in (("deleted already", session.id), ("never made", UNKNOWN_SESSION)):
        again = await client.request(
            "session/delete", {"sessionId": session_id}, within=run.options.timeout
        )
        if "result" not in again:
            problems.append(f"a session {what} was answered {describe(again)}")
            wrong += index_of(agent, again)
    if problems:
        run.record(
            "session.delete-unknown",
            Outcome.FAIL,
            "session/delete of " + "; of ".join(problems),
            evidence=[(agent, wrong)],
        )
    else:
        run.record(
            "session.delete-unknown",
            Outcome.PASS,
            "a session deleted already and one never made: answered {}",
        )
