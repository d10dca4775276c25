"""The turn's states, its one ending, and the records of what the editor saw.

Through the real subprocess: the prompt blocks and session metadata as
received.  In process (a custom provider or a patched loop): a provider's own
retries, a bug in the loop recorded as internal, and a Stop while a tool is
in flight (the ending waits for it, bounded by the cancel deadline).
"""

from __future__ import annotations

import gc
import os
import tempfile
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.harness import prompt_until, run_bridge, wait_until, write_script
from test_cancel_property import CWD, Served, serve_in_process
from test_replay_property import check_replay

from acp_bridge.client import AcpClient
from acp_bridge.log.check import check_log
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.reader import read_records
from acp_bridge.log.replay import replay_updates
from acp_bridge.loop import turn as turn_module
from acp_bridge.loop.inflight import InFlight
from acp_bridge.loop.stop import stop_reason_for_finish
from acp_bridge.loop.turn import TRANSITIONS, IllegalTransition, Turn, TurnState
from acp_bridge.providers.base import (
    Finish,
    ModelRequest,
    Provider,
    ProviderError,
    ProviderStream,
    Retrying,
    StreamEvent,
    TextDelta,
)
from acp_bridge.providers.script_format import parse_script
from acp_bridge.providers.scripted import ScriptedProvider

Json = dict[str, Any]
HELLO = {
    "responses": [{"events": [{"text": "Hello there", "chunk_size": 4}]}],
    "when_exhausted": "repeat_last",
}


# -- the prompt and the session as received (real subprocess) ------------------------


@pytest.mark.anyio
async def test_prompt_blocks_and_session_metadata_are_logged_as_received(tmp_path: Path) -> None:
    prompt = [
        {"type": "text", "text": "Look at these", "annotations": {"priority": 0.5}},
        {
            "type": "resource",
            "resource": {
                "uri": "file:///w/a.py",
                "text": "print(1)\n",
                "mimeType": "text/x-python",
            },
            "_meta": {"origin": "selection"},
        },
        {"type": "resource_link", "uri": "file:///w/b.md", "name": "b.md", "size": 12},
    ]
    box: Json = {}

    async def play(client: AcpClient) -> None:
        await client.initialize()
        new = await client.request(
            "session/new",
            {"cwd": CWD, "mcpServers": [], "additionalDirectories": [CWD + "/lib"]},
        )
        session_id = box["session"] = new["result"]["sessionId"]
        box["response"] = await client.request(
            "session/prompt", {"sessionId": session_id, "prompt": prompt}
        )

    run = await run_bridge(write_script(tmp_path, HELLO), tmp_path / "state", play)
    assert box["response"]["result"] == {"stopReason": "end_turn"}
    records = run.logs()[box["session"]]
    check_log(records)
    start = records[0]
    assert start["type"] == "session/start"
    assert start["additional_directories"] == [CWD + "/lib"]
    assert start["client_info"] == {"name": "acp-bridge-client", "version": "1"}
    assert start["client_capabilities"] == {"fs": {"readTextFile": False, "writeTextFile": False}}
    assert start["title"] is None
    assert start["provider"] == "fake"
    (user,) = [r for r in records if r["type"] == "user/message"]
    assert user["prompt"] == prompt  # exactly as received, embedded resource included
    # The history keeps the shape the providers read.
    assert derive_messages(records)[0]["content"][1] == {
        "type": "resource",
        "uri": "file:///w/a.py",
        "text": "print(1)\n",
        "mimeType": "text/x-python",
    }
    replayed = [p["update"] for p in replay_updates(records)]
    assert [u["content"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"] == prompt
    # Every assistant chunk names the message id that the log records.
    (message,) = [r for r in records if r["type"] == "assistant/message"]
    ids = {
        u["messageId"] for u in run.client.updates if u["sessionUpdate"] == "agent_message_chunk"
    }
    assert ids == {message["message_id"]}


@pytest.mark.anyio
async def test_bad_additional_directories_are_refused_naming_the_field(tmp_path: Path) -> None:
    box: Json = {}

    async def play(client: AcpClient) -> None:
        await client.initialize()
        box["bad"] = await client.request(
            "session/new", {"cwd": CWD, "mcpServers": [], "additionalDirectories": ["rel"]}
        )
        box["good"] = await client.new_session(CWD)

    await run_bridge(write_script(tmp_path, HELLO), tmp_path / "state", play)
    assert box["bad"]["error"]["code"] == -32602
    assert "additionalDirectories[0]" in box["bad"]["error"]["message"]
    assert box["good"].startswith("sess_")


# -- a provider that retries by itself -------------------------------------------------


class RetryingProvider(Provider):
    """Fails once, says it retries, then answers."""

    name = "retrying"

    def stream(self, request: ModelRequest) -> Any:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[_Events]:
        yield _Events(
            [
                Retrying(ProviderError("Overloaded", kind="overloaded", retryable=True), 1, 0.5),
                TextDelta(0, "After "),
                TextDelta(0, "a retry."),
                Finish("end_turn"),
            ]
        )


class _Events(ProviderStream):
    def __init__(self, events: list[StreamEvent]) -> None:
        self._events = iter(events)

    def __aiter__(self) -> _Events:
        return self

    async def __anext__(self) -> StreamEvent:
        await anyio.lowlevel.checkpoint()
        for event in self._events:
            return event
        raise StopAsyncIteration

    def abort(self) -> bool:
        return False


def serve_with(
    play: Callable[[AcpClient], Awaitable[None]],
    *,
    provider: Callable[[], Provider] | None = None,
    deadline: float = 5.0,
) -> tuple[Served, dict[str, list[Json]]]:
    """Serve in process; return what was served and every session's records."""
    with tempfile.TemporaryDirectory() as state_dir:

        async def main() -> Served:
            return await serve_in_process(
                HELLO, state_dir, play, provider=provider, cancel_deadline=deadline
            )

        served = anyio.run(main)
        sessions = os.path.join(state_dir, "sessions")
        logs = {
            name.removesuffix(".jsonl"): read_records(os.path.join(sessions, name))
            for name in os.listdir(sessions)
        }
        return served, logs


def test_a_turn_without_tools_is_freed_as_it_ends_not_by_the_garbage_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A turn that ran no tool leaves no reference cycle: it is gone once its prompt
    is answered, with the collector off (a turn in a cycle, a few dozen objects
    with it, waited for the next collection; one per turn made the collections
    several times as frequent)."""
    made: list[weakref.ref[Turn]] = []
    init = Turn.__init__

    def remember(self: Turn, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(weakref.ref(self))

    monkeypatch.setattr(Turn, "__init__", remember)
    alive: list[bool] = []

    async def play(client: AcpClient) -> None:
        await client.initialize()
        session_id = await client.new_session(CWD)
        gc.disable()
        try:
            for _ in range(3):
                result = await client.prompt(session_id, "Hi", settle=0)
                assert result.stop_reason == "end_turn"
            await anyio.wait_all_tasks_blocked()  # the prompts' tasks end after their answers
            alive.extend(ref() is not None for ref in made)
        finally:
            gc.enable()

    serve_with(play)
    assert alive == [False, False, False]


def test_a_provider_retry_is_logged_and_shown_as_a_notice_never_as_reasoning() -> None:
    box: Json = {}

    async def play(client: AcpClient) -> None:
        await client.initialize()
        session_id = box["session"] = await client.new_session(CWD)
        box["result"] = await client.prompt(session_id, "Hi", settle=0)

    def provider() -> Provider:
        return RetryingProvider()

    served, logs = serve_with(play, provider=provider)
    result = box["result"]
    assert result.stop_reason == "end_turn"
    # After the session's title (its first turn), the notice.
    notice = result.updates[1]
    assert notice["sessionUpdate"] == "agent_thought_chunk"
    assert notice["_meta"] == {"acpBridge": {"notice": True}}
    assert "retrying in 0.5s" in notice["content"]["text"]
    records = logs[box["session"]]
    check_log(records)
    (error,) = [r for r in records if r["type"] == "agent/request-error"]
    assert error["retrying"] is True
    assert error["retry_attempt"] == 1
    assert error["error"]["kind"] == "overloaded"
    # Not reasoning: the model's history holds only the answer.
    assert derive_messages(records)[-1]["content"] == [{"type": "text", "text": "After a retry."}]
    check_replay(records, served.client, set())


# -- a provider stream that ends without its finish event ----------------------------


class UnfinishedProvider(Provider):
    """Streams its events, then ends without `Finish` (whatever the wire format)."""

    name = "unfinished"

    def __init__(self, events: list[StreamEvent]) -> None:
        self.events = events

    def stream(self, request: ModelRequest) -> Any:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[_Events]:
        yield _Events(list(self.events))


@pytest.mark.parametrize(
    "events",
    [[], [TextDelta(0, "Half an "), TextDelta(0, "answer")]],
    ids=["before-output", "after-output"],
)
def test_a_stream_without_its_finish_event_fails_as_cut_never_end_turn(
    events: list[StreamEvent],
) -> None:
    box: Json = {}

    async def play(client: AcpClient) -> None:
        await client.initialize()
        session_id = box["session"] = await client.new_session(CWD)
        box["result"] = await client.prompt(session_id, "Hi", settle=0)

    _, logs = serve_with(play, provider=lambda: UnfinishedProvider(events))
    response = box["result"].response
    assert "result" not in response, response  # not {"stopReason": "end_turn"}
    assert response["error"]["data"]["kind"] == "cut"
    assert "without its finish event" in response["error"]["message"]
    records = logs[box["session"]]
    check_log(records)
    assert not [r for r in records if r["type"] == "assistant/message"]
    (attempt,) = [r for r in records if r["type"] == "assistant/attempt"]
    assert attempt["outcome"] == "provider_error"
    assert records[-1]["type"] == "turn/end"
    assert records[-1]["reason"] == "error"
    assert derive_messages(records)[-1]["role"] == "user"  # nothing of it in the history


# -- a bug in the loop ---------------------------------------------------------------


def test_a_bug_in_the_loop_is_recorded_as_internal_not_as_a_provider_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = stop_reason_for_finish
    calls = {"n": 0}

    def buggy(finish: str | None) -> str | None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyError("a bug")
        return real(finish)

    monkeypatch.setattr(turn_module, "stop_reason_for_finish", buggy)
    box: Json = {}

    async def play(client: AcpClient) -> None:
        await client.initialize()
        session_id = box["session"] = await client.new_session(CWD)
        box["first"] = await client.prompt(session_id, "Hi", settle=0)
        box["second"] = await client.prompt(session_id, "Again", settle=0)

    _, logs = serve_with(play)
    error = box["first"].response["error"]
    assert error["code"] == -32603
    assert error["data"] == {"kind": "internal"}
    assert box["second"].stop_reason == "end_turn"  # the session goes on
    records = logs[box["session"]]
    check_log(records)
    first = [r for r in records if r["turn"] == 1]
    assert [r["type"] for r in first if r["type"].startswith("agent/")] == ["agent/internal-error"]
    assert first[-1]["type"] == "turn/end"
    assert first[-1]["reason"] == "internal"
    assert [r["reason"] for r in first if r["type"] == "step/end"] == ["internal"]


# -- the first turn's tool schemas are built off the event loop ----------------------


def test_a_stop_right_behind_the_first_prompt_is_not_held_by_the_tools_schemas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first turn of a registry builds its tools' JSON Schemas (importing
    their pydantic models): in a worker thread, so a cancel sent right behind
    the first prompt is read and answered while that build still runs."""
    from pydantic import BaseModel

    from acp_bridge.acp import tool_setup
    from acp_bridge.tools.base import Tool, ToolContext, ToolOutput
    from acp_bridge.tools.registry import TOOLS, ToolRegistry

    release, built = threading.Event(), threading.Event()

    class SlowArgs(BaseModel):
        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            release.wait(3)  # held until the test has its answer (or 3 s)
            built.set()
            return super().model_json_schema(*args, **kwargs)

    class Slow(Tool[SlowArgs]):
        name = "slow"
        description = "A tool whose schema takes long to build."
        args_model = SlowArgs

        async def run(self, args: SlowArgs, ctx: ToolContext) -> ToolOutput:
            raise AssertionError("never called")

    monkeypatch.setattr(tool_setup, "TOOLS", ToolRegistry([*TOOLS, Slow()]))
    box: Json = {}

    async def play(client: AcpClient) -> None:
        await client.initialize()
        session_id = box["session"] = await client.new_session(CWD)
        request = await client.send_request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "Hi"}]}
        )
        await client.notify("session/cancel", {"sessionId": session_id})
        box["answer"] = await client.wait_response(request)
        box["built_before_the_answer"] = built.is_set()
        release.set()

    _, logs = serve_with(play)
    assert box["answer"]["result"] == {"stopReason": "cancelled"}
    assert box["built_before_the_answer"] is False
    check_log(logs[box["session"]])


# -- a Stop while a tool is in flight --------------------------------------------------

TOOL_SCRIPT = {
    "responses": [
        {
            "events": [
                {"text": "Let me look."},
                {"tool_call": {"id": "call_1", "name": "read_file", "arguments": {"p": 1}}},
            ]
        }
    ]
}


def fake_tools(cleanup_seconds: float, box: Json) -> Any:
    """A `_run_tools` whose one tool runs in its own task until stopped, then takes
    ``cleanup_seconds`` (shielded) to produce its partial result; ``box["tried"]``
    (an event) is set once it has tried to show that result."""

    async def run_tools(self: Turn) -> None:
        call = self._pending_tools[0]
        self._pending_tools = []
        self.rec.tool_call(call["id"], call["name"], call["input"], "dispatched")
        self.show_tool(
            {"sessionUpdate": "tool_call_update", "toolCallId": call["id"], "status": "in_progress"}
        )

        async def tool() -> None:
            async with self.in_flight.track("tool:" + call["id"]):
                try:
                    await anyio.sleep_forever()
                finally:
                    with anyio.CancelScope(shield=True):
                        await anyio.sleep(cleanup_seconds)
                    partial = [{"type": "text", "text": "partial output"}]
                    self.rec.tool_result(call["id"], partial, is_error=True)
                    self.show_tool(
                        {
                            "sessionUpdate": "tool_call_update",
                            "toolCallId": call["id"],
                            "status": "completed",
                            "content": [{"type": "content", "content": partial[0]}],
                        }
                    )
                    box["tried"].set()

        self.spawn(tool)
        await anyio.sleep_forever()  # waits for the tool; a Stop cancels this

    return run_tools


def stop_during_tool(monkeypatch: pytest.MonkeyPatch, cleanup: float, deadline: float) -> Json:
    box: Json = {}
    monkeypatch.setattr(Turn, "_run_tools", fake_tools(cleanup, box))

    async def play(client: AcpClient) -> None:
        box["tried"] = anyio.Event()
        await client.initialize()
        session_id = box["session"] = await client.new_session(CWD)

        def running(client: AcpClient, since: int) -> Any:
            return lambda: any(u.get("status") == "in_progress" for u in client.updates[since:])

        box["result"] = await prompt_until(client, session_id, "Read it", running, settle=0)
        # The editor stays until the tool has tried to show its result (late, for
        # a tool abandoned at the deadline): whatever it sent is then on the wire.
        with anyio.fail_after(10):
            await box["tried"].wait()
        # A request answered after anything queued before it (one ordered writer).
        await client.wait_response(await client.send_request("_acp-bridge/ping", {}))
        box["updates"] = len(client.updates)

    def provider() -> Provider:
        return ScriptedProvider(parse_script(TOOL_SCRIPT, "tool"))

    served, logs = serve_with(play, provider=provider, deadline=deadline)
    box["client"] = served.client
    box["records"] = logs[box["session"]]
    return box


def test_a_stop_waits_for_the_tool_in_flight_to_produce_its_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    box = stop_during_tool(monkeypatch, cleanup=0.05, deadline=5.0)
    assert box["result"].response["result"] == {"stopReason": "cancelled"}
    records = box["records"]
    check_log(records)
    types = [(r["type"], r.get("reason")) for r in records if r["turn"] == 1]
    results = [r for r in records if r["type"] == "tool/result"]
    assert [r["content"][0]["text"] for r in results] == ["partial output"]
    at = types.index(("tool/result", None))
    assert types[at + 1 :] == [
        ("tool/update", None),
        ("step/end", "cancelled"),
        ("turn/end", "cancelled"),
    ]
    assert [r["forced"] for r in records if r["type"] == "turn/end"] == [False]
    # The editor saw the tool's final status before the answer.
    statuses = [u.get("status") for u in box["result"].updates if "toolCallId" in u]
    assert statuses == ["pending", "in_progress", "completed"]
    check_replay(records, box["client"], {1})


def test_a_tool_that_does_not_finish_is_abandoned_at_the_cancel_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    box = stop_during_tool(monkeypatch, cleanup=1.0, deadline=0.2)
    assert box["result"].response["result"] == {"stopReason": "cancelled"}
    assert box["result"].late == []
    records = box["records"]
    check_log(records)
    results = [r for r in records if r["type"] == "tool/result"]
    # The ending answered the call as stopped; the tool's late result was fenced off.
    assert [r["content"][0]["text"] for r in results] == [
        "Tool 'read_file' was stopped before it returned a result."
    ]
    (end,) = [r for r in records if r["type"] == "turn/end"]
    assert (end["reason"], end["forced"]) == ("cancelled", True)
    assert records[-1] is end
    transcript = box["client"].transcript
    answer = next(
        i
        for i, (way, msg) in enumerate(transcript)
        if way == "recv" and msg.get("result") == {"stopReason": "cancelled"}
    )
    late = [m for way, m in transcript[answer + 1 :] if way == "recv" and m.get("method")]
    assert late == [], "I1: an update of the abandoned tool after the answer"


# -- the state machine and the in-flight registry, alone -----------------------------


def test_every_state_can_end_and_ended_is_final() -> None:
    for state, targets in TRANSITIONS.items():
        if state is not TurnState.ENDED:
            assert TurnState.ENDED in targets or TurnState.SETTLING in targets
    assert TRANSITIONS[TurnState.ENDED] == frozenset()
    assert TRANSITIONS[TurnState.SETTLING] == frozenset({TurnState.ENDED})


def test_an_illegal_transition_raises() -> None:
    turn = Turn.__new__(Turn)
    turn.number = 1
    turn.state = TurnState.STARTING
    with pytest.raises(IllegalTransition):
        turn._enter(TurnState.AWAITING_EDITOR)
    turn._enter(TurnState.STREAMING)
    assert turn.state is TurnState.STREAMING


@pytest.mark.anyio
async def test_in_flight_settle_waits_for_cleanup_and_is_bounded() -> None:
    flight = InFlight()
    assert await flight.settle(0.01) is True
    done: list[str] = []

    async def work(label: str, cleanup: float) -> None:
        async with flight.track(label):
            try:
                await anyio.sleep_forever()
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.sleep(cleanup)
                done.append(label)

    async with anyio.create_task_group() as tg:
        tg.start_soon(work, "quick", 0.01)
        await wait_until(lambda: len(flight) == 1)
        assert flight.labels == {"quick": 1}
        flight.cancel()
        # Cancelled and waited for, even from a cancelled scope (shielded).
        with anyio.CancelScope() as outer:
            outer.cancel()
            assert await flight.settle(5.0) is True
        assert done == ["quick"]
        assert len(flight) == 0
        assert flight.labels == {}

        tg.start_soon(work, "slow", 0.5)
        await wait_until(lambda: len(flight) == 1)
        flight.cancel()
        assert await flight.settle(0.05) is False  # bounded: still running
        assert await flight.settle(5.0) is True
    assert done == ["quick", "slow"]


# -- the fast Stop: a stream aborted synchronously -------------------------------------


class GatedProvider(Provider):
    """Streams forever; once stopped, its request takes until ``gate`` to be released."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = anyio.Event()
        self.released = False

    def stream(self, request: ModelRequest) -> Any:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[_Endless]:
        try:
            yield _Endless()
        finally:
            # Bounded well below the cancel deadline: a Stop that waited for
            # this would be answered after it, with ``released`` set.
            with anyio.CancelScope(shield=True), anyio.move_on_after(3):
                await self.gate.wait()
            self.released = True


class _Endless(ProviderStream):
    def __init__(self) -> None:
        self.stopped = False

    def __aiter__(self) -> _Endless:
        return self

    async def __anext__(self) -> StreamEvent:
        await anyio.sleep(0.001)
        if self.stopped:
            raise StopAsyncIteration
        return TextDelta(0, "tok ")

    def abort(self) -> bool:
        self.stopped = True
        return True


def test_a_stop_mid_stream_is_answered_without_waiting_for_the_request_to_unwind() -> None:
    """The stream's abort() makes the delivered prefix exact, so the answer need not
    wait for the turn's task (here: the provider's release of its request)."""
    providers: list[GatedProvider] = []
    box: Json = {}

    def provider() -> Provider:
        providers.append(GatedProvider())
        return providers[-1]

    async def play(client: AcpClient) -> None:
        await client.initialize()
        session_id = box["session"] = await client.new_session(CWD)
        box["result"] = await client.prompt(session_id, "Go", cancel_after=3, settle=0)
        box["released_at_answer"] = providers[0].released
        providers[0].gate.set()

    _, logs = serve_with(play, provider=provider, deadline=30.0)
    assert box["result"].stop_reason == "cancelled"
    assert box["released_at_answer"] is False
    records = logs[box["session"]]
    check_log(records)
    (message,) = [r for r in records if r["type"] == "assistant/message"]
    assert message["interrupted"] is True
    assert message["content"] == [{"type": "text", "text": box["result"].text()}]


def test_a_stop_records_and_answers_with_the_collector_paused() -> None:
    """A cyclic collection (0.1-1 ms) never lands inside the answer to a Stop."""
    import gc
    from typing import cast

    from acp_bridge.loop.prompts import stop

    seen: list[bool] = []

    class StoppingTurn:
        def cancel(self, cause: str) -> bool:
            seen.append(gc.isenabled())
            return True  # not ended yet: the watchdog bounds the wait

        async def watchdog(self) -> None:
            pass

    assert gc.isenabled()
    stop(cast(Turn, StoppingTurn()), "user", lambda task: None)
    assert seen == [False]
    assert gc.isenabled()
