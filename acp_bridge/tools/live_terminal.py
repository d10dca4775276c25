"""A command the agent runs itself, shown live: its terminal as the client sees it.

The editor's terminal (ACP v1's ``terminal/*``) shows itself; a local command
(`acp_bridge.tools.local_workspace`) has no one to show it but the turn.  The
runner gives each call a `LiveTerminal`; a local command started through it
gets an id, and the turn emits (live, not logged: the command's result, which
is logged, holds its output):

* ``terminal_update`` when it starts (``command``, ``cwd``, and the
  ``cancel`` capability: ``terminal/cancel`` may kill it);
* ``terminal_output_chunk`` for its output as it comes (base64 of UTF-8),
  whole lines at a time so that a secret is never cut in two and shown half:
  each line passes through the process's redactor first
  (`acp_bridge.redact`); at most `OUTPUT_BYTE_LIMIT` bytes in all, as the
  terminal keeps;
* ``terminal_update`` when it exits: its ``exitStatus``, no capability any
  more, and, when the chunks stopped at the limit, the ``output`` snapshot of
  the last bytes kept (redacted), which replaces what the chunks showed.

A dialect renders these (ACP v2 has them as they are); the engine sends them
only for a command it runs itself, which only a client without the editor's
terminal gets.
"""

from __future__ import annotations

import base64
import codecs
import uuid
from collections.abc import Callable
from typing import Any, Final

from ..redact import Redactor
from .workspace import OUTPUT_BYTE_LIMIT, CommandOutput, Terminal

__all__ = ["LINE_LIMIT", "LiveTerminal", "terminal_output_chunk", "terminal_update"]

# A line longer than this is sent in pieces (a secret in it may then be cut).
LINE_LIMIT: Final = 8192


def terminal_update(terminal_id: str, **fields: Any) -> dict[str, Any]:
    """A ``terminal_update`` (the fields given replace the client's)."""
    return {"sessionUpdate": "terminal_update", "terminalId": terminal_id, **fields}


def terminal_output_chunk(terminal_id: str, output: bytes) -> dict[str, Any]:
    data = base64.b64encode(output).decode("ascii")
    return {"sessionUpdate": "terminal_output_chunk", "terminalId": terminal_id, "data": data}


class LiveTerminal:
    """One call's view of the local command it runs (see the module docstring)."""

    def __init__(self, emit: Callable[[dict[str, Any]], None], redactor: Redactor) -> None:
        self._emit = emit
        self._redactor = redactor
        self.terminal_id = "term_" + uuid.uuid4().hex[:16]
        # The running command, from its start until it has exited.
        self.terminal: Terminal | None = None
        self.exited = False
        # Killed by ``terminal/cancel``: its result says so.
        self.cancelled = False
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._sent = 0  # bytes of output shown in chunks
        self._over = False  # the chunks stopped at the limit

    def started(self, terminal: Terminal, command: str, cwd: str) -> None:
        self.terminal = terminal
        self._emit(
            terminal_update(
                self.terminal_id,
                command=self._redactor.text(command),
                cwd=cwd,
                capabilities={"cancel": {}},
            )
        )

    def output(self, data: bytes) -> None:
        """Bytes the command printed: its complete lines are shown now."""
        if self._over:
            return
        self._pending += self._decoder.decode(data)
        cut = max(self._pending.rfind("\n"), self._pending.rfind("\r")) + 1
        if cut == 0 and len(self._pending) >= LINE_LIMIT:
            cut = len(self._pending)
        if cut:
            self._show(self._pending[:cut])
            self._pending = self._pending[cut:]

    def _show(self, text: str) -> None:
        shown = self._redactor.text(text).encode("utf-8")
        if self._sent + len(shown) > OUTPUT_BYTE_LIMIT:
            self._over = True  # the exit's snapshot shows the last bytes instead
            return
        self._sent += len(shown)
        self._emit(terminal_output_chunk(self.terminal_id, shown))

    def exit(self, out: CommandOutput) -> None:
        """It exited (or was killed): what is left of its last line, then its status."""
        if self.exited:
            return
        self.exited = True
        self.terminal = None
        tail = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        if tail and not self._over:
            self._show(tail)
        fields: dict[str, Any] = {
            "exitStatus": {"exitCode": out.exit_code, "signal": out.signal},
            "capabilities": None,
        }
        if self._over:
            snapshot = self._redactor.text(out.output).encode("utf-8")[-OUTPUT_BYTE_LIMIT:]
            fields["output"] = {"data": base64.b64encode(snapshot).decode("ascii")}
        self._emit(terminal_update(self.terminal_id, **fields))

    async def cancel(self) -> bool:
        """``terminal/cancel``: kill the command (its process group); False when
        it is not running (not started, or exited)."""
        terminal = self.terminal
        if terminal is None or self.exited:
            return False
        self.cancelled = True
        await terminal.kill()
        return True
