"""The connection calling its peer, byte by byte, with an in-memory peer.

`Wire` stands in for the outbox: it keeps every frame the connection writes.
The peer's side is played by feeding bytes into `Connection.feed`, exactly as
the server does with what it reads from stdin.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import orjson
import pytest
from anyio import TaskHandle

from acp_bridge.jsonrpc.connection import Connection, ConnectionClosed, current_reply
from acp_bridge.jsonrpc.errors import RemoteError

pytestmark = pytest.mark.anyio

LOGGER = "acp_bridge.jsonrpc"


class Wire:
    """A `FrameWriter` that keeps what is written, frame by frame."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.flushes = 0

    def send(self, frame: bytes) -> None:
        assert frame.endswith(b"\n"), frame
        assert frame.count(b"\n") == 1, frame
        self.frames.append(frame)

    def flush_now(self) -> None:
        self.flushes += 1

    def messages(self) -> list[dict[str, Any]]:
        return [orjson.loads(f) for f in self.frames]


def line(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj) + b"\n"


def result(rid: object, value: object) -> bytes:
    return line({"jsonrpc": "2.0", "id": rid, "result": value})


def error(rid: object, code: int, message: str, data: object = None) -> bytes:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return line({"jsonrpc": "2.0", "id": rid, "error": err})


class Call:
    """One `Connection.request` run in its own task, with its outcome."""

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.done = anyio.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        self.cancelled = False

    async def run(self, conn: Connection, method: str, params: Any) -> None:
        with self.scope:
            try:
                self.value = await conn.request(method, params)
            except (RemoteError, ConnectionClosed) as exc:
                self.error = exc
        self.cancelled = self.scope.cancelled_caught
        self.done.set()


async def start(tg: Any, conn: Connection, method: str, params: Any) -> Call:
    call = Call()
    tg.start_soon(call.run, conn, method, params)
    await anyio.wait_all_tasks_blocked()
    return call


async def test_request_writes_the_exact_frame_and_returns_the_result() -> None:
    wire = Wire()
    conn = Connection(wire)
    async with anyio.create_task_group() as tg:
        conn.bind(tg)
        call = await start(tg, conn, "fs/read_text_file", {"sessionId": "s", "path": "/a"})
        assert wire.frames == [
            b'{"jsonrpc":"2.0","id":0,"method":"fs/read_text_file",'
            b'"params":{"sessionId":"s","path":"/a"}}\n'
        ]
        assert wire.flushes == 1, "a request waits for its answer: it is flushed at once"
        assert conn.pending_requests == 1
        conn.feed(result(0, {"content": "hello"}))
        await call.done.wait()
    assert call.value == {"content": "hello"}
    assert call.error is None
    assert conn.pending_requests == 0
    assert len(wire.frames) == 1


async def test_ids_are_distinct_and_each_response_reaches_its_caller() -> None:
    wire = Wire()
    conn = Connection(wire)
    async with anyio.create_task_group() as tg:
        conn.bind(tg)
        first = await start(tg, conn, "a", {})
        second = await start(tg, conn, "b", {})
        ids = [m["id"] for m in wire.messages()]
        assert len(set(ids)) == 2
        # Answered out of order, in one read.
        conn.feed(result(ids[1], "B") + result(ids[0], "A"))
        await first.done.wait()
        await second.done.wait()
    assert (first.value, second.value) == ("A", "B")


async def test_an_error_response_raises_a_typed_error() -> None:
    wire = Wire()
    conn = Connection(wire)
    async with anyio.create_task_group() as tg:
        conn.bind(tg)
        call = await start(tg, conn, "fs/write_text_file", {"path": "/x"})
        conn.feed(error(0, -32002, "Resource not found", {"path": "/x"}))
        await call.done.wait()
    assert isinstance(call.error, RemoteError)
    assert (call.error.code, call.error.message, call.error.data) == (
        -32002,
        "Resource not found",
        {"path": "/x"},
    )


async def test_a_malformed_error_object_still_raises_a_remote_error() -> None:
    wire = Wire()
    conn = Connection(wire)
    async with anyio.create_task_group() as tg:
        conn.bind(tg)
        call = await start(tg, conn, "m", {})
        conn.feed(line({"jsonrpc": "2.0", "id": 0, "error": {"code": "x"}}))
        await call.done.wait()
    assert isinstance(call.error, RemoteError)
    assert call.error.code == -32603


async def test_notify_writes_a_notification() -> None:
    wire = Wire()
    conn = Connection(wire)
    conn.notify("session/update", {"sessionId": "s"})
    assert wire.frames == [
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}\n'
    ]


async def test_cancelling_the_caller_sends_cancel_request_and_ignores_the_late_response(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wire = Wire()
    conn = Connection(wire)
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    async with anyio.create_task_group() as tg:
        conn.bind(tg)
        call = await start(tg, conn, "session/request_permission", {"sessionId": "s"})
        call.scope.cancel()
        await call.done.wait()
        await anyio.wait_all_tasks_blocked()
        assert wire.frames[1:] == [
            b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":0}}\n'
        ]
        assert call.cancelled
        assert conn.pending_requests == 0
        caplog.clear()
        conn.feed(result(0, {"outcome": {"outcome": "selected", "optionId": "allow"}}))
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert len(wire.frames) == 2, "nothing is written for the late response"
    assert call.value is None


async def test_a_response_in_the_same_read_as_the_cancel_sends_no_cancel_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The editor's ``session/cancel`` (whose handler cancels the waiting task)
    and the answer to our request arrive in one read: the request is answered,
    so no ``$/cancel_request`` goes out, and the caller is cancelled all the same."""
    wire = Wire()
    conn = Connection(wire)
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    calls: list[Call] = []
    conn.notifications["session/cancel"] = lambda params: calls[0].scope.cancel()
    async with anyio.create_task_group() as tg:
        conn.bind(tg)
        calls.append(await start(tg, conn, "terminal/wait_for_exit", {"terminalId": "t"}))
        cancel = line({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}})
        conn.feed(cancel + result(0, {"exitCode": 0}))
        await calls[0].done.wait()
    assert calls[0].cancelled
    assert len(wire.frames) == 1, f"a $/cancel_request for an answered request: {wire.frames}"
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_response_before_the_cancel_in_the_same_read_sends_no_cancel_request() -> None:
    wire = Wire()
    conn = Connection(wire)
    calls: list[Call] = []
    conn.notifications["session/cancel"] = lambda params: calls[0].scope.cancel()
    async with anyio.create_task_group() as tg:
        conn.bind(tg)
        calls.append(await start(tg, conn, "m", {}))
        cancel = line({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}})
        conn.feed(result(0, "done") + cancel)
        await calls[0].done.wait()
    # The answer came first: the caller has it, or is cancelled at its next
    # checkpoint; either way the request is settled and nothing else is sent.
    assert calls[0].value == "done" or calls[0].cancelled
    assert calls[0].error is None
    assert len(wire.frames) == 1


async def test_eof_fails_every_pending_request_and_every_later_one() -> None:
    wire = Wire()
    conn = Connection(wire)
    async with anyio.create_task_group() as tg:
        conn.bind(tg)
        first = await start(tg, conn, "fs/read_text_file", {})
        second = await start(tg, conn, "terminal/output", {})
        conn.fail_pending("stdin closed")
        await first.done.wait()
        await second.done.wait()
        for call, method in ((first, "fs/read_text_file"), (second, "terminal/output")):
            assert isinstance(call.error, ConnectionClosed)
            assert call.error.method == method
            assert "connection closed (stdin closed)" in str(call.error)
        assert conn.pending_requests == 0
        later = await start(tg, conn, "fs/write_text_file", {})
        await later.done.wait()
    assert isinstance(later.error, ConnectionClosed)
    assert len(wire.frames) == 2, "nothing is written to a peer that is gone"
    conn.notify("session/update", {})
    assert len(wire.frames) == 2


async def test_close_fails_pending_requests_too() -> None:
    wire = Wire()
    conn = Connection(wire)
    async with anyio.create_task_group() as tg:
        conn.bind(tg)
        call = await start(tg, conn, "m", {})
        conn.close()
        await call.done.wait()
    assert isinstance(call.error, ConnectionClosed)


async def test_a_cancel_after_eof_writes_no_cancel_request() -> None:
    wire = Wire()
    conn = Connection(wire)
    async with anyio.create_task_group() as tg:
        conn.bind(tg)
        call = await start(tg, conn, "m", {})
        call.scope.cancel()
        conn.fail_pending("stdout closed")
        await call.done.wait()
    assert len(wire.frames) == 1


async def test_a_response_with_an_unknown_id_is_ignored_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wire = Wire()
    conn = Connection(wire)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    async with anyio.create_task_group() as tg:
        conn.bind(tg)
        call = await start(tg, conn, "m", {})
        conn.feed(result(7, "stray") + result("0", "a string id is another id"))
        await anyio.wait_all_tasks_blocked()
        assert not call.done.is_set(), "a stray response resolved a pending request"
        warnings = [r.getMessage() for r in caplog.records]
        assert warnings == [
            "response to unknown request id 7 ignored",
            "response to unknown request id '0' ignored",
        ]
        conn.feed(result(0, "ok"))
        await call.done.wait()
    assert call.value == "ok"
    assert len(wire.frames) == 1, "a stray response is never answered"


async def test_a_duplicate_in_flight_request_id_is_refused_and_the_first_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The duplicate gets -32600 at once, with id null (never two answers with one id);
    the first is not touched."""
    wire = Wire()
    conn = Connection(wire)
    caplog.set_level(logging.WARNING, logger=LOGGER)
    release = anyio.Event()
    runs: list[str] = []

    async def slow(params: dict[str, Any]) -> Any:
        runs.append("slow")
        await release.wait()
        return {"answered": current_reply.get().id}

    async def fast(params: dict[str, Any]) -> Any:
        runs.append("fast")
        return {}

    conn.requests["slow"] = slow
    conn.requests["fast"] = fast
    async with anyio.create_task_group() as tg:
        conn.bind(tg)
        conn.feed(
            line({"jsonrpc": "2.0", "id": 5, "method": "slow", "params": {}})
            + line({"jsonrpc": "2.0", "id": 5, "method": "fast", "params": {}})
        )
        await anyio.wait_all_tasks_blocked()
        [refused] = wire.messages()
        assert refused["id"] is None
        assert refused["error"]["code"] == -32600
        assert refused["error"]["data"] == {
            "detail": "request id 5 is already in flight; this fast was not run",
            "requestId": 5,
        }
        assert any("already in flight" in r.getMessage() for r in caplog.records)
        release.set()
        await conn.wait_idle()
        # Once the first is answered, the id is free again.
        conn.feed(line({"jsonrpc": "2.0", "id": 5, "method": "fast", "params": {}}))
        await conn.wait_idle()
    assert runs == ["slow", "fast"]
    assert wire.messages()[1:] == [
        {"jsonrpc": "2.0", "id": 5, "result": {"answered": 5}},
        {"jsonrpc": "2.0", "id": 5, "result": {}},
    ]


async def test_cancel_request_cancels_the_handler_which_answers_minus_32800_once_unwound() -> None:
    """``$/cancel_request`` cancels the handler's task (its own cancel scope): the
    handler's cleanup runs first, then the request is answered -32800, once; a
    request that was not named goes on."""
    wire = Wire()
    conn = Connection(wire)
    events: list[str] = []
    release = anyio.Event()

    async def hangs(params: dict[str, Any]) -> Any:
        try:
            await anyio.sleep_forever()
        finally:
            events.append("cleanup")
            conn.notify("cleanup/done", {})

    async def waits(params: dict[str, Any]) -> Any:
        await release.wait()
        return "other"

    conn.requests["hangs"] = hangs
    conn.requests["waits"] = waits
    async with anyio.create_task_group() as tg:
        conn.bind(tg)
        conn.feed(
            line({"jsonrpc": "2.0", "id": 7, "method": "hangs", "params": {}})
            + line({"jsonrpc": "2.0", "id": 8, "method": "waits", "params": {}})
        )
        await anyio.wait_all_tasks_blocked()
        cancel = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 7}}
        conn.feed(line(cancel))
        await anyio.wait_all_tasks_blocked()
        assert events == ["cleanup"]
        release.set()
        await conn.wait_idle()
    assert wire.messages() == [
        {"jsonrpc": "2.0", "method": "cleanup/done", "params": {}},
        {"jsonrpc": "2.0", "id": 7, "error": {"code": -32800, "message": "Request cancelled"}},
        {"jsonrpc": "2.0", "id": 8, "result": "other"},
    ]


class _Ended:
    """The handle of a task that ran to its end when it was started."""

    status = TaskHandle.Status.FINISHED


async def test_a_request_whose_task_ended_as_it_started_is_not_kept_in_flight() -> None:
    """With an eager task factory (Python 3.12+), a handler that never suspends
    has answered before ``start_soon`` returns: it is not left in flight (its
    id stays usable and the connection goes idle)."""
    wire = Wire()
    conn = Connection(wire)

    async def quick(params: dict[str, Any]) -> Any:
        return "done"

    def eager(func: Any, *args: Any) -> _Ended:
        coro = func(*args)
        with pytest.raises(StopIteration):
            coro.send(None)  # runs to its end at once, as an eager task does
        return _Ended()

    conn.requests["quick"] = quick
    conn._spawn = eager  # type: ignore[assignment]  # a stand-in for TaskHandle
    conn.feed(line({"jsonrpc": "2.0", "id": 1, "method": "quick", "params": {}}))
    conn.feed(line({"jsonrpc": "2.0", "id": 1, "method": "quick", "params": {}}))
    with anyio.fail_after(2):
        await conn.wait_idle()
    assert wire.messages() == [
        {"jsonrpc": "2.0", "id": 1, "result": "done"},
        {"jsonrpc": "2.0", "id": 1, "result": "done"},
    ]


async def test_outgoing_and_incoming_requests_share_one_connection() -> None:
    """An incoming request's handler can call the peer and answer with what it got."""
    wire = Wire()
    conn = Connection(wire)

    async def handler(params: dict[str, Any]) -> Any:
        return await conn.request("fs/read_text_file", {"path": params["path"]})

    conn.requests["read"] = handler
    async with anyio.create_task_group() as tg:
        conn.bind(tg)
        conn.feed(line({"jsonrpc": "2.0", "id": "r1", "method": "read", "params": {"path": "/p"}}))
        await anyio.wait_all_tasks_blocked()
        assert wire.messages() == [
            {"jsonrpc": "2.0", "id": 0, "method": "fs/read_text_file", "params": {"path": "/p"}}
        ]
        conn.feed(result(0, {"content": "text"}))
        await conn.wait_idle()
    assert wire.messages()[1] == {"jsonrpc": "2.0", "id": "r1", "result": {"content": "text"}}
