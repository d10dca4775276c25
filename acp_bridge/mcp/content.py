"""An MCP tool's description and result, as the bridge shows them.

`kind_of`: the ACP ``ToolKind`` from the tool's annotations: ``readOnlyHint``
gives ``read`` (and the call runs without asking), ``destructiveHint`` gives
``execute`` (so accept-edits mode still asks), anything else ``other``.

`map_result`: a ``tools/call`` result (as JSON) becomes

* the text the model reads: every text block, a text resource's text with
  its URI, and one line for each image, audio clip, binary resource or
  resource link (the model's history holds text only), bounded like the
  built-in tools' output;
* the editor's tool-call content: the non-text blocks as ACP content blocks
  (MCP's and ACP's content blocks have the same shapes); the text is shown
  by the runner;
* ``rawOutput``: ``structuredContent`` and ``isError``, bounded, with base64
  payloads left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

__all__ = ["MappedResult", "kind_of", "map_result", "read_only_of"]

# The longest rawOutput kept, as JSON (bytes); a longer one is replaced by a note.
RAW_LIMIT: Final = 20_000


@dataclass
class MappedResult:
    text: str
    is_error: bool
    content: list[dict[str, Any]] = field(default_factory=list)
    raw_output: dict[str, Any] | None = None


def read_only_of(annotations: Mapping[str, Any] | None) -> bool:
    return bool(annotations) and annotations.get("readOnlyHint") is True  # type: ignore[union-attr]


def kind_of(annotations: Mapping[str, Any] | None) -> str:
    if read_only_of(annotations):
        return "read"
    if annotations and annotations.get("destructiveHint") is True:
        return "execute"
    return "other"


def _size(data: Any) -> str:
    if isinstance(data, str):
        return f"{len(data) * 3 // 4} bytes"
    return "unknown size"


def _block_text(block: Mapping[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """What the model reads of one block, and what the editor is shown of it."""
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return (text if isinstance(text, str) else ""), None
    shown = {"type": "content", "content": dict(block)}
    if kind in ("image", "audio"):
        mime = block.get("mimeType", "unknown type")
        return f"[{kind}: {mime}, {_size(block.get('data'))}]", shown
    if kind == "resource_link":
        name = block.get("name") or block.get("uri")
        return f"[resource link: {name} <{block.get('uri')}>]", shown
    if kind == "resource":
        res = block.get("resource")
        if not isinstance(res, Mapping):
            return "[resource]", None
        uri = res.get("uri")
        if isinstance(res.get("text"), str):
            return f"[resource {uri}]\n{res['text']}", shown
        return f"[resource {uri}: {res.get('mimeType', 'binary')}, {_size(res.get('blob'))}]", shown
    return f"[{kind} content]", None


def _raw(result: Mapping[str, Any]) -> dict[str, Any]:
    raw: dict[str, Any] = {"isError": result.get("isError") is True}
    structured = result.get("structuredContent")
    if structured is not None:
        raw["structuredContent"] = structured
    size = len(orjson.dumps(raw, default=str))
    if size > RAW_LIMIT:
        return {"isError": raw["isError"], "truncated": f"structuredContent of {size} bytes"}
    return raw


def map_result(result: Mapping[str, Any], limit: int) -> MappedResult:
    """A ``CallToolResult`` (JSON), its text bounded to ``limit`` characters."""
    from ..tools.paths import truncate

    texts: list[str] = []
    content: list[dict[str, Any]] = []
    blocks = result.get("content")
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, Mapping):
            continue
        text, shown = _block_text(block)
        if text:
            texts.append(text)
        if shown is not None:
            content.append(shown)
    text = "\n".join(texts)
    if not text and result.get("structuredContent") is not None:
        text = orjson.dumps(result["structuredContent"], default=str).decode()
    is_error = result.get("isError") is True
    if not text:
        text = "(the tool returned an error with no content)" if is_error else "(no output)"
    return MappedResult(truncate(text, limit), is_error, content, _raw(result))
