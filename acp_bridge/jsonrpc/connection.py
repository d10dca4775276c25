"""A JSON-RPC 2.0 peer: dispatches incoming messages.

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


class Connection:
    def __init__(self, outbox: Outbox, *, max_frame: int | None = None) -> None:
        self.outbox = outbox
        self.framer = LineFramer() if max_frame is None else LineFramer(max_frame)
        self.requests: dict[str, RequestHandler] = {}
        self.notifications: dict[str, NotificationHandler] = {}
        # Methods that answer ``$/cancel_request`` themselves (session/prompt
        # answers with the ``cancelled`` stop reason rather than -32800).
        self.cancel_hooks: dict[str, Callable[[RequestId, dict[str, Any]], None]] = {}
        # Called synchronously when a request arrives, before its handler task
        # runs: lets a notification that follows in the same read (a cancel
        # right behind its prompt) see that the request exists.
        self.arrival_hooks: dict[str, Callable[[RequestId, dict[str, Any]], None]] = {}
        self._tg: TaskGroup | None = None
        self._in_flight: dict[RequestId, tuple[Request, anyio.CancelScope]] = {}
        self._idle = anyio.Event()
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
                    hook(req.id, req.params)
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
        # The bridge sends no requests to the editor yet (tools and
        # permissions will), so every response answers nothing of ours.
        log.warning("response to unknown request id %r ignored", resp.id)

    async def wait_idle(self) -> None:
        """Wait until no incoming request is being handled."""
        while self._in_flight:
            self._idle = anyio.Event()
            await self._idle.wait()

    def close(self) -> None:
        """The peer is gone: a cancelled request gets no -32800 any more."""
        self.closed = True
