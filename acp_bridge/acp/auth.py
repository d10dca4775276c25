"""Authentication at the protocol edge: the methods ``initialize`` advertises,
``authenticate``, ``logout``, and the ``-32000`` a session gets without a provider.

The bridge holds no account of its own: being authenticated means having a
model provider that can start (a key in the environment, a config profile,
or what ``acp-bridge setup`` stored).  ``initialize`` never needs a key or
the network.  It advertises

* an ``agent`` method (no ``type``: the protocol's default) that describes
  the key setup; ``authenticate`` with it loads the provider again and
  answers ``{}`` if one can start, else the same error ``session/new`` gets;
* a ``terminal`` method that runs ``acp-bridge setup``, only for a client
  that says it can run one (``clientCapabilities.auth.terminal``, or the
  ``terminal-auth`` flag in ``clientCapabilities._meta`` that the ACP
  registry's check and earlier Zed releases send; the legacy form of the
  method, a ``_meta`` ``terminal-auth`` command, is included for the latter).

While no provider can start, each ``session/new`` (and load, resume, fork)
loads the configuration again before it answers ``-32000``, so a setup run
meanwhile in a terminal takes effect without restarting the agent.
``logout`` forgets what setup stored and loads the configuration again;
sessions already open keep their provider.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import anyio.to_thread

from ..jsonrpc.errors import RpcError
from ..protocol.answers import TERMINAL_METHOD_ID
from . import params as P
from .edge import AGENT_METHOD_ID, Handler
from .provider_slot import ProviderSlot

log = logging.getLogger("acp_bridge.auth")


class AuthMethods:
    """``authenticate`` and ``logout``.

    ``forget`` removes stored credentials (blocking: it runs in a worker
    thread); ``setup_command`` runs ``acp-bridge setup`` (``initialize``
    advertises both).  Both reload the provider through ``providers``.
    """

    def __init__(self, providers: ProviderSlot) -> None:
        self.providers = providers
        self.forget: Callable[[], list[str]] | None = None
        self.setup_command: Sequence[str] | None = None

    def handlers(self) -> dict[str, Handler]:
        return {"authenticate": self.authenticate, "logout": self.logout}

    async def authenticate(self, params: dict[str, Any]) -> dict[str, Any]:
        method_id = P.require(params, "methodId", str)
        if method_id == TERMINAL_METHOD_ID:
            raise RpcError.invalid_params(
                "methodId",
                "the terminal method is run by the client as `acp-bridge setup`, "
                "never passed to authenticate",
            )
        if method_id != AGENT_METHOD_ID:
            raise RpcError.invalid_params(
                "methodId", f"no auth method {P.echo(method_id)} (known: {AGENT_METHOD_ID})"
            )
        await self.providers.check()
        return {}

    async def logout(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.forget is None:
            raise RpcError.method_not_found("logout")
        removed = await anyio.to_thread.run_sync(self.forget)
        log.info("logout: removed %s", ", ".join(removed) if removed else "nothing (none stored)")
        await self.providers.reload_when_ready()
        return {}
