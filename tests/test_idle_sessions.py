"""Idle sessions and the prompts that wait.

The prompts waiting for a session's queue run in arrival order, and a load's
garbage-collector pause (`pause_gc`) nests across tasks.  Through the agent: a
session prompted again after others sends the model its whole history.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from harness import cwd_for_tests, write_script

from acp_bridge.log.upcast import pause_gc
from acp_bridge.loop.prompts import PromptQueue
from acp_bridge.providers.scripted import parse_report
from acp_bridge.testing import NO_CAPABILITIES, AgentLauncher

REPORT = ["message_count", "first_user_text", "last_user_text"]


def test_gc_pauses_nest_and_each_resumes_once() -> None:
    assert gc.isenabled()
    first = pause_gc()
    second = pause_gc()
    assert not gc.isenabled()
    first()
    first()  # a second call changes nothing
    assert not gc.isenabled()
    second()
    assert gc.isenabled()


def test_gc_stays_off_after_a_pause_if_it_was_off() -> None:
    gc.disable()
    try:
        pause_gc()()
        assert not gc.isenabled()
    finally:
        gc.enable()


class Host:
    """A `PromptHost` whose prompts start no turn (as at shutdown)."""

    def __init__(self, gate: anyio.Event | None = None) -> None:
        self.config = cast(Any, None)
        self.spawn = cast(Any, None)
        self.gate = gate
        self.started = 0

    def before_start(self) -> bool:
        self.started += 1
        return False


@pytest.mark.anyio
async def test_prompts_that_wait_for_the_lock_run_in_arrival_order() -> None:
    queue = PromptQueue(cast(Any, None))
    release = anyio.Event()
    order: list[int] = []

    class Slow(Host):
        def before_start(self) -> bool:
            order.append(len(order))
            return False

    held = anyio.Event()

    async def first_then_mark() -> None:
        async with queue._lock:
            held.set()
            await release.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(first_then_mark)
        await held.wait()
        for rid in (1, 2):
            queue.arrived(rid)
            tg.start_soon(queue.run, rid, cast(Any, Slow()))
        # A cheap barrier: both runs have queued on the held lock.
        await anyio.wait_all_tasks_blocked()
        assert order == []
        release.set()
    assert order == [0, 1]


@pytest.mark.anyio
async def test_a_session_prompted_after_others_sends_the_model_its_whole_history(
    acp_agent: AgentLauncher, tmp_path: Path
) -> None:
    script = {
        "responses": [
            {"events": [{"text": "The capital of France is Paris."}]},
            {"events": [{"report": REPORT}]},
        ],
        "when_exhausted": "repeat_last",
    }
    cwd = cwd_for_tests()
    async with acp_agent.bridge(script=write_script(tmp_path, script)) as agent:
        await agent.initialize(NO_CAPABILITIES)
        first = await agent.new_session(cwd)
        await first.prompt("What is the capital of France?")
        others = [await agent.new_session(cwd) for _ in range(9)]
        for other in others:
            await other.prompt("Hello?")
        again = await first.prompt("And its river?")
        recent = await others[-1].prompt("And now?")
        await agent.finish(within=30)
    rested = parse_report(again.text())
    assert rested["message_count"] == 3
    assert rested["first_user_text"] == "What is the capital of France?"
    assert rested["last_user_text"] == "And its river?"
    assert parse_report(recent.text())["message_count"] == 3
