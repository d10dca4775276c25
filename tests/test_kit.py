"""The public test kit (`acp_bridge.testing`): its client against a scripted agent in
process (exact frames, no timing), against acp-bridge through the ``acp_agent``
fixture, and its pytest plugin's options in a pytest run of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson
import pytest
from support.harness import ROOT, nested_pytest_env, tool_call, write_script

from acp_bridge.client import AcpClient
from acp_bridge.testing import (
    CANCELLED,
    Agent,
    AgentLauncher,
    TurnEnded,
    accept,
    allow_once,
    transcript_snapshot,
    wait_for_stop,
)
from acp_bridge.testing.normalize import ID_PATTERNS, normalize
from acp_bridge.testing.transcript import session_id_pattern, session_ids

pytestmark = pytest.mark.anyio

Json = dict[str, Any]


# -- a scripted agent in process --------------------------------------------------------


class FakeAgent:
    """The agent's end of in-memory pipes: the test reads what the kit sent, frame by
    frame, and writes exactly what it wants the kit to receive."""

    def __init__(
        self,
        inbox: anyio.abc.ObjectReceiveStream[bytes],
        outbox: anyio.abc.ObjectSendStream[bytes],
    ) -> None:
        self.inbox = inbox
        self.outbox = outbox
        self.writes: list[bytes] = []  # each write of the kit, as it came
        self._lines: list[bytes] = []

    async def read(self) -> Json:
        with anyio.fail_after(10):
            while not self._lines:
                data = await self.inbox.receive()
                self.writes.append(data)
                self._lines += [line for line in data.split(b"\n") if line]
        message: Json = orjson.loads(self._lines.pop(0))
        return message

    async def send(self, *messages: Json) -> None:
        await self.outbox.send(b"".join(orjson.dumps(m) + b"\n" for m in messages))

    async def answer_settle(self) -> None:
        ping = await self.read()
        assert ping["method"] == "_acp_bridge/settle", ping
        await self.send(
            {"jsonrpc": "2.0", "id": ping["id"], "error": {"code": -32601, "message": "no"}}
        )


@asynccontextmanager
async def in_process(tmp_path: Path) -> AsyncIterator[tuple[Agent, FakeAgent]]:
    to_agent_send, to_agent_recv = anyio.create_memory_object_stream[bytes](100)
    from_agent_send, from_agent_recv = anyio.create_memory_object_stream[bytes](100)
    with to_agent_send, to_agent_recv, from_agent_send, from_agent_recv:
        client = AcpClient.over(to_agent_send, from_agent_recv)
        fake = FakeAgent(to_agent_recv, from_agent_send)
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.read_loop)
            agent = Agent(client, tg, workspace=tmp_path)
            yield agent, fake
            tg.cancel_scope.cancel()


def update(session_id: str, text: str) -> Json:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": session_id,
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
            },
        },
    }


def answer(request: Json, result: Json) -> Json:
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


async def both(
    agent_side: Callable[[], Coroutine[Any, Any, None]], test_side: Callable[[], Awaitable[Any]]
) -> Any:
    out: list[Any] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent_side)
        out.append(await test_side())
    return out[0]


async def open_session(agent: Agent, fake: FakeAgent, **init: Any) -> tuple[Any, Json]:
    async def agent_side() -> None:
        hello = await fake.read()
        await fake.send(answer(hello, {"protocolVersion": 1}))
        new = await fake.read()
        await fake.send(answer(new, {"sessionId": "s1"}))

    async def test_side() -> Any:
        await agent.initialize(**init)
        return await agent.new_session()

    session = await both(agent_side, test_side)
    return session, agent.transcript[0][1]


async def test_late_updates_are_caught_by_the_barrier(tmp_path: Path) -> None:
    """An update the agent writes after the response (here: once the barrier request
    is on its way, so only a barrier can see it) is in ``late``."""
    async with in_process(tmp_path) as (agent, fake):
        session, _ = await open_session(agent, fake)

        async def agent_side() -> None:
            prompt = await fake.read()
            await fake.send(update("s1", "in time"), answer(prompt, {"stopReason": "end_turn"}))
            ping = await fake.read()
            await fake.send(
                update("s1", "too late"),
                {"jsonrpc": "2.0", "id": ping["id"], "error": {"code": -32601, "message": "no"}},
            )

        result = await both(agent_side, lambda: session.prompt("hi"))
        assert result.stop_reason == "end_turn"
        assert [u["content"]["text"] for u in result.updates] == ["in time"]
        assert [u["content"]["text"] for u in result.late] == ["too late"]
        assert transcript_snapshot(agent)["wire"][-1][1]["params"]["update"]["content"] == {
            "type": "text",
            "text": "too late",
        }
        # The barrier's own frames are left out of the snapshot.
        assert "settle" not in json.dumps(transcript_snapshot(agent))


async def test_stop_at_once_sends_prompt_and_cancel_in_one_write(tmp_path: Path) -> None:
    async with in_process(tmp_path) as (agent, fake):
        session, _ = await open_session(agent, fake)

        async def agent_side() -> None:
            prompt = await fake.read()
            cancel = await fake.read()
            assert fake.writes[-1].count(b"\n") == 2, "one write, two frames"
            assert (prompt["method"], cancel["method"]) == ("session/prompt", "session/cancel")
            await fake.send(answer(prompt, {"stopReason": "cancelled"}))
            await fake.answer_settle()

        async def test_side() -> Any:
            turn = await session.start_prompt("hi", stop_at_once=True)
            return await turn.result()

        result = await both(agent_side, test_side)
        assert result.stop_reason == "cancelled"


async def test_wait_for_stop_answers_the_permission_cancelled_after_the_cancel(
    tmp_path: Path,
) -> None:
    async with in_process(tmp_path) as (agent, fake):
        session, _ = await open_session(agent, fake)
        agent.permissions = wait_for_stop()

        async def agent_side() -> None:
            prompt = await fake.read()
            await fake.send(
                {
                    "jsonrpc": "2.0",
                    "id": "ask-1",
                    "method": "session/request_permission",
                    "params": {
                        "sessionId": "s1",
                        "toolCall": {"toolCallId": "c1"},
                        "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}],
                    },
                }
            )
            cancel = await fake.read()
            assert cancel["method"] == "session/cancel"
            reply = await fake.read()
            assert reply == {"jsonrpc": "2.0", "id": "ask-1", "result": CANCELLED}
            await fake.send(answer(prompt, {"stopReason": "cancelled"}))
            await fake.answer_settle()

        async def test_side() -> Any:
            turn = await session.start_prompt("edit")
            request = await turn.wait_for_permission()
            assert request.answer is None
            assert request.option("allow_once") == "ok"
            result = await turn.stop()
            assert request.answer == CANCELLED
            return result

        result = await both(agent_side, test_side)
        assert result.stop_reason == "cancelled"


async def test_elicitations_are_answered_by_the_policy(tmp_path: Path) -> None:
    async with in_process(tmp_path) as (agent, fake):
        session, hello = await open_session(agent, fake, elicitation=True)
        assert hello["params"]["clientCapabilities"]["elicitation"] == {"form": {}}
        agent.elicitations = accept({"name": "Ada"})

        async def agent_side() -> None:
            prompt = await fake.read()
            ask = {
                "jsonrpc": "2.0",
                "id": "e1",
                "method": "elicitation/create",
                "params": {
                    "sessionId": "s1",
                    "message": "Your name?",
                    "mode": "form",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                    },
                },
            }
            await fake.send(ask)
            reply = await fake.read()
            assert reply["result"] == {"action": "accept", "content": {"name": "Ada"}}
            await fake.send(answer(prompt, {"stopReason": "end_turn"}))
            await fake.answer_settle()

        result = await both(agent_side, lambda: session.prompt("who am I?"))
        assert result.stop_reason == "end_turn"
        assert agent.elicitation_requests[0]["message"] == "Your name?"


async def test_a_turn_that_ends_before_the_chunks_is_not_stopped(tmp_path: Path) -> None:
    async with in_process(tmp_path) as (agent, fake):
        session, _ = await open_session(agent, fake)

        async def agent_side() -> None:
            prompt = await fake.read()
            await fake.send(update("s1", "short"), answer(prompt, {"stopReason": "end_turn"}))
            await fake.answer_settle()
            prompt = await fake.read()
            await fake.send(update("s1", "short"), answer(prompt, {"stopReason": "end_turn"}))
            await fake.answer_settle()

        async def test_side() -> Any:
            turn = await session.start_prompt("one")
            with pytest.raises(TurnEnded):
                await turn.wait_for_chunks(3)
            await turn.result()
            return await session.prompt("two", stop_after=3)

        result = await both(agent_side, test_side)
        assert result.stop_reason == "end_turn"
        sent = [m.get("method") for d, m in agent.transcript if d == "send"]
        assert "session/cancel" not in sent


# -- acp-bridge through the fixture -------------------------------------------------------


async def test_a_permission_allowed_by_policy_writes_through_the_editor(
    acp_agent: AgentLauncher, acp_workspace: Path, tmp_path: Path
) -> None:
    script = {
        "responses": [
            {"events": [tool_call("call_1", "write_file", path="out.txt", content="hi")]},
            {"events": [{"text": "Written."}]},
        ]
    }
    async with acp_agent.bridge(script=write_script(tmp_path, script)) as agent:
        agent.permissions = allow_once()
        await agent.initialize()
        session = await agent.new_session()
        result = await session.prompt("Write it")
        assert result.stop_reason == "end_turn"
        assert await agent.finish() == 0
    assert (acp_workspace / "out.txt").read_text() == "hi"
    # Asked first; then the write went through the editor (the bridge reads the old text first).
    assert agent.editor.methods()[0] == "session/request_permission"
    assert agent.editor.methods()[-1] == "fs/write_text_file"
    (request,) = agent.permission_requests
    assert request.answer == {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
    shot = json.dumps(transcript_snapshot(agent, logs=True))
    assert "<workspace>/out.txt" in shot
    assert str(tmp_path) not in shot


async def test_load_resume_fork_and_list_across_processes(
    acp_agent: AgentLauncher, acp_workspace: Path
) -> None:
    endless = ROOT / "examples" / "endless.json"
    async with acp_agent.bridge(script=endless) as agent:
        await agent.initialize()
        session = await agent.new_session()
        stopped = await session.prompt("Stream", stop_after=4)
        assert stopped.stop_reason == "cancelled"
        assert await agent.finish() == 0
    async with acp_agent.bridge(script=endless) as agent:
        await agent.initialize()
        loaded = await agent.load_session(session.id)
        replayed = "".join(
            u["content"]["text"]
            for u in loaded.replayed
            if u["sessionUpdate"] == "agent_message_chunk"
        )
        assert replayed == stopped.text()
        resumed = await agent.resume_session(session.id)
        assert [u for u in resumed.replayed if "content" in u] == []
        fork = await agent.fork_session(session.id)
        assert fork.id != session.id
        listed = await agent.list_sessions(acp_workspace)
        assert {s["sessionId"] for s in listed["sessions"]} == {session.id, fork.id}
        assert await agent.finish() == 0


async def test_snapshots_are_stable_for_an_agent_whose_session_ids_are_uuids(
    acp_agent: AgentLauncher,
) -> None:
    command = [sys.executable, str(ROOT / "tests" / "faulty_sdk_agent.py"), "--uuid-ids"]
    shots: list[Json] = []
    ids: list[str] = []
    for _ in range(2):
        async with acp_agent.command([*command, "--one-line"]) as agent:
            await agent.initialize()
            first = await agent.new_session()
            second = await agent.new_session()
            assert (await first.prompt("Hi")).stop_reason == "end_turn"
            assert (await second.prompt("Hi")).stop_reason == "end_turn"
            assert await agent.finish() == 0
        ids += [first.id, second.id]
        shots.append(transcript_snapshot(agent))
    assert len(set(ids)) == 4
    assert all(len(i) == 36 and not i.startswith("sess_") for i in ids)  # UUIDs
    assert shots[0] == shots[1]  # the same session, whatever ids the agent made
    text = json.dumps(shots[0])
    assert not any(i in text for i in ids)
    new_answers = [
        m["result"]
        for d, m in shots[0]["wire"]
        if d == "recv" and "sessionId" in m.get("result", {})
    ]
    assert new_answers == [{"sessionId": "<sess-1>"}, {"sessionId": "<sess-2>"}]


# -- the plugin -----------------------------------------------------------------------------


@pytest.mark.slow
def test_the_plugin_runs_any_agent_with_the_acp_agent_option(tmp_path: Path) -> None:
    """In a pytest run of its own (the plugin comes from the entry point):
    ``--acp-agent`` makes ``acp_agent.start()`` run that command."""
    (tmp_path / "test_other_agent.py").write_text(
        "import pytest\n"
        "pytestmark = pytest.mark.anyio\n"
        "async def test_it(acp_agent):\n"
        "    async with acp_agent.start(script='ignored.json') as agent:\n"
        "        info = await agent.initialize()\n"
        "        assert info['agentInfo']['name'] == 'ref-sdk-agent'\n"
        "        session = await agent.new_session()\n"
        "        result = await session.prompt('go', stop_after=3)\n"
        "        assert result.stop_reason == 'cancelled'\n"
        "        assert result.late == []\n"
        "        assert await agent.finish() == 0\n"
    )
    agent = f"{sys.executable} {ROOT / 'bench' / 'ref_sdk_agent.py'}"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--acp-agent", agent],
        cwd=tmp_path,
        env=nested_pytest_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


# -- record once, replay keyless --------------------------------------------------------


async def test_a_recorded_session_replays_keyless_in_the_kit(
    acp_agent: AgentLauncher, tmp_path: Path
) -> None:
    """The flow of docs/testing.md: a session with a real provider (here an
    OpenAI-compatible server on loopback, picked by a config profile) is recorded
    with ``--record``; the script then replays it without a key or a server."""
    from provider_server import Reply, WireServer, openai_chunk, openai_text

    recorded = tmp_path / "recorded.json"
    config = tmp_path / "providers.toml"
    replies = [
        Reply(openai_text(["The ", "answer ", "is 4."])),
        Reply(
            [openai_chunk({"content": "Once upon"}), openai_chunk({"content": " a time"})],
            hold=True,
        ),
    ]

    async def play(agent: Agent) -> list[Any]:
        await agent.initialize()
        session = await agent.new_session()
        first = await session.prompt("What is 2 + 2?")
        stopped = await session.prompt("A story", stop_after=2)
        assert await agent.finish() == 0
        return [first.stop_reason, first.text(), stopped.stop_reason, stopped.text()]

    env = {**os.environ, "KIT_TEST_KEY": "sk-kit-test-key"}
    with WireServer(replies) as server:
        config.write_text(
            "[profiles.local]\n"
            'provider = "openai"\n'
            f'base_url = "{server.url}"\n'
            'api_key_env = "KIT_TEST_KEY"\n'
        )
        async with acp_agent.bridge(
            config=config, profile="local", args=["--record", str(recorded)], env=env
        ) as agent:
            live = await play(agent)
    assert live == ["end_turn", "The answer is 4.", "cancelled", "Once upon a time"]
    assert "sk-kit-test-key" not in recorded.read_text()
    async with acp_agent.bridge(script=recorded) as agent:
        assert await play(agent) == live


def test_the_plugin_and_the_kit_load_without_syrupy() -> None:
    """The entry point loads the plugin in every pytest run of an environment that has
    the package, with or without the testing extra: only the snapshot extension needs
    syrupy, and only when it is used."""
    code = (
        "import sys; sys.modules['syrupy'] = None\n"
        "import acp_bridge.testing.plugin, acp_bridge.testing as kit\n"
        "assert kit.transcript_snapshot and kit.allow_once\n"
        "try:\n"
        "    kit.TranscriptSnapshot\n"
        "except ImportError:\n"
        "    print('needs syrupy')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "needs syrupy"


async def test_settle_after_the_agent_exited_returns_and_leaves_no_request(
    acp_agent: AgentLauncher, tmp_path: Path
) -> None:
    script = {"responses": [{"events": [{"text": "Hi."}]}]}
    async with acp_agent.bridge(script=write_script(tmp_path, script)) as agent:
        await agent.initialize()
        session = await agent.new_session()
        await agent.settle()
        (kept,) = agent.barrier_ids  # kept in the transcript, left out of snapshots
        assert any(m.get("id") == kept for _, m in agent.transcript)
        await session.prompt("Hello")
        assert await agent.finish() == 0
        settled, sent = set(agent.barrier_ids), len(agent.transcript)
        await agent.settle()  # the agent has gone: nothing is sent, nothing raised
    assert agent.barrier_ids == settled
    assert len(agent.transcript) == sent
    assert "settle" not in json.dumps(transcript_snapshot(agent))


def test_an_agents_session_ids_are_found_whole_and_numbered_with_acp_bridges() -> None:
    wire = [
        {"id": 1, "result": {"sessionId": "s1"}},
        {"method": "session/update", "params": {"sessionId": "sess_" + "a" * 32}},
        {"id": 2, "result": {"sessions": [{"sessionId": "s1"}, {"sessionId": "s10"}]}},
    ]
    assert session_ids(wire) == ["s1", "sess_" + "a" * 32, "s10"]
    pattern = session_id_pattern(session_ids(wire))
    assert pattern is not None
    assert pattern.pattern.count("|") == 1  # acp-bridge's own id is left to its own pattern
    shot = normalize(
        ["s1", "s10 and s1", "sess_" + "a" * 32, "ss1", "s1x", "/state/s10.jsonl"],
        ids=[*ID_PATTERNS[:1], (pattern, "sess"), *ID_PATTERNS[1:]],
    )
    assert shot == [
        "<sess-1>",
        "<sess-2> and <sess-1>",
        "<sess-3>",
        "ss1",
        "s1x",
        "/state/<sess-2>.jsonl",
    ]
