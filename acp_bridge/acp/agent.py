"""The ACP agent: ``initialize``, and the wiring of the method handlers to the connection.

Below it, imports point one way: the handler modules (`acp_bridge.acp.live`,
`acp_bridge.acp.stored`, `acp_bridge.acp.auth`), independent of each other,
work on the session table (`acp_bridge.acp.table`) and the provider slot
(`acp_bridge.acp.provider_slot`), which work on the loop.  Every request
handler is registered through `acp_bridge.acp.edge`, the one place where the
bridge's errors become JSON-RPC errors.
"""

from __future__ import annotations

from typing import Any

from ..jsonrpc.connection import Connection
from ..loop.turn import TurnConfig
from ..protocol import negotiate
from ..transport.outbox import Outbox
from . import params as P
from .auth import AuthMethods
from .edge import edge_handlers
from .live import LiveMethods
from .provider_slot import ProviderSlot
from .stored import StoredMethods
from .table import SessionTable, Spawn

__all__ = ["Agent"]


class Agent:
    def __init__(
        self,
        conn: Connection,
        outbox: Outbox,
        *,
        state_dir: str,
        config: TurnConfig,
        spawn: Spawn,
        latest_protocol: int = 2,
    ) -> None:
        self.conn = conn
        # The latest protocol version a client may ask for (``--protocol``).
        self.latest_protocol = latest_protocol
        # Where new sessions get their provider (the server sets its factory
        # and its ``reload``).
        self.providers = ProviderSlot()
        self.table = SessionTable(
            conn, outbox, state_dir=state_dir, config=config, spawn=spawn, providers=self.providers
        )
        # new, prompt, cancel, set_mode, set_config_option.
        self.live = LiveMethods(self.table)
        # load, resume, list, close, delete, fork, regenerate.
        self.stored = StoredMethods(self.table)
        # authenticate, logout.
        self.auth = AuthMethods(self.providers)
        conn.requests.update(
            edge_handlers(
                {
                    "initialize": self.initialize,
                    **self.live.handlers(),
                    **self.stored.handlers(),
                    **self.auth.handlers(),
                }
            )
        )
        conn.notifications["session/cancel"] = self.live.cancel
        conn.cancel_hooks["session/prompt"] = self.live.cancel_request
        conn.arrival_hooks["session/prompt"] = self.live.prompt_arrived
        conn.arrival_hooks["session/close"] = self.live.close_arrived

    async def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        table = self.table
        # One dialect for the connection, from the version the client asks for.
        table.dialect = dialect = negotiate(P.protocol_version(params), self.latest_protocol)
        if dialect.version == 2:
            self._speak_v2()
        # Recorded in each new session's log (session/start).
        table.client_capabilities, table.client_info = dialect.read_initialize(params)
        return dialect.initialize_answer(
            table.client_capabilities,
            logout=self.auth.forget is not None,
            setup_command=self.auth.setup_command,
        )

    def _speak_v2(self) -> None:
        """The method table of a v2 connection: no ``session/load`` (a resume
        replays), no fork (not in v2), no modes but the config option, ``auth/*`` for v1's
        ``authenticate``/``logout``, the cancel of one tool call or terminal,
        and a resume that replays."""
        requests = self.conn.requests
        auth = edge_handlers(self.auth.handlers())
        v1_only = ("session/load", "session/fork", "session/set_mode", "authenticate", "logout")
        for method in v1_only:
            requests.pop(method, None)
        requests["auth/login"] = auth["authenticate"]
        requests["auth/logout"] = auth["logout"]
        requests.update(edge_handlers(self.live.cancel_handlers()))
        requests.update(edge_handlers(self.stored.v2_handlers()))
