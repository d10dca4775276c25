"""Model history (`derive_messages` output) -> Anthropic Messages ``messages``.

What Anthropic receives, per history block:

* user ``text`` -> ``text``; ``image`` -> ``image`` with a base64 source
  (PNG, JPEG, GIF, WebP; any other type is refused with a clear error);
  ``resource`` / ``resource_link`` -> ``text`` (see `notes.resource_text`);
  ``tool_result`` -> ``tool_result`` (first in its message, as the API requires);
* assistant ``text`` -> ``text``; ``tool_call`` -> ``tool_use`` with its input;
  ``reasoning`` -> ``thinking`` with its signature, only when it has one and
  the message was not interrupted (thinking cut before its signature is
  rejected by the API, and a prior turn's thinking may be omitted);
* the messages themselves, an interrupted message's text only and the note
  after it, are those of `sent.sent_messages`, shared with the OpenAI wire
  and ``acp-bridge history``.

Messages left empty are dropped and same-role neighbours merged, so roles
still alternate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import IMAGE_TYPES, ProviderError
from .notes import resource_text
from .sent import sent_messages

__all__ = ["anthropic_messages"]


def anthropic_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in sent_messages(messages):
        if message["role"] == "assistant":
            content = _assistant(message)
            role = "assistant"
        else:
            content = _user(message["content"])
            role = "user"
        if not content:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(content)
        else:
            out.append({"role": role, "content": content})
    return out


def _assistant(message: dict[str, Any]) -> list[dict[str, Any]]:
    interrupted = bool(message.get("interrupted"))
    out: list[dict[str, Any]] = []
    for block in message["content"]:
        kind = block["type"]
        if kind == "text":
            out.append({"type": "text", "text": block["text"]})
        elif kind == "reasoning":
            if block.get("signature") and not interrupted:
                out.append(
                    {"type": "thinking", "thinking": block["text"], "signature": block["signature"]}
                )
        elif kind == "tool_call":
            out.append(
                {
                    "type": "tool_use",
                    "id": block["id"],
                    "name": block["name"],
                    "input": block["input"],
                }
            )
    return out


def _user(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    results = [_tool_result(b) for b in blocks if b["type"] == "tool_result"]
    rest: list[dict[str, Any]] = []
    for block in blocks:
        kind = block["type"]
        if kind == "text":
            rest.append({"type": "text", "text": block["text"]})
        elif kind == "image":
            rest.append(_image(block))
        elif kind in ("resource", "resource_link"):
            if (
                kind == "resource"
                and str(block.get("mimeType", "")) in IMAGE_TYPES
                and "blob" in block
            ):
                rest.append(_image({"data": block["blob"], "mimeType": block["mimeType"]}))
            else:
                rest.append({"type": "text", "text": resource_text(block)})
    return results + rest


def _image(block: dict[str, Any]) -> dict[str, Any]:
    mime = block["mimeType"]
    if mime not in IMAGE_TYPES:
        raise ProviderError(
            f"Anthropic models take PNG, JPEG, GIF or WebP images, not {mime}; "
            "convert the image or remove it",
            kind="unsupported_input",
        )
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": mime, "data": block["data"]},
    }


def _tool_result(block: dict[str, Any]) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for part in block["content"]:
        if part["type"] == "text":
            content.append({"type": "text", "text": part["text"]})
        elif part["type"] == "image":
            content.append(_image(part))
        else:
            text = resource_text(part)
            if text:
                content.append({"type": "text", "text": text})
    out: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": block["tool_call_id"],
        "content": content,
    }
    if block.get("is_error"):
        out["is_error"] = True
    return out
