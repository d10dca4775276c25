"""The bridge's secrets never reach a command or a tool result (invariant I7).

Through the real subprocess: ``run_command env`` shows every secret variable
of the bridge's environment set empty, except those let through with
``--pass-env`` or ``ACP_BRIDGE_PASS_ENV``; a secret in a file of the
workspace, read with ``read_file`` or found with ``search_text``, comes back
``[redacted]`` in the result the model gets, in the editor's
``tool_call_update`` and in the session log, and the provider's key does too
whatever its variable is called.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import anyio
import pytest
from provider_server import Reply, WireServer, openai_chunk, openai_text, sse
from support.bridge import running_bridge
from support.harness import report, tool_call
from test_tools import REPORT, Played
from test_tools import play as play_in_either_mode
from workspace_editor import FULL_CAPABILITIES, WorkspaceEditor

from acp_bridge.client import AcpClient, PromptResult, bridge_command
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records

# Every test of this file runs the real command: the secrets are its environment's.
play = functools.partial(play_in_either_mode, mode="subprocess")

pytestmark = pytest.mark.anyio

# Each a secret by its name (or, for DATABASE_URL, by its value).
SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMIplantedK7MDENGbPxRfiCY",
    "STRIPE_SECRET_KEY": "rk_live_planted0123456789",
    "DB_PASSWORD": "planted-db-password",
    "SECRET": "planted-plain-secret",
    "NPM_AUTH": "planted-npm-auth-value",
    "DATABASE_URL": "postgres://app:planted-url-password@db:5432/app",
    "openai_api_key": "planted-lowercase-key",
}
# Secrets by name too, but let through: one by flag, one by variable.
PASSED = {"GITHUB_TOKEN": "ghp_planted_passed_by_flag", "HF_TOKEN": "hf_planted_passed_by_env"}
PASS_FLAG = ("--pass-env", "GITHUB_TOKEN,UNSET_TOKEN")


def plant(monkeypatch: pytest.MonkeyPatch) -> None:
    """In the test's environment, which the bridge and the editor's terminals inherit."""
    for name, value in {**SECRETS, **PASSED}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ACP_BRIDGE_PASS_ENV", "HF_TOKEN")


def everything_written(played: Played) -> str:
    """The session logs, stderr and every message the bridge sent."""
    run = played.run
    logs = "".join(p.read_text() for p in (run.state_dir / "sessions").glob("*.jsonl"))
    sent = [m for d, m in run.client.transcript if d == "recv"]
    return logs + run.stderr + json.dumps(sent)


async def test_run_command_sees_no_secret_but_those_let_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(monkeypatch)
    script = {
        "responses": [{"events": [tool_call("call_1", "run_command", command="env")]}, REPORT]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        return [await client.prompt(sid, "Run env")]

    played = await play(tmp_path, script, turns, extra=PASS_FLAG, stderr=tmp_path / "err")
    (result,) = report(played.results[0])["tool_results"]
    lines = result["text"].splitlines()
    assert "[exit code 0]" in lines
    for name, value in SECRETS.items():
        # Set empty for the command (not merely redacted from what it printed).
        assert f"{name}=" in lines, name
        assert value not in result["text"]
    for name, value in PASSED.items():
        assert f"{name}={value}" in lines, name
    (create,) = [p for m, p in played.editor.calls if m == "terminal/create"]
    hidden = {v["name"] for v in create["env"]}
    assert set(SECRETS) <= hidden
    assert not hidden & set(PASSED)
    written = everything_written(played)
    for value in SECRETS.values():
        assert value not in written


async def test_a_bad_name_in_the_pass_env_variable_is_skipped_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_planted_passed_by_env")
    monkeypatch.setenv("ACP_BRIDGE_PASS_ENV", "9LIVES, GITHUB_TOKEN")
    script = {
        "responses": [
            {"events": [tool_call("call_1", "run_command", command="echo $GITHUB_TOKEN")]},
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        return [await client.prompt(sid, "Run it")]

    played = await play(tmp_path, script, turns, stderr=tmp_path / "err")
    (result,) = report(played.results[0])["tool_results"]
    assert "ghp_planted_passed_by_env" in result["text"]
    assert "ACP_BRIDGE_PASS_ENV: '9LIVES' is not an environment variable name" in (
        played.run.stderr
    )


async def test_a_secret_in_a_file_is_redacted_from_every_tool_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(monkeypatch)
    secret = SECRETS["STRIPE_SECRET_KEY"]
    url_password = "planted-url-password"
    files = {
        "config.txt": f"stripe = {secret}\ndb = {url_password}\nplain = kept\n",
        # What a link to /proc/self/environ gave before: the environment, NUL-separated.
        "environ.txt": "\0".join(f"{k}={v}" for k, v in os.environ.items()),
    }
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "read_file", path="config.txt"),
                    tool_call("call_2", "search_text", pattern="stripe|db|plain", glob="conf*"),
                    tool_call("call_3", "read_file", path="environ.txt"),
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        return [await client.prompt(sid, "Read the config")]

    played = await play(
        tmp_path, script, turns, files=files, extra=PASS_FLAG, stderr=tmp_path / "err"
    )
    (result,) = played.results
    read, search, environ = report(result)["tool_results"]
    assert read["text"] == "stripe = [redacted]\ndb = [redacted]\nplain = kept\n"
    config = played.workspace / "config.txt"
    assert search["text"].splitlines() == [
        f"{config}:1: stripe = [redacted]",
        f"{config}:2: db = [redacted]",
        f"{config}:3: plain = kept",
    ]
    variables = environ["text"].split("\0")
    for name in SECRETS:
        assert f"{name}=[redacted]" in variables, name
    for name, value in PASSED.items():
        assert f"{name}={value}" in variables, name
    # What the editor was shown as each call's result.
    finals = [u for u in played.tool_updates(result) if u.get("status") == "completed"]
    shown = [u["content"][-1]["content"]["text"] for u in finals]
    assert shown == [read["text"], search["text"], environ["text"]]
    written = everything_written(played)
    for value in [*SECRETS.values(), url_password]:
        assert value not in written


# -- the provider's key, whatever its variable is called -------------------------------

KEY = "planted-provider-key-0123456789"


def _openai_tool_call(call_id: str, name: str, arguments: dict[str, str]) -> list[str]:
    call = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return [
        openai_chunk({"role": "assistant", "content": ""}),
        openai_chunk({"tool_calls": [call]}),
        openai_chunk({}, "tool_calls"),
        sse(None, "[DONE]"),
    ]


async def test_the_provider_key_is_redacted_from_tool_results(tmp_path: Path) -> None:
    """--api-key-env names a variable that looks like no secret: its value is
    still kept from the model (the next request), the editor and the log."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text(f"the key is {KEY}\n")
    state = tmp_path / "state"
    stderr = tmp_path / "stderr.txt"
    env = {**os.environ, "LLM_SERVICE": KEY}
    replies = [
        Reply(_openai_tool_call("call_a", "read_file", {"path": "notes.txt"})),
        Reply(openai_text(["Read."])),
    ]
    with WireServer(replies) as server:
        command = bridge_command(
            "--provider", "openai", "--base-url", server.url, "--api-key-env", "LLM_SERVICE",
            "--model", "m", "--state-dir", str(state), "--log-level", "debug",
        )  # fmt: skip
        async with running_bridge(command, env=env, stderr=stderr) as client:
            with anyio.fail_after(30):
                await client.initialize()
                sid = await client.new_session(str(workspace))
                result = await client.prompt(sid, "Read my notes")
            assert await client.finish(within=15) == 0
    assert result.stop_reason == "end_turn"
    # The key went only into the auth header.
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    tool_message = server.requests[1].body["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "the key is [redacted]" in json.dumps(tool_message)
    (log,) = (state / "sessions").glob("*.jsonl")
    check_log(read_records(log))
    bodies = json.dumps([r.body for r in server.requests])
    for text in (log.read_text(), stderr.read_text(), json.dumps(client.transcript), bodies):
        assert KEY not in text


async def test_the_provider_key_variable_is_empty_for_commands(tmp_path: Path) -> None:
    """The provider declares the variable of its key (`Provider.key_env`), here one
    that looks like no secret: a command the model runs sees it set empty."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    editor = WorkspaceEditor(workspace)
    editor.permission_answers = ["allow_once"]
    env = {**os.environ, "LLM_SERVICE": KEY}
    command = 'echo "key=[$LLM_SERVICE]"'
    replies = [
        Reply(_openai_tool_call("call_a", "run_command", {"command": command})),
        Reply(openai_text(["Ran."])),
    ]
    with WireServer(replies) as server:
        bridge = bridge_command(
            "--provider", "openai", "--base-url", server.url, "--api-key-env", "LLM_SERVICE",
            "--model", "m", "--state-dir", str(tmp_path / "state"),
        )  # fmt: skip
        async with running_bridge(bridge, env=env) as client:
            with anyio.fail_after(30):
                async with anyio.create_task_group() as tg:
                    editor.install(client, tg)
                    await client.initialize(FULL_CAPABILITIES)
                    sid = await client.new_session(str(workspace))
                    result = await client.prompt(sid, "Run it")
                    editor.released.set()
                    tg.cancel_scope.cancel()
            assert await client.finish(within=15) == 0
    assert result.stop_reason == "end_turn"
    (create,) = [params for method, params in editor.calls if method == "terminal/create"]
    assert {"name": "LLM_SERVICE", "value": ""} in create["env"]
    tool_message = json.dumps(server.requests[1].body["messages"][-1])
    assert "key=[]" in tool_message, tool_message
