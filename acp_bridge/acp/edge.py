"""The one mapping from the bridge's errors to JSON-RPC errors.

Everything below the protocol edge raises `acp_bridge.errors` exceptions
(or `RpcError` itself, for a malformed parameter: that is already the
protocol's language); `to_rpc_error` decides each one's code, message and
``data``, and `at_edge` applies it around every ACP request handler (the
httpcore ``map_exceptions`` idea).  The connection maps whatever else a
handler raises to a short ``-32603`` (`acp_bridge.jsonrpc.connection`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..errors import (
    AuthNeeded,
    BridgeError,
    LogDamaged,
    LogNotCreated,
    LogNotLocked,
    LogNotWritable,
    NoProvider,
    NothingToRegenerate,
    SessionBusy,
    SessionLockedElsewhere,
    TurnFailed,
)
from ..jsonrpc.errors import AUTH_REQUIRED, INTERNAL_ERROR, RpcError

__all__ = ["AGENT_METHOD_ID", "at_edge", "to_rpc_error"]

# The auth method every client is offered (`acp_bridge.acp.auth`); an
# ``auth_required`` error names it.
AGENT_METHOD_ID = "api-key"

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


def to_rpc_error(exc: BridgeError | RpcError) -> RpcError:
    """The JSON-RPC error the editor gets for ``exc``."""
    match exc:
        case RpcError():
            return exc
        case AuthNeeded(reason=reason):
            return RpcError(
                AUTH_REQUIRED,
                f"Authentication required. {reason}",
                {"kind": "auth_required", "detail": reason, "authMethods": [AGENT_METHOD_ID]},
            )
        case NoProvider(reason=reason):
            return RpcError(
                INTERNAL_ERROR,
                f"acp-bridge cannot start a session: {reason}",
                {"detail": reason, "kind": "startup"},
            )
        case SessionBusy(session_id=sid, what=what):
            return RpcError(
                INTERNAL_ERROR,
                f"Session {sid} cannot be {what} while a reply is still streaming or a prompt "
                "is waiting: stop it and wait for its answer first.",
                {"kind": "session_busy", "sessionId": sid},
            )
        case SessionLockedElsewhere(session_id=sid, holder=holder):
            return RpcError(
                INTERNAL_ERROR,
                f"Session {sid} is open in another acp-bridge process"
                + (f" (pid {holder})" if holder else "")
                + "; close it there first.",
                {"kind": "session_locked", "sessionId": sid, "pid": holder or None},
            )
        case NothingToRegenerate():
            return RpcError(
                INTERNAL_ERROR,
                "Nothing to regenerate: this session has no message of yours yet.",
                {"kind": "nothing_to_regenerate"},
            )
        case LogNotCreated(path=path, reason=reason):
            return RpcError(
                INTERNAL_ERROR, f"Cannot create the session log: {reason}", {"path": path}
            )
        case LogNotLocked(path=path, reason=reason):
            return RpcError(INTERNAL_ERROR, f"Cannot lock the session: {reason}", {"path": path})
        case LogDamaged(path=path, reason=reason, line=line, loading=loading):
            what = "damaged and cannot be loaded" if loading else "damaged"
            return RpcError(
                INTERNAL_ERROR,
                f"The session log is {what}: {reason}",
                {"path": path, "line": line},
            )
        case LogNotWritable(path=path, reason=reason, pending=pending, lost=True):
            return RpcError(
                INTERNAL_ERROR,
                f"The session log can no longer be written: {reason}. Nothing more is "
                "written to it; what it could not take is saved beside it when acp-bridge exits.",
                {"path": path, "kind": "log_lost", "pendingBytes": pending},
            )
        case LogNotWritable(path=path, reason=reason, pending=pending):
            return RpcError(
                INTERNAL_ERROR,
                f"Cannot write the session log ({reason}); the conversation so far "
                "is kept in memory and will be written when the disk accepts it. "
                "Free space or fix permissions, then send the prompt again.",
                {"path": path, "pendingBytes": pending},
            )
        case TurnFailed(message=message, data=data):
            return RpcError(INTERNAL_ERROR, message, data)
    return RpcError.internal(type(exc).__name__)


def at_edge(handler: Handler) -> Handler:
    """``handler`` with its errors mapped (`to_rpc_error`)."""

    async def run(params: dict[str, Any]) -> Any:
        try:
            return await handler(params)
        except BridgeError as exc:
            raise to_rpc_error(exc) from exc

    return run


def edge_handlers(handlers: Mapping[str, Handler]) -> dict[str, Handler]:
    """Every handler of ``handlers`` with its errors mapped, by method."""
    return {method: at_edge(handler) for method, handler in handlers.items()}
