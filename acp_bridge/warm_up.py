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

The thread is a daemon (it must never keep the process alive), and a daemon
thread must not be running when the interpreter finalizes: one that wakes
then is ended by a forced unwind of its stack, and where that stack holds a
compiled extension's frames (pydantic's core, building a model) the process
aborts (``FATAL: exception not rethrown``, exit status -6) instead of
exiting with its status.  The server therefore calls `stop` as it exits:
the loading ends after the piece it is on, and the exit waits for that.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from importlib import import_module
from typing import Final

__all__ = ["MODULES", "STOP_WAIT", "also", "start", "stop", "wait"]

log = logging.getLogger("acp_bridge.warm_up")

# Imported in this order; each pulls in what it needs.
MODULES: Final[tuple[str, ...]] = (
    "acp_bridge.tools.arguments",
    "acp_bridge.tools.runner",
    "acp_bridge.context.windows",
    "acp_bridge.loop.compact",
    "pydantic.json_schema",
)

# How long `stop` waits for the piece being loaded (a model or a module
# takes milliseconds; a thread stuck longer is left, as before).
STOP_WAIT: Final = 5.0

_lock = threading.Lock()
_thread: threading.Thread | None = None
_more: list[Callable[[], object]] = []
_stopping = threading.Event()


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
        if _stopping.is_set():
            return  # the process is exiting
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


def stop(timeout: float = STOP_WAIT) -> bool:
    """End the loading after the piece it is on and wait for that (at most
    ``timeout`` seconds), so that no warm-up runs while the interpreter
    finalizes (see the module's docstring).  False if it is still running."""
    _stopping.set()
    if not wait(timeout):
        return False
    _stopping.clear()  # ended: a server started again in this process may warm up
    return True


def _load() -> None:
    # First what `also` added (the script's models: the first stream waits for them).
    while not _stopping.is_set():
        with _lock:
            if not _more:
                break
            work = _more.pop(0)
        try:
            work()
        except Exception as exc:  # left to the first use, which reports it
            log.debug("warm-up: %s: %s", getattr(work, "__qualname__", work), exc)
    for name in MODULES:
        if _stopping.is_set():
            return
        try:
            import_module(name)
        except Exception as exc:  # left to the first use, which reports it
            log.debug("warm-up: cannot import %s: %s", name, exc)
            return
    # Building the JSON Schemas the first request sends loads pydantic's
    # schema machinery; the registry builds and keeps its own on first use.
    from .tools.registry import TOOLS

    for tool in list(TOOLS):
        if _stopping.is_set():
            return
        try:
            tool.args_model.model_json_schema()
        except Exception as exc:  # a tool of the user's: its own use reports it
            log.debug("warm-up: %s: %s", getattr(tool, "name", tool), exc)
