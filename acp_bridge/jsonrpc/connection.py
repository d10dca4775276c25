"""A JSON-RPC 2.0 peer: dispatches incoming messages and tracks outgoing requests.

The connection does no I/O of its own.  Bytes arrive through `feed`;
everything it writes goes through the process's ordered `Outbox`.  Each
incoming request runs in its own task inside its own cancel scope, so a
notification such as ``session/cancel`` is handled while a long
``session/prompt`` is still running, and ``$/cancel_request`` can cancel a
request by id (its handler then answers ``-32800`` unless it chose to return a
result, as ``session/prompt`` does with ``cancelled``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from itertools import count
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..transport.outbox import Outbox
from .errors import RequestId, RpcError
from .framing import FrameTooLarge, LineFramer
from .messages import (
    Notification,
    Request,
    Response,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
    parse_frame,
)

log = logging.getLogger("acp_bridge.jsonrpc")


class Reply:
    """The one answer a request gets.  A handler may send it early (a prompt
    answers the moment its turn settles, without waiting to be scheduled
    again); whatever comes later for the same request is dropped."""

    __slots__ = ("_outbox", "id", "sent")

    def __init__(self, outbox: Outbox, id: RequestId) -> None:
        self._outbox = outbox
        self.id = id
        self.sent = False

    def result(self, value: Any) -> None:
        if not self.sent:
            self.sent = True
            self._outbox.send(encode_result(self.id, value))

    def error(self, error: RpcError) -> None:
        if not self.sent:
            self.sent = True
            self._outbox.send(encode_error(self.id, error))


# The reply of the request whose handler runs in the current task.
current_reply: ContextVar[Reply] = ContextVar("current_reply")

RequestHandler = Callable[[dict[str, Any]], Awaitable[Any]]
NotificationHandler = Callable[[dict[str, Any]], None]


class ConnectionClosed(Exception):
    """The peer went away while we were waiting for its answer."""


class _Pending:
    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Any = None
        self.error: dict[str, Any] | ConnectionClosed | None = None


class Connection:
    def __init__(self, outbox: Outbox, *, max_frame: int | None = None) -> None:
        self.outbox = outbox
        self.framer = LineFramer() if max_frame is None else LineFramer(max_frame)
        self.requests: dict[str, RequestHandler] = {}
        self.notifications: dict[str, NotificationHandler] = {}
        # Methods that answer ``$/cancel_request`` themselves (session/prompt
        # answers with the ``cancelled`` stop reason rather than -32800).
        self.cancel_hooks: dict[str, NotificationHandler] = {}
        # Called synchronously when a request arrives, before its handler task
        # runs: lets a notification that follows in the same read (a cancel
        # right behind its prompt) see that the request exists.
        self.arrival_hooks: dict[str, Callable[[RequestId, dict[str, Any]], None]] = {}
        self._tg: TaskGroup | None = None
        self._in_flight: dict[RequestId, tuple[Request, anyio.CancelScope]] = {}
        self._pending: dict[int, _Pending] = {}
        self._idle = anyio.Event()
        self._ids = count(1)
        self.closed = False

    def bind(self, tg: TaskGroup) -> None:
        self._tg = tg

    # -- incoming ----------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Handle bytes read from the peer (call on the event loop)."""
        for frame in self.framer.feed(data):
            try:
                self.handle_frame(frame)
            except Exception:
                # A bug in handling one frame must not cost the frames after it.
                log.exception("failed to handle a frame")

    def handle_frame(self, frame: bytes | FrameTooLarge) -> None:
        msg = parse_frame(frame)
        if isinstance(msg, RpcError):
            log.warning("rejected frame: %s %s", msg.code, msg.data)
            self.outbox.send(encode_error(msg.id, msg))
        elif isinstance(msg, Request):
            self._start_request(msg)
        elif isinstance(msg, Notification):
            self._notify(msg)
        else:
            self._resolve(msg)

    def _start_request(self, req: Request) -> None:
        handler = self.requests.get(req.method)
        if handler is None:
            self.outbox.send(encode_error(req.id, RpcError.method_not_found(req.method)))
            return
        if req.id in self._in_flight:
            err = RpcError.invalid_request(f"request id {req.id!r} is already in use", id=req.id)
            self.outbox.send(encode_error(req.id, err))
            return
        assert self._tg is not None, "Connection.bind() first"
        scope = anyio.CancelScope()
        self._in_flight[req.id] = (req, scope)
        arrival = self.arrival_hooks.get(req.method)
        if arrival is not None:
            arrival(req.id, req.params)
        self._tg.start_soon(self._run_request, req, handler, scope)

    async def _run_request(
        self, req: Request, handler: RequestHandler, scope: anyio.CancelScope
    ) -> None:
        reply = Reply(self.outbox, req.id)
        current_reply.set(reply)
        try:
            with scope:
                try:
                    result = await handler(req.params)
                except RpcError as exc:
                    reply.error(exc)
                    return
                except Exception:
                    log.exception("%s failed", req.method)
                    reply.error(RpcError.internal(f"{req.method} failed"))
                    return
                reply.result(result)
            if scope.cancelled_caught and not self.closed:
                reply.error(RpcError.cancelled())
        finally:
            self._in_flight.pop(req.id, None)
            if not self._in_flight:
                self._idle.set()

    def _notify(self, note: Notification) -> None:
        if note.method == "$/cancel_request":
            request_id = note.params.get("requestId")
            # Only a string or an integer can name a request (not true, 1.0, [..]).
            valid = isinstance(request_id, str) or type(request_id) is int
            entry = self._in_flight.get(request_id) if valid else None
            if entry is not None:
                req, scope = entry
                hook = self.cancel_hooks.get(req.method)
                if hook is not None:
                    hook(req.params)
                else:
                    scope.cancel()
            return
        handler = self.notifications.get(note.method)
        if handler is None:
            # JSON-RPC: notifications never get a reply; unknown ones are ignored.
            log.debug("ignored notification %s", note.method)
            return
        try:
            handler(note.params)
        except RpcError as exc:
            log.warning("bad %s notification: %s", note.method, exc.message)
        except Exception:
            log.exception("%s notification failed", note.method)

    def _resolve(self, resp: Response) -> None:
        pending = self._pending.pop(resp.id, None) if isinstance(resp.id, int) else None
        if pending is None:
            log.warning("response to unknown request id %r ignored", resp.id)
            return
        pending.result = resp.result
        pending.error = resp.error
        pending.done.set()

    # -- outgoing ----------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request to the peer and wait for its result.

        Raises `RpcError` for an error answer and `ConnectionClosed` if the
        peer goes away first.  Cancelling the caller sends
        ``$/cancel_request`` for it.
        """
        if self.closed:
            raise ConnectionClosed(method)
        rid = next(self._ids)
        pending = _Pending()
        self._pending[rid] = pending
        self.outbox.send(encode_request(rid, method, params))
        try:
            await pending.done.wait()
        except BaseException:
            if self._pending.pop(rid, None) is not None and not self.closed:
                self.outbox.send(encode_notification("$/cancel_request", {"requestId": rid}))
            raise
        if isinstance(pending.error, ConnectionClosed):
            raise pending.error
        if pending.error is not None:
            err = pending.error
            raise RpcError(
                int(err.get("code", -32603)), str(err.get("message", "")), err.get("data")
            )
        return pending.result

    async def wait_idle(self) -> None:
        """Wait until no incoming request is being handled."""
        while self._in_flight:
            self._idle = anyio.Event()
            await self._idle.wait()

    def close(self) -> None:
        """The peer is gone: fail every outstanding outgoing request."""
        self.closed = True
        for pending in self._pending.values():
            pending.error = ConnectionClosed("connection closed")
            pending.done.set()
        self._pending.clear()
