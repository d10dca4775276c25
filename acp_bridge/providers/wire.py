"""A vendor's wire format: what `HttpProvider` asks of Anthropic Messages or OpenAI
Chat Completions.

A wire (`AnthropicWire`, `OpenAIWire`) builds the request body from the
model history, reads each server-sent event into stream events (its
`WireParser`), and says what differs between vendors: the path under the
configured base URL, the words naming the server, the header carrying the
request id, whether a thinking budget is sent (`thinks`), whether the server
may say a model's window (`lists_windows`) and whether a complete,
non-streamed answer to the streaming request can be read as the whole stream
(`whole_answer`).  A failed HTTP response maps to a `ProviderError` the same
way for both (`errors.http_error`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Protocol

from .base import ModelRequest, ProviderError, StreamEvent
from .config import ProviderConfig
from .errors import http_error

__all__ = ["Wire", "WireParser"]


class WireParser(Protocol):
    """Reads one response's server-sent events into stream events."""

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        """The events for one SSE event; raises `ProviderError` for an in-stream error."""
        ...

    def end(self) -> list[StreamEvent]:
        """The events at the end of the body; raises `ProviderError` if it was cut."""
        ...


class Wire(ABC):
    name: str
    # How an error message names the server ("Anthropic", "the OpenAI-compatible server").
    vendor: str
    request_id_header: str
    # The endpoint's path under the base URL.
    path: str
    # Whether a thinking budget is sent (it adds to the room kept for the output).
    thinks = False

    def __init__(self, key_env: str) -> None:
        self.key_env = key_env

    @abstractmethod
    def headers(self, key: str | None) -> dict[str, str]: ...

    @abstractmethod
    def body(self, request: ModelRequest, config: ProviderConfig, model: str) -> bytes: ...

    @abstractmethod
    def parser(self) -> WireParser: ...

    def endpoint(self, base_url: str) -> str:
        return base_url.rstrip("/") + self.path

    def lists_windows(self, base_url: str) -> bool:
        """Whether the server at ``base_url`` may say a model's window (``GET /models``)."""
        return False

    def whole_answer(self, raw: bytes) -> list[str] | None:
        """The data of the server-sent events a complete, non-streamed answer
        stands for, or None when ``raw`` is not one (then it is refused)."""
        return None

    def http_error(
        self, status: int, raw: bytes, headers: Mapping[str, str], has_key: bool
    ) -> ProviderError:
        return http_error(
            self.vendor,
            status,
            raw,
            headers,
            key_env=self.key_env,
            has_key=has_key,
            request_id_header=self.request_id_header,
        )
