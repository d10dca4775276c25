"""The tool-related parts of the ACP agent: a session's tool state, its modes
(``session/set_mode`` and the ``mode`` config option) and their announcements."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ..jsonrpc.connection import Connection
from ..jsonrpc.errors import RpcError
from ..loop.session import Session
from ..loop.turn import TurnConfig
from ..tools.base import ClientCapabilities
from ..tools.modes import MODE_OPTION, MODES, mode_state
from ..tools.secret_env import env_policy
from ..tools.state import ToolState, from_records
from ..update_builders import config_option_update
from . import config_options
from . import params as P

__all__ = [
    "MODE_OPTION",
    "config_options_of",
    "new_session_fields",
    "set_mode",
    "set_mode_option",
    "tool_state",
]


class ToolHost(Protocol):
    """What a session's tools need of the session table."""

    config: TurnConfig
    client_capabilities: dict[str, Any] | None
    conn: Connection


def tool_state(
    agent: ToolHost,
    session: Session,
    extra_dirs: list[str] | None,
    records: Iterable[Mapping[str, Any]] = (),
) -> ToolState:
    """The tool state of a new session, or of one whose log ``records`` are
    loaded (its last mode and its remembered permission choices)."""
    mode, rules = from_records(records)
    provider_config = getattr(session.provider, "config", None)
    key_env = getattr(provider_config, "key_env", None)
    env = env_policy(
        os.environ,
        key_env=key_env if isinstance(key_env, str) else None,
        passed=agent.config.pass_env,
    )

    def emit(update: dict[str, Any]) -> None:
        session.outbox.send(session.frames.update(update))

    return ToolState(
        session_id=session.id,
        cwd=session.cwd,
        roots=[session.cwd, *(extra_dirs or [])],
        capabilities=ClientCapabilities.from_initialize(agent.client_capabilities),
        request=agent.conn.request,
        log=session.log,
        emit=emit,
        hidden_env=env.hidden,
        redactor=env.redactor,
        tool_timeout=agent.config.tool_timeout,
        cancel_deadline=agent.config.cancel_deadline,
        mode=mode,
        rules=rules,
    )


def config_options_of(session: Session) -> list[dict[str, Any]]:
    """Every config option of the session: the model (if any), then the mode."""
    options = config_options.offer(session.provider) or []
    if session.tools is not None:
        options = [*options, session.tools.config_option()]
    return options


def new_session_fields(session: Session) -> dict[str, Any]:
    """``modes`` and ``configOptions`` of a ``session/new`` (or load) response."""
    fields: dict[str, Any] = {}
    options = config_options_of(session)
    if options:
        fields["configOptions"] = options
    if session.tools is not None:
        fields["modes"] = mode_state(session.tools.mode)
    return fields


def _switch(session: Session, mode: object, field: str, via: str) -> None:
    tools = session.tools
    if tools is None:
        raise RpcError.invalid_params(field, "this session has no modes")
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
