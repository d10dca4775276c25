"""MCP servers through the real bridge subprocess, with small servers written
with the official ``mcp`` package (`mcp_server.py`): stdio and streamable HTTP.

Each scenario passes servers in ``session/new`` (or in the config file),
scripts the model to call their tools, and checks what the editor saw, what
the model got next (the scripted ``report``), what the log holds, and what
the server itself recorded (a cancellation it received, its exit).
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_schema import AcpSchema, load_acp_unstable_schema, load_pinned_sdk_schema
from harness import (
    Run,
    SessionSnapshot,
    coalesce_deltas,
    normalize,
    report,
    run_bridge,
    tool_call,
    wait_until,
    write_script,
)
from support.import_gate import gated_bridge_code
from syrupy.assertion import SnapshotAssertion
from workspace_editor import FULL_CAPABILITIES, WorkspaceEditor

from acp_bridge.client import AcpClient, PromptResult
from acp_bridge.log.check import check_history
from acp_bridge.log.derive import derive_messages
from acp_bridge.tools.runner import ABORTED_BEFORE_DISPATCH

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).resolve().parent / "mcp_server.py")
REPORT = {"events": [{"report": ["message_count", "tool_results"]}]}


def stdio_server(name: str, *args: str, record: Path | None = None) -> dict[str, Any]:
    argv = [SERVER, *args]
    if record is not None:
        argv += ["--record", str(record)]
    return {"name": name, "command": sys.executable, "args": argv, "env": []}


def events(record: Path) -> list[dict[str, Any]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines()]


@dataclass
class Played:
    run: Run
    session_id: str
    opened: dict[str, Any]
    results: list[PromptResult]
    editor: WorkspaceEditor
    workspace: Path

    @property
    def records(self) -> list[dict[str, Any]]:
        return self.run.logs()[self.session_id]

    def of_type(self, type: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["type"] == type]

    def updates(self, kind: str) -> list[dict[str, Any]]:
        return [
            m["params"]["update"]
            for d, m in self.run.client.transcript
            if d == "recv"
            and m.get("method") == "session/update"
            and m["params"]["update"]["sessionUpdate"] == kind
        ]

    def asked(self) -> list[dict[str, Any]]:
        return [
            m["params"]
            for d, m in self.run.client.transcript
            if d == "recv" and m.get("method") == "session/request_permission"
        ]

    def thoughts(self) -> str:
        return "".join(u["content"]["text"] for u in self.updates("agent_thought_chunk"))


Turns = Callable[[AcpClient, str, WorkspaceEditor], Awaitable[list[PromptResult]]]


async def play(
    tmp_path: Path,
    script: dict[str, Any],
    servers: list[dict[str, Any]],
    turns: Turns,
    *,
    extra: tuple[str, ...] = (),
    stderr: Path | None = None,
    finish: Callable[[AcpClient, str], Awaitable[None]] | None = None,
    capabilities: dict[str, Any] | None = None,
    command: list[str] | None = None,
) -> Played:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    editor = WorkspaceEditor(workspace)
    session: list[str] = []
    opened: dict[str, Any] = {}
    results: list[PromptResult] = []

    async def go(client: AcpClient) -> None:
        async with anyio.create_task_group() as tg:
            editor.install(client, tg)
            await client.initialize(FULL_CAPABILITIES if capabilities is None else capabilities)
            params = {"cwd": str(workspace), "mcpServers": servers}
            opened.update(await client.request("session/new", params))
            session.append(opened["result"]["sessionId"])
            results.extend(await turns(client, session[0], editor))
            if finish is not None:
                await finish(client, session[0])
            editor.released.set()
            tg.cancel_scope.cancel()

    script = {"when_exhausted": "error", **script}
    run = await run_bridge(
        write_script(tmp_path, script),
        tmp_path / "state",
        go,
        extra=("--mcp-start-timeout", "20", *extra),
        stderr=stderr,
        command=command,
    )
    return Played(run, session[0], opened, results, editor, workspace)


def check(played: Played, schema: AcpSchema) -> None:
    run = played.run
    assert run.returncode == 0
    for result in played.results:
        assert result.late == [], "I1: session/update after the prompt response"
    run.check_logs()
    check_history(derive_messages(played.records))
    schema.check_transcript(run.client.transcript)


def snap(played: Played, tmp_path: Path) -> Any:
    transcript = played.run.client.transcript
    paths = {
        str(played.workspace): "<ws>",
        str(played.run.state_dir): "<state>",
        str(tmp_path): "<tmp>",
        SERVER: "<mcp_server.py>",
        sys.executable: "<python>",
    }
    log = coalesce_deltas(played.records)
    for record in log:
        # The hashes of the schemas the mcp package generates for the test server.
        for tool in record.get("tools", ()):
            tool["schema"] = "<hash>"
    return normalize(
        {
            "agent_sent": [m for d, m in transcript if d == "recv"],
            "editor_sent": [m for d, m in transcript if d == "send" and "method" in m],
            "log": log,
            "history": derive_messages(played.records),
        },
        paths=paths,
    )


# -- a call and its result ------------------------------------------------------------


async def test_call_and_result(
    tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """The model calls a read-only MCP tool (no permission asked) and a
    destructive one (asked, kind execute); each result is what the server
    returned; the log records the server and its tools."""
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "mcp__files__echo", text="hi"),
                    tool_call("call_2", "mcp__files__note", text="buy milk"),
                    tool_call("call_3", "mcp__files__picture"),
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once", "allow_once"]
        return [await client.prompt(sid, "Use the server")]

    record = tmp_path / "server.jsonl"
    played = await play(tmp_path, script, [stdio_server("files", record=record)], turns)
    (result,) = played.results
    assert result.stop_reason == "end_turn"
    assert report(result)["tool_results"] == [
        {"tool_call_id": "call_1", "is_error": False, "text": "echo: hi"},
        {"tool_call_id": "call_2", "is_error": False, "text": "noted: buy milk"},
        {
            "tool_call_id": "call_3",
            "is_error": False,
            "text": "a red dot\n[image: image/png, 9 bytes]\n"
            "[resource link: dot.png <file:///tmp/dot.png>]",
        },
    ]
    asked = [
        m
        for d, m in played.run.client.transcript
        if d == "recv" and m.get("method") == "session/request_permission"
    ]
    assert [a["params"]["toolCall"]["toolCallId"] for a in asked] == ["call_2", "call_3"]
    kinds = {
        u["toolCallId"]: u.get("kind") for u in played.updates("tool_call_update") if "kind" in u
    }
    assert kinds == {"call_1": "read", "call_2": "execute", "call_3": "other"}
    final = [u for u in played.updates("tool_call_update") if u.get("status") == "completed"]
    assert final[-1]["content"][:2] == [
        {
            "type": "content",
            "content": {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        },
        {
            "type": "content",
            "content": {"type": "resource_link", "uri": "file:///tmp/dot.png", "name": "dot.png"},
        },
    ]
    statuses = [r["status"] for r in played.of_type("mcp/server")]
    assert statuses == ["starting", "connected"]
    offered = played.of_type("mcp/server")[1]["tools"]
    assert {t["name"] for t in offered} >= {"mcp__files__echo", "mcp__files__note"}
    started = [e.get("tool") for e in events(record) if e["event"] == "started"]
    assert started == ["echo", "note"]
    check(played, acp_schema)
    assert snap(played, tmp_path) == snapshot.use_extension(SessionSnapshot)


# -- Stop ---------------------------------------------------------------------------------


@pytest.mark.slow
async def test_stop_mid_call_cancels_it_on_the_server(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    """A Stop while an MCP call runs: the server receives notifications/cancelled
    for that call (its handler is cancelled), the call ends failed with a result
    saying it was stopped and what the server reported before, the next call of
    the step gets ABORTED_BEFORE_DISPATCH, and the turn answers cancelled."""
    record = tmp_path / "server.jsonl"
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "mcp__slow__wait"),
                    tool_call("call_2", "mcp__slow__echo", text="never"),
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        results: list[PromptResult] = []

        async def stop_when_running() -> None:
            await wait_until(lambda: any(e["event"] == "started" for e in events(record)))
            await client.notify("session/cancel", {"sessionId": sid})

        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_when_running)
            started = time.monotonic()
            results.append(await client.prompt(sid, "Wait"))
            elapsed = time.monotonic() - started
        assert results[0].stop_reason == "cancelled"
        assert elapsed < 30  # a hang guard, not a speed limit
        results.append(await client.prompt(sid, "And now?"))
        return results

    played = await play(tmp_path, script, [stdio_server("slow", record=record)], turns)
    stopped, after = played.results
    await wait_until(lambda: any(e["event"] == "cancelled" for e in events(record)))
    (start,) = [e for e in events(record) if e["event"] == "started"]
    (cancelled,) = [e for e in events(record) if e["event"] == "cancelled"]
    assert cancelled["request_id"] == start["request_id"]
    results = report(after)["tool_results"]
    assert results[0]["tool_call_id"] == "call_1"
    assert results[0]["is_error"] is True
    assert "stopped the turn" in results[0]["text"]
    assert "one tenth done" in results[0]["text"]
    assert results[1]["tool_call_id"] == "call_2"
    assert results[1]["text"].startswith(ABORTED_BEFORE_DISPATCH)
    finals = [u for u in stopped.updates if u.get("status") in ("completed", "failed")]
    assert {u["toolCallId"]: u["status"] for u in finals} == {
        "call_1": "failed",
        "call_2": "failed",
    }
    check(played, acp_schema)


# -- failures -----------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_server_that_crashes_mid_session(tmp_path: Path, acp_schema: AcpSchema) -> None:
    """The server dies during a call: the call fails saying so, the user is told
    (a thought chunk, stderr), the model is told once in the next user message,
    its tools are gone from the next request, and the session keeps working."""
    record = tmp_path / "server.jsonl"
    script = {
        "responses": [
            {"events": [tool_call("call_1", "mcp__box__crash")]},
            {"events": [{"text": "It crashed."}]},
            {
                "events": [
                    {"report": ["message_count", "tool_results", "tool_names", "last_user_text"]}
                ]
            },
            {"events": [{"report": ["last_user_text"]}]},
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        return [
            await client.prompt(sid, "Crash it"),
            await client.prompt(sid, "Still there?"),
            await client.prompt(sid, "And now?"),
        ]

    stderr = tmp_path / "stderr.txt"
    played = await play(
        tmp_path, script, [stdio_server("box", record=record)], turns, stderr=stderr
    )
    crashed, second, third = played.results
    final = [u for u in crashed.updates if u.get("status") == "failed"]
    assert "stopped during the call" in final[0]["content"][-1]["content"]["text"]
    said = report(second)
    assert not [t for t in said["tool_names"] if t.startswith("mcp__")]
    assert "MCP server 'box' is not available" in said["last_user_text"]
    assert "MCP server 'box' is not available" not in report(third)["last_user_text"]
    assert "MCP server 'box' is not available" in played.thoughts()
    assert "MCP server 'box' is not available" in played.run.stderr
    assert [r["status"] for r in played.of_type("mcp/server")] == [
        "starting",
        "connected",
        "failed",
    ]
    check(played, acp_schema)


async def test_a_server_that_never_answers_initialize(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    """session/new answers within --mcp-start-timeout; the user is told the
    server is still starting; the session works with the built-in tools; the
    mute server is stopped when the bridge exits."""
    record = tmp_path / "server.jsonl"
    script = {"responses": [{"events": [{"report": ["tool_names"]}]}]}
    servers = [stdio_server("mute", "--mute", record=record)]

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        return [await client.prompt(sid, "Hello")]

    started = time.monotonic()
    played = await play(tmp_path, script, servers, turns, extra=("--mcp-start-timeout", "0.5"))
    assert time.monotonic() - started < 25  # a hang guard
    assert "result" in played.opened
    assert "is still starting after 0.5 s" in played.thoughts()
    (result,) = played.results
    assert "read_file" in report(result)["tool_names"]
    assert [e["event"] for e in events(record)] == ["started-mute"]
    pid = events(record)[0]["pid"]
    assert not _alive(pid)
    check(played, acp_schema)


def _dead(pid: int) -> bool:
    return not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too (its parent, the bridge, is gone: init reaps it).
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


async def test_a_server_that_cannot_start(tmp_path: Path, acp_schema: AcpSchema) -> None:
    servers = [
        {"name": "ghost", "command": str(tmp_path / "no-such-program"), "args": [], "env": []}
    ]
    script = {"responses": [{"events": [{"report": ["last_user_text"]}]}]}

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        return [await client.prompt(sid, "Hello")]

    played = await play(tmp_path, script, servers, turns)
    assert "MCP server 'ghost' is not available: cannot start" in played.thoughts()
    assert "MCP server 'ghost' is not available" in report(played.results[0])["last_user_text"]
    check(played, acp_schema)


async def test_a_server_failure_is_a_notice_for_a_client_that_opted_in(tmp_path: Path) -> None:
    """With ``session.notices``, a failed server is a ``notice`` (error), not a thought."""
    servers = [
        {"name": "ghost", "command": str(tmp_path / "no-such-program"), "args": [], "env": []}
    ]
    script = {"responses": [{"events": [{"text": "Hi"}]}]}

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        return [await client.prompt(sid, "Hello")]

    capabilities = {**FULL_CAPABILITIES, "session": {"notices": {}}}
    played = await play(tmp_path, script, servers, turns, capabilities=capabilities)
    notices = played.updates("notice")
    assert [(n["severity"], n["title"]) for n in notices] == [
        ("error", "An MCP server is not available")
    ]
    assert "MCP server 'ghost' is not available: cannot start" in notices[0]["description"]
    assert "ghost" not in played.thoughts()
    check(played, load_pinned_sdk_schema())  # the override beside a checkout may predate notices


# -- hostile servers -----------------------------------------------------------------------


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


@pytest.mark.slow
async def test_a_server_that_does_not_read_is_disconnected(tmp_path: Path) -> None:
    """A server that floods ping requests and never reads its stdin: the
    answers waiting for it are bounded, it is disconnected and the user is told
    (a notice); the bridge stays small and the session goes on with the other
    server's tools."""
    record = tmp_path / "server.jsonl"
    servers = [stdio_server("flood", "--raw", "pings"), stdio_server("box", record=record)]
    script = {
        "responses": [
            {"events": [tool_call("call_1", "mcp__box__echo", text="hi")]},
            {"events": [{"report": ["tool_results", "tool_names"]}]},
        ]
    }
    capabilities = {**FULL_CAPABILITIES, "session": {"notices": {}}}
    rss: list[int] = []

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        def told() -> bool:
            return any(u.get("sessionUpdate") == "notice" for u in client.updates)

        with anyio.fail_after(60):
            await wait_until(told)
        process: Any = client.process
        rss.append(_rss_kib(process.pid))
        return [await client.prompt(sid, "Echo")]

    played = await play(tmp_path, script, servers, turns, capabilities=capabilities)
    (notice,) = played.updates("notice")
    assert notice["severity"] == "error"
    assert "MCP server 'flood' is not available: it does not read" in notice["description"]
    said = report(played.results[0])
    assert [r["text"] for r in said["tool_results"]] == ["echo: hi"]
    assert not [t for t in said["tool_names"] if t.startswith("mcp__flood__")]
    statuses = [(r["name"], r["status"]) for r in played.of_type("mcp/server")]
    assert ("flood", "failed") in statuses
    # 16 MiB may wait; the bridge with its mcp package is far under this when bounded.
    assert rss[0] < 400 * 1024, f"the bridge grew to {rss[0]} KiB"
    assert played.run.returncode == 0


async def test_an_invalid_answer_fails_its_call_at_once(tmp_path: Path) -> None:
    """A tools/call answer that is not valid JSON-RPC (its result is not an
    object) answers that call with an error at once, not after --tool-timeout."""
    record = tmp_path / "server.jsonl"
    servers = [stdio_server("raw", "--raw", "bad-answer", record=record)]
    script = {
        "responses": [
            {"events": [tool_call("call_1", "mcp__raw__echo", text="hi")]},
            {"events": [{"report": ["tool_results"]}]},
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        return [await client.prompt(sid, "Echo")]

    # A call left waiting would fail the run (it is bounded well under the timeout).
    played = await play(tmp_path, script, servers, turns, extra=("--tool-timeout", "3600"))
    (result,) = report(played.results[0])["tool_results"]
    assert "not valid JSON-RPC" in result["text"]
    assert [e["event"] for e in events(record)] == ["started-raw", "started"]
    assert played.run.returncode == 0


# -- tools ---------------------------------------------------------------------------------


@pytest.mark.slow
async def test_two_hundred_tools(tmp_path: Path, acp_schema: AcpSchema) -> None:
    """All 200 tools of a server are offered beside the built-in ones, with
    their schemas; one of them can be called."""
    script = {
        "responses": [
            {"events": [tool_call("call_1", "mcp__many__t199", x=5)]},
            {"events": [{"report": ["tool_results", "tool_names"]}]},
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        return [await client.prompt(sid, "Use the last one")]

    played = await play(tmp_path, script, [stdio_server("many", "--tools", "200")], turns)
    (result,) = played.results
    tools = report(result)["tool_names"]
    numbered = [t for t in tools if t.startswith("mcp__many__t") and t[12:].isdigit()]
    assert len(numbered) == 200
    assert "read_file" in tools
    assert report(result)["tool_results"] == [
        {"tool_call_id": "call_1", "is_error": False, "text": "t199: 5"}
    ]
    check(played, acp_schema)


@pytest.mark.parametrize("levels", [60, 200])
async def test_a_tool_whose_schema_nests_too_deep_is_left_out(tmp_path: Path, levels: int) -> None:
    """A tool whose input schema nests past the depth bound is not offered (the
    user is told, once: a thought for this client; stderr too), the server's
    other tools are: the session's prompts still run."""
    script = {
        "when_exhausted": "repeat_last",
        "responses": [{"events": [{"report": ["tool_names"]}]}],
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        return [await client.prompt(sid, "Hi"), await client.prompt(sid, "Again")]

    server = stdio_server("deep", "--deep-schema", str(levels))
    stderr_path = tmp_path / "stderr.txt"
    played = await play(tmp_path, script, [server], turns, stderr=stderr_path)
    for result in played.results:
        assert result.stop_reason == "end_turn", result
    tools = report(played.results[0])["tool_names"]
    assert "read_file" in tools
    assert ("mcp__deep__deep" in tools) is (levels == 60)
    assert "mcp__deep__echo" in tools
    told = "MCP server 'deep': tool(s) 'deep' left out: the input schema nests deeper than 128"
    assert played.thoughts().count(told) == (levels == 200)
    if levels == 200:
        stderr = stderr_path.read_text()
        assert "tool 'deep' left out: its input schema nests deeper than 128 levels" in stderr


@pytest.mark.slow
async def test_tools_list_changed(tmp_path: Path, acp_schema: AcpSchema) -> None:
    """notifications/tools/list_changed: the new tool is offered from the next request on."""
    script = {
        "responses": [
            {"events": [tool_call("call_1", "mcp__grow__grow")]},
            {"events": [tool_call("call_2", "mcp__grow__later")]},
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once", "allow_once"]
        return [await client.prompt(sid, "Grow")]

    played = await play(tmp_path, script, [stdio_server("grow")], turns)
    (result,) = played.results
    assert [r["status"] for r in played.of_type("mcp/server")][-1] == "tools"
    tools = played.of_type("mcp/server")[-1]["tools"]
    assert "mcp__grow__later" in [t["name"] for t in tools]
    assert report(result)["tool_results"][-1]["text"] == "later"
    check(played, acp_schema)


# -- permissions and modes -----------------------------------------------------------------


@pytest.mark.slow
async def test_read_only_mode_and_always_rules(tmp_path: Path, acp_schema: AcpSchema) -> None:
    """read_only mode runs the read-only MCP tool and refuses the others;
    an "always allow" answer is remembered for that one MCP tool only."""
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "mcp__srv__note", text="a"),
                    tool_call("call_2", "mcp__srv__note", text="b"),
                    tool_call("call_3", "mcp__srv__picture"),
                ]
            },
            REPORT,
            {
                "events": [
                    tool_call("call_4", "mcp__srv__echo", text="ro"),
                    tool_call("call_5", "mcp__srv__note", text="c"),
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_always", "reject_once"]
        first = await client.prompt(sid, "Write")
        answer = await client.request("session/set_mode", {"sessionId": sid, "modeId": "read_only"})
        assert "result" in answer
        return [first, await client.prompt(sid, "Now read only")]

    played = await play(tmp_path, script, [stdio_server("srv")], turns)
    first, second = played.results
    asked = [a["toolCall"]["toolCallId"] for a in played.asked()]
    assert asked == ["call_1", "call_3"]  # call_2 ran on the remembered rule
    texts = {r["tool_call_id"]: r for r in report(first)["tool_results"]}
    assert texts["call_2"]["text"] == "noted: b"
    assert texts["call_3"]["is_error"] is True
    later = {r["tool_call_id"]: r for r in report(second)["tool_results"]}
    assert later["call_4"]["text"] == "echo: ro"
    assert later["call_5"]["is_error"] is True
    assert "read-only mode" in later["call_5"]["text"]
    assert [r["tool"] for r in played.of_type("permission/rule")] == ["mcp:srv/note"]
    check(played, acp_schema)


async def test_an_always_rule_follows_the_servers_real_name(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    """Servers ``a_b`` and ``a.b`` give their tools the same model name; an
    "always allow" for ``a_b``'s ``note`` does not let ``a.b``'s run."""
    script = {
        "responses": [
            {"events": [tool_call("call_1", "mcp__a_b__note", text="a")]},
            {"events": [{"text": "done"}]},
        ]
    }

    async def always(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_always"]
        return [await client.prompt(sid, "Write")]

    first = await play(tmp_path, script, [stdio_server("a_b")], always)
    assert [r["tool"] for r in first.of_type("permission/rule")] == ["mcp:a_b/note"]
    rules = json.loads((tmp_path / "state" / "permissions.json").read_text())
    assert list(rules["projects"].values()) == [{"mcp:a_b/note": "allow_always"}]

    async def once(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["reject_once"]
        return [await client.prompt(sid, "Write")]

    other = await play(tmp_path, script, [stdio_server("a.b")], once)
    # The same model name, another server: asked, not run on a_b's rule.
    assert [a["toolCall"]["toolCallId"] for a in other.asked()] == ["call_1"]
    check(other, acp_schema)


async def test_what_a_server_is_given_in_env_is_redacted(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    """A token given to a server in ``env`` and echoed back by its tool reaches
    neither the editor, the model, the log nor stderr."""
    token = "ghp_s4hostileTOKEN0123456789abcdef+tail/PART99"
    plain = "no-secret-name-but-given-0123"
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "mcp__srv__env", var="GITHUB_TOKEN"),
                    tool_call("call_2", "mcp__srv__env", var="PLAIN"),
                ]
            },
            REPORT,
        ]
    }
    server = stdio_server("srv")
    server["env"] = [
        {"name": "GITHUB_TOKEN", "value": token},
        {"name": "PLAIN", "value": plain},
    ]

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once", "allow_once"]
        return [await client.prompt(sid, "Show them")]

    stderr = tmp_path / "stderr.txt"
    played = await play(tmp_path, script, [server], turns, stderr=stderr)
    texts = {r["tool_call_id"]: r["text"] for r in report(played.results[0])["tool_results"]}
    assert texts == {"call_1": "[redacted]", "call_2": "[redacted]"}
    wire = json.dumps([m for d, m in played.run.client.transcript if d == "recv"])
    logs = json.dumps(played.run.logs())
    for secret in (token, plain, "s4hostileTOKEN0123456789abcdef", "tail/PART99"[5:]):
        assert secret not in wire
        assert secret not in logs
        assert secret not in stderr.read_text()
    check(played, acp_schema)


# -- the config file --------------------------------------------------------------------------


@pytest.mark.slow
async def test_config_servers_join_and_the_editor_wins_a_clash(
    tmp_path: Path, acp_schema: AcpSchema
) -> None:
    """The config file's servers are merged with the editor's; on a name clash the
    editor's entry is used, and stderr says so."""
    config = tmp_path / "config.toml"
    config.write_text(
        "[[mcp_servers]]\n"
        f'name = "shared"\ncommand = {json.dumps(sys.executable)}\n'
        f'args = [{json.dumps(SERVER)}, "--name", "from-config"]\n'
        'env = { WHO = "config" }\n\n'
        "[[mcp_servers]]\n"
        f'name = "extra"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(SERVER)}]\n"
    )
    editor_entry = stdio_server("shared")
    editor_entry["env"] = [{"name": "WHO", "value": "editor"}]
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "mcp__shared__env", var="WHO"),
                    tool_call("call_2", "mcp__extra__echo", text="x"),
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        return [await client.prompt(sid, "Who?")]

    stderr = tmp_path / "stderr.txt"
    played = await play(
        tmp_path, script, [editor_entry], turns, extra=("--config", str(config)), stderr=stderr
    )
    results = report(played.results[0])["tool_results"]
    assert results[0]["text"] == "editor"
    assert results[1]["text"] == "echo: x"
    assert "'shared' of the config file is left out" in played.run.stderr
    origins = {r["name"]: r["origin"] for r in played.of_type("mcp/server") if "origin" in r}
    assert origins == {"shared": "editor", "extra": "config"}
    check(played, acp_schema)


@pytest.mark.slow
async def test_the_environment_is_the_editors_not_the_bridges(
    tmp_path: Path, acp_schema: AcpSchema, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-planted-key")
    entry = stdio_server("envs")
    entry["env"] = [{"name": "GIVEN", "value": "by the editor"}]
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "mcp__envs__env", var="GIVEN"),
                    tool_call("call_2", "mcp__envs__env", var="ANTHROPIC_API_KEY"),
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once", "allow_once"]
        return [await client.prompt(sid, "Env")]

    played = await play(tmp_path, script, [entry], turns)
    texts = [r["text"] for r in report(played.results[0])["tool_results"]]
    # The editor's value reached the server (else "<unset>"); on its way back it is
    # redacted, since what the editor gives a server in `env` is a secret.
    assert texts == ["[redacted]", "<unset>"]
    check(played, acp_schema)


# -- lifecycle -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("how", ["stdin closed", "SIGTERM"])
async def test_no_server_process_outlives_the_bridge(tmp_path: Path, how: str) -> None:
    """A server that ignores EOF and SIGTERM, and its own child, are killed
    (SIGKILL to its process group) when the bridge exits; session/close stops
    a well-behaved server at once (EOF)."""
    stubborn, polite = tmp_path / "stubborn.jsonl", tmp_path / "polite.jsonl"
    servers = [
        stdio_server("stubborn", "--stubborn", record=stubborn),
        stdio_server("polite", record=polite),
    ]
    script = {"responses": [{"events": [{"text": "ok"}]}]}
    workspace = tmp_path / "ws"
    workspace.mkdir()

    async def go(client: AcpClient) -> None:
        await client.initialize(FULL_CAPABILITIES)
        params = {"cwd": str(workspace), "mcpServers": servers}
        opened = await client.request("session/new", {**params, "mcpServers": servers[1:]})
        sid = opened["result"]["sessionId"]
        await client.request("session/new", params)
        closed = await client.request("session/close", {"sessionId": sid})
        assert closed == {"jsonrpc": "2.0", "id": closed["id"], "result": {}}
        # EOF ended it: it left through its own exit path.
        await wait_until(lambda: [e["event"] for e in events(polite)].count("exit") == 1)
        if how == "SIGTERM":
            process: Any = client.process
            process.send_signal(signal.SIGTERM)

    run = await run_bridge(
        write_script(tmp_path, script),
        tmp_path / "state",
        go,
        extra=("--mcp-start-timeout", "20"),
        close_stdin=how == "stdin closed",
    )
    assert run.returncode == 0
    (started, up) = events(stubborn)
    assert up["event"] == "up"  # it was serving
    for pid in (started["pid"], started["child"]):
        await wait_until(functools.partial(_dead, pid))


@pytest.mark.parametrize("how", ["session/close", "session/delete", "stdin closed", "SIGTERM"])
async def test_a_child_that_left_the_servers_group_is_ended(tmp_path: Path, how: str) -> None:
    """A server's child that called setsid (its own session and process group,
    out of reach of a signal to the server's group) is ended on every path
    that ends the server; the session's other server is unaffected until then."""
    record = tmp_path / "server.jsonl"
    servers = [stdio_server("daemon", "--setsid-child", record=record)]
    script = {"responses": [{"events": [{"text": "ok"}]}]}
    workspace = tmp_path / "ws"
    workspace.mkdir()
    child: list[int] = []

    async def go(client: AcpClient) -> None:
        await client.initialize(FULL_CAPABILITIES)
        opened = await client.request("session/new", {"cwd": str(workspace), "mcpServers": servers})
        sid = opened["result"]["sessionId"]
        (started, *_) = events(record)
        child.append(started["child"])
        assert _alive(child[0])
        if how.startswith("session/"):
            assert "result" in await client.request(how, {"sessionId": sid})
            with anyio.fail_after(20):
                await wait_until(functools.partial(_dead, child[0]))
        elif how == "SIGTERM":
            process: Any = client.process
            process.send_signal(signal.SIGTERM)

    run = await run_bridge(
        write_script(tmp_path, script),
        tmp_path / "state",
        go,
        extra=("--mcp-start-timeout", "20"),
        close_stdin=how != "SIGTERM",
    )
    assert run.returncode == 0
    with anyio.fail_after(20):
        await wait_until(functools.partial(_dead, child[0]))


@pytest.mark.slow
async def test_http_server(tmp_path: Path, acp_schema: AcpSchema) -> None:
    """A streamable HTTP server on loopback: its tools are offered and called."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = await anyio.open_process(
        [sys.executable, SERVER, "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await wait_until(lambda: _accepts(port))
        script = {
            "responses": [
                {"events": [tool_call("call_1", "mcp__web__echo", text="over http")]},
                REPORT,
            ]
        }

        async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
            return [await client.prompt(sid, "HTTP")]

        entry = {
            "type": "http",
            "name": "web",
            "url": f"http://127.0.0.1:{port}/mcp",
            "headers": [],
        }
        played = await play(tmp_path, script, [entry], turns)
    finally:
        server.kill()
        await server.wait()
    assert report(played.results[0])["tool_results"] == [
        {"tool_call_id": "call_1", "is_error": False, "text": "echo: over http"}
    ]
    assert played.of_type("mcp/server")[0]["transport"] == "http"
    check(played, acp_schema)


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
async def test_load_of_a_session_that_used_mcp_tools(tmp_path: Path, acp_schema: AcpSchema) -> None:
    """A session that called an MCP tool is loaded in a new process: the replay
    shows the call and its final status, the servers passed to session/load are
    connected again, and the next request has a valid history and their tools."""
    script = {
        "responses": [
            {"events": [tool_call("call_1", "mcp__files__echo", text="before")]},
            {"events": [{"text": "Done."}]},
            {
                "events": [
                    {"report": ["message_count", "tool_names"]},
                    tool_call("call_2", "mcp__files__echo", text="after"),
                ]
            },
            {"events": [{"report": ["tool_results"]}]},
        ]
    }
    played = await play(
        tmp_path,
        script,
        [stdio_server("files")],
        lambda client, sid, editor: _one_prompt(client, sid, "Echo"),
    )
    sid = played.session_id
    results: list[PromptResult] = []
    loaded: dict[str, Any] = {}

    async def go(client: AcpClient) -> None:
        await client.initialize(FULL_CAPABILITIES)
        params = {
            "sessionId": sid,
            "cwd": str(played.workspace),
            "mcpServers": [stdio_server("files")],
        }
        loaded.update(await client.request("session/load", params))
        results.append(await client.prompt(sid, "Again"))

    second = {"when_exhausted": "error", "responses": script["responses"][2:]}
    run = await run_bridge(
        write_script(tmp_path / "ws", second),
        tmp_path / "state",
        go,
        extra=("--mcp-start-timeout", "20"),
    )
    assert run.returncode == 0
    assert "result" in loaded
    replayed = [
        m["params"]["update"]
        for d, m in run.client.transcript
        if d == "recv" and m.get("method") == "session/update"
    ]
    finals = [u for u in replayed if u.get("toolCallId") == "call_1" and u.get("status")]
    assert finals[-1]["status"] == "completed"
    (again,) = results
    text = "".join(
        u["content"]["text"] for u in again.updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert "mcp__files__echo" in text
    records = run.logs()[sid]
    check_history(derive_messages(records))
    run.check_logs()
    schema_check = acp_schema.check_transcript
    schema_check(run.client.transcript)
    statuses = [r["status"] for r in records if r["type"] == "mcp/server"]
    assert statuses == ["starting", "connected", "starting", "connected"]


@pytest.mark.slow
async def test_a_fork_connects_the_servers_it_is_given(tmp_path: Path) -> None:
    """session/fork with mcpServers: the fork connects them (its log says so) and
    offers their tools from its first request on, and a call goes through; the
    source session, opened without servers, stays without them."""
    # Each session's scripted provider starts at the script's first response:
    # these are the fork's.
    script = {
        "responses": [
            {
                "events": [
                    {"report": ["tool_names"]},
                    tool_call("call_1", "mcp__files__echo", text="forked"),
                ]
            },
            {"events": [{"report": ["tool_results"]}]},
        ]
    }
    forked: dict[str, Any] = {}

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        params = {"sessionId": sid, "cwd": str(editor.root), "mcpServers": [stdio_server("files")]}
        forked.update(await client.request("session/fork", params))
        fork_id = forked["result"]["sessionId"]
        return [await client.prompt(fork_id, "Echo in the fork")]

    played = await play(tmp_path, script, [], turns)
    assert "result" in forked, forked
    fork_id = forked["result"]["sessionId"]
    (second,) = played.results
    offered, results = second.text().removeprefix("tool_names: ").split("tool_results: ")
    assert "mcp__files__echo" in json.loads(offered)
    assert json.loads(results) == [
        {"tool_call_id": "call_1", "is_error": False, "text": "echo: forked"}
    ]
    fork_log = played.run.logs()[fork_id]
    servers = [r for r in fork_log if r["type"] == "mcp/server"]
    assert [(r["name"], r["status"]) for r in servers] == [
        ("files", "starting"),
        ("files", "connected"),
    ]
    assert played.of_type("mcp/server") == []  # the source session had none
    check_history(derive_messages(fork_log))
    check(played, load_acp_unstable_schema())  # session/fork is in the unstable schema only


async def _one_prompt(client: AcpClient, sid: str, text: str) -> list[PromptResult]:
    return [await client.prompt(sid, text)]


# -- start-up ------------------------------------------------------------------------------


def _imported(stderr: str) -> set[str]:
    """The modules a ``python -X importtime`` run imported."""
    out = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            out.add(line.rsplit("|", 1)[1].strip())
    return out


@pytest.mark.parametrize("with_server", [False, pytest.param(True, marks=pytest.mark.slow)])
async def test_the_mcp_package_loads_only_for_a_session_with_servers(
    tmp_path: Path, with_server: bool
) -> None:
    """Start-up, session/new and a turn without MCP servers import nothing of
    the mcp package; a session with one does."""
    script = {"responses": [{"events": [{"text": "ok"}]}]}
    workspace = tmp_path / "ws"
    workspace.mkdir()
    servers = [stdio_server("files")] if with_server else []

    async def go(client: AcpClient) -> None:
        await client.initialize(FULL_CAPABILITIES)
        params = {"cwd": str(workspace), "mcpServers": servers}
        sid = (await client.request("session/new", params))["result"]["sessionId"]
        assert (await client.prompt(sid, "hi")).stop_reason == "end_turn"

    stderr = tmp_path / "stderr.txt"
    run = await run_bridge(
        write_script(tmp_path, script),
        tmp_path / "state",
        go,
        command=[sys.executable, "-X", "importtime", "-m", "acp_bridge"],
        stderr=stderr,
        extra=("--mcp-start-timeout", "20"),
    )
    assert run.returncode == 0
    modules = _imported(run.stderr)
    assert "acp_bridge.mcp.hub" in modules
    loaded = {m for m in modules if m.split(".")[0] in ("mcp", "mcp_types")}
    assert bool(loaded) is with_server, sorted(loaded)[:5]


@pytest.mark.slow
async def test_session_new_does_not_wait_for_the_mcp_package(tmp_path: Path) -> None:
    """A stdio server's tools are offered while the bridge cannot import the mcp
    package yet (session/new, the first model request); a call made then waits
    until the package is loaded and goes through its client."""
    gate = tmp_path / "gate"
    script = {
        "responses": [
            {
                "events": [
                    {"report": ["tool_names"]},
                    tool_call("call_1", "mcp__files__echo", text="hi"),
                ]
            },
            {"events": [{"report": ["tool_results"]}]},
        ]
    }

    def open_gate(update: dict[str, Any]) -> None:
        if update.get("sessionUpdate") == "tool_call":
            gate.touch()  # the call is made: now the import may go on

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        assert not gate.exists()
        return [await client.prompt(sid, "Echo", on_update=open_gate)]

    code = gated_bridge_code(held=("mcp", "mcp_types"), hold_until=str(gate))
    played = await play(
        tmp_path, script, [stdio_server("files")], turns, command=[sys.executable, "-c", code]
    )
    assert "still starting" not in played.thoughts()
    (result,) = played.results
    # The two reports, one per model request, run together in the turn's text.
    offered, results = result.text().removeprefix("tool_names: ").split("tool_results: ")
    assert "mcp__files__echo" in json.loads(offered)
    assert json.loads(results) == [
        {"tool_call_id": "call_1", "is_error": False, "text": "echo: hi"}
    ]
    assert [r["status"] for r in played.of_type("mcp/server")] == ["starting", "connected"]
    assert played.run.returncode == 0


@pytest.mark.slow
async def test_a_servers_stderr_reaches_the_bridges_bounded(tmp_path: Path) -> None:
    script = {
        "responses": [
            {"events": [tool_call("call_1", "mcp__loud__shout", lines=5000)]},
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        return [await client.prompt(sid, "Shout")]

    stderr = tmp_path / "stderr.txt"
    played = await play(tmp_path, script, [stdio_server("loud")], turns, stderr=stderr)
    assert report(played.results[0])["tool_results"][0]["text"] == "shouted"
    text = played.run.stderr
    assert "loud: shout line 0 " in text
    assert "MCP server loud: more stderr output is dropped" in text
    shown = [line for line in text.splitlines() if "loud: shout line" in line]
    assert 100 < len(shown) < 5000
