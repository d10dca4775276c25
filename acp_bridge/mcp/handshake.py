"""The start of a stdio MCP connection, done before the ``mcp`` package is loaded.

``session/new`` waits for its servers' tools.  Importing the ``mcp`` client
costs about as much CPU as a small server's whole start-up (the server
imports the same package), so if the bridge imported it while the server
starts, both would compete for the same cores and the server would be ready
later.  Instead the bridge speaks the three messages a connection starts
with itself, on its own JSON-RPC values (`acp_bridge.jsonrpc.messages`):

1. ``initialize`` (the same request the ``mcp`` client sends), answered;
2. ``notifications/initialized``;
3. ``tools/list``, every page.

Then the session is answered, the ``mcp`` package is imported, and its
``ClientSession`` takes the connection over (`ClientSession.adopt` installs
the ``initialize`` result without sending anything): calls, progress,
cancellation and later listings all go through it.

Until then a ``ping`` from the server is answered, any other request gets
``-32601`` (the bridge offers the server no capabilities), and
``notifications/tools/list_changed`` is passed on (`on_list_changed`).  The
handshake's request ids are strings (``"acp-bridge-1"``, ...), so they never
meet the integer ids of the ``mcp`` client that follows on the same
connection.

Free of I/O: frames go out through ``send``; what the server sends comes in
through `Handshake.received`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

import anyio
import orjson

from ..jsonrpc.errors import RemoteError, RpcError
from ..jsonrpc.messages import Notification, Request, Response, encode_error, encode_result

__all__ = ["HANDSHAKE_VERSIONS", "LATEST_VERSION", "Handshake", "HandshakeFailed", "parse_tools"]

log = logging.getLogger("acp_bridge.mcp")

# The protocol versions of the initialize handshake, as the mcp package (2.x)
# knows them (`mcp_types.version`; a unit test keeps the two equal).
HANDSHAKE_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION: Final = HANDSHAKE_VERSIONS[-1]
# The most tools/list pages followed (a server that pages forever is cut off).
MAX_PAGES: Final = 100


class HandshakeFailed(Exception):
    """The server's answers cannot start a connection (the message says why)."""


def encode(id: str | None, method: str, params: dict[str, Any] | None) -> bytes:
    """A request (or a notification, without ``id``), ``params`` left out when None."""
    message: dict[str, Any] = {"jsonrpc": "2.0"}
    if id is not None:
        message["id"] = id
    message["method"] = method
    if params is not None:
        message["params"] = params
    return orjson.dumps(message) + b"\n"


def parse_tools(result: Any) -> tuple[list[dict[str, Any]], str | None]:
    """The tools of one ``tools/list`` page (JSON objects) and its next cursor."""
    if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
        raise HandshakeFailed("its tools/list answer has no tools array")
    tools: list[dict[str, Any]] = []
    for i, tool in enumerate(result["tools"]):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise HandshakeFailed(f"tool {i} of its tools/list answer has no name")
        tools.append({k: v for k, v in tool.items() if v is not None})
    cursor = result.get("nextCursor")
    return tools, cursor if isinstance(cursor, str) and cursor else None


class Handshake:
    def __init__(self, send: Callable[[bytes], None], on_list_changed: Callable[[], None]) -> None:
        self._send = send
        self.on_list_changed = on_list_changed
        self._ids = 0
        self._waiting: dict[str, tuple[anyio.Event, list[Response]]] = {}
        self.result: dict[str, Any] | None = None

    # -- from the server -----------------------------------------------------------------

    def received(self, message: Request | Notification | Response | RpcError) -> None:
        if isinstance(message, Response):
            entry = self._waiting.pop(message.id, None) if isinstance(message.id, str) else None
            if entry is None:
                log.debug("MCP server answered an unknown request id %r", message.id)
                return
            entry[1].append(message)
            entry[0].set()
        elif isinstance(message, Request):
            if message.method == "ping":
                self._send(encode_result(message.id, {}))
            else:
                self._send(encode_error(message.id, RpcError.method_not_found(message.method)))
        elif isinstance(message, Notification) and (
            message.method == "notifications/tools/list_changed"
        ):
            self.on_list_changed()

    # -- to the server -------------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any] | None) -> Any:
        self._ids += 1
        rid = f"acp-bridge-{self._ids}"
        done, slot = anyio.Event(), list[Response]()
        self._waiting[rid] = (done, slot)
        try:
            self._send(encode(rid, method, params))
            await done.wait()
        finally:
            self._waiting.pop(rid, None)
        answer = slot[0]
        if answer.error is not None:
            raise RemoteError.from_wire(answer.error)
        return answer.result

    async def initialize(self, client_info: dict[str, Any]) -> dict[str, Any]:
        """``initialize`` then ``notifications/initialized``; the server's result."""
        params = {"protocolVersion": LATEST_VERSION, "capabilities": {}, "clientInfo": client_info}
        try:
            result = await self.request("initialize", params)
        except RemoteError as exc:
            raise HandshakeFailed(f"it refused initialize: {exc}") from None
        if not isinstance(result, dict):
            raise HandshakeFailed("its initialize answer is not an object")
        version = result.get("protocolVersion")
        if version not in HANDSHAKE_VERSIONS:
            raise HandshakeFailed(f"Unsupported protocol version from the server: {version}")
        for key in ("capabilities", "serverInfo"):
            if not isinstance(result.get(key), dict):
                raise HandshakeFailed(f"its initialize answer has no {key} object")
        self._send(encode(None, "notifications/initialized", None))
        self.result = result
        return result

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every page of ``tools/list`` (at most `MAX_PAGES`)."""
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            params = None if cursor is None else {"cursor": cursor}
            try:
                result = await self.request("tools/list", params)
            except RemoteError as exc:
                raise HandshakeFailed(f"it refused tools/list: {exc}") from None
            page, cursor = parse_tools(result)
            tools.extend(page)
            if cursor is None:
                break
        return tools
