"""What an OpenAI-compatible server says of a model's context window.

Some servers list a context length in their ``GET /models`` entries: vLLM
(``max_model_len``), OpenRouter (``context_length``), LM Studio
(``max_context_length``), llama.cpp (``meta.n_ctx``), others
``context_window``.  `server_window` asks once per server and model in this
process (a failure, a timeout or an entry without one is remembered as
unknown) and never raises.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

import anyio
import httpx
import orjson

__all__ = ["server_window", "window_of_entry"]

log = logging.getLogger("acp_bridge.providers")

LOOKUP_TIMEOUT: Final = 5.0
WINDOW_KEYS: Final = ("context_length", "context_window", "max_model_len", "max_context_length")

_known: dict[tuple[str, str], int | None] = {}


async def server_window(client: httpx.AsyncClient, base_url: str, model: str) -> int | None:
    """The context window the server at ``base_url`` gives ``model``, if it says."""
    key = (base_url, model)
    if key in _known:
        return _known[key]
    window: int | None = None
    try:
        with anyio.fail_after(LOOKUP_TIMEOUT):
            response = await client.get(base_url.rstrip("/") + "/models")
        if response.status_code == 200:
            window = _from_listing(orjson.loads(response.content), model)
    except (httpx.HTTPError, TimeoutError, orjson.JSONDecodeError) as exc:
        log.debug("cannot list the models of %s: %s", base_url, type(exc).__name__)
    _known[key] = window
    if window is not None:
        log.info("%s says %s has a context window of %d tokens", base_url, model, window)
    return window


def _from_listing(body: Any, model: str) -> int | None:
    entries = body.get("data") if isinstance(body, Mapping) else body
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("id") == model:
            return window_of_entry(entry)
    return None


def window_of_entry(entry: Mapping[str, Any]) -> int | None:
    """The context length of one ``/models`` entry, if it has one."""
    meta = entry.get("meta")
    candidates = [entry.get(key) for key in WINDOW_KEYS]
    if isinstance(meta, Mapping):
        candidates.append(meta.get("n_ctx"))
    for value in candidates:
        if type(value) is int and value > 0:
            return value
    return None
