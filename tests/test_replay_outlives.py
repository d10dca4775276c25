"""A replay that outlives the process: ``session/load`` in a new process shows a
command's terminal as its captured output and exit status, never as the id of
a terminal of the editor's that is gone (an editor drops a whole update that
names an unknown terminal)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_schema import AcpSchema
from harness import SessionSnapshot, normalize, run_bridge, tool_call, write_script
from syrupy.assertion import SnapshotAssertion
from workspace_editor import FULL_CAPABILITIES, WorkspaceEditor

from acp_bridge.client import AcpClient

pytestmark = pytest.mark.anyio

SCRIPT = {
    "responses": [
        {"events": [tool_call("call_1", "run_command", command="echo lighthouse")]},
        {"events": [{"text": "It printed lighthouse."}]},
    ]
}


def load_params(session_id: str, cwd: Path) -> dict[str, Any]:
    return {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []}


async def test_load_replays_a_command_as_its_output_text(
    tmp_path: Path, acp_schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    state = tmp_path / "state"
    sid: list[str] = []

    async def first(client: AcpClient) -> None:
        editor = WorkspaceEditor(workspace)
        async with anyio.create_task_group() as tg:
            editor.install(client, tg)
            editor.permission_answers = ["allow_once"]
            await client.initialize(FULL_CAPABILITIES)
            sid.append(await client.new_session(str(workspace)))
            result = await client.prompt(sid[0], "Run it")
            assert result.stop_reason == "end_turn"
            editor.released.set()
            tg.cancel_scope.cancel()

    one = await run_bridge(write_script(tmp_path, SCRIPT), state, first)
    live = json.dumps(one.client.updates)
    assert '"terminalId"' in live  # the live session embedded the editor's terminal

    async def second(client: AcpClient) -> None:
        await client.initialize(FULL_CAPABILITIES)
        response = await client.request("session/load", load_params(sid[0], workspace))
        assert "result" in response

    two = await run_bridge(write_script(tmp_path, SCRIPT), state, second, mode="inprocess")
    replayed = [u for u in two.client.updates if u["sessionUpdate"].startswith("tool_call")]
    assert "terminal" not in json.dumps(replayed)
    final = replayed[-1]
    assert final["status"] == "completed"
    assert final["rawOutput"]["exitCode"] == 0
    (text,) = [c["content"]["text"] for c in final["content"] if c["type"] == "content"]
    assert text == "$ echo lighthouse\nlighthouse\n[exit code 0]"
    # Every update the call had live is there but the terminal embed alone.
    assert len(replayed) == len([u for u in one.client.updates if "toolCallId" in u]) - 1
    acp_schema.check_transcript(two.client.transcript)
    wire = normalize(
        [list(entry) for entry in two.client.transcript], paths={str(tmp_path): "<tmp>"}
    )
    assert wire == snapshot.use_extension(SessionSnapshot)
