"""Whole sessions through the real subprocess against model APIs on loopback.

Each case runs `acp-bridge --provider anthropic|openai --base-url
http://127.0.0.1:PORT` against `provider_server.WireServer`, which replays the
vendors' streaming wire formats over real sockets.  A snapshot keeps the
normalized wire transcript, the request bodies the server received (what the
model sees) and the derived history.  Every case also checks the log
(`check_log`) and that the planted API key appears nowhere: not in the log,
the snapshot, stderr or the request bodies (only in its auth header).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from acp_schema import load_acp_schema, load_pinned_sdk_schema
from provider_server import (
    Reply,
    WireServer,
    anthropic_block_stop,
    anthropic_end,
    anthropic_start,
    anthropic_text,
    anthropic_text_block,
    openai_chunk,
    openai_completion,
    openai_text,
    sse,
)
from support.bridge import running_bridge
from support.harness import SessionSnapshot, cwd_for_tests, normalize
from syrupy.assertion import SnapshotAssertion

from acp_bridge.client import AcpClient, PromptResult, bridge_command
from acp_bridge.log.check import check_log
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.reader import read_records
from acp_bridge.loop.turn import unavailable_tool_text
from acp_bridge.providers.notes import INTERRUPTED_NOTE
from acp_bridge.redact import MIN_PART

pytestmark = pytest.mark.anyio

KEY = "sk-ant-PLANTED0123456789secretKEYvalue"
CWD = cwd_for_tests()
SYSTEM = "You are a test agent."


@pytest.fixture
def snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(SessionSnapshot)


@dataclass
class Session:
    client: AcpClient
    server: WireServer
    state: Path
    stderr: str = ""
    key: str = KEY

    def logs(self) -> list[list[dict[str, Any]]]:
        return [read_records(p) for p in sorted((self.state / "sessions").glob("*.jsonl"))]

    def snapshot(self) -> dict[str, Any]:
        logs = self.logs()
        out: dict[str, Any] = normalize(
            {
                "wire": [[d, m] for d, m in self.client.transcript],
                "requests": [{"path": r.path, "body": r.body} for r in self.server.requests],
                "history": [derive_messages(r) for r in logs],
            },
            paths={str(self.state): "<state>", CWD: "<cwd>"},
        )
        return out

    def errors(self) -> list[dict[str, Any]]:
        return [r for log in self.logs() for r in log if r["type"] == "agent/request-error"]


async def run(
    tmp_path: Path,
    provider: str,
    replies: list[Reply],
    play: Callable[[AcpClient, str], Awaitable[None]],
    *,
    extra: tuple[str, ...] = (),
    key_env: str | None = None,
    key: str = KEY,
) -> Session:
    state = tmp_path / "state"
    env = dict(os.environ)
    env[key_env or ("ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY")] = key
    stderr_path = tmp_path / "stderr.txt"
    # The default system prompt names this machine (its OS release, shell, date), and a
    # response without usage gets an estimate that counts it: a fixed prompt keeps the
    # snapshots the same on every machine (the default one is tested in test_context_prompt.py).
    system = tmp_path / "system.md"
    system.write_text(SYSTEM)
    with WireServer(replies) as server:
        command = bridge_command(
            "--system",
            str(system),
            "--system-mode",
            "replace",
            "--provider",
            provider,
            "--base-url",
            server.url,
            "--state-dir",
            str(state),
            "--log-level",
            "debug",
            *extra,
        )
        async with running_bridge(command, env=env, stderr=stderr_path) as client:
            session = Session(client, server, state, key=key)
            with anyio.fail_after(30):
                await client.initialize()
                sid = await client.new_session(CWD)
                await play(client, sid)
            await client.finish(within=15)
    session.stderr = stderr_path.read_text()
    for log in session.logs():
        check_log(log)
    _assert_no_key(session)
    # Every frame both ways is valid ACP.
    load_acp_schema().check_transcript(client.transcript)
    return session


def chat(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The Chat Completions messages of a request after its system message."""
    messages: list[dict[str, Any]] = body["messages"]
    assert messages[0]["role"] == "system"
    assert messages[0]["content"] == SYSTEM
    return messages[1:]


def _assert_no_key(session: Session) -> None:
    # The key, and each part of it a vendor could echo on its own.
    key = session.key
    for secret in {key, *(p for p in re.split(r"[+/=\s]+", key) if len(p) >= MIN_PART)}:
        assert secret not in session.stderr
        for path in (session.state / "sessions").glob("*"):
            assert secret not in path.read_text()
        assert secret not in json.dumps(session.snapshot())
        assert secret not in json.dumps(session.client.transcript)
        for request in session.server.requests:
            assert secret not in json.dumps(request.body)


async def prompt(client: AcpClient, sid: str, text: str, **kw: Any) -> PromptResult:
    result = await client.prompt(sid, text, **kw)
    assert not result.late  # invariant I1
    return result


# -- Anthropic ------------------------------------------------------------------------


async def test_anthropic_plain_text(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    results: list[PromptResult] = []

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    s = await run(
        tmp_path,
        "anthropic",
        [Reply(anthropic_text(["Hello", " there", "!"]))],
        play,
        extra=("--model", "claude-test"),
    )
    assert results[0].stop_reason == "end_turn"
    assert results[0].text() == "Hello there!"
    request = s.server.requests[0]
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.body["model"] == "claude-test"
    assert request.body["stream"] is True
    assert request.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}]}
    ]
    assert s.snapshot() == snapshot


def _thinking(index: int, text: str, signature: str) -> list[str]:
    return [
        sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
        ),
        sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "thinking_delta", "thinking": text},
            },
        ),
        sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "signature_delta", "signature": signature},
            },
        ),
        anthropic_block_stop(index),
    ]


async def test_anthropic_thinking_with_signature_is_sent_back(
    tmp_path: Path, snapshot: SnapshotAssertion
) -> None:
    results: list[PromptResult] = []
    first = [
        anthropic_start(),
        *_thinking(0, "Let me think", "SIG123"),
        *anthropic_text_block(1, ["Four."]),
        anthropic_block_stop(1),
        *anthropic_end(),
    ]

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "2+2?"))
        results.append(await prompt(client, sid, "And 3+3?"))

    s = await run(
        tmp_path,
        "anthropic",
        [Reply(first), Reply(anthropic_text(["Six."]))],
        play,
        extra=("--thinking-budget", "2000"),
    )
    assert results[0].text("agent_thought_chunk") == "Let me think"
    assert results[0].text() == "Four."
    second = s.server.requests[1].body
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 2000}
    assert second["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "Let me think", "signature": "SIG123"},
        {"type": "text", "text": "Four."},
    ]
    assert s.snapshot() == snapshot


def _tool_use(index: int, call_id: str, name: str, fragments: list[str]) -> list[str]:
    return [
        sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            },
        ),
        *[
            sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": f},
                },
            )
            for f in fragments
        ],
        anthropic_block_stop(index),
    ]


async def test_anthropic_tool_call_with_fragmented_arguments(
    tmp_path: Path, snapshot: SnapshotAssertion
) -> None:
    results: list[PromptResult] = []
    first = [
        anthropic_start(),
        *anthropic_text_block(0, ["I'll check."]),
        anthropic_block_stop(0),
        *_tool_use(1, "toolu_01", "get_weather", ["", '{"locati', 'on": "P', "ar", 'is"}']),
        *anthropic_end("tool_use", 65),
    ]

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Weather in Paris?"))

    s = await run(
        tmp_path, "anthropic", [Reply(first), Reply(anthropic_text(["I cannot check it."]))], play
    )
    assert results[0].stop_reason == "end_turn"
    follow = s.server.requests[1].body["messages"]
    assert follow[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "I'll check."},
            {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "get_weather",
                "input": {"location": "Paris"},
            },
        ],
    }
    assert follow[2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01",
                "is_error": True,
                "content": [{"type": "text", "text": unavailable_tool_text("get_weather")}],
            }
        ],
    }
    assert s.snapshot() == snapshot


async def test_anthropic_mid_stream_error_event_is_not_retried(
    tmp_path: Path, snapshot: SnapshotAssertion
) -> None:
    results: list[PromptResult] = []
    events = [
        anthropic_start(),
        *anthropic_text_block(0, ["Partial"]),
        sse(
            "error",
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ),
    ]

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    s = await run(tmp_path, "anthropic", [Reply(events, headers={"request-id": "req_42"})], play)
    error = results[0].response["error"]
    assert "overloaded" in error["message"]
    assert error["data"]["kind"] == "overloaded"
    assert len(s.server.requests) == 1  # output reached the editor: never retried
    [logged] = s.errors()
    assert logged["error"]["request_id"] == "req_42"
    assert s.snapshot() == snapshot


async def test_anthropic_429_with_retry_after_then_success(
    tmp_path: Path, snapshot: SnapshotAssertion
) -> None:
    results: list[PromptResult] = []
    limited = Reply(
        status=429,
        headers={"retry-after": "1", "request-id": "req_rl"},
        body=json.dumps(
            {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}}
        ).encode(),
    )

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    s = await run(tmp_path, "anthropic", [limited, Reply(anthropic_text(["Fine."]))], play)
    assert results[0].stop_reason == "end_turn"
    assert results[0].text() == "Fine."
    assert len(s.server.requests) == 2
    [retry] = s.errors()
    assert retry["retrying"] is True
    assert retry["retry_delay"] == 1.0  # the server's retry-after, not the backoff
    assert retry["error"]["kind"] == "rate_limited"
    assert retry["error"]["request_id"] == "req_rl"
    assert s.snapshot() == snapshot


@pytest.mark.slow
async def test_a_retry_wait_longer_than_the_idle_timeout_is_not_a_stall(tmp_path: Path) -> None:
    """The provider announces its wait before a retry; the idle watch allows it."""
    results: list[PromptResult] = []
    limited = Reply(
        status=429,
        headers={"retry-after": "1.5"},
        body=b'{"type":"error","error":{"type":"rate_limit_error","message":"Slow down"}}',
    )

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    s = await run(
        tmp_path,
        "anthropic",
        [limited, Reply(anthropic_text(["Fine."]))],
        play,
        extra=("--idle-timeout", "0.6"),
    )
    assert results[0].stop_reason == "end_turn", results[0]
    assert results[0].text() == "Fine."
    assert [e["retrying"] for e in s.errors()] == [True]


async def test_anthropic_529_overloaded_then_success(tmp_path: Path) -> None:
    config = tmp_path / "bridge.toml"
    config.write_text('[profiles.fast]\nprovider = "anthropic"\nretry_base_delay = 0.01\n')
    overloaded = Reply(
        status=529,
        body=b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
    )
    results: list[PromptResult] = []

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    s = await run(
        tmp_path,
        "anthropic",
        [overloaded, overloaded, Reply(anthropic_text(["Ok"]))],
        play,
        extra=("--config", str(config), "--profile", "fast"),
    )
    assert results[0].text() == "Ok"
    assert [e["error"]["kind"] for e in s.errors()] == ["overloaded", "overloaded"]
    assert all(e["retrying"] for e in s.errors())


async def test_anthropic_401_names_the_key_variable(
    tmp_path: Path, snapshot: SnapshotAssertion
) -> None:
    body = json.dumps(
        {
            "type": "error",
            "error": {"type": "authentication_error", "message": f"invalid x-api-key {KEY}"},
            "request_id": "req_auth",
        }
    ).encode()
    results: list[PromptResult] = []

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    s = await run(tmp_path, "anthropic", [Reply(status=401, body=body)], play)
    error = results[0].response["error"]
    assert "the API key in ANTHROPIC_API_KEY was rejected" in error["message"]
    assert error["data"]["kind"] == "auth"
    assert len(s.server.requests) == 1  # not retried
    assert s.errors()[0]["error"]["request_id"] == "req_auth"
    assert s.snapshot() == snapshot


@pytest.mark.parametrize(
    "key",
    [
        "s4hostileRAWKEY0123456789abcdefXYZ",  # no vendor shape: only its value tells
        "s4hostile+RAW/KEY=0123456789abcdef+tailPART99",  # + / = inside
    ],
)
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_key_echoed_in_an_error_body_is_redacted_everywhere(
    tmp_path: Path, provider: str, key: str
) -> None:
    # The whole key, then only its last part (a vendor that splits at a "+").
    echoed = f"invalid key {key!r}; tail {key.rsplit('+', 1)[-1]}"
    body = json.dumps({"error": {"type": "authentication_error", "message": echoed}}).encode()
    results: list[PromptResult] = []

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    record = tmp_path / "recorded.json"
    s = await run(
        tmp_path,
        provider,
        [Reply(status=401, body=body)],
        play,
        key=key,
        extra=("--record", str(record)),
    )
    error = results[0].response["error"]
    assert "was rejected" in error["message"]
    assert "[redacted]" in error["message"]  # the text is there, without the key
    assert "[redacted]" in s.errors()[0]["error"]["message"]
    recorded = record.read_text()
    assert "[redacted]" in recorded
    assert key not in recorded
    assert key.rsplit("+", 1)[-1] not in recorded
    # _assert_no_key (in `run`) checked the wire, the log and stderr.


async def test_a_key_with_a_trailing_cr_is_not_shown_in_the_header_error(
    tmp_path: Path,
) -> None:
    key = "s4hostileCRKEY0123456789abcdefXYZ\r"
    results: list[PromptResult] = []

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    s = await run(tmp_path, "anthropic", [], play, key=key)
    error = results[0].response["error"]
    assert key.strip() not in json.dumps(error)
    assert key.strip() not in s.stderr


async def test_stop_mid_stream_disconnects_and_follow_up_shows_marker(
    tmp_path: Path, snapshot: SnapshotAssertion
) -> None:
    results: list[PromptResult] = []
    streaming = Reply(
        [anthropic_start(), *anthropic_text_block(0, ["The answer", " is"])], hold=True
    )
    server_box: list[WireServer] = []

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Tell me", cancel_after=2))
        # The server saw the connection go (its keep-alive writes failed).
        server = server_box[0]
        with anyio.fail_after(10):
            await anyio.to_thread.run_sync(server.disconnected.wait)
        results.append(await prompt(client, sid, "Go on"))

    replies = [streaming, Reply(anthropic_text(["Continuing."]))]
    original = WireServer.__enter__

    def enter(self: WireServer) -> WireServer:
        server_box.append(self)
        return original(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(WireServer, "__enter__", enter)
        s = await run(tmp_path, "anthropic", replies, play)
    assert results[0].stop_reason == "cancelled"
    assert results[0].text() == "The answer is"
    follow = s.server.requests[1].body["messages"]
    assert follow[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "The answer is"}],
    }
    assert follow[2]["content"][0] == {"type": "text", "text": INTERRUPTED_NOTE}
    assert follow[2]["content"][1] == {"type": "text", "text": "Go on"}
    assert s.snapshot() == snapshot


# -- OpenAI-compatible -------------------------------------------------------------------


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
async def test_openai_reasoning_fields(tmp_path: Path, key: str) -> None:
    results: list[PromptResult] = []

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    s = await run(
        tmp_path,
        "openai",
        [Reply(openai_text(["Hel", "lo"], reasoning_key=key, reasoning=["Hm", "m"]))],
        play,
    )
    assert results[0].text("agent_thought_chunk") == "Hmm"
    assert results[0].text() == "Hello"
    request = s.server.requests[0]
    assert request.path == "/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["stream_options"] == {"include_usage": True}
    logs = s.logs()[0]
    [message] = [r for r in logs if r["type"] == "assistant/message"]
    # The window the provider knows rides along (a recording keeps it).
    assert message["usage"] == {"input_tokens": 9, "output_tokens": 5, "context_window": 128_000}


async def test_openai_plain_text(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    async def play(client: AcpClient, sid: str) -> None:
        assert (await prompt(client, sid, "Hi")).text() == "Hello world"

    s = await run(
        tmp_path,
        "openai",
        [Reply(openai_text(["Hello", " world"]))],
        play,
        extra=("--model", "gpt-test"),
    )
    assert s.snapshot() == snapshot


async def test_openai_ollama_parallel_calls_at_one_index(
    tmp_path: Path, snapshot: SnapshotAssertion
) -> None:
    calls = [
        openai_chunk({"role": "assistant", "content": ""}),
        openai_chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ]
            }
        ),
        openai_chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "get_time", "arguments": '{"tz":"CET"}'},
                    }
                ]
            }
        ),
        openai_chunk({}, "tool_calls"),
        sse(None, "[DONE]"),
    ]
    results: list[PromptResult] = []

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Weather and time?"))

    s = await run(tmp_path, "openai", [Reply(calls), Reply(openai_text(["Done."]))], play)
    follow = chat(s.server.requests[1].body)
    assert [c["id"] for c in follow[1]["tool_calls"]] == ["call_a", "call_b"]
    assert follow[1]["tool_calls"][1]["function"] == {
        "name": "get_time",
        "arguments": '{"tz":"CET"}',
    }
    assert [m["role"] for m in follow] == ["user", "assistant", "tool", "tool"]
    assert [m["tool_call_id"] for m in follow[2:]] == ["call_a", "call_b"]
    assert s.snapshot() == snapshot


async def test_openai_deepseek_reasoning_content_in_tool_turns(tmp_path: Path) -> None:
    first = [
        openai_chunk({"reasoning_content": "Need the weather."}),
        openai_chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "w", "arguments": "{}"},
                    }
                ]
            }
        ),
        openai_chunk({}, "tool_calls"),
        sse(None, "[DONE]"),
    ]

    async def play(client: AcpClient, sid: str) -> None:
        await prompt(client, sid, "Weather?")
        await prompt(client, sid, "Thanks")

    s = await run(
        tmp_path,
        "openai",
        [Reply(first), Reply(openai_text(["No tools."])), Reply(openai_text(["Welcome."]))],
        play,
    )
    in_loop = chat(s.server.requests[1].body)[1]
    assert in_loop["reasoning_content"] == "Need the weather."  # same turn: sent back
    next_turn = chat(s.server.requests[2].body)[1]
    assert "reasoning_content" not in next_turn  # an earlier turn: never


async def test_openai_cut_connection(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    results: list[PromptResult] = []
    events = [openai_chunk({"content": "Half an ans"})]

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    s = await run(tmp_path, "openai", [Reply(events, cut=True)], play)
    assert results[0].text() == "Half an ans"
    assert results[0].response["error"]["data"]["kind"] == "cut"
    assert len(s.server.requests) == 1
    assert s.snapshot() == snapshot


async def test_openai_idle_timeout(tmp_path: Path) -> None:
    results: list[PromptResult] = []

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    s = await run(
        tmp_path,
        "openai",
        [Reply([openai_chunk({"content": "Slow"})], stall=30)],
        play,
        extra=("--idle-timeout", "0.5"),
    )
    assert results[0].response["error"]["data"]["kind"] == "idle_timeout"
    logs = s.logs()[0]
    [attempt] = [r for r in logs if r["type"] == "assistant/attempt"]
    assert attempt["outcome"] == "timed_out"
    assert not [r for r in logs if r["type"] == "assistant/message"]


async def test_openai_mid_stream_error_data_event(tmp_path: Path) -> None:
    results: list[PromptResult] = []
    events = [
        openai_chunk({"content": "So"}),
        sse(None, {"error": {"message": "The server had an error", "type": "server_error"}}),
    ]

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    await run(tmp_path, "openai", [Reply(events)], play)
    error = results[0].response["error"]
    assert error["data"]["kind"] == "stream_error"
    assert "The server had an error" in error["message"]


# A server that answers the streaming request with one whole JSON chat.completion.
WHOLE_NOTE = "reading it as the whole stream"


async def test_openai_whole_json_completion_is_read_as_the_stream(tmp_path: Path) -> None:
    results: list[PromptResult] = []
    usage = {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}
    body = openai_completion({"content": "Hello world", "reasoning_content": "Hmm"}, usage=usage)

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    s = await run(tmp_path, "openai", [Reply(body=body)], play)
    assert results[0].text("agent_thought_chunk") == "Hmm"
    assert results[0].text() == "Hello world"
    assert results[0].response["result"]["stopReason"] == "end_turn"
    assert len(s.server.requests) == 1
    [message] = [r for r in s.logs()[0] if r["type"] == "assistant/message"]
    assert message["usage"] == {"input_tokens": 9, "output_tokens": 5, "context_window": 128_000}
    assert WHOLE_NOTE in s.stderr  # the debug line says what the server did


async def test_openai_whole_json_completion_with_tool_calls(tmp_path: Path) -> None:
    calls = [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
        },
        {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
    ]
    first = openai_completion({"content": "Checking.", "tool_calls": calls}, "tool_calls")
    results: list[PromptResult] = []

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Weather and time?"))

    s = await run(
        tmp_path,
        "openai",
        [Reply(body=first), Reply(body=openai_completion({"content": "Done."}))],
        play,
    )
    assert results[0].text() == "Checking.Done."
    started = [u for u in results[0].updates if u["sessionUpdate"] == "tool_call"]
    assert len(started) == 2
    follow = chat(s.server.requests[1].body)
    assert follow[1]["content"] == "Checking."
    assert [(c["id"], c["function"]) for c in follow[1]["tool_calls"]] == [
        (c["id"], c["function"]) for c in calls
    ]
    assert [m.get("tool_call_id") for m in follow[2:]] == ["call_a", "call_b"]
    assert unavailable_tool_text("get_weather") in follow[2]["content"]


async def test_openai_answer_neither_stream_nor_completion_is_refused(tmp_path: Path) -> None:
    results: list[PromptResult] = []
    replies = [
        Reply(body=b"<html>busy</html>", content_type="text/html"),
        # JSON, but not a chat.completion.
        Reply(body=b'{"status": "ok"}'),
    ]

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))
        results.append(await prompt(client, sid, "Again"))

    s = await run(tmp_path, "openai", replies, play)
    for result, content_type in zip(results, ["text/html", "application/json"], strict=True):
        error = result.response["error"]
        assert error["data"]["kind"] == "malformed"
        assert "something other than an event stream" in error["message"]
        assert content_type in error["message"]
    assert len(s.server.requests) == 2  # not retried
    assert WHOLE_NOTE not in s.stderr


async def test_model_option_and_image(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    seen: dict[str, Any] = {}

    async def play(client: AcpClient, sid: str) -> None:
        new = [m for d, m in client.transcript if d == "recv" and "result" in m][-1]
        seen["options"] = new["result"]["configOptions"]
        changed = await client.request(
            "session/set_config_option", {"sessionId": sid, "configId": "model", "value": "m2"}
        )
        seen["changed"] = changed["result"]
        image = {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}
        await client.request(
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": "What is this?"}, image]},
        )

    s = await run(
        tmp_path,
        "openai",
        [Reply(openai_text(["A dot."]))],
        play,
        extra=("--model", "m1", "--model", "m2"),
    )
    option, mode_option = seen["options"]
    assert mode_option["category"] == "mode"
    assert option["category"] == "model"
    assert option["currentValue"] == "m1"
    assert seen["changed"]["configOptions"][0]["currentValue"] == "m2"
    body = s.server.requests[0].body
    assert body["model"] == "m2"
    assert chat(body)[0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
    }
    assert s.snapshot() == snapshot


async def _image_prompt(client: AcpClient, sid: str, mime: str) -> dict[str, Any]:
    image = {"type": "image", "mimeType": mime, "data": "Qk0="}
    return await client.request(
        "session/prompt",
        {"sessionId": sid, "prompt": [{"type": "text", "text": "Look"}, image]},
    )


async def test_image_refused_for_a_model_without_vision(tmp_path: Path) -> None:
    config = tmp_path / "bridge.toml"
    config.write_text('[profiles.default]\nprovider = "openai"\nimages = false\n')
    answers: list[dict[str, Any]] = []

    async def play(client: AcpClient, sid: str) -> None:
        answers.append(await _image_prompt(client, sid, "image/png"))

    s = await run(tmp_path, "openai", [], play, extra=("--config", str(config)))
    error = answers[0]["error"]
    assert error["code"] == -32602
    assert "prompt[1]" in error["message"]
    assert "does not take images" in error["message"]
    assert s.server.requests == []


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_an_image_type_no_provider_takes_is_refused_where_it_arrives(
    tmp_path: Path, provider: str
) -> None:
    """-32602 naming the field, before any request: not a provider's 400 at the next one."""
    answers: list[dict[str, Any]] = []

    async def play(client: AcpClient, sid: str) -> None:
        for mime in ("image/bmp", "image/svg+xml"):
            answers.append(await _image_prompt(client, sid, mime))

    s = await run(tmp_path, provider, [], play)
    for answer, mime in zip(answers, ("image/bmp", "image/svg+xml"), strict=True):
        error = answer["error"]
        assert error["code"] == -32602
        assert error["data"]["field"] == "prompt[1].mimeType"
        assert mime in error["message"]
    assert s.server.requests == []


async def test_anthropic_context_length_rejection(tmp_path: Path) -> None:
    body = json.dumps(
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 210000 tokens > 200000 maximum",
            },
        }
    ).encode()
    answers: list[PromptResult] = []

    async def play(client: AcpClient, sid: str) -> None:
        answers.append(await prompt(client, sid, "Hi"))

    s = await run(tmp_path, "anthropic", [Reply(status=400, body=body)], play)
    error = answers[0].response["error"]
    assert error["data"]["kind"] == "context_length"
    assert "start a new session" in error["message"]
    assert len(s.server.requests) == 1


async def test_thinking_cut_before_its_signature_is_never_sent_back(
    tmp_path: Path, snapshot: SnapshotAssertion
) -> None:
    thinking = [
        anthropic_start(),
        sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
        ),
        sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "Let me"},
            },
        ),
    ]
    results: list[PromptResult] = []

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Think hard", cancel_after=1))
        results.append(await prompt(client, sid, "Never mind"))

    s = await run(
        tmp_path,
        "anthropic",
        [Reply(thinking, hold=True), Reply(anthropic_text(["Ok."]))],
        play,
        extra=("--thinking-budget", "2000"),
    )
    assert results[0].stop_reason == "cancelled"
    assert results[0].text("agent_thought_chunk") == "Let me"
    # The log keeps the thought the user saw (invariant I2) ...
    [interrupted] = [m for m in s.logs()[0] if m["type"] == "assistant/message"][:1]
    assert interrupted["content"] == [{"type": "reasoning", "text": "Let me"}]
    # ... but the API never gets unsigned thinking: no assistant turn at all here.
    follow = s.server.requests[1].body["messages"]
    assert "thinking" not in json.dumps(follow)
    assert follow == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Think hard"},
                {"type": "text", "text": INTERRUPTED_NOTE},
                {"type": "text", "text": "Never mind"},
            ],
        }
    ]
    assert s.snapshot() == snapshot


async def test_set_config_option_answers_every_option(tmp_path: Path) -> None:
    """Both the model and the mode answer with the full list (some clients replace
    their state with it): two ``select`` options with their categories, valid
    for the TypeScript SDK's schema."""
    answers: list[dict[str, Any]] = []

    async def play(client: AcpClient, sid: str) -> None:
        for config_id, value in (("model", "m2"), ("mode", "read_only")):
            answer = await client.request(
                "session/set_config_option",
                {"sessionId": sid, "configId": config_id, "value": value},
            )
            answers.append(answer["result"])

    await run(tmp_path, "openai", [], play, extra=("--model", "m1", "--model", "m2"))
    ts_schema = load_pinned_sdk_schema()
    assert ts_schema is not None
    for answer in answers:
        assert ts_schema.errors("SetSessionConfigOptionResponse", answer) == []
        options = {o["id"]: o for o in answer["configOptions"]}
        assert list(options) == ["model", "mode"]
        assert {o["type"] for o in options.values()} == {"select"}
        assert (options["model"]["category"], options["mode"]["category"]) == ("model", "mode")
    assert answers[0]["configOptions"][0]["currentValue"] == "m2"
    assert [o["currentValue"] for o in answers[1]["configOptions"]] == ["m2", "read_only"]


async def test_model_command_switches_the_model(tmp_path: Path) -> None:
    results: list[PromptResult] = []

    async def play(client: AcpClient, sid: str) -> None:
        for text in ("/model", "/model m2", "/model m9", "Hello"):
            results.append(await prompt(client, sid, text))

    s = await run(
        tmp_path,
        "openai",
        [Reply(openai_text(["Hi."]))],
        play,
        extra=("--model", "m1", "--model", "m2"),
    )
    shown, switched, unknown, hello = results
    assert shown.text() == "Model: m1. Also available: m2 (`/model NAME` switches)."
    assert switched.text().startswith("Switched the model from m1 to m2")
    (update,) = [u for u in switched.updates if u["sessionUpdate"] == "config_option_update"]
    assert update["configOptions"][0]["currentValue"] == "m2"
    assert unknown.text() == "No model 'm9' in this setup; the models it offers: m1, m2."
    assert all(r.stop_reason == "end_turn" for r in results)
    # Only the prompt reached the provider, with the model /model chose.
    (request,) = s.server.requests
    assert request.body["model"] == "m2"
    assert hello.text() == "Hi."
