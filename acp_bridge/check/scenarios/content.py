"""The scenario of what a request may carry: content blocks beyond text, string
request ids, ``_meta``, and non-ASCII text.

Each prompt here is short ("reply with one word") and is stopped as soon as it
shows an update, so an agent on a real model spends a few tokens on each.
"""

from __future__ import annotations

import base64
import contextlib
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from ...client import id_key, is_response
from ...testing.agent import Agent
from ..results import Outcome
from ..run import CheckRun, Json
from .frames import CONVERSATION, describe, end, index_of, updates_between

REPLY_PROMPT: Final = "Reply with one word: ok."
META: Final[Json] = {"acpBridgeCheck": {"note": "extension data the agent may ignore"}}

# A 1x1 PNG, and a WAV of four silent 8 kHz samples.
PNG: Final = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E"
    "rkJggg=="
)
WAV: Final = base64.b64encode(
    b"RIFF"
    + struct.pack("<I", 36 + 8)
    + b"WAVEfmt "
    + struct.pack("<IHHIIHH", 16, 1, 1, 8000, 16000, 2, 16)
    + b"data"
    + struct.pack("<I", 8)
    + bytes(8)
).decode()

# The non-ASCII words of the UTF-8 check: accents, CJK, an emoji (outside the BMP).
WORDS: Final = ("café", "naïve", "日本語", "世界", "🎉")
UTF8_PROMPT: Final = "Réponds en un mot : " + ", ".join(WORDS) + "."
UTF8_FOLDER: Final = "projet-été-世界-🎉"

# promptCapabilities field -> (what the report calls it, the block sent).
OPTIONAL_BLOCKS: Final = ("image", "audio", "embeddedContext")


def optional_block(kind: str, tmp: Path) -> tuple[str, Json]:
    if kind == "image":
        return "an image block", {"type": "image", "mimeType": "image/png", "data": PNG}
    if kind == "audio":
        return "an audio block", {"type": "audio", "mimeType": "audio/wav", "data": WAV}
    uri = (tmp / "acp-check-note.txt").as_uri()
    resource = {"uri": uri, "mimeType": "text/plain", "text": "A note for the check."}
    return "an embedded resource block", {"type": "resource", "resource": resource}


async def prompt_answer(
    run: CheckRun, agent: Agent, session_id: str, blocks: list[Json], meta: Json | None = None
) -> tuple[Json | None, list[int]]:
    """Send a prompt of ``blocks``; its response (None if there is none), once the
    turn ends by itself or, if it shows an update or --stream-timeout passes first,
    once it is stopped.  Also the transcript marks of the request and the response."""
    opts = run.options
    client = agent.client
    params: Json = {"sessionId": session_id, "prompt": blocks}
    if meta is not None:
        params["_meta"] = meta
    at = len(client.transcript)
    rid = await client.send_request("session/prompt", params)
    key = id_key(rid)

    def answered() -> bool:
        return bool(client.responses.get(key))

    def moved() -> bool:
        return answered() or bool(updates_between(agent, session_id, at, kinds=CONVERSATION))

    with contextlib.suppress(TimeoutError):  # nothing to show yet: stop it all the same
        await client.wait_until(moved, within=opts.stream_timeout)
    if not answered():
        await client.notify("session/cancel", {"sessionId": session_id})
        try:
            await client.wait_response(rid, within=opts.stop_timeout)
        except TimeoutError:
            return None, [at]
    response = client.responses[key][0]
    return response, [at, *index_of(agent, response)]


def accepted(response: Json | None) -> bool:
    result = response.get("result") if response else None
    return isinstance(result, dict) and isinstance(result.get("stopReason"), str)


async def content(run: CheckRun) -> None:
    async with run.agent("content") as agent:
        info = await run.initialize(agent)
        await check_string_ids(run, agent)
        await check_meta(run, agent)
        session = await agent.new_session(run.project)
        await check_blocks(run, agent, session.id, info)
        await check_utf8(run, agent)
        await end(run, agent)


async def check_string_ids(run: CheckRun, agent: Agent) -> None:
    client = agent.client
    problems: list[str] = []
    marks: list[int] = []
    for rid in ("acp-check-id", "7"):
        at = len(client.transcript)
        params = {"cwd": str(run.project), "mcpServers": []}
        await client.send_request("session/new", params, rid=rid)
        try:
            await client.wait_response(rid, within=run.options.timeout)
        except TimeoutError:
            others = [
                i
                for i, (d, m) in enumerate(client.transcript[at:], at)
                if d == "recv" and is_response(m) and m.get("id") not in agent.barrier_ids
            ]
            if others:
                got = client.transcript[others[0]][1].get("id")
                problems.append(f"the request with id {rid!r} was answered with id {got!r}")
            else:
                problems.append(f"the request with id {rid!r} was not answered")
            marks += [at, *others]
    if problems:
        run.record(
            "jsonrpc.string-id", Outcome.FAIL, "; ".join(problems), evidence=[(agent, marks)]
        )
    else:
        run.record(
            "jsonrpc.string-id", Outcome.PASS, 'ids "acp-check-id" and "7" came back as sent'
        )


async def check_meta(run: CheckRun, agent: Agent) -> None:
    client = agent.client
    params = {"cwd": str(run.project), "mcpServers": [], "_meta": META}
    new = await client.request("session/new", params, within=run.options.timeout)
    result = new.get("result")
    session_id = result.get("sessionId") if isinstance(result, dict) else None
    if not isinstance(session_id, str):
        run.record(
            "meta.accepted",
            Outcome.FAIL,
            f"session/new with _meta was answered {describe(new)}",
            evidence=[(agent, index_of(agent, new))],
        )
        return
    block = {"type": "text", "text": REPLY_PROMPT, "_meta": META}
    response, marks = await prompt_answer(run, agent, session_id, [block], META)
    if accepted(response):
        run.record(
            "meta.accepted",
            Outcome.PASS,
            "session/new and session/prompt with _meta (on the params and on a block) answered",
        )
    else:
        run.record(
            "meta.accepted",
            Outcome.FAIL,
            f"session/prompt with _meta was answered {describe(response)}",
            evidence=[(agent, marks)],
        )


async def check_blocks(run: CheckRun, agent: Agent, session_id: str, info: Json) -> None:
    text = {"type": "text", "text": REPLY_PROMPT}
    link = {
        "type": "resource_link",
        "uri": (run.tmp / "acp-check-link.txt").as_uri(),
        "name": "acp-check-link.txt",
    }
    response, marks = await prompt_answer(run, agent, session_id, [text, link])
    if accepted(response):
        run.record("prompt.resource-link", Outcome.PASS, "a text and a resource_link block")
    else:
        run.record(
            "prompt.resource-link",
            Outcome.FAIL,
            f"a prompt with a resource_link block was answered {describe(response)}",
            evidence=[(agent, marks)],
        )
    capabilities = (info.get("agentCapabilities") or {}).get("promptCapabilities") or {}
    took: dict[bool, list[str]] = {True: [], False: []}
    wrong: dict[bool, list[tuple[str, list[int]]]] = {True: [], False: []}
    for kind in OPTIONAL_BLOCKS:
        advertised = capabilities.get(kind) is True
        what, block = optional_block(kind, run.tmp)
        response, marks = await prompt_answer(run, agent, session_id, [text, block])
        if accepted(response) == advertised:
            took[advertised].append(what)
        else:
            wrong[advertised].append((f"{what} was answered {describe(response)}", marks))
    for advertised, check_id in ((True, "prompt.capabilities"), (False, "prompt.unadvertised")):
        if wrong[advertised]:
            told = "advertised" if advertised else "not advertised"
            run.record(
                check_id,
                Outcome.FAIL,
                f"{told}: " + "; ".join(w for w, _ in wrong[advertised]),
                evidence=[(agent, m) for _, m in wrong[advertised]],
            )
        elif not took[advertised]:
            every = "none" if advertised else "every one"
            run.record(
                check_id,
                Outcome.SKIP,
                f"promptCapabilities advertises {every} of image, audio, embeddedContext",
            )
        else:
            how = "accepted" if advertised else "refused"
            run.record(check_id, Outcome.PASS, f"{how}: " + ", ".join(took[advertised]))


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


async def check_utf8(run: CheckRun, agent: Agent) -> None:
    client = agent.client
    folder = run.tmp / UTF8_FOLDER
    folder.mkdir(exist_ok=True)
    start = len(client.transcript)
    problems: list[str] = []
    marks: list[int] = []
    told: list[str] = []
    new = await client.request(
        "session/new", {"cwd": str(folder), "mcpServers": []}, within=run.options.timeout
    )
    result = new.get("result")
    session_id = result.get("sessionId") if isinstance(result, dict) else None
    if not isinstance(session_id, str):
        problems.append(f"session/new in {UTF8_FOLDER!r} was answered {describe(new)}")
        marks += index_of(agent, new)
    else:
        prompt = [{"type": "text", "text": UTF8_PROMPT}]
        response, at = await prompt_answer(run, agent, session_id, prompt)
        if not accepted(response):
            problems.append(f"a prompt in non-ASCII text was answered {describe(response)}")
            marks += at
        if run.advertised("sessionCapabilities.list"):
            listed = await client.request(
                "session/list", {"cwd": str(folder)}, within=run.options.timeout
            )
            sessions = (listed.get("result") or {}).get("sessions") or []
            mine = [s for s in sessions if isinstance(s, dict) and s.get("sessionId") == session_id]
            if mine and mine[0].get("cwd") != str(folder):
                problems.append(f"session/list gave the cwd back as {mine[0].get('cwd')!r}")
                marks += index_of(agent, listed)
            elif mine:
                told.append("session/list gave the cwd back as sent")
    await agent.settle(within=run.options.timeout)
    garbled = {word.encode().decode("latin-1"): word for word in WORDS}
    for i, (direction, msg) in enumerate(client.transcript[start:], start):
        if direction != "recv":
            continue
        for text in strings(msg):
            bad = [word for mangled, word in garbled.items() if mangled in text]
            if "\ufffd" in text or bad:
                what = f"{bad[0]!r} as Latin-1" if bad else "U+FFFD"
                problems.append(f"frame {i} holds {what}: {text[:80]!r}")
                marks.append(i)
                break
    for line in client.bad_lines:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            problems.append(f"a line that is not UTF-8: {line[:80]!r}")
            break
    if problems:
        run.record("text.utf8", Outcome.FAIL, "; ".join(problems), evidence=[(agent, marks)])
    else:
        run.record(
            "text.utf8",
            Outcome.PASS,
            "a session in a non-ASCII folder and a non-ASCII prompt answered; no text garbled"
            + "".join(f"; {t}" for t in told),
        )
