"""What a turn needs and start-up does not, loaded in the background once a session is answered.

Nothing of it is needed to answer ``initialize`` and ``session/new``: the
tools' argument models (pydantic, `acp_bridge.tools.arguments`), the tool
runner, and the parts of the loop a first turn imports on its way.  Loaded
before the answers, they made ``session/new`` several times slower than the
process start itself.  `start` loads them in a daemon thread once the first
session is answered, so that the first prompt, which the user types a moment
later, finds them ready; a prompt that comes sooner imports what it needs
itself (the import system makes it wait for a module the thread is loading),
and a failure here only leaves the import to the first use, which reports it.

The serving modules import each other without cycles at module level (only
packages import their own submodules), so two threads importing parts of
them at once cannot deadlock on the import locks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from importlib import import_module
from typing import Final

__all__ = ["MODULES", "also", "start", "wait"]

log = logging.getLogger("acp_bridge.warm_up")

# Imported in this order; each pulls in what it needs.
MODULES: Final[tuple[str, ...]] = (
    "acp_bridge.tools.arguments",
    "acp_bridge.tools.runner",
    "acp_bridge.context.windows",
    "acp_bridge.loop.compact",
    "pydantic.json_schema",
)

_lock = threading.Lock()
_thread: threading.Thread | None = None
_more: list[Callable[[], object]] = []


def also(work: Callable[[], object]) -> None:
    """Have the warm-up run ``work`` too, before the modules (the script's models,
    say).  ``work`` must be safe to run again at its first real use, which runs it
    itself if the warm-up has not (or fails): an exception here is only logged."""
    with _lock:
        _more.append(work)


def start() -> None:
    """Start loading (once per process; later calls do nothing, unless work was
    added by `also` after the loading ended: a process forked after it, say)."""
    global _thread
    with _lock:
        if _thread is not None and (_thread.is_alive() or not _more):
            return
        _thread = threading.Thread(target=_load, name="acp-bridge-warm-up", daemon=True)
        _thread.start()


def wait(timeout: float | None = None) -> bool:
    """Wait for the loading `start` began (for tests and benchmarks); False if still running."""
    thread = _thread
    if thread is None:
        return True
    thread.join(timeout)
    return not thread.is_alive()


def _load() -> None:
    # First what `also` added (the script's models: the first stream waits for them).
    while True:
        with _lock:
            if not _more:
                break
            work = _more.pop(0)
        try:
            work()
        except Exception as exc:  # left to the first use, which reports it
            log.debug("warm-up: %s: %s", getattr(work, "__qualname__", work), exc)
    for name in MODULES:
        try:
            import_module(name)
        except Exception as exc:  # left to the first use, which reports it
            log.debug("warm-up: cannot import %s: %s", name, exc)
            return
    # Building the JSON Schemas the first request sends loads pydantic's
    # schema machinery; the registry builds and keeps its own on first use.
    from .tools.registry import TOOLS

    for tool in list(TOOLS):
        try:
            tool.args_model.model_json_schema()
        except Exception as exc:  # a tool of the user's: its own use reports it
            log.debug("warm-up: %s: %s", getattr(tool, "name", tool), exc)
