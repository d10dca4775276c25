"""Compaction through the real subprocess, against the loopback vendor servers (both wire formats).

The loopback model (`Model`) answers each request with the next scripted step
and reports usage that follows the request's size (a quarter of its JSON);
it answers a summary request (recognized by its instruction) with `SUMMARY`.
Asserted: a long tool loop with a small ``--context-window`` compacts before
the request that would overflow, and the next request is smaller and holds the
summary; a load in a new process and a fork reproduce the compacted history;
a request the provider rejects as too long is compacted and retried once, and
when it still does not fit the user gets a clear error and the next prompt
works; a Stop during a compaction cancels it and leaves the history as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from provider_server import (
    Reply,
    anthropic_block_stop,
    anthropic_end,
    anthropic_start,
    anthropic_text_block,
    openai_chunk,
    sse,
)
from support.harness import update_seen, wait_until
from test_context_providers import FS, Ran, run

from acp_bridge.client import AcpClient
from acp_bridge.compaction.plan import SUMMARY_INSTRUCTION
from acp_bridge.log.check import check_log
from acp_bridge.log.derive import SUMMARY_HEADER, derive_messages
from acp_bridge.log.reader import read_records

pytestmark = pytest.mark.anyio

PROVIDERS = ["anthropic", "openai"]
SUMMARY = "SUMMARY: the user had files a.txt to c.txt read; each holds a long poem."
# A file of about 1,200 tokens.
POEM = " ".join(f"line {n}: the quick brown fox jumps over the lazy dog." for n in range(90))
# No subagent tool: these requests are measured against the window to the token,
# with the built-in tools only.
WINDOW = ("--context-window", "6000", "--max-tokens", "300", "--subagent-depth", "0")
OPTED_IN = {**FS, "session": {"compaction": {}}}

Step = Callable[[str, int], Reply]


def is_summary(body: dict[str, Any]) -> bool:
    return SUMMARY_INSTRUCTION[:60] in json.dumps(body)


def text_reply(provider: str, text: str, tokens: int) -> Reply:
    if provider == "anthropic":
        return Reply(
            [
                anthropic_start(input_tokens=tokens),
                *anthropic_text_block(0, [text]),
                anthropic_block_stop(0),
                *anthropic_end(output_tokens=len(text) // 4 + 1),
            ]
        )
    usage = {"prompt_tokens": tokens, "completion_tokens": len(text) // 4 + 1}
    return Reply(
        [
            openai_chunk({"role": "assistant", "content": text}),
            openai_chunk({}, "stop"),
            openai_chunk({}, usage=usage),
            sse(None, "[DONE]"),
        ]
    )


def read_reply(provider: str, path: str, tokens: int) -> Reply:
    call_id = "call_" + path.replace(".", "_")
    arguments = json.dumps({"path": path})
    if provider == "anthropic":
        return Reply(
            [
                anthropic_start(input_tokens=tokens),
                sse(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": 0,
                        "content_block": {"type": "tool_use", "id": call_id, "name": "read_file"},
                    },
                ),
                sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "input_json_delta", "partial_json": arguments},
                    },
                ),
                anthropic_block_stop(0),
                *anthropic_end("tool_use", output_tokens=15),
            ]
        )
    call = {"index": 0, "id": call_id, "type": "function"}
    call["function"] = {"name": "read_file", "arguments": arguments}
    return Reply(
        [
            openai_chunk({"role": "assistant", "tool_calls": [call]}),
            openai_chunk({}, "tool_calls"),
            openai_chunk({}, usage={"prompt_tokens": tokens, "completion_tokens": 15}),
            sse(None, "[DONE]"),
        ]
    )


def too_long(provider: str, tokens: int) -> Reply:
    if provider == "anthropic":
        error = {"type": "invalid_request_error", "message": f"prompt is too long: {tokens} tokens"}
        return Reply(status=400, body=json.dumps({"type": "error", "error": error}).encode())
    message = "This model's maximum context length is 6000 tokens"
    body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    return Reply(status=400, body=json.dumps(body).encode())


class Model:
    """The loopback model: scripted steps, and a summary for every summary request."""

    def __init__(self, provider: str, steps: list[Step], *, summary: Step | None = None) -> None:
        self.provider = provider
        self.steps = list(steps)
        self.summary = summary
        self.summaries = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        tokens = len(json.dumps(body)) // 4
        if is_summary(body):
            self.summaries += 1
            if self.summary is not None:
                return self.summary(self.provider, tokens)
            return text_reply(self.provider, SUMMARY, tokens)
        return self.steps.pop(0)(self.provider, tokens)

    def replies(self) -> list[Any]:
        return [self] * 30


def read(path: str) -> Step:
    return lambda provider, tokens: read_reply(provider, path, tokens)


def say(text: str) -> Step:
    return lambda provider, tokens: text_reply(provider, text, tokens)


def serve_files(client: AcpClient) -> None:
    """The editor serves every file: its name, then `POEM`."""

    async def read_file(params: dict[str, Any]) -> dict[str, Any]:
        return {"content": f"{Path(params['path']).name}: {POEM}"}

    client.handlers["fs/read_text_file"] = read_file


def messages_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m.get("role") != "system"]


def first_text(body: dict[str, Any]) -> str:
    first = messages_of(body)[0]
    content = first["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


def compactions(records: list[dict[str, Any]], status: str = "completed") -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == "compaction" and r["status"] == status]


# -- a long tool loop -------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_tool_loop_compacts_before_the_request_that_would_overflow(
    tmp_path: Path, provider: str
) -> None:
    model = Model(
        provider, [read("a.txt"), read("b.txt"), read("c.txt"), read("d.txt"), say("Done.")]
    )
    results: list[Any] = []

    async def play(client: AcpClient, ran: Ran) -> None:
        serve_files(client)
        sid = await client.new_session(str(tmp_path))
        results.append(await client.prompt(sid, "Read a.txt, b.txt, c.txt and d.txt."))

    ran = await run(tmp_path, provider, model.replies(), play, extra=WINDOW, capabilities=FS)
    assert results[0].stop_reason == "end_turn"
    assert model.summaries == 1
    bodies = [r.body for r in ran.server.requests]
    at = next(i for i, body in enumerate(bodies) if is_summary(body))
    before, after = bodies[at - 1], bodies[at + 1]
    # The request after the compaction is smaller, and starts with the summary
    # (and the prompt being answered, kept verbatim).
    assert len(json.dumps(after)) < len(json.dumps(before))
    assert first_text(after).startswith(SUMMARY_HEADER)
    assert SUMMARY in first_text(after)
    assert "Read a.txt, b.txt, c.txt and d.txt." in json.dumps(messages_of(after))
    # No request sent to the model was larger than the window.
    assert all(len(json.dumps(b)) // 4 < 6000 for b in bodies)
    # ... and without the compaction the next one would have passed the threshold
    # (80% of the window): the last request, plus the file read since.
    assert len(json.dumps(before)) // 4 + len(POEM) // 4 > 0.8 * 6000
    # Mid-turn: between two steps of the one turn.
    [records] = ran.logs()
    [done] = compactions(records)
    assert done["turn"] == 1
    assert done["trigger"] == "auto"
    steps = [r["step"] for r in records if r["type"] == "step/end" and r["seq"] < done["seq"]]
    assert max(steps, default=0) >= 2
    assert done["tokens_after"] < done["tokens_before"]
    # The editor was told, as a notice (this client did not opt in to compaction updates).
    notices = [
        u
        for u in results[0].updates
        if (u.get("_meta") or {}).get("acpBridge", {}).get("compaction")
    ]
    assert [u["sessionUpdate"] for u in notices] == ["agent_thought_chunk"]
    assert notices[0]["content"]["text"].startswith("Context compacted to keep it within")
    # A usage_update after every response, and one after the compaction (smaller).
    usage = [u["used"] for u in results[0].updates if u["sessionUpdate"] == "usage_update"]
    responses = len(bodies) - 1  # the summary request's usage is in the compaction's
    assert len(usage) == responses + 1
    compacted = [r for r in records if r["type"] == "usage/update" and r["step"] == 0]
    assert [r["used"] for r in compacted] == [done["tokens_after"]]
    check_log(records)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("max_tokens", "turn"), [("300", 3), ("3500", 2)])
async def test_a_long_session_compacts_before_the_first_request_of_a_turn(
    tmp_path: Path, provider: str, max_tokens: str, turn: int
) -> None:
    """Pasted files make each request about 1,200 tokens larger.  With room for a
    300-token answer the third turn's request would pass 80% of the window; with
    room for 3,500 the second would leave too little room: each compacts first."""
    model = Model(provider, [say(f"Got file {n}.") for n in range(1, 5)])
    results: list[Any] = []

    async def play(client: AcpClient, ran: Ran) -> None:
        sid = await client.new_session(str(tmp_path))
        for n in range(1, 4):
            results.append(await client.prompt(sid, f"Here is file {n}: {POEM}"))

    extra = ("--context-window", "6000", "--max-tokens", max_tokens)
    ran = await run(tmp_path, provider, model.replies(), play, extra=extra)
    assert [r.stop_reason for r in results] == ["end_turn"] * 3
    [records] = ran.logs()
    done = compactions(records)[0]  # (the small room may call for another one later)
    assert model.summaries == len(compactions(records))
    assert done["turn"] == turn
    first_step = next(r for r in records if r["type"] == "step/start" and r["turn"] == turn)
    assert done["seq"] < first_step["seq"]  # before the turn's first request
    summary_at = next(i for i, r in enumerate(ran.server.requests) if is_summary(r.body))
    after = ran.server.requests[summary_at + 1].body
    assert first_text(after).startswith(SUMMARY_HEADER)
    assert f"Here is file {turn}" in json.dumps(messages_of(after))  # the prompt, verbatim


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_load_and_fork_after_a_compaction_reproduce_its_history(
    tmp_path: Path, provider: str
) -> None:
    model = Model(
        provider,
        [read("a.txt"), read("b.txt"), read("c.txt"), read("d.txt"), say("Done."), say("Loaded.")],
    )
    box: dict[str, Any] = {}

    async def play(client: AcpClient, ran: Ran) -> None:
        serve_files(client)
        sid = await client.new_session(str(tmp_path))
        await client.prompt(sid, "Read a.txt, b.txt, c.txt and d.txt.")
        box["sid"] = sid

    ran = await run(tmp_path, provider, model.replies(), play, extra=WINDOW, capabilities=FS)
    [records] = ran.logs()
    assert compactions(records)
    history = derive_messages(records)

    async def again(client: AcpClient, ran: Ran) -> None:
        params = {"sessionId": box["sid"], "cwd": str(tmp_path), "mcpServers": []}
        box["load"] = await client.request("session/load", params)
        box["replayed"] = list(client.updates)
        result = await client.prompt(box["sid"], "And now?")
        assert result.stop_reason == "end_turn"
        fork = {"sessionId": box["sid"], "turn": 1}  # the extension: session/fork is unstable
        box["fork"] = await client.request("_acp-bridge/fork_at_turn", fork)

    # A new process: the log is all it has.
    ran2 = await run(tmp_path, provider, model.replies(), again, extra=WINDOW, capabilities=FS)
    assert "result" in box["load"], box["load"]
    notices = [
        u for u in box["replayed"] if (u.get("_meta") or {}).get("acpBridge", {}).get("compaction")
    ]
    assert len(notices) == 1  # replayed once, at its place
    # The request after the load carries the same history, then the new prompt.
    body = ran2.server.requests[-1].body
    assert first_text(body).startswith(SUMMARY_HEADER)
    logs = {log[0]["session_id"]: log for log in ran2.logs()}
    parent = logs[box["sid"]]
    assert derive_messages(parent)[: len(history)] == history
    fork_id = box["fork"]["result"]["sessionId"]
    assert derive_messages(logs[fork_id]) == history  # the parent's, as of turn 1
    for log in logs.values():
        check_log(log)


# -- a request refused as too long ----------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_rejected_request_is_compacted_and_retried_once(
    tmp_path: Path, provider: str
) -> None:
    model = Model(provider, [read("a.txt"), say("Read it."), too_long, say("Fits now.")])
    results: list[Any] = []

    async def play(client: AcpClient, ran: Ran) -> None:
        serve_files(client)
        sid = await client.new_session(str(tmp_path))
        results.append(await client.prompt(sid, "Read a.txt"))
        results.append(await client.prompt(sid, "What is in it?"))

    # The default (large) window: only the provider's refusal makes it compact.
    ran = await run(tmp_path, provider, model.replies(), play, capabilities=FS)
    assert [r.stop_reason for r in results] == ["end_turn", "end_turn"], results[1].response
    assert results[1].text() == "Fits now."
    assert model.summaries == 1
    rejected, summary, retried = [r.body for r in ran.server.requests[-3:]]
    assert is_summary(summary)
    assert len(json.dumps(retried)) < len(json.dumps(rejected))
    assert first_text(retried).startswith(SUMMARY_HEADER)
    [records] = ran.logs()
    [done] = compactions(records)
    assert done["trigger"] == "overflow"
    errors = [r for r in records if r["type"] == "agent/request-error"]
    assert [e["error"]["kind"] for e in errors] == ["context_length"]
    assert [r["reason"] for r in records if r["type"] == "step/end" and r["turn"] == 2] == [
        "provider_error",
        "end_turn",
    ]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_prompt_that_never_fits_does_not_wedge_the_session(
    tmp_path: Path, provider: str
) -> None:
    model = Model(
        provider, [read("a.txt"), say("Read it."), too_long, too_long, say("Hello again.")]
    )
    results: list[Any] = []

    async def play(client: AcpClient, ran: Ran) -> None:
        serve_files(client)
        sid = await client.new_session(str(tmp_path))
        results.append(await client.prompt(sid, "Read a.txt"))
        results.append(await client.prompt(sid, "HUGE PASTE " + "x" * 2000))
        results.append(await client.prompt(sid, "Something short"))

    ran = await run(tmp_path, provider, model.replies(), play, capabilities=FS)
    error = results[1].response["error"]
    assert error["data"]["kind"] == "context_length"
    assert "it was left out of the conversation" in error["message"]
    assert results[2].stop_reason == "end_turn"
    last = ran.server.requests[-1].body
    assert "HUGE PASTE" not in json.dumps(last)
    assert "Something short" in json.dumps(last)
    [records] = ran.logs()
    ends = [r for r in records if r["type"] == "turn/end"]
    assert [e.get("left_out", False) for e in ends] == [False, True, False]
    assert "HUGE PASTE" not in json.dumps(derive_messages(records))


async def test_a_first_prompt_too_long_has_nothing_to_compact(tmp_path: Path) -> None:
    model = Model("anthropic", [too_long, say("Hi.")])
    results: list[Any] = []

    async def play(client: AcpClient, ran: Ran) -> None:
        sid = await client.new_session(str(tmp_path))
        results.append(await client.prompt(sid, "An enormous first message"))
        results.append(await client.prompt(sid, "Hi"))

    ran = await run(tmp_path, "anthropic", model.replies(), play)
    assert model.summaries == 0
    assert "left out" in results[0].response["error"]["message"]
    assert results[1].stop_reason == "end_turn"
    assert "enormous" not in json.dumps(ran.server.requests[-1].body)


# -- Stop during a compaction -----------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stop_during_a_compaction_cancels_it(tmp_path: Path, provider: str) -> None:
    def held(provider: str, tokens: int) -> Reply:
        if provider == "openai":
            return Reply([openai_chunk({"content": "SUMM"})], hold=True)
        return Reply([anthropic_start(input_tokens=tokens)], hold=True)

    model = Model(
        provider,
        [read("a.txt"), read("b.txt"), read("c.txt"), read("d.txt"), say("After the stop.")],
        summary=held,
    )
    results: list[Any] = []
    history: dict[str, Any] = {}

    async def play(client: AcpClient, ran: Ran) -> None:
        serve_files(client)
        sid = await client.new_session(str(tmp_path))
        start = len(client.updates)

        async def stop_when_compacting() -> None:
            await client.wait_until(update_seen(client, "compaction_update", since=start))
            with anyio.fail_after(10):  # until the server answers it (no message to wake on)
                await wait_until(lambda: model.summaries == 1)
            history["before"] = derive_messages(
                read_records(next((ran.state / "sessions").glob("*.jsonl")))
            )
            await client.notify("session/cancel", {"sessionId": sid})

        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_when_compacting)
            results.append(await client.prompt(sid, "Read a.txt, b.txt, c.txt and d.txt."))
        model.summary = None  # the next compaction works
        results.append(await client.prompt(sid, "Go on"))

    ran = await run(tmp_path, provider, model.replies(), play, extra=WINDOW, capabilities=OPTED_IN)
    assert results[0].stop_reason == "cancelled"
    shown = [u for u in results[0].updates if u["sessionUpdate"] == "compaction_update"]
    assert [u["status"] for u in shown] == ["in_progress", "cancelled"]
    assert ran.server.disconnected.wait(5)  # the summary request was abandoned
    [records] = ran.logs()
    first_turn = [r for r in records if r["turn"] == 1]
    assert [r["status"] for r in compactions(first_turn, "cancelled")] == ["cancelled"]
    assert not compactions(first_turn)
    # The history is as it was before the compaction started.
    ends = next(i for i, r in enumerate(records) if r["type"] == "turn/end")
    assert derive_messages(records[: ends + 1]) == history["before"]
    assert results[1].stop_reason == "end_turn"
