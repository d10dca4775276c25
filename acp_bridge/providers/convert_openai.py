"""Model history (`derive_messages` output) -> Chat Completions ``messages``.

What an OpenAI-compatible server receives:

* the system prompt, if any, as a first ``system`` message;
* user ``text`` -> text; ``image`` -> an ``image_url`` part with a ``data:``
  URL; ``resource`` / ``resource_link`` -> text (see `notes.resource_text`).
  A user message of text only is sent as one string (some local servers take
  nothing else), one with an image as a list of parts;
* each ``tool_result`` -> a ``tool`` message (``tool_call_id``, text content),
  before the rest of its user message;
* assistant ``text`` -> ``content``; ``tool_call`` -> ``tool_calls`` with the
  arguments as a JSON string; ``reasoning`` -> ``reasoning_content`` only on
  an assistant message with tool calls after the last user prompt (DeepSeek's
  rule: reasoning goes back within the tool loop of the current turn, never
  from earlier turns; servers that never stream reasoning never get it);
* the messages themselves, an interrupted message's text only and the note
  after it, are those of `sent.sent_messages`, shared with the Anthropic wire
  and ``acp-bridge history``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from .base import IMAGE_TYPES
from .notes import resource_text
from .sent import sent_messages

__all__ = ["openai_messages"]


def openai_messages(messages: Sequence[dict[str, Any]], system: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    sent = sent_messages(messages)
    last_prompt = max(
        (i for i, m in enumerate(sent) if m["role"] == "user" and _has_prompt(m)),
        default=-1,
    )
    for i, message in enumerate(sent):
        if message["role"] == "assistant":
            out.append(_assistant(message, in_tool_loop=i > last_prompt))
        else:
            out.extend(_user(message["content"]))
    return out


def _has_prompt(message: dict[str, Any]) -> bool:
    return any(block["type"] != "tool_result" for block in message["content"])


def _assistant(message: dict[str, Any], *, in_tool_loop: bool) -> dict[str, Any]:
    text = "".join(b["text"] for b in message["content"] if b["type"] == "text")
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": orjson.dumps(b["input"]).decode()},
        }
        for b in message["content"]
        if b["type"] == "tool_call"
    ]
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        out["tool_calls"] = calls
        reasoning = "".join(b["text"] for b in message["content"] if b["type"] == "reasoning")
        if reasoning and in_tool_loop and not message.get("interrupted"):
            out["reasoning_content"] = reasoning
    return out


def _user(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in blocks:
        kind = block["type"]
        if kind == "tool_result":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": block["tool_call_id"],
                    "content": _result_text(block),
                }
            )
        elif kind == "text":
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "image":
            parts.append(_image(block["mimeType"], block["data"]))
        elif (
            kind == "resource" and "blob" in block and str(block.get("mimeType", "")) in IMAGE_TYPES
        ):
            parts.append(_image(block["mimeType"], block["blob"]))
        else:
            parts.append({"type": "text", "text": resource_text(block) or ""})
    if parts:
        if all(p["type"] == "text" for p in parts):
            content: Any = "\n\n".join(p["text"] for p in parts)
        else:
            content = parts
        out.append({"role": "user", "content": content})
    return out


def _image(mime: str, data: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}


def _result_text(block: dict[str, Any]) -> str:
    texts = [p["text"] if p["type"] == "text" else resource_text(p) or "" for p in block["content"]]
    text = "\n".join(texts)
    return ("Error: " + text) if block.get("is_error") and text else text
