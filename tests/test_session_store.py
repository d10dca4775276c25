"""Stored sessions through the real subprocess: load, resume, close, list, fork,
regenerate, the lock, and delete, snapshot-tested.

Most scenarios use two processes over one state directory, the way an editor
that restarts the agent does: the first plays a conversation, the second
opens it again.  Each snapshot holds the second process's wire transcript
(what ``session/load`` replayed, what ``session/resume`` did not) and the
logs, normalized like `tests/test_sessions.py`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_schema import AcpSchema, load_acp_unstable_schema
from support.bridge import Mode, running_bridge
from support.harness import (
    Run,
    SessionSnapshot,
    chunks_seen,
    coalesce_deltas,
    cwd_for_tests,
    normalize,
    prompt_until,
    run_bridge,
    wait_until,
)
from syrupy.assertion import SnapshotAssertion

from acp_bridge.client import CHUNK_KINDS, AcpClient, bridge_command, prompt_params
from acp_bridge.log.check import check_log
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.replay import replay_updates

pytestmark = pytest.mark.anyio

CWD = cwd_for_tests()
LONG_MS = 30_000
STORY = "Once upon a time,"  # four chunks of five, then a long pause

Json = dict[str, Any]


@pytest.fixture(scope="module")
def schema() -> AcpSchema:
    # session/fork is in the unstable schema only; everything else is in both.
    return load_acp_unstable_schema()


def client_text(client: AcpClient, *, since: int = 0) -> str:
    """The message text the client has been sent (since ``client.updates[since]``)."""
    return "".join(
        u["content"]["text"]
        for u in client.updates[since:]
        if u.get("sessionUpdate") == "agent_message_chunk"
    )


def story_then(*rest: Json) -> Json:
    return {
        "when_exhausted": "repeat_last",
        "responses": [
            {
                "events": [
                    {"text": STORY, "chunk_size": 5},
                    {"delay_ms": LONG_MS},
                    {"text": " never shown"},
                ]
            },
            *rest,
        ],
    }


REPORT = {
    "events": [
        {
            "report": [
                "message_count",
                "last_user_text",
                "last_assistant_text",
                "last_assistant_interrupted",
            ]
        }
    ]
}


async def bridge(
    tmp: Path,
    name: str,
    script: Json,
    play: Callable[[AcpClient], Awaitable[None]],
    mode: Mode = "inprocess",
) -> Run:
    """A bridge on ``script``, served in this process, or the real command: for
    regenerate, delete and close (their tests through the process), and for a bridge
    whose session a later one opens again (a bridge served in this process
    keeps its sessions' log locks until the test process exits)."""
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(script))
    return await run_bridge(path, tmp / "state", play, mode=mode)


async def load(client: AcpClient, sid: str, method: str = "session/load") -> Json:
    return await client.request(method, {"sessionId": sid, "cwd": CWD, "mcpServers": []})


def merged(updates: list[Json]) -> list[Json]:
    """Consecutive chunks of one message and kind joined; markers dropped."""
    out: list[Json] = []
    for update in updates:
        update = {k: v for k, v in update.items() if k != "_meta"}
        previous = out[-1] if out else None
        if (
            previous is not None
            and update["sessionUpdate"] in CHUNK_KINDS
            and previous["sessionUpdate"] == update["sessionUpdate"]
            and previous.get("messageId") == update.get("messageId")
        ):
            text = previous["content"]["text"] + update["content"]["text"]
            out[-1] = {**previous, "content": {"type": "text", "text": text}}
        else:
            out.append(update)
    return out


def live_view(client: AcpClient, sid: str) -> list[Json]:
    """What an editor showed: each prompt's blocks, then the updates of the session."""
    out: list[Json] = []
    for direction, msg in client.transcript:
        if direction != "send" and direction != "recv":
            continue
        params = msg.get("params") or {}
        if params.get("sessionId") != sid:
            continue
        if direction == "send" and msg.get("method") == "session/prompt":
            for block in params["prompt"]:
                out.append({"sessionUpdate": "user_message_chunk", "content": block})
        elif direction == "recv" and msg.get("method") == "session/update":
            if params["update"]["sessionUpdate"] == "available_commands_update":
                continue  # sent when a session opens, not part of the conversation
            out.append(params["update"])
    return out


def updates_before_response(client: AcpClient, request_id: object) -> list[Json]:
    """The session/update notifications received before the response to ``request_id``."""
    out: list[Json] = []
    for direction, msg in client.transcript:
        if direction != "recv":
            continue
        if msg.get("id") == request_id and "method" not in msg:
            return out
        if msg.get("method") == "session/update":
            out.append(msg["params"]["update"])
    raise AssertionError(f"no response to {request_id!r}")


def last_request_id(client: AcpClient, method: str) -> object:
    for direction, msg in reversed(client.transcript):
        if direction == "send" and msg.get("method") == method:
            return msg["id"]
    raise AssertionError(f"no {method} sent")


def coalesced_wire(transcript: list[tuple[str, Json]]) -> list[list[Any]]:
    """The transcript with consecutive chunks of one message joined: a replay sends
    one chunk per logged batch, and batching depends on timing."""
    out: list[list[Any]] = []
    for direction, msg in transcript:
        update = (msg.get("params") or {}).get("update") or {}
        if out and direction == "recv" and update.get("sessionUpdate") in CHUNK_KINDS:
            prev = out[-1][1].get("params", {}).get("update", {})
            same = all(
                prev.get(k) == update.get(k) for k in ("sessionUpdate", "messageId", "_meta")
            )
            if out[-1][0] == "recv" and same:
                joined = prev["content"]["text"] + update["content"]["text"]
                out[-1][1]["params"]["update"]["content"] = {"type": "text", "text": joined}
                continue
        out.append([direction, json.loads(json.dumps(msg))])
    return out


def snapshot_of(runs: list[Run]) -> Json:
    # In order of creation (file names are random ids).
    logs = dict(sorted(runs[-1].logs().items(), key=lambda item: item[1][0]["at"]))
    shot: Json = normalize(
        {
            "wire": [coalesced_wire(run.client.transcript) for run in runs],
            "logs": [coalesce_deltas(records) for records in logs.values()],
            "history": [derive_messages(records) for records in logs.values()],
        },
        paths={str(runs[-1].state_dir): "<state>", CWD: "<cwd>"},
    )
    return shot


def check_all(runs: list[Run], schema: AcpSchema) -> None:
    for run in runs:
        assert run.returncode == 0
        schema.check_transcript(run.client.transcript)
    for records in runs[-1].logs().values():
        check_log(records)


async def stop_story(client: AcpClient, sid: str, chunks: int = 4) -> str:
    result = await prompt_until(
        client, sid, "Tell me a story.", lambda c, since: chunks_seen(c, chunks, since=since)
    )
    assert result.stop_reason == "cancelled"
    return result.text()


# -- load ----------------------------------------------------------------------------


async def test_load_after_a_cancelled_turn_replays_what_was_seen(
    tmp_path: Path, schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    sid: list[str] = []
    seen: list[str] = []

    async def first(client: AcpClient) -> None:
        await client.initialize()
        sid.append(await client.new_session(CWD))
        seen.append(await stop_story(client, sid[0]))

    async def second(client: AcpClient) -> None:
        init = await client.initialize()
        assert init["result"]["agentCapabilities"]["loadSession"] is True
        response = await load(client, sid[0])
        assert response["result"]["_meta"]["acpBridge"]["turns"] == [
            {"turn": 1, "reason": "cancelled"}
        ]

    one = await bridge(tmp_path, "one", story_then(REPORT), first, mode="subprocess")
    two = await bridge(tmp_path, "two", story_then(REPORT), second)
    replayed = updates_before_response(two.client, last_request_id(two.client, "session/load"))
    # The session's commands close the replay, before the answer.
    assert replayed.pop()["sessionUpdate"] == "available_commands_update"
    # The same conversation, modulo chunking, and every character that was shown.
    assert merged(replayed) == merged(live_view(one.client, sid[0]))
    chunks = [u for u in replayed if u["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(u["content"]["text"] for u in chunks) == seen[0]
    assert seen[0]
    assert STORY.startswith(seen[0])
    assert all(u["_meta"] == {"acpBridge": {"interrupted": True}} for u in chunks)
    check_all([one, two], schema)
    assert snapshot_of([one, two]) == snapshot.use_extension(SessionSnapshot)


async def test_load_after_a_tool_call_replays_its_final_status(
    tmp_path: Path, schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    script = {
        "responses": [
            {
                "events": [
                    {"text": "Let me look.", "chunk_size": 4},
                    {
                        "tool_call": {
                            "id": "call_1",
                            "name": "read_file",
                            "arguments": {"path": "README.md"},
                        }
                    },
                ]
            },
            {"events": [{"text": "It is a README.", "chunk_size": 4}]},
        ]
    }
    sid: list[str] = []

    async def first(client: AcpClient) -> None:
        await client.initialize()
        sid.append(await client.new_session(CWD))
        result = await client.prompt(sid[0], "What is in README.md?")
        assert result.stop_reason == "end_turn"

    async def second(client: AcpClient) -> None:
        await client.initialize()
        await load(client, sid[0])

    one = await bridge(tmp_path, "one", script, first, mode="subprocess")
    two = await bridge(tmp_path, "two", script, second)
    replayed = updates_before_response(two.client, last_request_id(two.client, "session/load"))
    assert replayed.pop()["sessionUpdate"] == "available_commands_update"
    assert merged(replayed) == merged(live_view(one.client, sid[0]))
    tool_updates = [u for u in replayed if u["sessionUpdate"].startswith("tool_call")]
    # The call ran (a relative path: the tool refuses it), and the replay ends
    # it on its final status, as the editor saw it live.
    assert [(u["sessionUpdate"], u.get("status")) for u in tool_updates] == [
        ("tool_call", "pending"),
        ("tool_call_update", "pending"),
        ("tool_call_update", "in_progress"),
        ("tool_call_update", "failed"),
    ]
    check_all([one, two], schema)
    assert snapshot_of([one, two]) == snapshot.use_extension(SessionSnapshot)


async def test_a_second_process_cannot_open_a_session_in_use(tmp_path: Path) -> None:
    """The lock: while one process has the session, another gets a clear error."""
    state = tmp_path / "state"
    script = tmp_path / "s.json"
    script.write_text(json.dumps(story_then(REPORT)))
    sid: list[str] = []
    errors: list[Json] = []

    async def holder(client: AcpClient) -> None:
        await client.initialize()
        sid.append(await client.new_session(CWD))
        await client.prompt(sid[0], "Hello", cancel_after=2)

        async def intruder(other: AcpClient) -> None:
            await other.initialize()
            errors.append((await load(other, sid[0]))["error"])
            errors.append((await load(other, sid[0], "session/resume"))["error"])
            errors.append((await other.request("session/delete", {"sessionId": sid[0]}))["error"])

        await run_bridge(script, state, intruder)

    await run_bridge(script, state, holder)
    for error in errors:
        assert error["code"] == -32603
        assert error["data"]["kind"] == "session_locked"
        assert "open in another acp-bridge process" in error["message"]

    # Once the holder has exited, the session opens again.
    async def after(client: AcpClient) -> None:
        await client.initialize()
        assert "result" in await load(client, sid[0])

    await run_bridge(script, state, after)


# -- resume, close, delete -------------------------------------------------------------


async def test_resume_replays_nothing_and_continues_the_conversation(
    tmp_path: Path, schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    script = {
        "when_exhausted": "repeat_last",
        "responses": [{"events": [{"text": "First answer.", "chunk_size": 6}]}, REPORT],
    }
    sid: list[str] = []
    report: list[str] = []

    async def first(client: AcpClient) -> None:
        await client.initialize()
        sid.append(await client.new_session(CWD))
        await client.prompt(sid[0], "Hello there")

    async def second(client: AcpClient) -> None:
        await client.initialize()
        response = await load(client, sid[0], "session/resume")
        assert "result" in response
        result = await client.prompt(sid[0], "And now?")
        report.append(result.text())

    one = await bridge(tmp_path, "one", script, first, mode="subprocess")
    # The second process's provider starts its script over: its first answer is the report.
    two = await bridge(tmp_path, "two", {"responses": [REPORT]}, second)
    before = updates_before_response(two.client, last_request_id(two.client, "session/resume"))
    # The session's state, not its conversation, comes before the response.
    assert [u["sessionUpdate"] for u in before] == [
        "session_info_update",
        "available_commands_update",
    ]
    assert before[0]["title"] == "Hello there"
    assert "message_count: 3" in report[0]
    assert 'last_assistant_text: "First answer."' in report[0]
    check_all([one, two], schema)
    assert snapshot_of([one, two]) == snapshot.use_extension(SessionSnapshot)


async def test_close_during_a_stream_cancels_it_first(
    tmp_path: Path, schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    sid: list[str] = []

    async def play(client: AcpClient) -> None:
        await client.initialize()
        sid.append(await client.new_session(CWD))
        prompt_id = client.next_id()
        await client.send(
            {
                "jsonrpc": "2.0",
                "id": prompt_id,
                "method": "session/prompt",
                "params": prompt_params(sid[0], "Go"),
            }
        )
        # The whole story shown: the stream is in its long pause, so the close
        # comes at the same point of the turn on every run.
        await wait_until(lambda: client_text(client) == STORY)
        closed = await client.request("session/close", {"sessionId": sid[0]})
        assert closed["result"] == {}
        answer = await client.wait_response(prompt_id)
        assert answer["result"] == {"stopReason": "cancelled"}
        ids = [m.get("id") for d, m in client.transcript if d == "recv" and "method" not in m]
        # The prompt was answered before the close.
        assert ids.index(prompt_id) < ids.index(closed["id"])
        gone = await client.prompt(sid[0], "Still there?")
        assert gone.response["error"]["code"] == -32602
        # Freed: this very process can open it again (its lock was released).
        again = await load(client, sid[0], "session/resume")
        assert "result" in again

    # Through the real command: served in this process, the reopen after the close
    # was once refused as still locked (seen under load, not yet explained).
    run = await bridge(tmp_path, "one", story_then(REPORT), play, mode="subprocess")
    records = run.logs()[sid[0]]
    assert [r["reason"] for r in records if r["type"] == "turn/end"] == ["cancelled"]
    check_all([run], schema)
    assert snapshot_of([run]) == snapshot.use_extension(SessionSnapshot)


async def test_delete_removes_the_session(tmp_path: Path) -> None:
    async def play(client: AcpClient) -> None:
        await client.initialize()
        sid = await client.new_session(CWD)
        await client.prompt(sid, "Hello")
        assert (await client.request("session/delete", {"sessionId": sid}))["result"] == {}
        listed = await client.request("session/list", {})
        assert listed["result"]["sessions"] == []
        missing = await load(client, sid)
        assert missing["error"]["code"] == -32602
        assert missing["error"]["data"]["field"] == "sessionId"
        # Deleting it again, or a session that never existed, succeeds silently.
        for gone in (sid, "sess_" + "0" * 32):
            again = await client.request("session/delete", {"sessionId": gone})
            assert again == {"jsonrpc": "2.0", "id": again["id"], "result": {}}
        # An id that cannot be a session's is still bad params.
        bad = await client.request("session/delete", {"sessionId": "../x"})
        assert bad["error"]["code"] == -32602

    run = await bridge(tmp_path, "one", {"responses": [REPORT]}, play, mode="subprocess")
    assert list((run.state_dir / "sessions").iterdir()) == []


async def test_the_session_state_comes_before_a_load_or_resume_answer_after_a_new_one(
    tmp_path: Path,
) -> None:
    """The commands (and the title) of a session: after the session/new and
    session/fork answer, which tells the editor the id (an update for an unknown id
    is dropped); before the
    answer of a load or resume, whose id the editor gave, so the session opens with
    them."""
    script = {"responses": [{"events": [{"text": "First answer."}]}]}
    sid: list[str] = []
    state = ("available_commands_update", "session_info_update")

    def kinds(updates: list[Json]) -> list[str]:
        return [u["sessionUpdate"] for u in updates if u["sessionUpdate"] in state]

    async def first(client: AcpClient) -> None:
        await client.initialize()
        sid.append(await client.new_session(CWD))
        await client.prompt(sid[0], "Hello there")
        fork = await client.request(
            "session/fork", {"sessionId": sid[0], "cwd": CWD, "mcpServers": []}
        )
        sid.append(fork["result"]["sessionId"])
        await client.request("_acp-bridge/no_such_method", {})  # a barrier

    def of_session(client: AcpClient, session_id: str) -> tuple[list[str], bool]:
        """The session state updates of ``session_id``, and whether any came before
        the answer that gave its id."""
        seen: list[str] = []
        early = False
        answered = False
        for direction, msg in client.transcript:
            if direction != "recv":
                continue
            if (msg.get("result") or {}).get("sessionId") == session_id:
                answered = True
            params = msg.get("params") or {}
            if msg.get("method") == "session/update" and params.get("sessionId") == session_id:
                kind = params["update"]["sessionUpdate"]
                if kind in state:
                    seen.append(kind)
                    early = early or not answered
        return seen, early

    async def reopen(method: str) -> Callable[[AcpClient], Awaitable[None]]:
        async def play(client: AcpClient) -> None:
            await client.initialize()
            assert "result" in await load(client, sid[0], method)
            await client.request("_acp-bridge/no_such_method", {})  # a barrier

        return play

    one = await bridge(tmp_path, "one", script, first, mode="subprocess")
    new_id = last_request_id(one.client, "session/new")
    assert updates_before_response(one.client, new_id) == []
    assert of_session(one.client, sid[0]) == (
        ["available_commands_update", "session_info_update"],
        False,
    )
    # A fork: its id is new to the editor, so its state follows the answer: the
    # title its turns gave it, then its commands.
    assert of_session(one.client, sid[1]) == (
        ["session_info_update", "available_commands_update"],
        False,
    )
    for method in ("session/load", "session/resume"):
        run = await bridge(tmp_path, method[8:], script, await reopen(method), mode="subprocess")
        rid = last_request_id(run.client, method)
        before = kinds(updates_before_response(run.client, rid))
        assert before == ["session_info_update", "available_commands_update"], method
        assert kinds(run.client.updates) == before, f"session state after the {method} answer"


# -- list ------------------------------------------------------------------------------


async def test_list_filters_by_cwd_and_pages(
    tmp_path: Path, schema: AcpSchema, snapshot: SnapshotAssertion, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACP_BRIDGE_LIST_PAGE_SIZE", "2")
    other = CWD + "-other"
    os.makedirs(other, exist_ok=True)  # session/new wants a directory that exists
    pages: list[Json] = []

    async def play(client: AcpClient) -> None:
        await client.initialize()
        for i, cwd in enumerate([CWD, other, CWD, CWD]):
            sid = await client.new_session(cwd)
            await client.prompt(sid, f"Session number {i}:   a   question")
        cursor: str | None = None
        while True:
            params: Json = {"cwd": CWD} | ({"cursor": cursor} if cursor else {})
            page = (await client.request("session/list", params))["result"]
            pages.append(page)
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        everything = (await client.request("session/list", {}))["result"]
        assert len(everything["sessions"]) == 2
        assert "nextCursor" in everything
        bad = await client.request("session/list", {"cursor": "nonsense"})
        assert bad["error"]["data"]["field"] == "cursor"

    run = await bridge(
        tmp_path, "one", {"responses": [REPORT], "when_exhausted": "repeat_last"}, play
    )
    assert [len(p["sessions"]) for p in pages] == [2, 1]
    titles = [s["title"] for p in pages for s in p["sessions"]]
    # Newest first, only this cwd, whitespace folded.
    assert titles == [
        "Session number 3: a question",
        "Session number 2: a question",
        "Session number 0: a question",
    ]
    for page in pages:
        for info in page["sessions"]:
            assert info["cwd"] == CWD
            assert info["updatedAt"].endswith("Z")
    check_all([run], schema)
    shot = normalize(pages, paths={CWD: "<cwd>"})
    for page in shot:
        for info in page["sessions"]:
            info["updatedAt"] = "<time>"
        if "nextCursor" in page:
            page["nextCursor"] = "<cursor>"
    assert shot == snapshot.use_extension(SessionSnapshot)


# -- fork and regenerate -----------------------------------------------------------------


async def test_fork_at_a_cancelled_turn_keeps_the_interrupted_text(
    tmp_path: Path, schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    sid: list[str] = []
    seen: list[str] = []
    report: list[str] = []

    async def first(client: AcpClient) -> None:
        await client.initialize()
        sid.append(await client.new_session(CWD))
        seen.append(await stop_story(client, sid[0]))
        await client.prompt(sid[0], "Go on")  # a second turn the fork leaves out

    async def second(client: AcpClient) -> None:
        await client.initialize()
        forked = await client.request("_acp-bridge/fork_at_turn", {"sessionId": sid[0], "turn": 1})
        new = forked["result"]["sessionId"]
        assert forked["result"]["_meta"]["acpBridge"]["parent"] == {
            "sessionId": sid[0],
            "turn": 1,
        }
        result = await client.prompt(new, "What did you say?")
        report.append(result.text())
        sid.append(new)
        # The whole-session fork of the unstable schema, too.
        whole = await client.request("session/fork", {"sessionId": sid[0], "cwd": CWD})
        assert whole["result"]["_meta"]["acpBridge"]["parent"]["turn"] == 2
        bad = await client.request("_acp-bridge/fork_at_turn", {"sessionId": sid[0], "turn": 7})
        assert bad["error"]["data"]["field"] == "turn"

    one = await bridge(tmp_path, "one", story_then(REPORT), first)
    two = await bridge(tmp_path, "two", {"responses": [REPORT]}, second)
    assert f"last_assistant_text: {json.dumps(seen[0])}" in report[0]
    assert "last_assistant_interrupted: true" in report[0]
    assert 'last_user_text: "What did you say?"' in report[0]
    fork_log = two.logs()[sid[1]]
    assert fork_log[0]["parent"] == {"session_id": sid[0], "turn": 1}
    check_all([one, two], schema)
    assert snapshot_of([one, two]) == snapshot.use_extension(SessionSnapshot)


async def test_regenerate_after_a_stop(
    tmp_path: Path, schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    script = story_then(
        REPORT, {"events": [{"text": "Streaming", "chunk_size": 3}, {"hang": True}]}
    )
    sid: list[str] = []
    seen: list[str] = []
    report: list[str] = []
    refused: list[Json] = []

    async def play(client: AcpClient) -> None:
        await client.initialize()
        sid.append(await client.new_session(CWD))
        seen.append(await stop_story(client, sid[0]))
        result = await client.prompt(sid[0], "/regenerate")
        assert result.stop_reason == "end_turn"
        report.append(result.text())

        start = len(client.updates)

        def streaming() -> bool:
            # The whole of it shown: the stream hangs there, so the Stop comes at the
            # same point on every run (after one chunk, a busy machine decided how many).
            return client_text(client, since=start) == "Streaming"

        prompt_id = client.next_id()
        await client.send(
            {
                "jsonrpc": "2.0",
                "id": prompt_id,
                "method": "session/prompt",
                "params": prompt_params(sid[0], "More"),
            }
        )
        await wait_until(streaming)
        refused.append(
            (await client.request("_acp-bridge/regenerate", {"sessionId": sid[0]}))["error"]
        )
        await client.notify("session/cancel", {"sessionId": sid[0]})
        await client.wait_response(prompt_id)

    run = await bridge(tmp_path, "one", script, play, mode="subprocess")
    # The model saw the user's message and no reply: the stopped one was replaced.
    assert "message_count: 1" in report[0]
    assert 'last_user_text: "Tell me a story."' in report[0]
    assert refused[0]["data"]["kind"] == "session_busy"
    records = run.logs()[sid[0]]
    # The replaced reply stays in the log.
    (stopped,) = [r for r in records if r["type"] == "assistant/message" and r["turn"] == 1]
    assert stopped["content"] == [{"type": "text", "text": seen[0]}]
    starts = [r for r in records if r["type"] == "turn/start"]
    assert starts[1]["regenerates"] == 1
    history = derive_messages(records)
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[1]["content"][0]["text"].startswith("message_count: 1")
    # The replay marks the replaced reply.
    replayed = [u["update"] for u in replay_updates(records)]
    marked = [u for u in replayed if u.get("_meta", {}).get("acpBridge", {}).get("replaced")]
    assert "".join(u["content"]["text"] for u in marked) == seen[0]
    check_all([run], schema)
    assert snapshot_of([run]) == snapshot.use_extension(SessionSnapshot)


# -- after a crash ---------------------------------------------------------------------------


async def test_load_after_sigkill_mid_stream_keeps_what_was_shown(
    tmp_path: Path, schema: AcpSchema, snapshot: SnapshotAssertion
) -> None:
    """Killed mid-stream: the next process closes the turn as ``crashed``, replays
    the shown text marked so, and the model's next request holds it."""
    script = tmp_path / "one.json"
    script.write_text(json.dumps(story_then(REPORT)))
    state = tmp_path / "state"
    command = bridge_command(
        "--provider", "fake", "--script", str(script), "--state-dir", str(state)
    )
    async with running_bridge(command, stderr=subprocess.DEVNULL) as killed:
        with anyio.fail_after(30):
            await killed.initialize()
            sid = await killed.new_session(CWD)
            await killed.send(
                {
                    "jsonrpc": "2.0",
                    "id": killed.next_id(),
                    "method": "session/prompt",
                    "params": prompt_params(sid, "Story?"),
                }
            )
            await killed.wait_until(chunks_seen(killed, 4))
        killed.agent.send_signal(signal.SIGKILL)
        await killed.agent.wait()
    shown = "".join(
        u["content"]["text"] for u in killed.updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert shown == STORY
    report: list[str] = []

    async def second(client: AcpClient) -> None:
        await client.initialize()
        response = await load(client, sid)
        assert response["result"]["_meta"]["acpBridge"]["turns"] == [
            {"turn": 1, "reason": "crashed"}
        ]
        report.append((await client.prompt(sid, "Go on")).text())

    two = await bridge(tmp_path, "two", {"responses": [REPORT]}, second)
    replayed = updates_before_response(two.client, last_request_id(two.client, "session/load"))
    chunks = [u for u in replayed if u["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(u["content"]["text"] for u in chunks) == shown
    assert all(u["_meta"] == {"acpBridge": {"interrupted": True, "crashed": True}} for u in chunks)
    assert f"last_assistant_text: {json.dumps(shown)}" in report[0]
    assert "last_assistant_interrupted: true" in report[0]
    check_all([two], schema)
    assert snapshot_of([two]) == snapshot.use_extension(SessionSnapshot)
