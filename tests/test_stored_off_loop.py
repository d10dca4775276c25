"""Opening a stored session reads its log in a worker thread, never on the event loop.

A long session's file is megabytes: read on the event loop, it would hold up
every other session's stream (and a Stop) for the whole read.  Loading or
resuming a session not open here, and forking one, read the log off the
loop; a second load of a session still being opened waits for the first and
then loads the open session (it is not refused, and the log is opened once),
and so do a close and a delete.  A load that cannot make its session gives
up the log's lock.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.harness import cwd_for_tests

from acp_bridge.log import reopen

PARIS = {"responses": [{"events": [{"text": "Paris."}]}], "when_exhausted": "repeat_last"}


def on_event_loop() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def watch(name: str, read: Any, reads: list[tuple[str, bool]]) -> Any:
    """``read``, noting in ``reads`` each call as (``name``, whether on an event loop)."""

    def watched(*args: Any, **kwargs: Any) -> Any:
        reads.append((name, on_event_loop()))
        return read(*args, **kwargs)

    return watched


@contextlib.asynccontextmanager
async def bridge_with(
    state_dir: Path, prepare: Callable[[Any, str], Awaitable[str]]
) -> AsyncIterator[tuple[Any, Any, str, str]]:
    """A bridge on pipes answering `PARIS`, initialized, and a session that
    ``prepare(client, cwd)`` made: (served, client, its id, cwd), inside a
    30 s guard."""
    from support.pipe_peer import bridge_on_pipes

    cwd = cwd_for_tests()
    async with bridge_on_pipes(PARIS, str(state_dir)) as served:
        with anyio.fail_after(30):
            await served.client.initialize()
            sid = await prepare(served.client, cwd)
            yield served, served.client, sid, cwd


async def closed_session(client: Any, cwd: str) -> str:
    """A session with one turn, then closed: only its log is left."""
    sid: str = await client.new_session(cwd)
    await client.prompt(sid, "The capital of France?")
    await client.request("session/close", {"sessionId": sid})
    return sid


def with_closed_session(state_dir: Path) -> AbstractAsyncContextManager[tuple[Any, Any, str, str]]:
    """`bridge_with` a `closed_session`."""
    return bridge_with(state_dir, closed_session)


def message_text(messages: list[dict[str, Any]]) -> str:
    return "".join(
        m["params"]["update"]["content"]["text"]
        for m in messages
        if m.get("method") == "session/update"
        and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["session/load", "session/resume"])
async def test_opening_a_stored_session_reads_its_log_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    reads: list[tuple[str, bool]] = []
    async with with_closed_session(tmp_path) as (_, client, sid, cwd):
        monkeypatch.setattr(reopen, "_read", watch("open", reopen._read, reads))
        start = len(client.messages)
        await client.request(method, {"sessionId": sid, "cwd": cwd, "mcpServers": []})
        replayed = client.messages[start:]
        result = await client.prompt(sid, "And its river?")
    assert reads == [("open", False)]
    assert message_text(replayed) == ("Paris." if method == "session/load" else "")
    assert result.stop_reason == "end_turn"


@pytest.mark.anyio
async def test_a_fork_reads_both_logs_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acp_bridge.acp import stored
    from acp_bridge.log.upcast import load_log
    from acp_bridge.stored.fork import fork_records

    reads: list[tuple[str, bool]] = []
    async with with_closed_session(tmp_path) as (_, client, sid, cwd):
        monkeypatch.setattr(stored, "load_log", watch("source", load_log, reads))
        monkeypatch.setattr(stored, "fork_records", watch("copy", fork_records, reads))
        monkeypatch.setattr(reopen, "_read", watch("fork", reopen._read, reads))
        fork = await client.request("session/fork", {"sessionId": sid, "cwd": cwd})
        result = await client.prompt(fork["result"]["sessionId"], "And its river?")
    assert reads == [("source", False), ("copy", False), ("fork", False)]
    assert result.stop_reason == "end_turn"


@pytest.mark.anyio
async def test_two_loads_at_once_open_the_session_once(tmp_path: Path) -> None:
    async with with_closed_session(tmp_path) as (served, client, sid, cwd):
        params = {"sessionId": sid, "cwd": cwd, "mcpServers": []}
        answers: list[Any] = []

        async def load() -> None:
            answers.append(await client.request("session/load", params))

        async with anyio.create_task_group() as tg:
            tg.start_soon(load)
            tg.start_soon(load)
        result = await client.prompt(sid, "And its river?")
    assert len(answers) == 2
    assert all("modes" in answer.get("result", {}) for answer in answers), answers
    assert result.stop_reason == "end_turn"
    # One session in the log's eyes: one turn/start per prompt, no second open.
    records = served.records(sid)
    assert [r["type"] for r in records].count("session/start") == 1
    assert sum(1 for r in records if r["type"] == "turn/start") == 2


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["session/close", "session/delete"])
async def test_a_close_or_delete_during_a_load_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """A close or a delete that arrives while a load is reading the session's
    log (in its worker thread) waits for the load to open the session, then
    closes or deletes it; it is neither refused as unknown nor as locked."""
    started, go = threading.Event(), threading.Event()
    read = reopen._read

    def held(*args: Any) -> Any:
        started.set()
        go.wait(10)
        return read(*args)

    async with with_closed_session(tmp_path) as (_, client, sid, cwd):
        monkeypatch.setattr(reopen, "_read", held)
        answers: dict[str, Any] = {}

        async def load() -> None:
            params = {"sessionId": sid, "cwd": cwd, "mcpServers": []}
            answers["load"] = await client.request("session/load", params)

        async def other() -> None:
            answers["other"] = await client.request(method, {"sessionId": sid})

        async with anyio.create_task_group() as tg:
            tg.start_soon(load)
            await anyio.to_thread.run_sync(started.wait, 10)
            tg.start_soon(other)
            # A barrier: the close or delete was read before this is answered.
            await client.request("session/list", {})
            assert "other" not in answers
            go.set()
        after = await client.request("session/resume", {"sessionId": sid, "cwd": cwd})
    assert "modes" in answers["load"]["result"]
    assert answers["other"] == {"jsonrpc": "2.0", "id": answers["other"]["id"], "result": {}}
    if method == "session/delete":
        assert after["error"]["code"] == -32602  # no stored session left
    else:
        assert "modes" in after["result"]  # closed, so it opens again


@pytest.mark.anyio
async def test_a_load_that_cannot_make_its_session_gives_up_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from acp_bridge.acp.provider_slot import ProviderSlot

    real = ProviderSlot.new
    calls: list[int] = []

    async def failing_once(self: ProviderSlot) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the provider broke")
        return await real(self)

    async with with_closed_session(tmp_path) as (_, client, sid, cwd):
        monkeypatch.setattr(ProviderSlot, "new", failing_once)
        params = {"sessionId": sid, "cwd": cwd, "mcpServers": []}
        first = await client.request("session/load", params)
        second = await client.request("session/load", params)
        result = await client.prompt(sid, "And its river?")
    assert "error" in first
    assert "modes" in second.get("result", {}), second
    assert result.stop_reason == "end_turn"
