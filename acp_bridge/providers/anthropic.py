"""``--provider anthropic``: the Messages API, streamed (``POST /v1/messages``).

`AnthropicParser` maps the event stream onto the provider seam: text and
thinking deltas, the thinking signature (kept for sending the block back),
``redacted_thinking`` (accepted, not shown, not kept), tool use with its
argument fragments, usage (``message_start`` input plus cumulative
``message_delta`` output, reported once at the end) and the stop reason.  An
``error`` event is classified by its type (`errors.stream_error`); a body
that ends without ``message_stop`` is a cut stream.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from .base import (
    BlockEnd,
    Finish,
    FinishReason,
    ModelRequest,
    ProviderError,
    ReasoningDelta,
    ReasoningSignature,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from .config import ProviderConfig
from .convert_anthropic import anthropic_messages
from .errors import stream_error
from .vendors import ANTHROPIC
from .wire import Wire

__all__ = ["AnthropicParser", "AnthropicWire"]

# Pinned: the request and event shapes below are those of this version.
API_VERSION: Final = "2023-06-01"

STOP_REASONS: Final[dict[str, FinishReason]] = {
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "pause_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",
    "refusal": "refusal",
}
_EMPTY: Final[list[StreamEvent]] = []


class AnthropicWire(Wire):
    name = ANTHROPIC.name
    vendor = ANTHROPIC.title
    request_id_header = "request-id"
    path = "/v1/messages"
    thinks = True

    def headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def body(self, request: ModelRequest, config: ProviderConfig, model: str) -> bytes:
        max_tokens = request.max_tokens or config.max_tokens
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens,
            "stream": True,
            "messages": anthropic_messages(request.messages),
        }
        if request.system:
            body["system"] = request.system
        budget = config.thinking_budget
        if budget:
            # The API wants the budget below max_tokens: room for the answer too.
            body["max_tokens"] = max(max_tokens, budget + 1024)
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in request.tools
            ]
        return orjson.dumps(body)

    def parser(self) -> AnthropicParser:
        return AnthropicParser()


class AnthropicParser:
    __slots__ = ("_input", "_kinds", "_output", "_stop", "_thought", "done")

    def __init__(self) -> None:
        self._kinds: dict[int, str] = {}
        self._thought: set[int] = set()  # thinking blocks with visible text
        self._input = 0
        self._output = 0
        self._stop: str | None = None
        self.done = False

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        if not data or self.done:
            return _EMPTY
        obj = orjson.loads(data)
        kind = obj["type"]
        if kind == "content_block_delta":
            delta = obj["delta"]
            dtype = delta["type"]
            index = obj["index"]
            if dtype == "text_delta":
                return [TextDelta(index, delta["text"])] if delta["text"] else _EMPTY
            if dtype == "input_json_delta":
                args = delta["partial_json"]
                return [ToolCallDelta(index, args)] if args else _EMPTY
            if dtype == "thinking_delta":
                if not delta["thinking"]:
                    return _EMPTY
                self._thought.add(index)
                return [ReasoningDelta(index, delta["thinking"])]
            if dtype == "signature_delta" and index in self._thought:
                return [ReasoningSignature(index, delta["signature"])]
            return _EMPTY  # citations and future delta types
        if kind == "content_block_start":
            return self._start(obj["index"], obj["content_block"])
        if kind == "content_block_stop":
            index = obj["index"]
            return [BlockEnd(index)] if self._kinds.get(index) in _SHOWN else _EMPTY
        if kind == "message_start":
            self._usage(obj["message"].get("usage") or {})
            return _EMPTY
        if kind == "message_delta":
            self._stop = (obj.get("delta") or {}).get("stop_reason") or self._stop
            self._usage(obj.get("usage") or {})
            return _EMPTY
        if kind == "message_stop":
            self.done = True
            reason = STOP_REASONS.get(self._stop or "end_turn", "end_turn")
            return [Usage(self._input, self._output), Finish(reason)]
        if kind == "error":
            raise stream_error(AnthropicWire.vendor, obj.get("error") or {})
        return _EMPTY  # ping and event types added later

    def _start(self, index: int, block: dict[str, Any]) -> list[StreamEvent]:
        btype = block["type"]
        self._kinds[index] = btype
        if btype == "text":
            return [TextDelta(index, block["text"])] if block.get("text") else _EMPTY
        if btype == "thinking":
            if block.get("thinking"):
                self._thought.add(index)
                return [ReasoningDelta(index, block["thinking"])]
            return _EMPTY
        if btype == "tool_use":
            return [ToolCallStart(index, block["id"], block["name"])]
        return _EMPTY  # redacted_thinking, server tool blocks

    def _usage(self, usage: dict[str, Any]) -> None:
        # Cumulative counts: overwrite, never add.
        if usage.get("input_tokens") is not None:
            self._input = (
                usage["input_tokens"]
                + (usage.get("cache_creation_input_tokens") or 0)
                + (usage.get("cache_read_input_tokens") or 0)
            )
        if usage.get("output_tokens") is not None:
            self._output = usage["output_tokens"]

    def end(self) -> list[StreamEvent]:
        if not self.done:
            raise ProviderError(
                "the Anthropic stream ended before message_stop; the reply is incomplete",
                kind="cut",
                retryable=True,
            )
        return _EMPTY


_SHOWN: Final = frozenset({"text", "thinking", "tool_use"})
