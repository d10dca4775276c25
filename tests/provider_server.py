"""A model API on loopback for the provider tests: real sockets, real HTTP/1.1.

`WireServer` answers each ``POST`` with the next scripted `Reply`: a status,
headers and a body of server-sent events written as chunked transfer
encoding, with optionally a cut (the socket closes mid-body) or a
tail that keeps the stream open until the client goes away (recorded as a
disconnect); or a plain body instead of the events (an error, or one whole
JSON answer as some servers give to a streaming request, `openai_completion`).
It keeps every request it received (path, headers, JSON body).
A ``GET .../models`` is answered with `WireServer.models` (404 while it is
None) and kept apart, in ``gets``.  A scripted reply may be a function of the
request's JSON body that returns the `Reply` (usage that follows the request's
size, say).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    events: list[str] = field(default_factory=list)  # raw SSE events, without the blank line
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None  # a non-SSE body (errors, or a whole JSON answer)
    content_type: str = "application/json"  # the non-SSE body's
    cut: bool = False  # close the socket after the events, mid-body
    stall: float = 0.0  # after the events, wait this long before ending
    hold: bool = False  # after the events, keep the stream open until the client leaves


def sse(event: str | None, data: Any) -> str:
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "") + f"data: {text}"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


ReplyFor = Callable[[dict[str, Any]], Reply]


class WireServer:
    def __init__(self, replies: Sequence[Reply | ReplyFor]) -> None:
        self.replies = list(replies)
        self.requests: list[Received] = []
        self.disconnected = threading.Event()
        # The model listing GET /models answers with (None: 404), and the GETs.
        self.models: list[dict[str, Any]] | None = None
        self.gets: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(length)
                server.requests.append(
                    Received(
                        self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw)
                    )
                )
                reply = server.replies.pop(0) if server.replies else Reply(status=500)
                if callable(reply):
                    reply = reply(server.requests[-1].body)
                server.serve_reply(self, reply)

            def do_GET(self) -> None:
                server.gets.append(self.path)
                if self.path.endswith("/models") and server.models is not None:
                    body = json.dumps({"object": "list", "data": server.models}).encode()
                    server.serve_reply(self, Reply(status=200, body=body))
                else:
                    server.serve_reply(self, Reply(status=404, body=b'{"error": "not found"}'))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> WireServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def serve_reply(self, h: BaseHTTPRequestHandler, reply: Reply) -> None:
        h.send_response(reply.status)
        if reply.body is not None or reply.status != 200:
            body = reply.body or b""
            h.send_header("content-type", reply.content_type)
            h.send_header("content-length", str(len(body)))
            for k, v in reply.headers.items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(body)
            h.wfile.flush()
            return
        h.send_header("content-type", "text/event-stream")
        h.send_header("cache-control", "no-cache")
        h.send_header("transfer-encoding", "chunked")
        for k, v in reply.headers.items():
            h.send_header(k, v)
        h.end_headers()

        def chunk(data: bytes) -> None:
            h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            h.wfile.flush()

        try:
            for event in reply.events:
                chunk(event.encode() + b"\n\n")
            if reply.cut:
                h.connection.shutdown(socket.SHUT_RDWR)
                h.close_connection = True
                return
            if reply.hold:
                while True:
                    time.sleep(0.02)
                    chunk(b": keep-alive\n\n")
            if reply.stall:
                time.sleep(reply.stall)
            h.wfile.write(b"0\r\n\r\n")
            h.wfile.flush()
        except OSError:
            self.disconnected.set()
            h.close_connection = True


# -- the wire formats, as the vendors stream them -------------------------------------


def anthropic_start(msg_id: str = "msg_01", input_tokens: int = 25) -> str:
    return sse(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": input_tokens,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 1,
                },
            },
        },
    )


def anthropic_text_block(index: int, pieces: list[str]) -> list[str]:
    out = [
        sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        sse("ping", {"type": "ping"}),
    ]
    out += [
        sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": p},
            },
        )
        for p in pieces
    ]
    return out


def anthropic_block_stop(index: int) -> str:
    return sse("content_block_stop", {"type": "content_block_stop", "index": index})


def anthropic_end(stop: str = "end_turn", output_tokens: int = 6) -> list[str]:
    return [
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        ),
        sse("message_stop", {"type": "message_stop"}),
    ]


def anthropic_text(pieces: list[str]) -> list[str]:
    return [
        anthropic_start(),
        *anthropic_text_block(0, pieces),
        anthropic_block_stop(0),
        *anthropic_end(),
    ]


def openai_chunk(
    delta: dict[str, Any], finish: str | None = None, usage: dict[str, Any] | None = None
) -> str:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    if usage is not None:
        body["choices"] = []
        body["usage"] = usage
    return sse(None, body)


def openai_text(
    pieces: list[str], *, reasoning_key: str | None = None, reasoning: Sequence[str] = ()
) -> list[str]:
    out = [openai_chunk({"role": "assistant", "content": ""})]
    out += [openai_chunk({reasoning_key or "reasoning_content": r}) for r in reasoning]
    out += [openai_chunk({"content": p}) for p in pieces]
    out += [
        openai_chunk({}, "stop"),
        openai_chunk({}, usage={"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}),
        sse(None, "[DONE]"),
    ]
    return out


def openai_completion(
    message: dict[str, Any], finish: str | None = "stop", usage: dict[str, Any] | None = None
) -> bytes:
    """A whole non-streamed ``chat.completion``, as some servers answer a streaming request."""
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [
                {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
            ],
            "usage": usage,
        }
    ).encode()


# -- streams that end cleanly without their finish event -------------------------------


def anthropic_unfinished(pieces: Sequence[str] = ()) -> list[str]:
    """An Anthropic body that ends (a clean end of the chunked body) with no
    ``message_delta`` and no ``message_stop``: text only if ``pieces``."""
    out = [anthropic_start(), *anthropic_text_block(0, list(pieces))]
    return out


def openai_unfinished(pieces: Sequence[str] = ()) -> list[str]:
    """An OpenAI-compatible body that ends cleanly with no ``finish_reason`` and
    no ``[DONE]``: the role chunk, then text only if ``pieces``."""
    out = [openai_chunk({"role": "assistant", "content": ""})]
    out += [openai_chunk({"content": p}) for p in pieces]
    return out
