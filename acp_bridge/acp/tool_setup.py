"""The tool-related parts of the ACP agent: a session's tool state, its modes
(``session/set_mode`` and the ``mode`` config option) and their announcements."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.to_thread

from ..jsonrpc.connection import Connection
from ..jsonrpc.errors import RpcError
from ..loop.session import Session
from ..loop.turn import TurnConfig
from ..protocol import Dialect, answers
from ..redact import SECRETS
from ..tools.base import ClientCapabilities
from ..tools.editor_workspace import choose
from ..tools.local_workspace import LocalWorkspace
from ..tools.modes import MODE_OPTION, MODES
from ..tools.registry import TOOLS, ToolRegistry
from ..tools.secret_env import env_policy
from ..tools.state import ToolState, from_records
from ..update_builders import config_option_update
from . import config_options
from . import params as P

if TYPE_CHECKING:
    from ..tools.plans import Plans

log = logging.getLogger("acp_bridge.tools")

__all__ = [
    "MODE_OPTION",
    "config_options_of",
    "new_session_fields",
    "set_mode",
    "set_mode_option",
    "tool_state",
]


_LOCAL_FILES_AND_COMMANDS: dict[str, Any] = {
    "read_text_file": True,
    "write_text_file": True,
    "terminal": True,
}


class ToolHost(Protocol):
    """What a session's tools need of the session table."""

    config: TurnConfig
    client_capabilities: dict[str, Any] | None
    conn: Connection
    # The connection's dialect: a v2 session's tools work on this machine.
    dialect: Dialect
    # Where the remembered permissions live, and how their writes are started.
    state_dir: str

    def spawn(self, fn: Callable[[], Coroutine[Any, Any, None]]) -> object: ...


def tool_state(
    agent: ToolHost,
    session: Session,
    extra_dirs: list[str] | None,
    records: Iterable[Mapping[str, Any]] = (),
) -> ToolState:
    """The tool state of a new session, or of one whose log ``records`` are
    loaded (its last mode and its remembered permission choices)."""
    mode, rules = from_records(records, session.cwd)
    env = env_policy(os.environ, key_env=session.provider.key_env, passed=agent.config.pass_env)
    SECRETS.add(env.values, min_length=1)
    dialect = agent.dialect
    # What the client opted in to, as its dialect has it (v2: plans by id).
    capabilities = ClientCapabilities.from_initialize(dialect.opt_ins(agent.client_capabilities))
    if dialect.local_tools:
        # Files and commands here, as the editor's would be (v2 has no fs/terminal).
        capabilities = dataclasses.replace(capabilities, **_LOCAL_FILES_AND_COMMANDS)
        workspace: Any = LocalWorkspace()
    else:
        workspace = choose(capabilities)
    return ToolState(
        session_id=session.id,
        cwd=session.cwd,
        roots=[session.cwd, *(extra_dirs or [])],
        capabilities=capabilities,
        workspace=workspace,
        registry=registry_for(capabilities),
        request=dialect.editor_request(agent.conn.request, session.frames, session.outbox.send),
        log=session.log,
        emit=session.send_update,
        hidden_env=env.hidden,
        tool_timeout=agent.config.tool_timeout,
        cancel_deadline=agent.config.cancel_deadline,
        mode=mode,
        rules=rules,
        on_remember=_KeepForProject(agent, session),
        plans=_plans(records),
    )


def _plans(records: Iterable[Mapping[str, Any]]) -> Plans | None:
    """The plans a reopened session's ``records`` end with (None: it has none)."""
    from ..tools.plan import plans_of

    plans = plans_of(records)
    return plans if plans.by_id else None


class _KeepForProject:
    """Remember a permission choice for the session's project, in a worker thread."""

    __slots__ = ("agent", "session")

    def __init__(self, agent: ToolHost, session: Session) -> None:
        self.agent, self.session = agent, session

    def __call__(self, tool: str, decision: str) -> None:
        from ..tools import rules_store

        agent, cwd = self.agent, self.session.cwd

        async def write() -> None:
            try:
                await anyio.to_thread.run_sync(
                    rules_store.remember, agent.state_dir, cwd, tool, decision
                )
            except OSError as exc:
                log.warning("cannot keep the permission rule for %s: %s", tool, exc)

        agent.spawn(write)


def registry_for(capabilities: ClientCapabilities) -> ToolRegistry:
    """The tools of a session: every registered tool, ``ask_user`` when the
    editor can show a form question (``elicitation.form``), and the plan tool
    that keeps plans by id in place of the built-in one when the editor does
    (``plan``)."""
    from ..tools.plan import NAME, PlansById, UpdatePlan

    by_id = capabilities.plan and type(TOOLS.get(NAME)) is UpdatePlan
    if not capabilities.elicitation_form and not by_id:
        return TOOLS
    registry = ToolRegistry(list(TOOLS))
    if capabilities.elicitation_form:
        from ..tools.ask_user import AskUser

        registry.register(AskUser())
    if by_id:
        registry.register(PlansById())
    return registry


async def add_project_rules(agent: ToolHost, session: Session) -> None:
    """Give ``session`` the "always" rules of its project (its own rules win)."""
    from ..tools import rules_store

    tools = session.tools
    try:
        project = await anyio.to_thread.run_sync(
            rules_store.rules_for, agent.state_dir, session.cwd
        )
    except OSError as exc:  # pragma: no cover - load_all handles read errors
        log.warning("cannot read the remembered permissions: %s", exc)
        return
    tools.rules = {**project, **tools.rules}


def config_options_of(session: Session) -> list[dict[str, Any]]:
    """Every config option of the session: the model (if any), then the mode."""
    return answers.config_options(config_options.offer(session.provider), _mode(session))


def new_session_fields(session: Session, dialect: Dialect) -> dict[str, Any]:
    """``modes`` and ``configOptions`` of a ``session/new`` (or load) response."""
    return dialect.session_fields(config_options.offer(session.provider), _mode(session))


def _mode(session: Session) -> str:
    return session.tools.mode


def _switch(session: Session, mode: object, field: str, via: str) -> None:
    tools = session.tools
    if not isinstance(mode, str) or mode not in MODES:
        raise RpcError.invalid_params(field, f"must be one of {', '.join(MODES)}")
    if tools.set_mode(mode, via):
        tools.emit(config_option_update(config_options_of(session)))
        session.log.sync()


def set_mode(session: Session, params: dict[str, Any]) -> dict[str, Any]:
    """``session/set_mode``."""
    P.session_id(params)
    _switch(session, params.get("modeId"), "modeId", "set_mode")
    return {}


def set_mode_option(session: Session, params: dict[str, Any]) -> dict[str, Any]:
    """``session/set_config_option`` with ``configId: "mode"``."""
    _switch(session, params.get("value"), "value", "config_option")
    return {"configOptions": config_options_of(session)}
