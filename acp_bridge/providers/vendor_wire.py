"""What the two vendor wires (`AnthropicWire`, `OpenAIWire`) share.

Each wire posts to a path under the configured base URL, knows the variable
that holds its API key and maps a failed HTTP response to a `ProviderError`
the same way (`errors.http_error`); only the path, the words naming the
server and the header carrying the request id differ.  A wire that can read
a complete, non-streamed answer to its streaming request as the whole stream
overrides `VendorWire.whole_answer`.
"""

from __future__ import annotations

from collections.abc import Mapping

from .base import ProviderError
from .errors import http_error

__all__ = ["VendorWire"]


class VendorWire:
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
