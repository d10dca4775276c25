"""Property: a Stop at a random moment of a scripted tool session.

Random model responses call a few tools (reads, writes, quick and long
commands, unknown tools, a call still streaming when the response hangs);
the editor grants, rejects or never answers permissions, and serves files
and terminals from a temporary workspace.  The turn is stopped after a
random number of messages from the agent (or once it waits on something that
never ends).  Whatever the moment:

* nothing of the stopped turn reaches the editor after its prompt response:
  no update and no request (no tool starts, no terminal is touched);
* every tool call announced got exactly one final status before the response,
  and every terminal created was released before it;
* every complete tool call of the turn has exactly one result in the log, the
  log passes `check_log`, and every derived history passes `check_history`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.harness import prompt_until
from test_cancel_property import serve_in_process
from workspace_editor import FULL_CAPABILITIES, WorkspaceEditor

from acp_bridge.client import AcpClient
from acp_bridge.log.check import check_history, check_log
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.reader import read_records

Json = dict[str, Any]
LONG = "sleep 30"

call_kinds = st.sampled_from(["read", "read_missing", "write", "quick", "long", "unknown"])


def call_event(i: int, kind: str) -> Json:
    call_id = f"call_{i}"
    if kind == "read":
        name, args = "read_file", {"path": "notes.txt"}
    elif kind == "read_missing":
        name, args = "read_file", {"path": "missing.txt"}
    elif kind == "write":
        name, args = "write_file", {"path": f"w{i}.txt", "content": "x"}
    elif kind == "quick":
        name, args = "run_command", {"command": f"echo out{i}"}
    elif kind == "long":
        name, args = "run_command", {"command": f"echo out{i}; {LONG}"}
    else:
        name, args = "teleport", {}
    return {"tool_call": {"id": call_id, "name": name, "arguments": args, "chunks": 2}}


@st.composite
def sessions(draw: st.DrawFn) -> tuple[Json, list[str], int]:
    kinds = draw(st.lists(call_kinds, min_size=1, max_size=3), label="calls")
    events: list[Json] = []
    if draw(st.booleans(), label="text first"):
        events.append({"text": "Working on it.", "chunk_size": 5})
    events += [call_event(i, kind) for i, kind in enumerate(kinds, 1)]
    half = draw(st.booleans(), label="a call still streaming")
    if half:
        events += [
            {"tool_call_start": {"id": "call_half", "name": "write_file"}},
            {"tool_args": '{"path": "h'},
            {"hang": True},
        ]
    answers = draw(
        st.lists(
            st.sampled_from(["allow_once", "allow_always", "reject_once", "dismiss", "hang"]),
            min_size=4,
            max_size=4,
        ),
        label="permission answers",
    )
    k = draw(st.integers(min_value=1, max_value=30), label="stop after K agent messages")
    script = {
        "responses": [
            {"events": events},
            {"events": [{"report": ["message_count", "tool_results"]}]},
        ],
        "when_exhausted": "repeat_last",
    }
    return script, answers, k


def agent_sent(client: AcpClient) -> list[Json]:
    return [m for d, m in client.transcript if d == "recv"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=sessions())
def test_stop_at_a_random_moment_of_a_tool_session(session: tuple[Json, list[str], int]) -> None:
    script, answers, k = session
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        (workspace / "notes.txt").write_text("buy milk\n")
        editor = WorkspaceEditor(workspace)
        editor.permission_answers = list(answers)
        box: dict[str, Any] = {}

        def waiting_forever(client: AcpClient, since: int) -> bool:
            if any(a == "hang" for a in editor.served_answers):
                return True
            long_running = any(
                LONG in " ".join(t.args) for t in editor.terminals.values() if not t.exited.is_set()
            )
            half = any(u.get("toolCallId") == "call_half" for u in client.updates[since:])
            return long_running or half

        async def play(client: AcpClient) -> None:
            async with anyio.create_task_group() as tg:
                editor.install(client, tg)
                await client.initialize(FULL_CAPABILITIES)
                sid = await client.new_session(str(workspace))
                start = len(agent_sent(client))

                def until(c: AcpClient, since: int) -> Any:
                    return lambda: len(agent_sent(c)) - start >= k or waiting_forever(c, since)

                box["stopped"] = await prompt_until(client, sid, "Go", until, settle=0)
                box["mark"] = len(client.transcript)
                box["records_1"] = list(served_records(client, tmp, sid))
                box["after"] = await client.prompt(sid, "What happened?", settle=0)
                box["sid"] = sid
                tg.cancel_scope.cancel()

        def served_records(client: AcpClient, state_dir: str, sid: str) -> list[Json]:
            return read_records(Path(state_dir) / "state" / "sessions" / f"{sid}.jsonl")

        async def main() -> Any:
            return await serve_in_process(script, str(Path(tmp) / "state"), play)

        served = anyio.run(main)
        assert served.status == 0
        client = served.client
        transcript = client.transcript
        stopped = box["stopped"]
        assert "result" in stopped.response, stopped.response

        # Where the first prompt's response is, and where the follow-up was sent.
        response_at = next(
            i
            for i, (d, m) in enumerate(transcript)
            if d == "recv" and m.get("id") == stopped.response["id"] and "result" in m
        )
        follow_up_at = next(
            i
            for i, (d, m) in enumerate(transcript)
            if i > response_at and d == "send" and m.get("method") == "session/prompt"
        )
        between = [m for d, m in transcript[response_at + 1 : follow_up_at] if d == "recv"]
        assert [m for m in between if "method" in m] == [], (
            "the stopped turn went on after its response"
        )

        # Every announced call: one final status, before the response.
        finals: dict[str, int] = {}
        announced: set[str] = set()
        for d, m in transcript[:response_at]:
            if d != "recv" or m.get("method") != "session/update":
                continue
            update = m["params"]["update"]
            if update["sessionUpdate"] in ("tool_call", "tool_call_update"):
                announced.add(update["toolCallId"])
                if update.get("status") in ("completed", "failed"):
                    finals[update["toolCallId"]] = finals.get(update["toolCallId"], 0) + 1
        assert finals == dict.fromkeys(announced, 1)

        # Every terminal created in the turn was released before its response.
        created = [
            m
            for d, m in transcript[:response_at]
            if d == "recv" and m.get("method") == "terminal/create"
        ]
        released = [
            m
            for d, m in transcript[:response_at]
            if d == "recv" and m.get("method") == "terminal/release"
        ]
        assert len(created) == len(released)

        # The log: every complete call of turn 1 has exactly one result; histories valid.
        records = box["records_1"]
        check_log(records)
        calls = [
            block["id"]
            for r in records
            if r["type"] == "assistant/message"
            for block in r["content"]
            if block["type"] == "tool_call"
        ]
        results = [r["tool_call_id"] for r in records if r["type"] == "tool/result"]
        assert sorted(calls) == sorted(results)
        assert len(set(results)) == len(results)
        check_history(derive_messages(records))
        full = served.records(box["sid"])
        check_log(full)
        check_history(derive_messages(full))
        assert "result" in box["after"].response
