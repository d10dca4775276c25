"""The editor's system prompt (ACP ``systemPrompt``), through the real subprocess.

Against the loopback vendor servers, so the request each model call carries is
seen as the provider sent it: ``append`` adds the editor's text to the bridge's
own prompt, ``override`` replaces the built-in instructions (the environment
and the instruction files stay); the value is kept with the session (a
``session/system-prompt`` record), kept by a load, resume or fork without
one and replaced by one with a new value; a mode or a block the bridge cannot
use is ``-32602`` naming the field, and nothing is created or changed.  Every
frame, both ways, is checked against the unstable schema of the pinned SDK,
the one that defines these shapes.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from acp_schema import load_pinned_sdk_unstable_schema
from harness import write_script
from support.bridge import BridgeStarter
from test_context_providers import Ran, project, reply, run

from acp_bridge.client import AcpClient
from acp_bridge.log.reader import read_records
from acp_bridge.sessions_cli import print_show

pytestmark = pytest.mark.anyio


def system_prompt(mode: str, *texts: str) -> dict[str, Any]:
    return {"mode": mode, "content": [{"type": "text", "text": t} for t in texts]}


def check_frames(client: AcpClient) -> None:
    """Both ways (`run` checks the bridge's frames against the same schema)."""
    assert load_pinned_sdk_unstable_schema().sent_errors(client.transcript) == []


async def new(client: AcpClient, cwd: Path, prompt: dict[str, Any] | None) -> str:
    params: dict[str, Any] = {"cwd": str(cwd), "mcpServers": []}
    if prompt is not None:
        params["systemPrompt"] = prompt
    response = await client.request("session/new", params)
    assert "result" in response, response
    return str(response["result"]["sessionId"])


def prompt_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"mode": r["mode"], "content": r["content"]}
        for r in records
        if r["type"] == "session/system-prompt"
    ]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_append_and_override_at_system_level(tmp_path: Path, provider: str) -> None:
    cwd = project(tmp_path)
    init: dict[str, Any] = {}

    async def play(client: AcpClient, ran: Ran) -> None:
        init.update(client.transcript[1][1]["result"])
        one = await new(client, cwd, system_prompt("append", "Answer in haiku.", "Be kind."))
        assert (await client.prompt(one, "Hello")).stop_reason == "end_turn"
        two = await new(client, cwd, system_prompt("override", "You review diffs, nothing else."))
        assert (await client.prompt(two, "Hello")).stop_reason == "end_turn"
        three = await new(client, cwd, None)
        assert (await client.prompt(three, "Hello")).stop_reason == "end_turn"
        check_frames(client)

    replies = [reply(provider, "Hi.") for _ in range(3)]
    ran = await run(tmp_path, provider, replies, play, schema=load_pinned_sdk_unstable_schema())
    caps = init["agentCapabilities"]["sessionCapabilities"]
    assert caps["systemPrompt"] == {"mode": {"override": {}}}
    appended, overridden, plain = ran.system(0), ran.system(1), ran.system(2)
    # append: after the bridge's own prompt, before the instruction files.
    assert appended.startswith("You are acp-bridge, a coding agent.")
    assert "Answer in haiku.\n\nBe kind." in appended
    assert appended.index("# Environment") < appended.index("Answer in haiku.")
    assert appended.index("Answer in haiku.") < appended.index("Call me Ada.")
    # override: the built-in instructions are gone; the environment and the
    # instruction files stay.
    assert overridden.startswith("You review diffs, nothing else.")
    assert "You are acp-bridge" not in overridden
    assert "# When the user presses Stop" not in overridden
    assert f"- Working directory: {cwd}" in overridden
    assert "Use tabs, never spaces." in overridden
    assert "Call me Ada." in overridden
    # Without it, the prompt is the bridge's own, as before.
    assert "haiku" not in plain
    assert "review diffs" not in plain
    assert plain == appended.replace("\n\nAnswer in haiku.\n\nBe kind.", "")
    # Never in the history: the provider sends it at system level only.
    for request in ran.server.requests:
        history = [m for m in request.body["messages"] if m["role"] != "system"]
        assert "haiku" not in str(history)
        assert "review diffs" not in str(history)
    logs = ran.logs()
    kept = sorted((prompt_records(log) for log in logs), key=len)
    assert kept == [
        [],
        [system_prompt("append", "Answer in haiku.", "Be kind.")],
        [system_prompt("override", "You review diffs, nothing else.")],
    ] or kept == [
        [],
        [system_prompt("override", "You review diffs, nothing else.")],
        [system_prompt("append", "Answer in haiku.", "Be kind.")],
    ]
    for log in logs:
        if prompt_records(log):
            assert [r["type"] for r in log[:2]] == ["session/start", "session/system-prompt"]


async def test_load_resume_and_fork_keep_or_replace_it(tmp_path: Path) -> None:
    cwd = project(tmp_path)
    ids: dict[str, str] = {}

    async def play(client: AcpClient, ran: Ran) -> None:
        sid = ids["sid"] = await new(client, cwd, system_prompt("append", "Alpha rule."))
        await client.prompt(sid, "One")
        base = {"sessionId": sid, "cwd": str(cwd), "mcpServers": []}
        # A load without it keeps it.
        assert "result" in await client.request("session/load", base)
        await client.prompt(sid, "Two")
        # A resume with a new value replaces it from the next request on.
        beta = {**base, "systemPrompt": system_prompt("override", "Beta rule.")}
        assert "result" in await client.request("session/resume", beta)
        await client.prompt(sid, "Three")
        # The same value again records nothing new.
        assert "result" in await client.request("session/load", beta)
        # A fork without it takes the source's; one with it, its own.
        forked = await client.request("session/fork", base)
        fork = ids["fork"] = forked["result"]["sessionId"]
        await client.prompt(fork, "Four")
        gamma = {**base, "systemPrompt": system_prompt("append", "Gamma rule.")}
        forked = await client.request("session/fork", gamma)
        await client.prompt(forked["result"]["sessionId"], "Five")
        check_frames(client)

    replies = [reply("openai", "Ok.") for _ in range(5)]
    ran = await run(tmp_path, "openai", replies, play, schema=load_pinned_sdk_unstable_schema())
    systems = [ran.system(i) for i in range(5)]
    assert "Alpha rule." in systems[0]
    assert "Alpha rule." in systems[1]
    assert systems[2].startswith("Beta rule.")
    assert "Alpha" not in systems[2]
    assert systems[3].startswith("Beta rule.")
    assert "Gamma rule." in systems[4]
    assert "Beta" not in systems[4]
    state = ran.state / "sessions"
    source = read_records(state / f"{ids['sid']}.jsonl")
    assert prompt_records(source) == [
        system_prompt("append", "Alpha rule."),
        system_prompt("override", "Beta rule."),
    ]
    fork = read_records(state / f"{ids['fork']}.jsonl")
    assert prompt_records(fork)[-1] == system_prompt("override", "Beta rule.")

    # A new process loading it keeps it too (the record is read back).
    async def again(client: AcpClient, ran: Ran) -> None:
        base = {"sessionId": ids["sid"], "cwd": str(cwd), "mcpServers": []}
        assert "result" in await client.request("session/load", base)
        await client.prompt(ids["sid"], "Six")

    schema = load_pinned_sdk_unstable_schema()
    rerun = await run(tmp_path, "openai", [reply("openai", "Ok.")], again, schema=schema)
    assert rerun.system(0).startswith("Beta rule.")
    out = io.StringIO()
    assert print_show(str(ran.state), ids["sid"], out) == 0
    shown = out.getvalue()
    assert '  system prompt from the editor (append): "Alpha rule."' in shown
    assert '  system prompt from the editor (override): "Beta rule."' in shown


BAD = [
    ({"mode": "replace", "content": [{"type": "text", "text": "x"}]}, "systemPrompt.mode"),
    ({"mode": "_mine", "content": [{"type": "text", "text": "x"}]}, "systemPrompt.mode"),
    ({"content": [{"type": "text", "text": "x"}]}, "systemPrompt.mode"),
    ({"mode": "append", "content": []}, "systemPrompt.content"),
    ({"mode": "append", "content": "be brief"}, "systemPrompt.content"),
    (
        {"mode": "append", "content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]},
        "systemPrompt.content[0].type",
    ),
    ({"mode": "override", "content": [{"type": "text"}]}, "systemPrompt.content[0].text"),
    ("append", "systemPrompt"),
]


async def test_what_it_cannot_use_is_refused_and_changes_nothing(
    tmp_path: Path, bridge: BridgeStarter
) -> None:
    script = write_script(tmp_path, {"responses": [{"events": [{"text": "Ok."}]}]})
    sessions = tmp_path / "state" / "sessions"
    async with bridge(script=script) as client:
        await client.initialize()
        for value, field in BAD:
            params = {"cwd": str(tmp_path), "mcpServers": [], "systemPrompt": value}
            response = await client.request("session/new", params)
            assert response["error"]["code"] == -32602, (value, response)
            assert response["error"]["data"]["field"] == field, (value, response)
        assert not sessions.exists() or list(sessions.iterdir()) == []
        sid = await new(client, tmp_path, system_prompt("append", "Kept."))
        log = sessions / f"{sid}.jsonl"
        before = log.read_bytes()
        base = {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
        for method in ("session/load", "session/resume", "session/fork"):
            for value, field in BAD:
                response = await client.request(method, {**base, "systemPrompt": value})
                assert response["error"]["data"]["field"] == field, (method, value, response)
        assert log.read_bytes() == before
        assert [p.name for p in sessions.iterdir()] == [log.name]  # no fork written
        # Still serving, and the session keeps its prompt.
        assert "result" in await client.request("session/load", base)
        assert prompt_records(read_records(log)) == [system_prompt("append", "Kept.")]
        assert (await client.prompt(sid, "Hi")).stop_reason == "end_turn"
        # The bad frames are the test's own: only the bridge's are checked here.
        load_pinned_sdk_unstable_schema().check_transcript(client.transcript)
