"""Validation of ACP request params, free of I/O.

Hand-written rather than generated models: the bridge only needs a handful of
methods, the checks run on every request, and each failure must name the
exact field (``prompt[2].uri``) in the ``-32602`` error.

An error message never carries more than `ECHO_LIMIT` characters of a value
the editor sent (see `echo`): a 100 KB session id must not come back as a
200 KB error.
"""

from __future__ import annotations

import binascii
import os
from typing import Any, Final

from ..jsonrpc.errors import RpcError
from ..providers.base import IMAGE_TYPES

ECHO_LIMIT: Final = 100
ROLES: Final = ("assistant", "user")


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


def protocol_version(params: dict[str, Any]) -> int:
    """``protocolVersion``: an integer from 0 to 65535 (the schema's uint16)."""
    version = params.get("protocolVersion")
    if version is None:
        raise RpcError.invalid_params("protocolVersion", "is required")
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= 65535:
        raise RpcError.invalid_params(
            "protocolVersion", f"must be an integer from 0 to 65535, got {echo(version)}"
        )
    return version


def base64_text(params: dict[str, Any], key: str, where: str, *, empty: bool) -> str:
    """A string of standard base64 (padded, no whitespace), as the schema's
    ``data`` and ``blob`` say; ``empty`` allows ``""``."""
    value: str = require(params, key, str, where)
    if not value and not empty:
        raise RpcError.invalid_params(f"{where}{key}", "must not be empty")
    try:
        binascii.a2b_base64(value, strict_mode=True)
    except (binascii.Error, ValueError):
        raise RpcError.invalid_params(f"{where}{key}", "must be base64-encoded data") from None
    return value


def _meta(params: dict[str, Any], where: str) -> None:
    """``_meta``, where present, is an object (or null)."""
    optional(params, "_meta", dict, where)


def _annotations(block: dict[str, Any], where: str) -> None:
    """``annotations``, where present, is an Annotations object (or null)."""
    annotations: dict[str, Any] | None = optional(block, "annotations", dict, where)
    if annotations is None:
        return
    awhere = f"{where}annotations."
    audience: list[Any] | None = optional(annotations, "audience", list, awhere)
    for j, role in enumerate(audience or ()):
        if role not in ROLES:
            raise RpcError.invalid_params(
                f"{awhere}audience[{j}]", f'must be "assistant" or "user", got {echo(role)}'
            )
    optional(annotations, "priority", (int, float), awhere)
    optional(annotations, "lastModified", str, awhere)
    _meta(annotations, awhere)


def _resource_link(block: dict[str, Any], where: str) -> dict[str, Any]:
    link = {"type": "resource_link", "uri": require(block, "uri", str, where)}
    link["name"] = require(block, "name", str, where)
    for key in ("title", "description", "mimeType"):
        if block.get(key) is not None:
            link[key] = require(block, key, str, where)
    if block.get("size") is not None:
        link["size"] = require(block, "size", int, where)
    return link


def _resource(block: dict[str, Any], where: str) -> dict[str, Any]:
    res = require(block, "resource", dict, where)
    rwhere = f"{where}resource."
    item: dict[str, Any] = {"type": "resource", "uri": require(res, "uri", str, rwhere)}
    if res.get("text") is not None:
        item["text"] = require(res, "text", str, rwhere)
    elif res.get("blob") is not None:
        item["blob"] = base64_text(res, "blob", rwhere, empty=True)
    else:
        raise RpcError.invalid_params(f"{rwhere}text", "is required (or blob)")
    if res.get("mimeType") is not None:
        item["mimeType"] = require(res, "mimeType", str, rwhere)
    _meta(res, rwhere)
    return item


def _image(block: dict[str, Any], where: str) -> dict[str, Any]:
    data = base64_text(block, "data", where, empty=False)
    mime: str = require(block, "mimeType", str, where)
    if mime not in IMAGE_TYPES:
        raise RpcError.invalid_params(
            f"{where}mimeType",
            f"must be image/png, image/jpeg, image/gif or image/webp, got {echo(mime)}",
        )
    optional(block, "uri", str, where)
    return {"type": "image", "data": data, "mimeType": mime}


def prompt_blocks(
    params: dict[str, Any], *, embedded_context: bool, image: bool
) -> list[dict[str, Any]]:
    """Check the ``prompt`` array and turn it into HistoryBlocks.

    Every field the schema types is checked, ``annotations`` and ``_meta``
    included, though only the content reaches the history; ``data`` and
    ``blob`` must be base64 and an image's ``mimeType`` one the providers
    take (`IMAGE_TYPES`).
    """
    blocks = require(params, "prompt", list)
    supported = {"text", "resource_link"}
    if embedded_context:
        supported.add("resource")
    if image:
        supported.add("image")
    out: list[dict[str, Any]] = []
    for i, block in enumerate(blocks):
        where = f"prompt[{i}]."
        if not isinstance(block, dict):
            raise RpcError.invalid_params(f"prompt[{i}]", "must be an object")
        kind = require(block, "type", str, where)
        if kind in supported:  # else the type is what the error names, below
            _annotations(block, where)
            _meta(block, where)
        if kind == "text":
            out.append({"type": "text", "text": require(block, "text", str, where)})
        elif kind == "resource_link":
            out.append(_resource_link(block, where))
        elif kind == "resource" and embedded_context:
            out.append(_resource(block, where))
        elif kind == "image" and image:
            out.append(_image(block, where))
        else:
            raise RpcError.invalid_params(
                f"prompt[{i}].type", f"content type {echo(kind)} is not supported by this agent"
            )
    if not out:
        raise RpcError.invalid_params("prompt", "must contain at least one content block")
    return out
