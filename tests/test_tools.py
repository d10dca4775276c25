"""Tools through the editor, whole sessions through the real subprocess.

The test client serves files and terminals from a temporary workspace
(`workspace_editor.WorkspaceEditor`) and answers permission requests as each
scenario scripts.  Each scenario snapshots what the bridge sent (every
message, in order), what the editor sent (its requests and notifications),
the event log (deltas coalesced) and the derived history, with the workspace
path normalized; and asserts its point directly.  Every Stop scenario ends
with a follow-up prompt whose scripted ``report`` says what the next model
request held (I3: every call paired with exactly one result).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_schema import AcpSchema
from support.bridge import Mode
from support.harness import (
    EXAMPLES,
    Run,
    SessionSnapshot,
    assert_cancelled,
    coalesce_deltas,
    normalize,
    prompt_until,
    report,
    run_bridge,
    tool_call,
    update_seen,
    wait_until,
    write_script,
)
from syrupy.assertion import SnapshotAssertion
from workspace_editor import FULL_CAPABILITIES, WorkspaceEditor

from acp_bridge.client import AcpClient, PromptResult, prompt_params
from acp_bridge.log.check import check_history
from acp_bridge.log.derive import derive_messages
from acp_bridge.tools.runner import ABORTED_BEFORE_DISPATCH

pytestmark = pytest.mark.anyio

REPORT = {"events": [{"report": ["message_count", "tool_results"]}]}


@dataclass
class Played:
    run: Run
    session_id: str
    results: list[PromptResult]
    editor: WorkspaceEditor
    workspace: Path

    @property
    def records(self) -> list[dict[str, Any]]:
        return self.run.logs()[self.session_id]

    def of_type(self, type: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["type"] == type]

    def sent_by_agent(self, method: str) -> list[dict[str, Any]]:
        return [
            m for d, m in self.run.client.transcript if d == "recv" and m.get("method") == method
        ]

    def tool_updates(self, result: PromptResult) -> list[dict[str, Any]]:
        return [
            u for u in result.updates if u["sessionUpdate"] in ("tool_call", "tool_call_update")
        ]


Turns = Callable[[AcpClient, str, WorkspaceEditor], Awaitable[list[PromptResult]]]


async def play(
    tmp_path: Path,
    script: dict[str, Any],
    turns: Turns,
    *,
    files: dict[str, str] | None = None,
    capabilities: dict[str, Any] | None = None,
    extra: tuple[str, ...] = (),
    editor_setup: Callable[[WorkspaceEditor], None] | None = None,
    stderr: Path | None = None,
    mode: Mode = "inprocess",
) -> Played:
    """Play ``turns`` against a bridge on ``script``, served in this process (the
    tests of a read, an edit, a command and a Stop of a command run the real
    command; with ``stderr``, so does any test that reads it)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for name, text in (files or {}).items():
        (workspace / name).write_text(text)
    editor = WorkspaceEditor(workspace)
    if editor_setup is not None:
        editor_setup(editor)
    session: list[str] = []
    results: list[PromptResult] = []

    async def go(client: AcpClient) -> None:
        async with anyio.create_task_group() as tg:
            editor.install(client, tg)
            await client.initialize(FULL_CAPABILITIES if capabilities is None else capabilities)
            session.append(await client.new_session(str(workspace)))
            results.extend(await turns(client, session[0], editor))
            editor.released.set()
            tg.cancel_scope.cancel()

    script = {"when_exhausted": "error", **script}
    run = await run_bridge(
        write_script(tmp_path, script),
        tmp_path / "state",
        go,
        extra=extra,
        stderr=stderr,
        mode="subprocess" if stderr is not None else mode,
    )
    return Played(run, session[0], results, editor, workspace)


def check(played: Played, schema: AcpSchema, snapshot: SnapshotAssertion) -> None:
    run = played.run
    assert run.returncode == 0
    for result in played.results:
        assert result.late == [], "I1: session/update after the prompt response"
        assert "result" in result.response, result.response
    run.check_logs()
    check_history(derive_messages(played.records))
    schema.check_transcript(run.client.transcript)
    # Every tool call announced got exactly one final status, before its prompt's response.
    for result in played.results:
        finals: dict[str, int] = {}
        announced = set()
        for update in played.tool_updates(result):
            announced.add(update["toolCallId"])
            if update.get("status") in ("completed", "failed"):
                finals[update["toolCallId"]] = finals.get(update["toolCallId"], 0) + 1
        assert finals == {call: 1 for call in announced}
    transcript = [(d, _stable_env(m)) for d, m in run.client.transcript]
    paths = {str(played.workspace): "<ws>", str(run.state_dir): "<state>"}
    snap = normalize(
        {
            "agent_sent": [m for d, m in transcript if d == "recv"],
            "editor_sent": [m for d, m in transcript if d == "send" and "method" in m],
            "log": coalesce_deltas(played.records),
            "history": derive_messages(played.records),
        },
        paths=paths,
    )
    assert snap == snapshot.use_extension(SessionSnapshot)


def _stable_env(msg: dict[str, Any]) -> dict[str, Any]:
    """terminal/create blanks every key-like variable of the bridge's environment,
    which differs between machines: keep the two that are always there."""
    if msg.get("method") != "terminal/create":
        return msg
    env = [v for v in msg["params"]["env"] if v["name"] in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")]
    return {**msg, "params": {**msg["params"], "env": env}}


# -- the basics -----------------------------------------------------------------------


async def test_read(tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion) -> None:
    """read_file goes through fs/read_text_file with an absolute path; the
    content is the result the model gets next."""
    script = {
        "responses": [
            {"events": [{"text": "Reading."}, tool_call("call_1", "read_file", path="notes.txt")]},
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        return [await client.prompt(sid, "What do my notes say?")]

    played = await play(
        tmp_path, script, turns, files={"notes.txt": "buy milk\n"}, mode="subprocess"
    )
    (result,) = played.results
    assert result.stop_reason == "end_turn"
    assert played.editor.calls == [
        (
            "fs/read_text_file",
            {"sessionId": played.session_id, "path": str(played.workspace / "notes.txt")},
        )
    ]
    statuses = [u.get("status") for u in played.tool_updates(result)]
    assert statuses == ["pending", "pending", "in_progress", "completed"]
    shown = played.tool_updates(result)[1]
    assert shown["kind"] == "read"
    assert shown["locations"] == [{"path": str(played.workspace / "notes.txt")}]
    assert shown["rawInput"] == {"path": "notes.txt"}
    assert report(result)["tool_results"] == [
        {"tool_call_id": "call_1", "is_error": False, "text": "buy milk\n"}
    ]
    check(played, acp_schema, snapshot)


async def test_edit_with_diff(
    tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """edit_file asks (ask mode), writes through fs/write_text_file, and shows a diff."""
    script = {
        "responses": [
            {
                "events": [
                    tool_call(
                        "call_1", "edit_file", path="a.py", old_text="x = 1", new_text="x = 2"
                    )
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        return [await client.prompt(sid, "Set x to 2")]

    played = await play(
        tmp_path, script, turns, files={"a.py": "x = 1\ny = 3\n"}, mode="subprocess"
    )
    (result,) = played.results
    assert (played.workspace / "a.py").read_text() == "x = 2\ny = 3\n"
    assert played.editor.methods() == [
        "session/request_permission",
        "fs/read_text_file",
        "fs/write_text_file",
    ]
    (asked,) = played.sent_by_agent("session/request_permission")
    kinds = [o["kind"] for o in asked["params"]["options"]]
    assert kinds == ["allow_once", "allow_always", "reject_once", "reject_always"]
    final = played.tool_updates(result)[-1]
    assert final["status"] == "completed"
    assert final["content"][0] == {
        "type": "diff",
        "path": str(played.workspace / "a.py"),
        "oldText": "x = 1\ny = 3\n",
        "newText": "x = 2\ny = 3\n",
    }
    check(played, acp_schema, snapshot)


async def test_command(
    tmp_path: Path,
    acp_schema: AcpSchema,
    snapshot: SnapshotAssertion,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """run_command runs in an editor terminal, embedded in the tool call, and is
    always released; the provider's key is not in the command's environment."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-planted-key")
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "run_command", command='echo "key=[$ANTHROPIC_API_KEY]"')
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        return [await client.prompt(sid, "Run it")]

    played = await play(tmp_path, script, turns, mode="subprocess")
    (result,) = played.results
    methods = played.editor.methods()
    assert methods == [
        "session/request_permission",
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]
    create = played.editor.calls[1][1]
    assert create["command"] == "/bin/sh"
    assert {"name": "ANTHROPIC_API_KEY", "value": ""} in create["env"]
    updates = played.tool_updates(result)
    assert {"type": "terminal", "terminalId": "term_1"} in updates[-2]["content"]
    assert updates[-1]["status"] == "completed"
    (tool_result,) = report(result)["tool_results"]
    assert "key=[]" in tool_result["text"]
    assert "sk-ant-planted-key" not in json.dumps(played.run.client.transcript)
    assert "[exit code 0]" in tool_result["text"]
    check(played, acp_schema, snapshot)


async def test_rejected_permission(
    tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """A rejection: nothing is written, the call fails, and the model is told
    the user declined and not to retry."""
    script = {
        "responses": [
            {"events": [tool_call("call_1", "write_file", path="out.txt", content="hi")]},
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["reject_once"]
        return [await client.prompt(sid, "Write it")]

    played = await play(tmp_path, script, turns)
    (result,) = played.results
    assert not (played.workspace / "out.txt").exists()
    assert played.editor.methods() == ["session/request_permission"]
    assert played.tool_updates(result)[-1]["status"] == "failed"
    (tool_result,) = report(result)["tool_results"]
    assert tool_result["is_error"] is True
    assert "declined" in tool_result["text"]
    assert "Do not retry" in tool_result["text"]
    (call,) = played.of_type("tool/call")
    assert call["status"] == "refused"
    check(played, acp_schema, snapshot)


async def test_dismissed_permission_is_a_rejection(tmp_path: Path) -> None:
    script = {
        "responses": [
            {"events": [tool_call("call_1", "write_file", path="out.txt", content="hi")]},
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["dismiss"]
        return [await client.prompt(sid, "Write it")]

    played = await play(tmp_path, script, turns)
    assert not (played.workspace / "out.txt").exists()
    (tool_result,) = report(played.results[0])["tool_results"]
    assert "dismissed" in tool_result["text"]
    assert "Do not retry" in tool_result["text"]


async def test_allow_always_is_remembered_across_prompts(
    tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    write = {"events": [tool_call("call_1", "write_file", path="a.txt", content="one")]}
    write2 = {"events": [tool_call("call_2", "write_file", path="b.txt", content="two")]}
    done = {"events": [{"text": "Done."}]}
    script = {"responses": [write, done, write2, done]}

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_always"]
        return [await client.prompt(sid, "Write a"), await client.prompt(sid, "Write b")]

    played = await play(tmp_path, script, turns)
    assert (played.workspace / "a.txt").read_text() == "one"
    assert (played.workspace / "b.txt").read_text() == "two"
    assert played.editor.methods().count("session/request_permission") == 1
    (rule,) = played.of_type("permission/rule")
    assert (rule["tool"], rule["decision"]) == ("write_file", "allow_always")
    check(played, acp_schema, snapshot)


async def test_read_only_mode_refuses_a_write(
    tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    script = {
        "responses": [
            {"events": [tool_call("call_1", "write_file", path="out.txt", content="hi")]},
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        answer = await client.request("session/set_mode", {"sessionId": sid, "modeId": "read_only"})
        assert answer["result"] == {}
        return [await client.prompt(sid, "Write it")]

    played = await play(tmp_path, script, turns)
    assert not (played.workspace / "out.txt").exists()
    assert played.editor.calls == []
    (tool_result,) = report(played.results[0])["tool_results"]
    assert "read-only" in tool_result["text"]
    # After the commands that followed session/new.
    kinds = [u["sessionUpdate"] for u in played.run.client.updates[:3]]
    assert kinds == ["available_commands_update", "current_mode_update", "config_option_update"]
    (mode,) = played.of_type("session/mode")
    assert (mode["mode"], mode["via"]) == ("read_only", "set_mode")
    check(played, acp_schema, snapshot)


async def test_switching_to_read_only_while_asked_refuses_the_call(tmp_path: Path) -> None:
    script = {
        "responses": [
            {"events": [tool_call("call_1", "write_file", path="out.txt", content="hi")]},
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        async def switch_then_allow() -> str:
            await client.request("session/set_mode", {"sessionId": sid, "modeId": "read_only"})
            return "allow_once"

        editor.permission_answers = [switch_then_allow]
        return [await client.prompt(sid, "Write it")]

    played = await play(tmp_path, script, turns)
    assert not (played.workspace / "out.txt").exists()
    (tool_result,) = report(played.results[0])["tool_results"]
    assert "read-only" in tool_result["text"]
    played.run.check_logs()


async def test_mode_as_a_config_option(tmp_path: Path) -> None:
    script = {"responses": [{"events": [{"text": "ok"}]}]}

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        answer = await client.request(
            "session/set_config_option",
            {"sessionId": sid, "configId": "mode", "value": "accept_edits"},
        )
        (option,) = answer["result"]["configOptions"]
        assert (option["category"], option["currentValue"]) == ("mode", "accept_edits")
        bad = await client.request("session/set_mode", {"sessionId": sid, "modeId": "yolo"})
        assert bad["error"]["code"] == -32602
        assert bad["error"]["data"]["field"] == "modeId"
        return []

    played = await play(tmp_path, script, turns)
    updates = played.run.client.updates
    assert updates[0]["sessionUpdate"] == "available_commands_update"  # after session/new
    updates = updates[1:]
    assert updates[0] == {"sessionUpdate": "current_mode_update", "currentModeId": "accept_edits"}
    assert updates[1]["sessionUpdate"] == "config_option_update"
    (mode,) = played.of_type("session/mode")
    assert mode["via"] == "config_option"


async def test_accept_edits_writes_without_asking_and_outside_paths_ask(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.txt"
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "write_file", path="in.txt", content="in"),
                    tool_call("call_2", "write_file", path=str(outside), content="out"),
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        await client.request("session/set_mode", {"sessionId": sid, "modeId": "accept_edits"})
        editor.permission_answers = ["reject_once"]
        return [await client.prompt(sid, "Write both")]

    played = await play(tmp_path, script, turns)
    assert (played.workspace / "in.txt").read_text() == "in"
    assert not outside.exists()
    (asked,) = played.sent_by_agent("session/request_permission")
    assert asked["params"]["toolCall"]["toolCallId"] == "call_2"
    # No "always" for a path outside the session's directories.
    assert [o["kind"] for o in asked["params"]["options"]] == ["allow_once", "reject_once"]
    first, second = report(played.results[0])["tool_results"]
    assert first["is_error"] is False
    assert "outside the session's directories" in second["text"]


async def test_without_editor_capabilities_files_are_local_and_commands_say_so(
    tmp_path: Path,
) -> None:
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "read_file", path="notes.txt"),
                    tool_call("call_2", "run_command", command="echo hi"),
                    tool_call("call_3", "search_text", pattern="mil+k"),
                    tool_call("call_4", "find_files", pattern="*.txt"),
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        return [await client.prompt(sid, "Go")]

    played = await play(tmp_path, script, turns, files={"notes.txt": "buy milk\n"}, capabilities={})
    # Only the permission for the command was asked: no fs/* or terminal/* request.
    assert played.editor.methods() == ["session/request_permission"]
    read, command, search, find = report(played.results[0])["tool_results"]
    assert read["text"] == "buy milk\n"
    assert command["is_error"]
    assert "offers no terminal" in command["text"]
    assert search["text"] == f"{played.workspace / 'notes.txt'}:1: buy milk"
    assert find["text"] == str(played.workspace / "notes.txt")


async def test_invalid_arguments_and_unknown_tools_never_run(tmp_path: Path) -> None:
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "read_file", line=3),
                    tool_call("call_2", "teleport", to="mars"),
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        return [await client.prompt(sid, "Go")]

    played = await play(tmp_path, script, turns)
    assert played.editor.calls == []
    invalid, unknown = report(played.results[0])["tool_results"]
    assert "Invalid arguments for read_file: path: Field required" in invalid["text"]
    assert "not available" in unknown["text"]
    assert [c["status"] for c in played.of_type("tool/call")] == ["refused", "unavailable"]


# -- Stop while tools are in flight ----------------------------------------------------


async def follow_up(client: AcpClient, sid: str) -> PromptResult:
    return await client.prompt(sid, "What happened?")


async def test_stop_while_a_tool_call_streams(
    tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """The half-streamed call is dropped: it never runs and never reaches the model."""
    script = {
        "responses": [
            {
                "events": [
                    {"text": "Writing."},
                    {"tool_call_start": {"id": "call_1", "name": "write_file"}},
                    {"tool_args": '{"path": "out.txt", "cont'},
                    {"hang": True},
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        stopped = await prompt_until(
            client, sid, "Write it", lambda c, since: update_seen(c, "tool_call", since=since)
        )
        return [stopped, await follow_up(client, sid)]

    played = await play(tmp_path, script, turns)
    stopped, after = played.results
    assert_cancelled(stopped)
    assert played.editor.calls == []
    assert played.of_type("tool/call") == []
    assert report(after) == {"message_count": 3, "tool_results": []}
    check(played, acp_schema, snapshot)


async def test_stop_while_permission_is_pending(
    tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """The permission request is cancelled with $/cancel_request, the call is
    marked failed and never runs."""
    script = {
        "responses": [
            {"events": [tool_call("call_1", "write_file", path="out.txt", content="hi")]},
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["hang"]
        stopped = await prompt_until(client, sid, "Write it", lambda c, since: editor.asked())
        return [stopped, await follow_up(client, sid)]

    played = await play(tmp_path, script, turns)
    stopped, after = played.results
    assert_cancelled(stopped)
    assert not (played.workspace / "out.txt").exists()
    (asked,) = played.sent_by_agent("session/request_permission")
    (cancel,) = played.sent_by_agent("$/cancel_request")
    assert cancel["params"] == {"requestId": asked["id"]}
    assert played.tool_updates(stopped)[-1]["status"] == "failed"
    (call,) = played.of_type("tool/call")
    assert call["status"] == "aborted"
    (tool_result,) = report(after)["tool_results"]
    assert "while permission" in tool_result["text"]
    assert tool_result["is_error"]
    check(played, acp_schema, snapshot)


async def test_stop_while_a_command_runs(
    tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """The terminal is killed then released; the output so far is the real result,
    with the interruption stated."""
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "run_command", command="echo started; sleep 60; echo never")
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        stopped = await prompt_until(
            client, sid, "Run it", lambda c, since: editor.waiting_on_command("started")
        )
        return [stopped, await follow_up(client, sid)]

    played = await play(tmp_path, script, turns, mode="subprocess")
    stopped, after = played.results
    assert_cancelled(stopped)
    methods = played.editor.methods()
    assert methods[-3:] == ["terminal/kill", "terminal/output", "terminal/release"]
    assert played.editor.running() == []
    (tool_result,) = report(after)["tool_results"]
    assert tool_result["text"].startswith("$ echo started; sleep 60; echo never\nstarted\n")
    assert "interrupted by the user" in tool_result["text"]
    assert "never" not in tool_result["text"].split("\n", 1)[1]
    check(played, acp_schema, snapshot)


async def test_stop_leaves_undispatched_calls_aborted(
    tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """Stopped while the first call waits on the editor: that request is
    cancelled, and the second call, never dispatched, gets ABORTED_BEFORE_DISPATCH."""
    script = {
        "responses": [
            {
                "events": [
                    tool_call("call_1", "read_file", path="notes.txt"),
                    tool_call("call_2", "read_file", path="other.txt"),
                ]
            },
            REPORT,
        ]
    }

    def setup(editor: WorkspaceEditor) -> None:
        editor.hang.add("fs/read_text_file")

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        stopped = await prompt_until(
            client, sid, "Read both", lambda c, since: lambda: bool(editor.calls)
        )
        return [stopped, await follow_up(client, sid)]

    played = await play(
        tmp_path, script, turns, files={"notes.txt": "a", "other.txt": "b"}, editor_setup=setup
    )
    stopped, after = played.results
    assert_cancelled(stopped)
    assert played.editor.methods() == ["fs/read_text_file"]
    first, second = report(after)["tool_results"]
    assert first["tool_call_id"] == "call_1"
    assert "stopped the turn while" in first["text"]
    assert second["tool_call_id"] == "call_2"
    assert second["text"].startswith(ABORTED_BEFORE_DISPATCH)
    assert [c["status"] for c in played.of_type("tool/call")] == ["dispatched", "aborted"]
    check(played, acp_schema, snapshot)


async def test_stop_while_a_terminal_is_being_created_still_releases_it(
    tmp_path: Path,
) -> None:
    """The editor has created the terminal but not yet answered when Stop comes:
    the bridge waits for the answer, then kills and releases that terminal."""
    script = {
        "responses": [
            {"events": [tool_call("call_1", "run_command", command="echo started; sleep 60")]},
            REPORT,
        ]
    }
    gate = anyio.Event()

    def setup(editor: WorkspaceEditor) -> None:
        editor.hold_answer["terminal/create"] = gate

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        box: dict[str, Any] = {}

        async def prompt() -> None:
            params = prompt_params(sid, "Run it")
            box["response"] = await client.request("session/prompt", params)

        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt)
            await wait_until(lambda: bool(editor.terminals))
            await client.notify("session/cancel", {"sessionId": sid})
            gate.set()
        stopped = PromptResult(box["response"], [])
        return [stopped, await follow_up(client, sid)]

    played = await play(tmp_path, script, turns, editor_setup=setup)
    stopped, after = played.results
    assert_cancelled(stopped)
    assert played.editor.running() == []
    assert played.editor.methods()[-3:] == ["terminal/kill", "terminal/output", "terminal/release"]
    (tool_result,) = report(after)["tool_results"]
    assert "interrupted by the user" in tool_result["text"]


async def test_an_editor_that_never_answers_is_bounded_by_the_cancel_deadline(
    tmp_path: Path,
) -> None:
    """terminal/kill is never answered, even after $/cancel_request: the Stop
    still answers, the call still gets its final status and a result."""
    script = {
        "responses": [
            {"events": [tool_call("call_1", "run_command", command="echo started; sleep 60")]},
            REPORT,
        ]
    }

    def setup(editor: WorkspaceEditor) -> None:
        editor.wedge.add("terminal/kill")

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        stopped = await prompt_until(
            client, sid, "Run it", lambda c, since: editor.waiting_on_command("started")
        )
        return [stopped, await follow_up(client, sid)]

    played = await play(
        tmp_path, script, turns, extra=("--cancel-deadline", "1"), editor_setup=setup
    )
    stopped, after = played.results
    assert_cancelled(stopped)
    assert played.tool_updates(stopped)[-1]["status"] == "failed"
    (tool_result,) = report(after)["tool_results"]
    assert "interrupted by the user" in tool_result["text"]
    assert "terminal/release" in played.editor.methods()
    played.run.check_logs()


async def test_per_tool_timeout_kills_the_command(tmp_path: Path) -> None:
    script = {
        "responses": [
            {
                "events": [
                    tool_call(
                        "call_1", "run_command", command="echo begun; sleep 60", timeout_s=0.5
                    )
                ]
            },
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = ["allow_once"]
        return [await client.prompt(sid, "Run it")]

    played = await play(tmp_path, script, turns)
    (tool_result,) = report(played.results[0])["tool_results"]
    assert "timed out after 0.5 s" in tool_result["text"]
    # The command's own output, not its echo on the first line.
    assert tool_result["text"].startswith("$ echo begun; sleep 60\nbegun\n")
    assert played.editor.methods()[-3:] == ["terminal/kill", "terminal/output", "terminal/release"]


async def test_a_user_tool_registered_from_python(tmp_path: Path) -> None:
    """examples/custom_tool.py registers count_lines and runs the bridge: the
    model can call it like a built-in tool."""
    script = {
        "responses": [
            {"events": [tool_call("call_1", "count_lines", path="notes.txt")]},
            REPORT,
        ]
    }
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("a\nb\nc\n")
    editor = WorkspaceEditor(workspace)
    results: list[PromptResult] = []

    async def go(client: AcpClient) -> None:
        async with anyio.create_task_group() as tg:
            editor.install(client, tg)
            await client.initialize(FULL_CAPABILITIES)
            sid = await client.new_session(str(workspace))
            results.append(await client.prompt(sid, "How long?"))
            tg.cancel_scope.cancel()

    command = [sys.executable, str(EXAMPLES / "custom_tool.py")]
    await run_bridge(write_script(tmp_path, script), tmp_path / "state", go, command=command)
    (result,) = results
    assert editor.methods() == ["fs/read_text_file"]
    assert report(result)["tool_results"] == [
        {"tool_call_id": "call_1", "is_error": False, "text": "3 lines"}
    ]
    kinds = [u.get("kind") for u in result.updates if u["sessionUpdate"] == "tool_call"]
    assert kinds == ["read"]


async def test_per_tool_timeout(tmp_path: Path) -> None:
    """--tool-timeout stops a tool whose editor request does not return."""
    script = {
        "responses": [
            {"events": [tool_call("call_1", "read_file", path="notes.txt")]},
            REPORT,
        ]
    }

    def setup(editor: WorkspaceEditor) -> None:
        editor.hang.add("fs/read_text_file")

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        return [await client.prompt(sid, "Read it")]

    played = await play(
        tmp_path, script, turns, extra=("--tool-timeout", "0.5"), editor_setup=setup
    )
    (result,) = played.results
    assert result.stop_reason == "end_turn"
    (tool_result,) = report(result)["tool_results"]
    assert tool_result == {
        "tool_call_id": "call_1",
        "is_error": True,
        "text": "read_file timed out after 0.5 s: stopped.",
    }
    assert len(played.sent_by_agent("$/cancel_request")) == 1


async def test_large_output_is_truncated_and_says_so(tmp_path: Path) -> None:
    script = {
        "responses": [
            {"events": [tool_call("call_1", "read_file", path="big.txt")]},
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        return [await client.prompt(sid, "Read it")]

    played = await play(tmp_path, script, turns, files={"big.txt": "x" * 60_000})
    (tool_result,) = report(played.results[0])["tool_results"]
    assert tool_result["text"].startswith("x" * 50_000 + "\n")
    assert tool_result["text"].endswith(
        "[output truncated: showing the first 50000 of 60000 characters]"
    )
