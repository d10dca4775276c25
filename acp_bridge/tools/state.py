"""A session's tool state: its directories, the editor's capabilities, the
mode, and the remembered permission choices.

Mode switches and remembered choices are session-level log records
(``session/mode {mode, via}``, ``permission/rule {tool, decision}``), so
`from_records` rebuilds the state of a session from its log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..log.writer import SessionLog
from ..redact import SECRETS, Redactor
from ..update_builders import current_mode_update
from .base import ClientCapabilities, EditorRequest
from .editor_workspace import choose
from .modes import DEFAULT_MODE, MODES, config_option
from .registry import TOOLS, ToolRegistry
from .workspace import Workspace

if TYPE_CHECKING:
    from .plans import Plans


@dataclass
class ToolState:
    session_id: str
    cwd: str
    roots: list[str]
    capabilities: ClientCapabilities
    request: EditorRequest
    log: SessionLog
    # Sends a session/update (for mode switches).
    emit: Callable[[dict[str, Any]], None]
    registry: ToolRegistry = field(default_factory=lambda: TOOLS)
    mode: str = DEFAULT_MODE
    rules: dict[str, str] = field(default_factory=dict)
    # Variables set empty for commands (`acp_bridge.tools.secret_env`), and
    # what is redacted from every tool result: the process's secrets.
    hidden_env: tuple[str, ...] = ()
    redactor: Redactor = SECRETS
    tool_timeout: float = 300.0
    cancel_deadline: float = 5.0
    # Keeps an "always" answer for the session's project too (`acp_bridge.tools.rules_store`).
    on_remember: Callable[[str, str], None] | None = None
    # The session's plans (`acp_bridge.tools.plan`), made at the first tool call
    # of a session that has none (an idle session holds no empty one).
    plans: Plans | None = None
    # Starts child sessions for the ``task`` tool (`acp_bridge.tools.subagent`).
    subagents: Any = None
    # A subagent whose requests name its parent session: how its permission
    # requests name it (the title of the parent's ``task`` call).
    asker: str | None = None
    # ... and what its tool call ids carry in those requests, so that none is
    # taken for one of the parent's (both sessions may have a ``call_1``).
    call_prefix: str = ""

    def plan_store(self) -> Plans:
        if self.plans is None:
            from .plans import Plans

            self.plans = Plans()
        return self.plans

    # Where the tools read, write and run commands, chosen once for the session
    # from the editor's capabilities (`acp_bridge.tools.workspace.choose`).
    workspace: Workspace = field(kw_only=True)

    @classmethod
    def without_tools(
        cls, session_id: str, cwd: str, log: SessionLog, emit: Callable[[dict[str, Any]], None]
    ) -> ToolState:
        """The state of a session made without tools (a test's): no tool is
        offered, so every call is answered "unavailable"."""
        caps = ClientCapabilities()
        return cls(
            session_id,
            cwd,
            [cwd],
            caps,
            _no_editor,
            log,
            emit,
            ToolRegistry(),
            workspace=choose(caps),
        )

    def set_mode(self, mode: str, via: str) -> bool:
        """Switch the mode (``via``: ``set_mode`` or ``config_option``); False if unchanged."""
        if mode not in MODES:
            raise ValueError(mode)
        if mode == self.mode:
            return False
        self.mode = mode
        self.log.append("session/mode", 0, 0, mode=mode, via=via)
        self.emit(current_mode_update(mode))
        return True

    def remember(self, tool: str, decision: str) -> None:
        self.rules[tool] = decision
        # Kept with the project it was given in: a load, resume or fork in
        # another cwd does not take it along (`from_records`).
        self.log.append("permission/rule", 0, 0, tool=tool, decision=decision, cwd=self.cwd)
        if self.on_remember is not None:
            self.on_remember(tool, decision)

    def config_option(self) -> dict[str, Any]:
        return config_option(self.mode)


async def _no_editor(method: str, params: dict[str, Any]) -> Any:
    raise RuntimeError(f"a session without tools makes no editor request ({method})")


def from_records(records: Iterable[Mapping[str, Any]], cwd: str) -> tuple[str, dict[str, str]]:
    """The mode and remembered choices a session's log ends with, for a
    session opened in ``cwd``: a choice
    counts only in the project (cwd) it was given in.  One recorded without
    its cwd (an older log) is left out; the project's own rules, kept in
    ``permissions.json``, still apply (`acp_bridge.tools.rules_store`)."""
    mode, rules = DEFAULT_MODE, {}
    for record in records:
        if record.get("type") == "session/mode" and record.get("mode") in MODES:
            mode = record["mode"]
        elif record.get("type") == "permission/rule" and record.get("cwd") == cwd:
            rules[str(record.get("tool"))] = str(record.get("decision"))
    return mode, rules
