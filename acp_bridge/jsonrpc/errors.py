"""JSON-RPC 2.0 error values.

`RpcError` is both the exception a handler raises to answer with an error and
the value the parser returns for a frame it must reject.  The codes are the
ones JSON-RPC and ACP name; anything else a handler raises becomes
`INTERNAL_ERROR` with a short message and no traceback on the wire.
"""

from __future__ import annotations

import errno
import resource
from typing import Any, Final, TypeGuard

from ..redact import SECRETS

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
REQUEST_CANCELLED: Final = -32800
AUTH_REQUIRED: Final = -32000
RESOURCE_NOT_FOUND: Final = -32002

RequestId = int | str | None


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None, *, id: RequestId = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        # The id of the request this error answers, when the parser knows it.
        self.id = id

    def to_wire(self) -> dict[str, Any]:
        """The error object sent, without the process's secrets (`acp_bridge.redact`)."""
        error: dict[str, Any] = {"code": self.code, "message": SECRETS.text(self.message)}
        if self.data is not None:
            error["data"] = SECRETS.json(self.data)
        return error

    def __repr__(self) -> str:
        return f"RpcError({self.code}, {self.message!r})"

    @classmethod
    def parse_error(cls, detail: str) -> RpcError:
        return cls(PARSE_ERROR, "Parse error", {"detail": detail})

    @classmethod
    def invalid_request(cls, detail: str, *, id: RequestId = None) -> RpcError:
        return cls(INVALID_REQUEST, "Invalid Request", {"detail": detail}, id=id)

    @classmethod
    def method_not_found(cls, method: str) -> RpcError:
        return cls(METHOD_NOT_FOUND, "Method not found", {"method": method})

    @classmethod
    def invalid_params(cls, field: str, detail: str) -> RpcError:
        return cls(
            INVALID_PARAMS, f"Invalid params: {field}: {detail}", {"field": field, "detail": detail}
        )

    @classmethod
    def internal(cls, detail: str = "internal error") -> RpcError:
        return cls(INTERNAL_ERROR, "Internal error", {"detail": detail})

    @classmethod
    def out_of_descriptors(cls, method: str) -> RpcError:
        """A request that failed because the process may open no more files."""
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = "" if soft == resource.RLIM_INFINITY else f" (its limit is {soft})"
        return cls(
            INTERNAL_ERROR,
            f"Too many open files: acp-bridge cannot open another file now{limit}, so "
            f"{method} could not be done. Try again once fewer files are open, or raise the "
            "limit (ulimit -n) for acp-bridge.",
            {"kind": "too_many_open_files", "method": method},
        )

    @classmethod
    def cancelled(cls) -> RpcError:
        return cls(REQUEST_CANCELLED, "Request cancelled")


def is_out_of_descriptors(exc: BaseException) -> TypeGuard[OSError]:
    """Whether ``exc`` says the process (EMFILE) or the system (ENFILE) has no
    file descriptor left."""
    return isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE)


class RemoteError(Exception):
    """The peer answered one of our requests with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.data = data

    @classmethod
    def from_wire(cls, error: dict[str, Any]) -> RemoteError:
        code = error.get("code")
        message = error.get("message")
        return cls(
            code if type(code) is int else INTERNAL_ERROR,
            message if isinstance(message, str) else "(no message)",
            error.get("data"),
        )

    def __repr__(self) -> str:
        return f"RemoteError({self.code}, {self.message!r})"
