"""Validation of ACP request params, free of I/O.

Hand-written rather than generated models: the bridge only needs a handful of
methods, the checks run on every request, and each failure must name the
exact field (``prompt[2].uri``) in the ``-32602`` error.

An error message never carries more than `ECHO_LIMIT` characters of a value
the editor sent (see `echo`): a 100 KB session id must not come back as a
200 KB error.
"""

from __future__ import annotations

import os
from typing import Any, Final

from ..jsonrpc.errors import RpcError

ECHO_LIMIT: Final = 100


def echo(value: object, limit: int = ECHO_LIMIT) -> str:
    """``repr(value)`` for an error message, cut to ``limit`` characters with an ellipsis."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def require(
    params: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str = ""
) -> Any:
    path = f"{where}{key}"
    if key not in params or params[key] is None:
        raise RpcError.invalid_params(path, "is required")
    value = params[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in kinds):
        raise RpcError.invalid_params(path, f"must be {_kind_name(kind)}")
    return value


def optional(
    params: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str = ""
) -> Any:
    if params.get(key) is None:
        return None
    return require(params, key, kind, where)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {
        str: "a string",
        int: "an integer",
        dict: "an object",
        list: "an array",
        bool: "a boolean",
    }
    if isinstance(kind, tuple):
        return " or ".join(names.get(k, k.__name__) for k in kind)
    return names.get(kind, kind.__name__)


def session_id(params: dict[str, Any]) -> str:
    sid: str = require(params, "sessionId", str)
    return sid


def absolute_path(params: dict[str, Any], key: str) -> str:
    path: str = require(params, key, str)
    if "\0" in path:
        # No file system accepts it, and a log must never store it as a path.
        raise RpcError.invalid_params(key, "must not contain a NUL character")
    if not os.path.isabs(path):
        raise RpcError.invalid_params(key, "must be an absolute path")
    return path


def additional_directories(params: dict[str, Any]) -> list[str] | None:
    """``additionalDirectories``: absolute paths, or None when not given."""
    dirs: list[Any] | None = optional(params, "additionalDirectories", list)
    if dirs is None:
        return None
    for i, path in enumerate(dirs):
        if not isinstance(path, str) or not os.path.isabs(path):
            raise RpcError.invalid_params(f"additionalDirectories[{i}]", "must be an absolute path")
    return list(dirs)


def mcp_servers(params: dict[str, Any]) -> list[dict[str, Any]]:
    servers: list[dict[str, Any]] | None = optional(params, "mcpServers", list)
    if servers is None:
        return []
    for i, server in enumerate(servers):
        if not isinstance(server, dict):
            raise RpcError.invalid_params(f"mcpServers[{i}]", "must be an object")
        require(server, "name", str, f"mcpServers[{i}].")
    return servers


def prompt_blocks(
    params: dict[str, Any], *, embedded_context: bool, image: bool
) -> list[dict[str, Any]]:
    """Check the ``prompt`` array and turn it into HistoryBlocks."""
    blocks = require(params, "prompt", list)
    out: list[dict[str, Any]] = []
    for i, block in enumerate(blocks):
        where = f"prompt[{i}]."
        if not isinstance(block, dict):
            raise RpcError.invalid_params(f"prompt[{i}]", "must be an object")
        kind = require(block, "type", str, where)
        if kind == "text":
            out.append({"type": "text", "text": require(block, "text", str, where)})
        elif kind == "resource_link":
            link = {"type": "resource_link", "uri": require(block, "uri", str, where)}
            link["name"] = require(block, "name", str, where)
            for key in ("title", "description", "mimeType"):
                if block.get(key) is not None:
                    link[key] = require(block, key, str, where)
            if block.get("size") is not None:
                link["size"] = require(block, "size", int, where)
            out.append(link)
        elif kind == "resource" and embedded_context:
            res = require(block, "resource", dict, where)
            rwhere = f"{where}resource."
            item: dict[str, Any] = {"type": "resource", "uri": require(res, "uri", str, rwhere)}
            if res.get("text") is not None:
                item["text"] = require(res, "text", str, rwhere)
            elif res.get("blob") is not None:
                item["blob"] = require(res, "blob", str, rwhere)
            else:
                raise RpcError.invalid_params(f"{rwhere}text", "is required (or blob)")
            if res.get("mimeType") is not None:
                item["mimeType"] = require(res, "mimeType", str, rwhere)
            out.append(item)
        elif kind == "image" and image:
            out.append(
                {
                    "type": "image",
                    "data": require(block, "data", str, where),
                    "mimeType": require(block, "mimeType", str, where),
                }
            )
        else:
            raise RpcError.invalid_params(
                f"prompt[{i}].type", f"content type {echo(kind)} is not supported by this agent"
            )
    if not out:
        raise RpcError.invalid_params("prompt", "must contain at least one content block")
    return out
