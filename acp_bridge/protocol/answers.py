"""The answers of ``initialize`` and ``session/new``, built from plain values.

v1's (`acp_bridge.protocol.v1`): used through the dialect for ``initialize``,
and by `acp_bridge.acp.live` (``session/new``) and the stored sessions'
methods.  Pure functions of their arguments; nothing here imports the event
loop, pydantic or the loop's classes.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Final

from .. import __version__
from ..acp import params as P
from ..acp.edge import AGENT_METHOD_ID
from ..tools.modes import config_option, mode_state

__all__ = [
    "MCP_CAPABILITIES",
    "PROTOCOL_VERSION",
    "SESSION_CAPABILITIES",
    "agent_method",
    "auth_capabilities",
    "auth_methods",
    "client_runs_terminal_auth",
    "config_options",
    "initialize_answer",
    "new_session_id",
    "read_initialize",
    "session_fields",
    "session_start_fields",
    "terminal_method",
]

# We speak version 1 only: the same version if asked for it, else our latest.
PROTOCOL_VERSION: Final = 1

# The ACP MCP capability: every transport is implemented (`acp_bridge.mcp`).
MCP_CAPABILITIES: Final = {"http": True, "sse": True}

SESSION_CAPABILITIES: Final[dict[str, dict[str, Any]]] = {
    "list": {},
    "resume": {},
    "close": {},
    "delete": {},
    "fork": {},
    # session/new, load, resume and fork take them (a load or resume without
    # them keeps those of the session's start).
    "additionalDirectories": {},
    # The editor's system prompt (systemPrompt on new, load, resume and fork),
    # appended to the bridge's own or, with override, in place of it.
    "systemPrompt": {"mode": {"override": {}}},
}

TERMINAL_METHOD_ID: Final = "setup"


# -- initialize -------------------------------------------------------------------


def read_initialize(params: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Check ``initialize``'s params; its client capabilities and client info
    (recorded in each new session's log).  Raises `RpcError` (``-32602``)."""
    P.protocol_version(params)
    capabilities: dict[str, Any] | None = P.optional(params, "clientCapabilities", dict)
    info: dict[str, Any] | None = P.optional(params, "clientInfo", dict)
    return capabilities, info


def initialize_answer(
    client_capabilities: dict[str, Any] | None,
    *,
    logout: bool,
    setup_command: Sequence[str] | None,
) -> dict[str, Any]:
    """The result of ``initialize``; ``logout`` when stored credentials can be
    forgotten, ``setup_command`` the command that runs ``acp-bridge setup``."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            "mcpCapabilities": dict(MCP_CAPABILITIES),
            "sessionCapabilities": SESSION_CAPABILITIES,
            **auth_capabilities(logout=logout),
        },
        "authMethods": auth_methods(client_capabilities, setup_command),
        "agentInfo": {"name": "acp-bridge", "title": "acp-bridge", "version": __version__},
    }


def auth_capabilities(*, logout: bool) -> dict[str, Any]:
    return {"auth": {"logout": {}}} if logout else {}


def auth_methods(
    client_capabilities: dict[str, Any] | None, setup_command: Sequence[str] | None
) -> list[dict[str, Any]]:
    methods = [agent_method()]
    if setup_command and client_runs_terminal_auth(client_capabilities):
        methods.append(terminal_method(setup_command))
    return methods


def agent_method() -> dict[str, Any]:
    return {
        "id": AGENT_METHOD_ID,
        "name": "API key or local server",
        "description": (
            "Set ANTHROPIC_API_KEY or OPENAI_API_KEY (with OPENAI_BASE_URL for another "
            "OpenAI-compatible server) in the agent's environment, or run `acp-bridge setup` in "
            "a terminal: it stores a provider's key, or the URL of a local server (Ollama, "
            "LM Studio, vLLM). Authenticate then checks that the provider can start."
        ),
    }


def terminal_method(command: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "terminal",
        "id": TERMINAL_METHOD_ID,
        "name": "Set up in a terminal",
        "description": (
            "Runs `acp-bridge setup`: choose a provider, enter its API key (not shown) or a "
            "local server's URL; one tiny request tests it before it is stored."
        ),
        "args": ["setup"],
        "_meta": {
            "terminal-auth": {
                "command": command[0],
                "args": list(command[1:]),
                "label": "acp-bridge setup",
            }
        },
    }


def client_runs_terminal_auth(capabilities: dict[str, Any] | None) -> bool:
    if not isinstance(capabilities, dict):
        return False
    auth = capabilities.get("auth")
    if isinstance(auth, dict) and auth.get("terminal") is True:
        return True
    meta = capabilities.get("_meta")
    return isinstance(meta, dict) and meta.get("terminal-auth") is True


# -- session/new ------------------------------------------------------------------


def new_session_id() -> str:
    return "sess_" + uuid.uuid4().hex


def session_start_fields(
    session_id: str,
    cwd: str,
    provider: str,
    extra_dirs: list[str] | None,
    client_info: dict[str, Any] | None,
    client_capabilities: dict[str, Any] | None,
) -> dict[str, Any]:
    """The fields of a new session's ``session/start`` record, in their order."""
    fields: dict[str, Any] = {
        "session_id": session_id,
        "cwd": cwd,
        "provider": provider,
        "title": None,
    }
    if extra_dirs is not None:
        fields["additional_directories"] = extra_dirs
    if client_info is not None:
        fields["client_info"] = client_info
    if client_capabilities is not None:
        fields["client_capabilities"] = client_capabilities
    return fields


def config_options(
    model_options: list[dict[str, Any]] | None, mode: str | None
) -> list[dict[str, Any]]:
    """Every config option of a session: the model (if any), then the mode (if
    the session has tools)."""
    options = list(model_options or ())
    if mode is not None:
        options.append(config_option(mode))
    return options


def session_fields(model_options: list[dict[str, Any]] | None, mode: str | None) -> dict[str, Any]:
    """``configOptions`` and ``modes`` of a ``session/new`` (or load) answer."""
    fields: dict[str, Any] = {}
    options = config_options(model_options, mode)
    if options:
        fields["configOptions"] = options
    if mode is not None:
        fields["modes"] = mode_state(mode)
    return fields
