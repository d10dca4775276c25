"""A JSON-RPC 2.0 peer: dispatches incoming messages, calls the other side.

The connection does no I/O of its own.  Bytes arrive through `feed`;
everything it writes goes through a `FrameWriter` (in the server, the
process's ordered outbox).  Each incoming request runs in its own task of
the server's task group, in that task's own cancel scope (anyio gives every
task one: its `TaskHandle`), so a notification such as ``session/cancel`` is
handled while a long ``session/prompt`` is still running, and
``$/cancel_request`` can cancel a request by id (its handler then answers
``-32800``).  A method that answers
``$/cancel_request`` itself (a cancel hook: ``session/prompt`` answers with
the ``cancelled`` stop reason) is never cancelled that way: the hook is called
instead, and the request's scope is left to the task group's end.

Outgoing requests (`Connection.request`) wait in a table keyed by their id.
A response resolves its entry with the result or a `RemoteError`; cancelling
the waiting task sends ``$/cancel_request`` for the id and the late response
is ignored; `fail_pending` (EOF on the input, a broken output) fails every
waiting request with `ConnectionClosed`.  A response whose id matches nothing
is ignored with a warning.

A request that reuses the id of an incoming request still in flight is
refused at once with ``-32600``, id null and the reused id in
``data.requestId`` (and said on stderr): an answer with that id would be
taken for the answer of the request in flight, which is not touched and gets
its own answer later.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import count
from typing import Any, Protocol

import anyio
from anyio import TaskHandle
from anyio.abc import TaskGroup

from .errors import RemoteError, RequestId, RpcError, is_out_of_descriptors
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

CANCEL_REQUEST = "$/cancel_request"
_MAX_ABANDONED = 1024


class FrameWriter(Protocol):
    """Where the connection's frames go, in order (the server's outbox)."""

    def send(self, frame: bytes) -> None:
        """Queue one complete frame (it ends with a newline); never blocks."""

    def flush_now(self) -> None:
        """Write what is queued now if that can be done without waiting."""


class ConnectionClosed(Exception):
    """The peer went away (EOF, broken pipe) before answering a request."""

    def __init__(self, method: str, reason: str) -> None:
        super().__init__(f"connection closed ({reason}) before {method} was answered")
        self.method = method
        self.reason = reason


@dataclass(eq=False, slots=True)
class _Pending:
    method: str
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None
    error: BaseException | None = None


class Reply:
    """The one answer a request gets.  A handler may send it early (a prompt
    answers the moment its turn settles, without waiting to be scheduled
    again); whatever comes later for the same request is dropped."""

    __slots__ = ("_outbox", "cancelled", "id", "on_sent", "sent")

    def __init__(self, outbox: FrameWriter, id: RequestId) -> None:
        self._outbox = outbox
        self.id = id
        self.sent = False
        # ``$/cancel_request`` cancelled its handler: answered ``-32800`` once it unwinds.
        self.cancelled = False
        # Called once the answer is sent (set by `Connection.wait_answered`).
        self.on_sent: Callable[[], None] | None = None

    def result(self, value: Any) -> None:
        if not self.sent:
            self._send(encode_result(self.id, value))

    def error(self, error: RpcError) -> None:
        if not self.sent:
            self._send(encode_error(self.id, error))

    def _send(self, frame: bytes) -> None:
        self.sent = True
        self._outbox.send(frame)
        if self.on_sent is not None:
            self.on_sent()


# The reply of the request whose handler runs in the current task.
current_reply: ContextVar[Reply] = ContextVar("current_reply")

RequestHandler = Callable[[dict[str, Any]], Awaitable[Any]]
NotificationHandler = Callable[[dict[str, Any]], None]


class Connection:
    def __init__(self, outbox: FrameWriter) -> None:
        self.outbox = outbox
        self.framer = LineFramer()
        self.requests: dict[str, RequestHandler] = {}
        self.notifications: dict[str, NotificationHandler] = {}
        # Methods that answer ``$/cancel_request`` themselves (session/prompt
        # answers with the ``cancelled`` stop reason rather than -32800).
        self.cancel_hooks: dict[str, Callable[[RequestId, dict[str, Any]], None]] = {}
        # Called synchronously when a request arrives, before its handler task
        # runs: lets a notification that follows in the same read (a cancel
        # right behind its prompt) see that the request exists.
        self.arrival_hooks: dict[str, Callable[[RequestId, dict[str, Any]], None]] = {}
        # Spawns a request's handler (see `bind`); the task's handle cancels it.
        self._spawn: Callable[..., TaskHandle[None]] | None = None
        self._in_flight: dict[RequestId, tuple[Request, TaskHandle[None], Reply]] = {}
        self._idle = anyio.Event()
        self.closed = False
        # Outgoing requests waiting for their response, by id.
        self._pending: dict[RequestId, _Pending] = {}
        # Ids we cancelled: their late responses are expected, not warned
        # about (bounded: a peer that never answers them cannot grow it).
        self._abandoned: dict[RequestId, None] = {}
        self._ids = count()
        self._gone: str | None = None

    def bind(self, tg: TaskGroup) -> None:
        """Run request handlers in tasks of ``tg``."""
        self._spawn = tg.start_soon

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
        if req.id in self._in_flight:
            self._refuse_duplicate(req)
            return
        handler = self.requests.get(req.method)
        if handler is None:
            self.outbox.send(encode_error(req.id, RpcError.method_not_found(req.method)))
            return
        assert self._spawn is not None, "Connection.bind() first"
        reply = Reply(self.outbox, req.id)
        arrival = self.arrival_hooks.get(req.method)
        if arrival is not None:
            arrival(req.id, req.params)
        # The task's own cancel scope is the request's: no second one per request.
        task = self._spawn(self._run_request, req, handler, reply)
        # A task started eagerly (an eager task factory) may have run to its
        # end already: it popped nothing, so it must not be kept in flight.
        if task.status is TaskHandle.Status.PENDING:
            self._in_flight[req.id] = (req, task, reply)

    def _refuse_duplicate(self, req: Request) -> None:
        """Answer a request whose id is in flight: ``-32600`` with id null
        (JSON-RPC's id for a request it could not identify), the id in
        ``data.requestId``.  An answer with that id would be taken for the
        answer of the request in flight, which is not touched."""
        log.warning("refused %s: request id %r is already in flight", req.method, req.id)
        shown = repr(req.id)[:100]  # a string id may be long
        error = RpcError.invalid_request(
            f"request id {shown} is already in flight; this {req.method} was not run"
        )
        error.data["requestId"] = req.id
        self.outbox.send(encode_error(None, error))

    async def _run_request(self, req: Request, handler: RequestHandler, reply: Reply) -> None:
        current_reply.set(reply)
        try:
            try:
                result = await handler(req.params)
            except RpcError as exc:
                reply.error(exc)
                return
            except Exception as exc:
                if is_out_of_descriptors(exc):
                    # A state of the process, not a bug: said in one line.
                    log.error("%s failed: %s", req.method, exc.strerror or exc)
                    reply.error(RpcError.out_of_descriptors(req.method))
                else:
                    log.exception("%s failed", req.method)
                    reply.error(RpcError.internal(f"{req.method} failed"))
                return
            reply.result(result)
        finally:
            # Cancelled by ``$/cancel_request`` (the task's scope swallows the
            # cancellation once this returns): answered once it has unwound.
            if reply.cancelled and not self.closed:
                reply.error(RpcError.cancelled())
            self._in_flight.pop(req.id, None)
            if not self._in_flight:
                self._idle.set()
            if reply.on_sent is not None:
                reply.on_sent()  # gone, answered or not: `wait_answered` looks again

    def _notify(self, note: Notification) -> None:
        if note.method == "$/cancel_request":
            request_id = note.params.get("requestId")
            # Only a string or an integer can name a request (not true, 1.0, [..]).
            valid = isinstance(request_id, str) or type(request_id) is int
            entry = self._in_flight.get(request_id) if valid else None
            if entry is not None:
                req, task, reply = entry
                hook = self.cancel_hooks.get(req.method)
                if hook is not None:
                    hook(req.id, req.params)
                else:
                    reply.cancelled = True
                    task.cancel()
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
        pending = self._pending.pop(resp.id, None)
        if pending is None:
            if resp.id in self._abandoned:
                del self._abandoned[resp.id]
                log.debug("late response to cancelled request %r ignored", resp.id)
            else:
                log.warning("response to unknown request id %r ignored", resp.id)
            return
        if resp.error is not None:
            pending.error = RemoteError.from_wire(resp.error)
        else:
            pending.result = resp.result
        pending.done.set()

    # -- outgoing ------------------------------------------------------------

    async def request(self, method: str, params: Any) -> Any:
        """Send a request to the peer and wait for its result.

        Raises `RemoteError` when the peer answers with an error and
        `ConnectionClosed` when it goes away first.  Cancelling the calling
        task sends ``$/cancel_request`` for the id; the late response is ignored.
        """
        if self._gone is not None:
            raise ConnectionClosed(method, self._gone)
        rid = next(self._ids)
        pending = self._pending[rid] = _Pending(method)
        self.outbox.send(encode_request(rid, method, params))
        self.outbox.flush_now()
        try:
            await pending.done.wait()
        except BaseException:
            # Cancelled (or failed) while waiting.  If the answer is already
            # here, there is nothing to cancel on the other side.
            if self._pending.pop(rid, None) is not None and self._gone is None:
                self._abandoned[rid] = None
                if len(self._abandoned) > _MAX_ABANDONED:
                    del self._abandoned[next(iter(self._abandoned))]
                self.outbox.send(encode_notification(CANCEL_REQUEST, {"requestId": rid}))
            raise
        if pending.error is not None:
            raise pending.error
        return pending.result

    def notify(self, method: str, params: Any) -> None:
        """Send a notification to the peer (no answer comes back)."""
        if self._gone is None:
            self.outbox.send(encode_notification(method, params))

    @property
    def pending_requests(self) -> int:
        """Outgoing requests still waiting for their response."""
        return len(self._pending)

    def fail_pending(self, reason: str) -> None:
        """The peer is gone (EOF on its input, a broken pipe): every waiting
        request fails with `ConnectionClosed`, and so does every later one."""
        if self._gone is None:
            self._gone = reason
        pending, self._pending = self._pending, {}
        for rid, entry in pending.items():
            log.info("request %r (%s) failed: connection closed (%s)", rid, entry.method, reason)
            entry.error = ConnectionClosed(entry.method, reason)
            entry.done.set()

    async def wait_idle(self) -> None:
        """Wait until no incoming request is being handled."""
        while self._in_flight:
            self._idle = anyio.Event()
            await self._idle.wait()

    async def wait_answered(self) -> None:
        """Wait until every incoming request is answered (or its handler has
        returned).  A prompt's handler runs its turn, and a turn abandoned by
        the watchdog was answered while its task may still be stuck: the
        answers are what a shutdown waits for, not that task."""
        while any(not reply.sent for _, _, reply in self._in_flight.values()):
            changed = anyio.Event()
            for _, _, reply in self._in_flight.values():
                reply.on_sent = changed.set
            await changed.wait()

    def close(self) -> None:
        """The peer is gone: a cancelled request gets no -32800 any more, and
        the requests still waiting for the peer fail with `ConnectionClosed`."""
        self.closed = True
        self.fail_pending("closed")
