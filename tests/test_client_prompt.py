"""The editor's system prompt (ACP's ``systemPrompt``), through the real subprocess.

Against a loopback OpenAI-compatible server, so the test reads the system
prompt each model request carries: ``append`` adds the editor's text to the
bridge's own prompt, ``override`` replaces the bridge's instructions (the
environment and the project's instruction files stay); what the editor sent is
kept in the log, so a load or resume without ``systemPrompt`` keeps it and one
with a new value replaces it; a fork takes it along; a mode or a block the
bridge cannot use is refused before any session is created or changed.  Every
frame is checked against the unstable schema of ACP's TypeScript SDK 2.4.0,
where ``systemPrompt`` is defined.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_schema import load_pinned_sdk_unstable_schema
from provider_server import Reply, WireServer, openai_chunk, openai_text, sse
from support.bridge import running_bridge

from acp_bridge.client import AcpClient, bridge_command
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records

pytestmark = pytest.mark.anyio

KEY = "sk-test-client-prompt-0123456789"
INTRO = "You are acp-bridge, a coding agent."


def said(mode: str, *texts: str) -> dict[str, Any]:
    return {"mode": mode, "content": [{"type": "text", "text": t} for t in texts]}


class Ran:
    def __init__(self, client: AcpClient, server: WireServer, state: Path) -> None:
        self.client, self.server, self.state = client, server, state

    def system(self, index: int) -> str:
        """The system prompt of the server's ``index``-th model request."""
        first = self.server.requests[index].body["messages"][0]
        assert first["role"] == "system"
        return str(first["content"])

    def logs(self) -> dict[str, list[dict[str, Any]]]:
        paths = sorted((self.state / "sessions").glob("*.jsonl"))
        return {p.stem: read_records(p) for p in paths}


async def run(
    tmp_path: Path, replies: int, play: Callable[[AcpClient, Ran], Awaitable[None]]
) -> Ran:
    state = tmp_path / "state"
    env = {**os.environ, "OPENAI_API_KEY": KEY, "ACP_BRIDGE_CONFIG_DIR": str(tmp_path / "cfg")}
    with WireServer([Reply(openai_text([f"Reply {i}."])) for i in range(replies)]) as server:
        command = bridge_command(
            "--provider", "openai", "--base-url", server.url, "--state-dir", str(state)
        )
        async with running_bridge(command, env=env, stderr=tmp_path / "stderr.txt") as client:
            ran = Ran(client, server, state)
            with anyio.fail_after(60):
                await client.initialize()
                await play(client, ran)
            assert await client.finish(within=15) == 0
    for records in ran.logs().values():
        check_log(records)
    load_pinned_sdk_unstable_schema().check_transcript(client.transcript)
    return ran


def project(tmp_path: Path) -> Path:
    cwd = tmp_path / "project"
    cwd.mkdir()
    (cwd / "AGENTS.md").write_text("Use tabs, never spaces.\n")
    return cwd


async def new_session(client: AcpClient, cwd: Path, prompt: dict[str, Any] | None) -> str:
    params: dict[str, Any] = {"cwd": str(cwd), "mcpServers": []}
    if prompt is not None:
        params["systemPrompt"] = prompt
    answer = await client.request("session/new", params)
    return str(answer["result"]["sessionId"])


async def test_the_capability_is_advertised(tmp_path: Path) -> None:
    async def play(client: AcpClient, ran: Ran) -> None:
        init = client.transcript[1][1]["result"]
        capability = init["agentCapabilities"]["sessionCapabilities"]["systemPrompt"]
        assert capability == {"mode": {"override": {}}}

    await run(tmp_path, 0, play)


async def test_append_override_and_what_a_load_resume_and_fork_keep(tmp_path: Path) -> None:
    cwd = project(tmp_path)
    ids: dict[str, str] = {}

    async def play(client: AcpClient, ran: Ran) -> None:
        sid = ids["a"] = await new_session(
            client, cwd, said("append", "Answer in French.", "Be brief.")
        )
        assert (await client.prompt(sid, "Hi")).stop_reason == "end_turn"
        first = ran.system(0)
        assert first.startswith(INTRO)  # the bridge's own prompt is there...
        assert "Answer in French.\n\nBe brief." in first  # ...and the editor's after it
        assert "Use tabs, never spaces." in first  # the project's instructions stay
        assert first.index("Be brief.") < first.index("Use tabs")

        # A load without systemPrompt keeps it.
        loaded = await client.request(
            "session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []}
        )
        assert "result" in loaded, loaded
        assert (await client.prompt(sid, "Again")).stop_reason == "end_turn"
        assert "Answer in French." in ran.system(1)

        # A resume with a new one replaces it from the next request on.
        resumed = await client.request(
            "session/resume",
            {
                "sessionId": sid,
                "cwd": str(cwd),
                "systemPrompt": said("override", "You are Zed's helper."),
            },
        )
        assert "result" in resumed, resumed
        assert (await client.prompt(sid, "Once more")).stop_reason == "end_turn"
        third = ran.system(2)
        assert third.startswith("You are Zed's helper.")
        assert INTRO not in third
        assert "Answer in French." not in third
        assert str(cwd) in third  # the environment stays
        assert "Use tabs, never spaces." in third

        # A fork takes the one in force along.
        fork = await client.request(
            "session/fork", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []}
        )
        forked = ids["fork"] = fork["result"]["sessionId"]
        assert (await client.prompt(forked, "Forked")).stop_reason == "end_turn"
        assert ran.system(3).startswith("You are Zed's helper.")

        # A session without one has the bridge's prompt alone.
        plain = await new_session(client, cwd, None)
        assert (await client.prompt(plain, "Plain")).stop_reason == "end_turn"
        assert ran.system(4).startswith(INTRO)
        assert "Zed's helper" not in ran.system(4)
        assert "French" not in ran.system(4)

    ran = await run(tmp_path, 5, play)
    logs = ran.logs()
    kept = [r for r in logs[ids["a"]] if r["type"] == "session/system_prompt"]
    assert [(r["mode"], r["content"][0]["text"]) for r in kept] == [
        ("append", "Answer in French."),
        ("override", "You are Zed's helper."),
    ]
    forked = [r for r in logs[ids["fork"]] if r["type"] == "session/system_prompt"]
    assert forked[-1]["mode"] == "override"  # the last one counts

    with anyio.fail_after(60):
        shown = await anyio.run_process(
            [sys.executable, "-m", "acp_bridge", "show", ids["a"], "--state-dir", str(ran.state)]
        )
    out = shown.stdout.decode()
    assert 'the editor\'s system prompt (append): "Answer in French. Be brief."' in out
    assert "the editor's system prompt (override): \"You are Zed's helper.\"" in out


@pytest.mark.parametrize(
    ("prompt", "field"),
    [
        ({"mode": "prepend", "content": [{"type": "text", "text": "x"}]}, "systemPrompt.mode"),
        ({"mode": "append", "content": []}, "systemPrompt.content"),
        (
            {
                "mode": "append",
                "content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}],
            },
            "systemPrompt.content[0].type",
        ),
        ({"mode": "append"}, "systemPrompt.content"),
    ],
)
async def test_what_the_bridge_cannot_use_is_refused_and_changes_nothing(
    tmp_path: Path, prompt: dict[str, Any], field: str
) -> None:
    cwd = project(tmp_path)

    async def play(client: AcpClient, ran: Ran) -> None:
        refused = await client.request(
            "session/new", {"cwd": str(cwd), "mcpServers": [], "systemPrompt": prompt}
        )
        assert refused["error"]["code"] == -32602, refused
        assert field in refused["error"]["message"], refused
        assert not (ran.state / "sessions").exists() or not list(
            (ran.state / "sessions").glob("*.jsonl")
        )
        # An existing session: a resume with it is refused and the session keeps its own.
        sid = await new_session(client, cwd, said("append", "Keep me."))
        again = await client.request(
            "session/resume", {"sessionId": sid, "cwd": str(cwd), "systemPrompt": prompt}
        )
        assert again["error"]["code"] == -32602, again
        forked = await client.request(
            "session/fork",
            {"sessionId": sid, "cwd": str(cwd), "mcpServers": [], "systemPrompt": prompt},
        )
        assert forked["error"]["code"] == -32602, forked
        assert (await client.prompt(sid, "Hi")).stop_reason == "end_turn"
        assert "Keep me." in ran.system(0)

    ran = await run(tmp_path, 1, play)
    assert len(ran.logs()) == 1  # no fork was written


async def test_a_fork_of_an_earlier_turn_and_a_new_process_keep_the_one_in_force(
    tmp_path: Path,
) -> None:
    """The prompt given after the turns a fork copies still goes with the fork, and a
    load in a new process (the log read back) keeps the one in force."""
    cwd = project(tmp_path)
    ids: dict[str, str] = {}

    async def first(client: AcpClient, ran: Ran) -> None:
        sid = ids["a"] = await new_session(client, cwd, said("append", "Answer in French."))
        for text in ("One", "Two"):
            assert (await client.prompt(sid, text)).stop_reason == "end_turn"
        resumed = await client.request(
            "session/resume",
            {"sessionId": sid, "cwd": str(cwd), "systemPrompt": said("override", "Be Zed.")},
        )
        assert "result" in resumed, resumed
        fork = await client.request("_acp-bridge/fork_at_turn", {"sessionId": sid, "turn": 1})
        forked = fork["result"]["sessionId"]
        assert (await client.prompt(forked, "Forked")).stop_reason == "end_turn"
        assert ran.system(2).startswith("Be Zed.")

    await run(tmp_path, 3, first)

    async def second(client: AcpClient, ran: Ran) -> None:
        loaded = await client.request(
            "session/load", {"sessionId": ids["a"], "cwd": str(cwd), "mcpServers": []}
        )
        assert "result" in loaded, loaded
        assert (await client.prompt(ids["a"], "Three")).stop_reason == "end_turn"
        assert ran.system(0).startswith("Be Zed.")
        assert "French" not in ran.system(0)

    await run(tmp_path, 1, second)


def openai_task_call(call_id: str, prompt: str) -> list[str]:
    arguments = json.dumps({"description": "Look around", "prompt": prompt})
    call = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": "task", "arguments": arguments},
    }
    return [
        openai_chunk({"role": "assistant", "tool_calls": [call]}),
        openai_chunk({}, "tool_calls"),
        openai_chunk({}, usage={"prompt_tokens": 40, "completion_tokens": 12}),
        sse(None, "[DONE]"),
    ]


@pytest.mark.parametrize("mode", ["append", "override"])
async def test_a_subagent_obeys_the_editors_system_prompt(tmp_path: Path, mode: str) -> None:
    """A subagent's requests carry the system prompt the editor gave its parent
    (append or override: the child obeys the same editor), and the child's log
    keeps it, so a load of the child by its id keeps it too."""
    cwd = project(tmp_path)
    state = tmp_path / "state"
    env = {**os.environ, "OPENAI_API_KEY": KEY, "ACP_BRIDGE_CONFIG_DIR": str(tmp_path / "cfg")}
    replies = [
        Reply(openai_task_call("call_1", "Count the files.")),
        Reply(openai_text(["Three."])),
        Reply(openai_text(["Done."])),
    ]
    with WireServer(replies) as server:
        command = bridge_command(
            "--provider", "openai", "--base-url", server.url, "--state-dir", str(state)
        )
        async with running_bridge(command, env=env, stderr=tmp_path / "stderr.txt") as client:
            ran = Ran(client, server, state)
            with anyio.fail_after(60):
                await client.initialize()
                sid = await new_session(client, cwd, said(mode, "Answer in French."))
                assert (await client.prompt(sid, "How many?")).stop_reason == "end_turn"
            assert await client.finish(within=15) == 0
    parent, child = ran.system(0), ran.system(1)
    assert "Answer in French." in child
    assert "Use tabs, never spaces." in child  # the project's instructions stay
    assert child.startswith(INTRO) == (mode == "append") == parent.startswith(INTRO)
    logs = ran.logs()
    for records in logs.values():
        check_log(records)
    (kid,) = [k for k in logs if k != sid]
    kept = [r for r in logs[kid] if r["type"] == "session/system_prompt"]
    assert [(r["mode"], r["content"][0]["text"]) for r in kept] == [(mode, "Answer in French.")]
