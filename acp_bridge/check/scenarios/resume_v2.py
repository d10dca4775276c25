"""The ACP v2 resume after a Stop: ``session/resume`` with ``replayFrom`` replays.

v2 has no ``session/load``: an editor that reopens a session asks
``session/resume`` to replay (``replayFrom: {"type": "start"}``).  The scenario
stops a turn mid-stream in one process and resumes the session in a new one:
the user's prompt must come back under the ``messageId`` its ``session/prompt``
was answered with, a ``state_update`` must follow the replay before the
response, and the agent's text replayed for the stopped turn should be what the
user saw.
"""

from __future__ import annotations

import json

import anyio

from ...testing.agent import Agent, session_update
from ..results import Outcome
from ..run import CheckRun, Json
from .frames import CONVERSATION, describe, end, index_of, probe, stream, updates_between

CHECKS = ("resume.replay", "resume.after-stop")
START: Json = {"type": "start"}


def replayed_texts(updates: list[Json], kind: str) -> dict[str, str]:
    """The text of each message of ``kind`` (``agent_message``) by ``messageId``, as
    a client assembles it: an upsert with content replaces, a chunk appends."""
    out: dict[str, str] = {}
    for update in updates:
        message_id = update.get("messageId")
        if not isinstance(message_id, str):
            continue
        if update.get("sessionUpdate") == kind and "content" in update:
            blocks = update.get("content") or []
            out[message_id] = "".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict))
        elif update.get("sessionUpdate") == kind + "_chunk":
            content = update.get("content")
            text = content.get("text", "") if isinstance(content, dict) else ""
            out[message_id] = out.get(message_id, "") + str(text)
    return out


async def resume_replay(run: CheckRun) -> None:
    opts = run.options
    await probe(run)
    if not run.advertised("session"):
        for check in CHECKS:
            run.record(check, Outcome.SKIP, "not advertised (agentCapabilities.session)")
        return
    state = run.tmp / "resume-replay-state"
    async with run.agent("resume-replay", state=state) as agent:
        await run.initialize(agent)
        session = await agent.new_session(run.project)
        turn = await session.start_prompt(opts.prompt("stream") or "")
        why = await stream(run, turn)
        if why is not None:
            for check in CHECKS:
                run.record(check, Outcome.NOT_EXERCISED, why)
            return
        result = await turn.stop(within=opts.stop_timeout)
        delivered = result.text()
        accepted = (turn.accepted or {}).get("result") or {}
        prompt_id = accepted.get("messageId")
        chunk_ids = list(
            dict.fromkeys(
                u.get("messageId")
                for u in result.updates
                if u.get("sessionUpdate") == "agent_message_chunk"
            )
        )
        await end(run, agent)
    async with run.agent("resume-replay", state=state) as agent:
        await run.initialize(agent)
        start = len(agent.transcript)
        params = {
            "sessionId": session.id,
            "cwd": str(run.project),
            "mcpServers": [],
            "replayFrom": START,
        }
        response = await agent.client.request("session/resume", params, within=opts.timeout)
        if opts.watch:
            # Watching for something that must not happen: only a time window can.
            await anyio.sleep(opts.watch)
        await agent.settle(within=opts.timeout)
        judge_replay(run, agent, session.id, start, response, prompt_id, chunk_ids, delivered)
        await end(run, agent)


def judge_replay(
    run: CheckRun,
    agent: Agent,
    session_id: str,
    start: int,
    response: Json,
    prompt_id: object,
    chunk_ids: list[object],
    delivered: str,
) -> None:
    response_at = index_of(agent, response)
    error = response.get("error")
    if isinstance(error, dict) and error.get("code") == -32602:
        for check in CHECKS:
            run.record(
                check,
                Outcome.SKIP,
                f'the agent refuses replayFrom {{"type": "start"}} with -32602: '
                f"{describe(response)}",
            )
        return
    if "result" not in response or not response_at:
        run.record(
            "resume.replay",
            Outcome.FAIL,
            f"session/resume with replayFrom in a new process was answered {describe(response)}",
            evidence=[(agent, response_at)],
        )
        run.record("resume.after-stop", Outcome.NOT_EXERCISED, "the resume failed")
        return
    end_at = response_at[0]
    before = updates_between(agent, session_id, start, end_at)
    updates = [session_update(agent.transcript[i][1], session_id) or {} for i in before]
    kinds = [u.get("sessionUpdate") for u in updates]
    conversation = [i for i, kind in zip(before, kinds, strict=True) if kind in CONVERSATION]
    states = [i for i, kind in zip(before, kinds, strict=True) if kind == "state_update"]
    after = updates_between(agent, session_id, end_at + 1, kinds=CONVERSATION)
    users = [u for u in updates if u.get("sessionUpdate") in ("user_message", "user_message_chunk")]
    problems = []
    if not any(u.get("messageId") == prompt_id for u in users):
        seen = sorted({str(u.get("messageId")) for u in users})
        problems.append(
            f"the user's prompt was not replayed under its messageId {json.dumps(prompt_id)} "
            f"({len(conversation)} conversation update(s) replayed; user message ids: "
            f"{', '.join(seen) or 'none'})"
        )
    if not states or (conversation and states[-1] < conversation[-1]):
        problems.append("no state_update after the replay and before the response")
    if after:
        problems.append(f"{len(after)} conversation update(s) after the response")
    if problems:
        run.record(
            "resume.replay",
            Outcome.FAIL,
            "; ".join(problems),
            evidence=[(agent, before + response_at + after)],
        )
    else:
        run.record(
            "resume.replay",
            Outcome.PASS,
            f"{len(conversation)} conversation update(s) replayed, the user's prompt under its "
            f"messageId {json.dumps(prompt_id)}, then a state_update, then the response",
        )
    texts = replayed_texts(updates, "agent_message")
    if not chunk_ids:
        run.record(
            "resume.after-stop", Outcome.NOT_EXERCISED, "the stopped turn streamed no agent text"
        )
        return
    replayed = "".join(texts.get(str(i), "") for i in chunk_ids)
    if replayed == delivered:
        run.record(
            "resume.after-stop",
            Outcome.PASS,
            f"the {len(delivered)} characters delivered before the Stop were replayed under "
            "the same messageId",
        )
    else:
        run.record(
            "resume.after-stop",
            Outcome.FAIL,
            f"replayed under the messageId of the stopped turn's chunks: {replayed[-120:]!r} "
            f"({len(replayed)} characters); delivered before the Stop: {delivered[-120:]!r} "
            f"({len(delivered)} characters)",
            evidence=[(agent, conversation + response_at)],
        )
