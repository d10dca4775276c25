"""The HTTP side of the real providers: one streamed request, retried before output.

`HttpProvider` is vendor-neutral: a `Wire` (Anthropic Messages or OpenAI Chat
Completions) builds the request body from the model history, reads each
server-sent event into stream events, and turns an HTTP error into a
`ProviderError`.  This module does the rest:

* one ``POST`` per attempt with httpx, the response read as SSE with httpx-sse;
* retries (429, 5xx, 529, overloaded, connection failures) only while nothing
  has been yielded: each is announced by a `Retrying` event before the wait;
* a server that answers with one whole JSON answer instead of an event stream
  is read as that stream when the wire knows the answer (`Wire.whole_answer`:
  an OpenAI-compatible ``chat.completion``), and refused otherwise;
* an idle stream (no bytes for the read timeout) raises `StreamIdleTimeout`;
  a cut body, malformed SSE and in-stream errors raise distinct kinds;
* ``abort()`` shuts the socket down synchronously, so the server sees the
  disconnect at once; leaving the context manager closes the response.

httpx is imported here, and this module only when a real provider is chosen,
so a scripted session does not pay for it at start-up.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections import deque
from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import httpx
from httpx_sse import EventSource, ServerSentEvent

from ..context.config import ContextConfig
from ..context.windows import ModelInfo, resolve_window
from ..redact import MIN_KEY_LENGTH, SECRETS
from .base import (
    ModelRequest,
    ProviderError,
    ProviderStream,
    Retrying,
    StreamEvent,
    StreamIdleTimeout,
    Usage,
)
from .config import ProviderConfig
from .recording import RecordedResponse, Recorder
from .retry import RetryPolicy
from .wire import Wire, WireParser

__all__ = ["HttpProvider"]

log = logging.getLogger("acp_bridge.providers")
# httpx and httpcore never see a key in a log line: their debug output names
# headers, so keep them quiet whatever the bridge's log level.
logging.getLogger("httpx").setLevel(logging.WARNING)
logging.getLogger("httpcore").setLevel(logging.WARNING)


@dataclass
class HttpProvider:
    """A real model provider: one per session (its model can be changed by the editor)."""

    wire: Wire
    config: ProviderConfig
    key: str | None
    recorder: Recorder | None = None

    def __post_init__(self) -> None:
        self.name = self.wire.name
        # What it can do (see `Provider`): the configured models, images or not, its key.
        config = self.config
        self.models, self.images, self.key_env = config.models, config.images, config.key_env
        self.model = self.config.models[0]
        self._client: httpx.AsyncClient | None = None
        self.context = self.config.context or ContextConfig()
        if self.key:
            # Whole, and its parts (a vendor may echo the key cut at a + or /).
            SECRETS.add([self.key], min_length=MIN_KEY_LENGTH)

    async def model_info(self) -> ModelInfo:
        """The current model's window (see `acp_bridge.context.windows`), output limit, price."""
        context, model = self.context, self.model
        reported = None
        if (
            not context.context_window
            and model not in context.context_windows
            and self.wire.lists_windows(self.config.base_url)
        ):
            from .models import server_window

            reported = await server_window(self.client(), self.config.base_url, model)
        window, source = resolve_window(model, context, reported=reported)
        max_output = self.config.max_tokens
        if self.wire.thinks and self.config.thinking_budget:
            max_output = max(max_output, self.config.thinking_budget + 1024)
        return ModelInfo(window, source, max_output, context.prices.get(model))

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(
                    connect=self.config.connect_timeout,
                    read=self.config.idle_timeout,
                    write=60.0,
                    pool=self.config.connect_timeout,
                ),
                headers=self.wire.headers(self.key),
            )
        return self._client

    @asynccontextmanager
    async def stream(self, request: ModelRequest) -> AsyncGenerator[ProviderStream, None]:
        body = self.wire.body(request, self.config, self.model)
        url = self.wire.endpoint(self.config.base_url)
        record = self.recorder.response() if self.recorder is not None else None
        stream = HttpStream(self, url, body, record)
        # Usage reports name the window (and a recording of them keeps it).
        stream.context_window = (await self.model_info()).context_window
        try:
            yield stream
        finally:
            with anyio.CancelScope(shield=True):
                await stream.aclose()


class HttpStream(ProviderStream):
    """The async iterator of one model request (all its attempts)."""

    def __init__(
        self, provider: HttpProvider, url: str, body: bytes, record: RecordedResponse | None
    ) -> None:
        self._provider = provider
        self._wire = provider.wire
        self._policy: RetryPolicy = provider.config.retry
        self._url = url
        self._body = body
        self._record = record
        self._queue: deque[StreamEvent] = deque()
        self._response: httpx.Response | None = None
        self._sse: AsyncGenerator[ServerSentEvent, None] | None = None
        self._parser: WireParser | None = None
        self._attempt = 0
        self._wait = 0.0
        self._delivered = False
        self._finished = False
        self._aborted = False
        self.request_id: str | None = None
        self.context_window: int | None = None

    def __aiter__(self) -> HttpStream:
        return self

    async def __anext__(self) -> StreamEvent:
        queue = self._queue
        while True:
            if queue:
                ev = queue.popleft()
                if type(ev) is Usage and ev.context_window is None:
                    ev = Usage(ev.input_tokens, ev.output_tokens, self.context_window)
                self._delivered = True
                if self._record is not None:
                    self._record.event(ev)
                return ev
            if self._aborted or self._finished:
                raise StopAsyncIteration
            if self._sse is None:
                retrying = await self._connect()
            else:
                retrying = await self._read(self._sse)
            if retrying is not None:
                return retrying

    async def _read(self, sse: AsyncGenerator[ServerSentEvent, None]) -> Retrying | None:
        """Read one server-sent event into the queue (or fail, or retry)."""
        assert self._parser is not None
        try:
            item = await sse.__anext__()
            self._queue.extend(self._parser.feed(item.event, item.data))
        except StopAsyncIteration:
            try:
                self._queue.extend(self._parser.end())
            except ProviderError as exc:
                # A body that ended without its finish event: a failed
                # attempt, retried like any other before output (so the
                # stream is not finished: the next call makes the retry).
                return await self._failed(exc)
            self._finished = True
        except ProviderError as exc:
            return await self._failed(exc)
        except httpx.ReadTimeout:
            if self._aborted:
                raise StopAsyncIteration from None
            await self._drop_response()
            timeout = StreamIdleTimeout(self._provider.config.idle_timeout or 0.0)
            if self._record is not None:
                self._record.error(timeout)
            raise self._tag(timeout) from None
        except httpx.TransportError as exc:
            if self._aborted:
                raise StopAsyncIteration from None
            return await self._failed(self._cut(exc))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:  # bad JSON or shapes
            return await self._failed(
                ProviderError(
                    f"{self._wire.vendor} sent a malformed event stream: {exc}",
                    kind="malformed",
                )
            )
        return None

    def _cut(self, exc: Exception) -> ProviderError:
        return ProviderError(
            f"the connection to {self._wire.vendor} broke mid-answer "
            f"({type(exc).__name__}); the reply is incomplete",
            kind="cut",
            retryable=True,
        )

    def _tag(self, exc: ProviderError) -> ProviderError:
        if exc.request_id is None:
            exc.request_id = self.request_id
        return exc

    async def _failed(
        self, exc: ProviderError, headers: Mapping[str, str] | None = None
    ) -> Retrying:
        """Retry a failure that came before any output, else raise it."""
        exc = self._tag(exc)
        await self._drop_response()
        if self._delivered or not exc.retryable or self._attempt > self._policy.max_retries:
            if self._record is not None:
                self._record.error(exc)
            raise exc
        self._wait = self._policy.delay(self._attempt, headers)
        log.info(
            "%s: attempt %d failed (%s); retrying in %.2fs",
            self._wire.name,
            self._attempt,
            exc.kind,
            self._wait,
        )
        return Retrying(exc, self._attempt, self._wait)

    async def _connect(self) -> Retrying | None:
        if self._wait:
            await anyio.sleep(self._wait)
            self._wait = 0.0
        self._attempt += 1
        client = self._provider.client()
        self._parser = self._wire.parser()
        request = client.build_request(
            "POST",
            self._url,
            content=self._body,
            headers={"accept": "text/event-stream", "content-type": "application/json"},
        )
        try:
            response = await client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            return await self._failed(
                ProviderError(
                    f"{self._wire.vendor} did not answer in time ({type(exc).__name__})",
                    kind="timeout",
                    retryable=True,
                )
            )
        except httpx.TransportError as exc:
            return await self._failed(
                ProviderError(
                    f"cannot reach {self._wire.vendor} at {self._provider.config.base_url}: "
                    f"{str(exc) or type(exc).__name__}",
                    kind="connection",
                    retryable=True,
                )
            )
        self._response = response
        self.request_id = response.headers.get(self._wire.request_id_header)
        if response.status_code != 200:
            try:
                raw = await response.aread()
            except httpx.TransportError:
                raw = b""
            error = self._wire.http_error(
                response.status_code, raw, response.headers, bool(self._provider.key)
            )
            return await self._failed(error, response.headers)
        if self._aborted:
            await self._drop_response()
            return None
        content_type = response.headers.get("content-type", "")
        if "text/event-stream" not in content_type:
            return await self._whole(response, content_type)
        self._sse = EventSource(response).aiter_sse()
        return None

    async def _whole(self, response: httpx.Response, content_type: str) -> Retrying | None:
        """A 200 that is not an event stream: read it as one whole answer, the
        events it stands for going through the parser like a stream's, or refuse it."""
        try:
            raw = await response.aread()
        except httpx.TransportError as exc:
            if self._aborted:
                await self._drop_response()
                return None
            return await self._failed(self._cut(exc))
        data = self._wire.whole_answer(raw) if "json" in content_type else None
        if data is None:
            return await self._failed(
                ProviderError(
                    f"{self._wire.vendor} answered with something other than an event stream "
                    f"(content-type {content_type or 'none'!r})",
                    kind="malformed",
                )
            )
        log.debug(
            "%s answered the streaming request with one whole JSON answer (%s, %d bytes); "
            "reading it as the whole stream",
            self._wire.name,
            content_type,
            len(raw),
        )
        self._sse = _replayed(data)
        return None

    async def _drop_response(self) -> None:
        sse, response = self._sse, self._response
        self._sse = self._response = None
        with anyio.CancelScope(shield=True):
            if sse is not None:
                with contextlib.suppress(Exception):
                    await sse.aclose()
            if response is not None:
                await response.aclose()

    def abort(self) -> bool:
        """Stop now: no further event, and the server sees the connection go."""
        self._aborted = True
        response = self._response
        if response is not None:
            stream = response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            # A socket.socket, or asyncio's TransportSocket wrapper of one.
            shutdown = getattr(sock, "shutdown", None)
            if shutdown is not None:
                with contextlib.suppress(OSError):
                    shutdown(socket.SHUT_RDWR)
        return True

    async def aclose(self) -> None:
        if self._record is not None:
            self._record.end(self._finished and not self._queue)
        await self._drop_response()


async def _replayed(data: list[str]) -> AsyncGenerator[ServerSentEvent, None]:
    """The server-sent events of a whole answer, as if they had been streamed."""
    for item in data:
        yield ServerSentEvent(data=item)
