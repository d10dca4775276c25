"""The model's context through the real subprocess, against the loopback vendor servers.

Both wire formats (Anthropic Messages, OpenAI-compatible Chat Completions):
the system prompt each request carries (the session's cwd, the user's and the
project's instruction files, read again when the session is loaded), the
``usage_update`` after every model response (the request's own input plus
output tokens, the configured or discovered window, the cost so far), and a
window an OpenAI-compatible server lists in ``/models``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_schema import load_acp_schema, load_pinned_sdk_schema
from provider_server import (
    Reply,
    WireServer,
    anthropic_block_stop,
    anthropic_end,
    anthropic_start,
    anthropic_text,
    openai_chunk,
    openai_text,
    sse,
)
from support.bridge import running_bridge

from acp_bridge.client import AcpClient, bridge_command
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records

pytestmark = pytest.mark.anyio

KEY = "sk-test-context-0123456789"
# The newest stable ACP schema (it has compaction_update).


@dataclass
class Ran:
    client: AcpClient
    server: WireServer
    state: Path

    def logs(self) -> list[list[dict[str, Any]]]:
        return [read_records(p) for p in sorted((self.state / "sessions").glob("*.jsonl"))]

    def system(self, index: int) -> str:
        """The system prompt of the server's ``index``-th request."""
        body = self.server.requests[index].body
        if "system" in body:
            return str(body["system"])
        first = body["messages"][0]
        assert first["role"] == "system"
        return str(first["content"])

    def usage(self) -> list[dict[str, Any]]:
        return [u for u in self.client.updates if u.get("sessionUpdate") == "usage_update"]


Play = Callable[[AcpClient, "Ran"], Awaitable[None]]


async def run(
    tmp_path: Path,
    provider: str,
    replies: list[Reply],
    play: Play,
    *,
    extra: tuple[str, ...] = (),
    models: list[dict[str, Any]] | None = None,
    capabilities: dict[str, Any] | None = None,
) -> Ran:
    """Run the bridge against a `WireServer` of ``replies`` and play the editor.

    Every frame is checked against the ACP schema: the newest stable one for a
    client that opted in to compaction updates, which the older one lacks."""
    state = tmp_path / "state"
    env = dict(os.environ)
    env["ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"] = KEY
    env["ACP_BRIDGE_CONFIG_DIR"] = str(tmp_path / "config")
    with WireServer(replies) as server:
        server.models = models
        command = bridge_command(
            "--provider",
            provider,
            "--base-url",
            server.url,
            "--state-dir",
            str(state),
            *extra,
        )
        async with running_bridge(command, env=env, stderr=tmp_path / "stderr.txt") as client:
            ran = Ran(client, server, state)
            with anyio.fail_after(30):
                await client.initialize(capabilities)
                await play(client, ran)
            await client.finish(within=15)
    for log in ran.logs():
        check_log(log)
    opted = bool(((capabilities or {}).get("session") or {}).get("compaction") is not None)
    schema = load_pinned_sdk_schema() if opted else load_acp_schema()
    assert schema is not None
    schema.check_transcript(client.transcript)
    return ran


def project(tmp_path: Path) -> Path:
    """A repository with an AGENTS.md at its root and the session's cwd below it."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "AGENTS.md").write_text("Use tabs, never spaces.\n")
    cwd = root / "app"
    cwd.mkdir()
    (cwd / "CLAUDE.md").write_text("The app is written in Go.\n")
    config = tmp_path / "config"
    config.mkdir()
    (config / "AGENTS.md").write_text("Call me Ada.\n")
    return cwd


def anthropic_tool_call(call_id: str, path: str) -> list[str]:
    return [
        anthropic_start(input_tokens=40),
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
                "delta": {"type": "input_json_delta", "partial_json": f'{{"path": "{path}"}}'},
            },
        ),
        anthropic_block_stop(0),
        *anthropic_end("tool_use", output_tokens=12),
    ]


def openai_tool_call(call_id: str, path: str) -> list[str]:
    call = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": "read_file", "arguments": f'{{"path": "{path}"}}'},
    }
    return [
        openai_chunk({"role": "assistant", "tool_calls": [call]}),
        openai_chunk({}, "tool_calls"),
        openai_chunk({}, usage={"prompt_tokens": 40, "completion_tokens": 12}),
        sse(None, "[DONE]"),
    ]


def reply(provider: str, text: str) -> Reply:
    return Reply(anthropic_text([text]) if provider == "anthropic" else openai_text([text]))


def tool_reply(provider: str, call_id: str, path: str) -> Reply:
    if provider == "anthropic":
        return Reply(anthropic_tool_call(call_id, path))
    return Reply(openai_tool_call(call_id, path))


def answer_reads(client: AcpClient, content: str) -> None:
    async def read(params: dict[str, Any]) -> dict[str, Any]:
        return {"content": content}

    client.handlers["fs/read_text_file"] = read


FS = {"fs": {"readTextFile": True, "writeTextFile": False}}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_every_request_carries_the_system_prompt(tmp_path: Path, provider: str) -> None:
    cwd = project(tmp_path)
    session: dict[str, str] = {}

    async def play(client: AcpClient, ran: Ran) -> None:
        sid = await client.new_session(str(cwd))
        session["id"] = sid
        result = await client.prompt(sid, "Hello")
        assert result.stop_reason == "end_turn"
        # Edited instructions are read again when the session is loaded.
        (cwd.parent / "AGENTS.md").write_text("Use spaces, never tabs.\n")
        loaded = await client.request(
            "session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []}
        )
        assert "result" in loaded, loaded
        result = await client.prompt(sid, "Again")
        assert result.stop_reason == "end_turn"

    ran = await run(
        tmp_path, provider, [reply(provider, "Hi."), reply(provider, "Hi again.")], play
    )
    first, second = ran.system(0), ran.system(1)
    assert first.startswith("You are acp-bridge, a coding agent.")
    assert f"- Working directory: {cwd}" in first
    for name in ("Operating system:", "Shell:", "Today's date:"):
        assert name in first
    # The user's file, then the project's from the repository root down to the cwd.
    ada = first.index("Call me Ada.")
    tabs = first.index("Use tabs, never spaces.")
    go = first.index("The app is written in Go.")
    assert ada < tabs < go
    assert f"## {cwd.parent / 'AGENTS.md'} (the project's instructions)" in first
    assert f"## {tmp_path / 'config' / 'AGENTS.md'} (the user's own instructions)" in first
    assert "Use spaces, never tabs." in second
    assert "Use tabs" not in second
    # The history itself holds no system prompt (the provider sends it apart).
    history = [m for m in ran.server.requests[1].body["messages"] if m["role"] != "system"]
    assert "Call me Ada." not in json.dumps(history)


async def test_system_mode_replace(tmp_path: Path) -> None:
    cwd = project(tmp_path)
    system = tmp_path / "system.md"
    system.write_text("You are a terse assistant.")

    async def play(client: AcpClient, ran: Ran) -> None:
        sid = await client.new_session(str(cwd))
        await client.prompt(sid, "Hello")

    ran = await run(
        tmp_path,
        "openai",
        [reply("openai", "Hi.")],
        play,
        extra=("--system", str(system), "--system-mode", "replace"),
    )
    prompt = ran.system(0)
    assert prompt.startswith("You are a terse assistant.")
    assert "You are acp-bridge" not in prompt
    assert "Use tabs, never spaces." in prompt


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_usage_update_after_every_response(tmp_path: Path, provider: str) -> None:
    config = tmp_path / "acp.toml"
    config.write_text(
        "[profiles.default]\n"
        f'provider = "{provider}"\n'
        'model = "m1"\n'
        "[profiles.default.prices]\n"
        'm1 = { input = 2.0, output = 10.0, currency = "EUR" }\n'
    )

    async def play(client: AcpClient, ran: Ran) -> None:
        answer_reads(client, "hello")
        sid = await client.new_session(str(tmp_path))
        result = await client.prompt(sid, "Read a.txt")
        assert result.stop_reason == "end_turn"

    ran = await run(
        tmp_path,
        provider,
        [tool_reply(provider, "call_1", "a.txt"), reply(provider, "It says hello.")],
        play,
        extra=("--config", str(config), "--context-window", "50000"),
    )
    input_tokens, output_tokens = (25, 6) if provider == "anthropic" else (9, 5)
    # One per model response, each of its own request (never a running sum).
    costs = [(40 * 2.0 + 12 * 10.0) / 1e6]
    costs.append(costs[0] + (input_tokens * 2.0 + output_tokens * 10.0) / 1e6)
    assert ran.usage() == [
        {
            "sessionUpdate": "usage_update",
            "used": 52,
            "size": 50_000,
            "cost": {"amount": pytest.approx(costs[0]), "currency": "EUR"},
        },
        {
            "sessionUpdate": "usage_update",
            "used": input_tokens + output_tokens,
            "size": 50_000,
            "cost": {"amount": pytest.approx(costs[1]), "currency": "EUR"},
        },
    ]
    logged = [r for r in ran.logs()[0] if r["type"] == "usage/update"]
    assert [(r["used"], r["size"]) for r in logged] == [
        (52, 50_000),
        (31 if provider == "anthropic" else 14, 50_000),
    ]


async def test_the_window_an_openai_compatible_server_lists(tmp_path: Path) -> None:
    async def play(client: AcpClient, ran: Ran) -> None:
        for _ in range(2):  # two sessions: the server is asked once
            sid = await client.new_session(str(tmp_path))
            await client.prompt(sid, "Hi")

    ran = await run(
        tmp_path,
        "openai",
        [reply("openai", "One."), reply("openai", "Two.")],
        play,
        extra=("--model", "local-model"),
        models=[
            {"id": "other", "max_model_len": 1},
            {"id": "local-model", "max_model_len": 12_345},
        ],
    )
    assert [u["size"] for u in ran.usage()] == [12_345, 12_345]
    assert ran.server.gets == ["/models"]


async def test_a_known_model_s_window(tmp_path: Path) -> None:
    async def play(client: AcpClient, ran: Ran) -> None:
        sid = await client.new_session(str(tmp_path))
        await client.prompt(sid, "Hi")

    ran = await run(
        tmp_path,
        "anthropic",
        [reply("anthropic", "One.")],
        play,
        extra=("--model", "claude-sonnet-4-5"),
    )
    assert [u["size"] for u in ran.usage()] == [200_000]
    assert ran.server.gets == []  # Anthropic is never asked


async def test_an_unreadable_system_file_is_reported_at_session_new(tmp_path: Path) -> None:
    """With the keyless provider too: the editor is told why, the agent keeps serving."""
    missing = tmp_path / "nope.md"
    command = bridge_command(
        "--provider", "fake", "--system", str(missing), "--state-dir", str(tmp_path / "state")
    )
    async with running_bridge(command, stderr=tmp_path / "stderr.txt") as client:
        with anyio.fail_after(30):
            await client.initialize()
            answer = await client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        assert await client.finish(within=15) == 2
    error = answer["error"]
    assert error["data"]["kind"] == "startup"
    assert f"cannot read the system prompt file {missing}" in error["message"]
