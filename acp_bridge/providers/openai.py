"""``--provider openai``: OpenAI-compatible Chat Completions, streamed.

One parser for the servers that speak it (OpenAI, DeepSeek, vLLM, llama.cpp,
Ollama, OpenRouter, LM Studio), with their differences:

* reasoning arrives in ``delta.reasoning_content`` (DeepSeek, llama.cpp) or
  ``delta.reasoning`` (vLLM, Ollama, OpenRouter);
* a tool call is identified by its ``index`` and continued by chunks without
  an ``id``; a chunk with a *new* ``id`` at a used index is a new call
  (Ollama sends parallel calls whole, all at index 0);
* usage comes in a last chunk with empty ``choices`` when asked for
  (``stream_options.include_usage``), and is reported with the finish;
* an ``{"error": ...}`` data event or ``finish_reason: "error"`` is an
  in-stream error; a body without a finish reason is a cut stream;
* some servers answer the streaming request with one whole JSON
  ``chat.completion`` (some local servers, test servers when tools are
  offered): `OpenAIWire.whole_answer` reads it as one chunk carrying the whole
  message, so it goes through the same parser.

Each kind of content gets its own block index, in order of arrival.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

import orjson

from .base import (
    BlockEnd,
    Finish,
    FinishReason,
    ModelRequest,
    ProviderError,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from .config import ProviderConfig
from .convert_openai import openai_messages
from .errors import stream_error
from .vendors import OPENAI
from .wire import Wire

__all__ = ["OpenAIParser", "OpenAIWire"]

FINISH_REASONS: Final[dict[str, FinishReason]] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
_EMPTY: Final[list[StreamEvent]] = []


class OpenAIWire(Wire):
    name = OPENAI.name
    vendor = "the OpenAI-compatible server"
    request_id_header = "x-request-id"
    path = "/chat/completions"

    def headers(self, key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"} if key else {}

    def body(self, request: ModelRequest, config: ProviderConfig, model: str) -> bytes:
        body: dict[str, Any] = {
            "model": model,
            "messages": openai_messages(request.messages, request.system),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        max_tokens = request.max_tokens or config.max_tokens
        # OpenAI's own API wants the newer name (its reasoning models refuse
        # the old one); compatible servers know only the old one.
        official = _official(config.base_url)
        body["max_completion_tokens" if official else "max_tokens"] = max_tokens
        effort = config.reasoning_effort
        if effort:
            body["reasoning_effort"] = effort
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                }
                for t in request.tools
            ]
        return orjson.dumps(body)

    def parser(self) -> OpenAIParser:
        return OpenAIParser()

    def lists_windows(self, base_url: str) -> bool:
        return not _official(base_url)  # its listing has no lengths

    def whole_answer(self, raw: bytes) -> list[str] | None:
        """A complete ``chat.completion`` as the one chunk (and ``[DONE]``) of a
        stream: its message is the chunk's delta, its tool calls indexed in order."""
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        choices = obj.get("choices") if isinstance(obj, dict) else None
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            return None
        message = choices[0].get("message")
        if not isinstance(message, dict):
            return None
        delta = {
            k: message[k] for k in ("reasoning_content", "reasoning", "content") if message.get(k)
        }
        calls = message.get("tool_calls")
        if calls:
            delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(calls)]
        finish = choices[0].get("finish_reason") or ("tool_calls" if calls else "stop")
        chunk = {
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            "usage": obj.get("usage"),
        }
        return [orjson.dumps(chunk).decode(), "[DONE]"]


def _official(base_url: str) -> bool:
    """Whether ``base_url`` is OpenAI's own API (not a compatible server)."""
    return OPENAI.base_url.split("/")[2] in base_url


class OpenAIParser:
    __slots__ = ("_calls", "_finish", "_kind", "_next", "_open", "_usage", "done")

    def __init__(self) -> None:
        self._kind: str | None = None  # kind of the open text/reasoning block
        self._open = -1  # its index
        self._next = 0
        # wire tool index -> (call id, block index)
        self._calls: dict[int, tuple[str, int]] = {}
        self._finish: str | None = None
        self._usage: Usage | None = None
        self.done = False

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        if not data or self.done:
            return _EMPTY
        if data == "[DONE]":
            return self._done()
        obj = orjson.loads(data)
        if obj.get("error") is not None:
            error = obj["error"]
            raise stream_error(
                OpenAIWire.vendor,
                error if isinstance(error, dict) else {"message": str(error)},
            )
        usage = obj.get("usage")
        if usage:
            self._usage = Usage(
                usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
            )
        choices = obj.get("choices")
        if not choices:
            return _EMPTY
        choice = choices[0]
        out: list[StreamEvent] = []
        delta = choice.get("delta")
        if delta:
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning:
                out.append(ReasoningDelta(self._block("reasoning", out), reasoning))
            content = delta.get("content")
            if content:
                out.append(TextDelta(self._block("text", out), content))
            calls = delta.get("tool_calls")
            if calls:
                self._tool_calls(calls, out)
        finish = choice.get("finish_reason")
        if finish:
            if finish == "error":
                raise stream_error(
                    OpenAIWire.vendor,
                    {"type": "error", "message": "finish_reason error"},
                )
            self._finish = finish
        return out

    def _block(self, kind: str, out: list[StreamEvent]) -> int:
        if self._kind != kind:
            self._close(out)
            self._kind = kind
            self._open = self._next
            self._next += 1
        return self._open

    def _close(self, out: list[StreamEvent]) -> None:
        if self._kind is not None:
            out.append(BlockEnd(self._open))
            self._kind = None

    def _tool_calls(self, calls: list[dict[str, Any]], out: list[StreamEvent]) -> None:
        self._close(out)
        for call in calls:
            wire_index = call.get("index", 0)
            call_id = call.get("id")
            fn = call.get("function") or {}
            known = self._calls.get(wire_index)
            if known is None or (call_id and call_id != known[0]):
                if known is not None:
                    out.append(BlockEnd(known[1]))
                block = self._next
                self._next += 1
                # Some local servers send no id: make one, unique in the session.
                call_id = call_id or "call_" + uuid.uuid4().hex[:16]
                self._calls[wire_index] = (call_id, block)
                out.append(ToolCallStart(block, call_id, fn.get("name") or ""))
            else:
                block = known[1]
            args = fn.get("arguments")
            if args:
                out.append(ToolCallDelta(block, args))

    def _done(self) -> list[StreamEvent]:
        self.done = True
        out: list[StreamEvent] = []
        if self._usage is not None:
            out.append(self._usage)
        out.append(Finish(FINISH_REASONS.get(self._finish or "stop", "end_turn")))
        return out

    def end(self) -> list[StreamEvent]:
        if self.done:
            return _EMPTY
        if self._finish is not None:
            return self._done()  # a server that ends without [DONE]
        raise ProviderError(
            "the OpenAI-compatible stream ended without a finish reason; the reply is incomplete",
            kind="cut",
            retryable=True,
        )
