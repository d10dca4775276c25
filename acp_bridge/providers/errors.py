"""HTTP and in-stream failures of the real providers, as `ProviderError` kinds.

Each kind says what went wrong in words a user can act on; the provider's
request id rides along.  Kinds: ``auth``, ``permission``, ``rate_limited``,
``overloaded``, ``server``, ``context_length``, ``bad_request``,
``not_found``, ``stream_error`` (an error event after HTTP 200), plus the
transport kinds raised by `acp_bridge.providers.http`: ``connection``,
``timeout``, ``cut``, ``malformed`` and ``idle_timeout``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from ..redact import SECRETS
from .base import ProviderError

__all__ = ["http_error", "stream_error"]

_CONTEXT_WORDS: Final = (
    "context length",
    "context_length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
)
_RETRYABLE_TYPES: Final = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error", "server_error"}
)


def _error_body(raw: bytes) -> tuple[str | None, str, str | None]:
    """(type or code, message, request id) from a JSON error body, best effort."""
    try:
        body: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        # Redacted before it is cut: a key across the cut would leave its start.
        return None, SECRETS.cut(raw.decode("utf-8", "replace").strip(), 300), None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        kind = error.get("type") or error.get("code")
        message = error.get("message") or ""
        return (str(kind) if kind else None), str(message), body.get("request_id")
    if isinstance(error, str):
        return None, error, None
    return None, SECRETS.cut(str(body), 300), None


def http_error(
    vendor: str,
    status: int,
    raw: bytes,
    headers: Mapping[str, str],
    *,
    key_env: str,
    has_key: bool,
    request_id_header: str,
) -> ProviderError:
    etype, message, body_id = _error_body(raw)
    request_id = headers.get(request_id_header) or body_id
    detail = f" (HTTP {status}{': ' + message if message else ''})"
    lowered = f"{etype or ''} {message}".lower()

    def err(text: str, kind: str, retryable: bool = False) -> ProviderError:
        return ProviderError(
            text, kind=kind, retryable=retryable, status=status, request_id=request_id
        )

    if status == 401:
        if not has_key:
            return err(f"{vendor} needs an API key: set {key_env}{detail}", "auth")
        return err(f"the API key in {key_env} was rejected by {vendor}{detail}", "auth")
    if status == 403:
        return err(
            f"the API key in {key_env} may not use this model or feature{detail}", "permission"
        )
    if status == 429:
        return err(f"{vendor} is rate limiting this key{detail}", "rate_limited", True)
    if status == 529 or etype == "overloaded_error":
        return err(f"{vendor} is overloaded{detail}", "overloaded", True)
    if status >= 500:
        return err(f"{vendor} had a server error{detail}", "server", True)
    if status in (400, 413) and any(word in lowered for word in _CONTEXT_WORDS):
        return err(
            f"the conversation is too long for the model's context window{detail}; "
            "start a new session or choose a model with a larger context",
            "context_length",
        )
    if status == 404:
        return err(
            f"{vendor} does not know this model or endpoint{detail}; check --model and --base-url",
            "not_found",
        )
    return err(f"{vendor} refused the request{detail}", "bad_request")


def stream_error(vendor: str, error: Mapping[str, Any]) -> ProviderError:
    """An error event inside a 200 stream: classified by its type, not the status."""
    etype = str(error.get("type") or error.get("code") or "error")
    message = str(error.get("message") or "")
    lowered = f"{etype} {message}".lower()
    if etype == "overloaded_error":
        return ProviderError(
            f"{vendor} is overloaded (in-stream error: {message})",
            kind="overloaded",
            retryable=True,
        )
    if any(word in lowered for word in _CONTEXT_WORDS):
        return ProviderError(
            f"the conversation is too long for the model's context window ({message}); "
            "start a new session or choose a model with a larger context",
            kind="context_length",
        )
    return ProviderError(
        f"{vendor} reported an error mid-answer ({etype}: {message})",
        kind="stream_error",
        retryable=etype in _RETRYABLE_TYPES,
    )
