"""The ACP methods of live sessions: ``session/new``, ``session/prompt``,
``session/cancel``, ``session/set_mode`` and ``session/set_config_option``;
and ACP v2's ``tool_call/cancel`` and ``terminal/cancel`` (`cancel_handlers`:
only a v2 connection has them).

Entry points only: the table (`acp_bridge.acp.table`) holds the sessions,
`acp_bridge.acp.prompt_turns` runs a prompt's turn, and each session's
`acp_bridge.loop.prompts.PromptQueue` keeps the bookkeeping of its prompts.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from ..jsonrpc.connection import current_reply
from ..jsonrpc.errors import RequestId, RpcError
from ..loop.lifecycle import TurnKind
from ..protocol import answers
from ..stored import client_prompt as client_prompt_log
from . import config_options
from . import params as P
from .edge import Handler
from .prompt_turns import run_regenerate, run_turn
from .table import SessionTable, require_directory

if TYPE_CHECKING:
    from ..loop.session import Session

__all__ = ["LiveMethods"]


class LiveMethods:
    def __init__(self, table: SessionTable) -> None:
        self.table = table

    def handlers(self) -> dict[str, Handler]:
        return {
            "session/new": self.new_session,
            "session/prompt": self.prompt,
            "session/set_config_option": self.set_config_option,
            "session/set_mode": self.set_mode,
            "session/cancel": _cancel_is_a_notification,
        }

    def cancel_handlers(self) -> dict[str, Handler]:
        """ACP v2's cancel of one running tool call or terminal (the turn goes on)."""
        return {
            "tool_call/cancel": self.cancel_tool_call,
            "terminal/cancel": self.cancel_terminal,
        }

    def _owner(self, params: dict[str, Any]) -> Session:
        """The session that owns a tool call or terminal: an open session, or a
        running subagent the client was told of (its calls advertise their
        cancel under its own id)."""
        child = self.table.children.get(P.session_id(params))
        return child if child is not None else self.table.get(params)

    async def cancel_tool_call(self, params: dict[str, Any]) -> dict[str, Any]:
        """``tool_call/cancel``: answered once accepted; the call's final
        ``tool_call_update`` (``cancelled``) follows.  ``-32602`` for a call
        that is unknown, not running, or finished (the schema's answer)."""
        session = self._owner(params)
        call_id: str = P.require(params, "toolCallId", str)
        why = session.prompts.cancel_tool_call(call_id)
        if why is not None:
            raise RpcError.invalid_params("toolCallId", why)
        return {}

    async def cancel_terminal(self, params: dict[str, Any]) -> dict[str, Any]:
        """``terminal/cancel``: its command is killed (the ``terminal_update``
        with its exit status follows) and its tool call ends with what it
        printed; ``-32602`` for a terminal that is unknown or has exited."""
        session = self._owner(params)
        terminal_id: str = P.require(params, "terminalId", str)
        why = await session.prompts.cancel_terminal(terminal_id)
        if why is not None:
            raise RpcError.invalid_params("terminalId", why)
        return {}

    async def new_session(self, params: dict[str, Any]) -> dict[str, Any]:
        table = self.table
        cwd = P.absolute_path(params, "cwd")
        extra_dirs = P.additional_directories(params)
        client_prompt = P.system_prompt(params)
        table.mcp.editor_specs(params)  # checked before anything is created
        await require_directory(cwd, "cwd")
        # The provider first: if it cannot start, the editor is told why and
        # no session file is left behind.
        provider = await table.providers.new()
        session_id, slog = await table.new_log()
        session = table.make_session(session_id, cwd, slog, provider, extra_dirs)
        from .subagents import attach  # the tools load off the start-up path

        attach(table, session)  # its task calls start child sessions
        session.context.client_prompt = client_prompt
        await table.prepare_context(session)
        start = answers.session_start_fields(
            session_id, cwd, provider.name, extra_dirs, table.client_info, table.client_capabilities
        )
        slog.append("session/start", 0, 0, **start)
        if client_prompt is not None:
            client_prompt_log.keep(session, params["systemPrompt"])
        await table.mcp.attach(session, params)
        table.sessions[session_id] = session
        slog.sync()
        await table.mcp.ready(session)
        from ..commands.catalog import announce
        from . import tool_setup  # the tools load off the start-up path

        # Answered first: the commands and what the MCP servers' start-up has to
        # say follow, for the session the editor now knows.
        answer = {
            "sessionId": session_id,
            **tool_setup.new_session_fields(session, table.dialect),
        }
        current_reply.get().result(answer)
        table.mcp.answered(session)
        announce(session)
        table.outbox.flush_now()
        return answer

    async def set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        from . import tool_setup  # the tools load off the start-up path

        session = self.table.get(params)
        if params.get("configId") == tool_setup.MODE_OPTION:
            tool_setup.set_mode_option(session, params)
        else:
            config_options.set_option(session.provider, params)
        options = tool_setup.config_options_of(session)
        return {"configOptions": self.table.dialect.config_options(options)}

    async def set_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        from . import tool_setup  # the tools load off the start-up path

        return tool_setup.set_mode(self.table.get(params), params)

    # -- prompt turns ------------------------------------------------------------

    def prompt_arrived(self, request_id: RequestId, params: dict[str, Any]) -> None:
        """The connection's arrival hook for ``session/prompt``."""
        session = self.table.find(params)
        if session is not None:
            session.prompts.arrived(request_id)

    async def prompt(self, params: dict[str, Any]) -> None:
        reply = current_reply.get()
        session = self.table.get(params)
        try:
            blocks = P.prompt_blocks(params, embedded_context=True, image=True)
            config_options.check_prompt(session.provider, blocks)
        except RpcError:
            session.prompts.withdraw(reply.id)
            raise
        from ..commands import catalog

        table, raw = self.table, params["prompt"]
        command = catalog.parse(blocks)
        if command is None:
            return await run_turn(
                table, reply, session, blocks, partial(TurnKind.prompt, blocks, raw)
            )
        name, argument = command
        if name == "regenerate":
            return await run_regenerate(table, reply, session, raw)
        if name == "compact":
            kind = partial(TurnKind.compact, raw, argument)
        else:
            from .command_turns import command_kind  # a slash command's turn

            kind = partial(command_kind, session, name, argument, raw)
        return await run_turn(table, reply, session, [], kind)

    def cancel(self, params: dict[str, Any]) -> None:
        """``session/cancel`` (a notification)."""
        sid = P.session_id(params)
        # A subagent the client was told of stops alone (its parent goes on).
        session = self.table.sessions.get(sid) or self.table.children.get(sid)
        if session is None:
            return  # harmless for an unknown session (invariant I6)
        session.prompts.cancel(self.table.spawn)

    def close_arrived(self, request_id: RequestId, params: dict[str, Any]) -> None:
        """The connection's arrival hook for ``session/close``: the session's prompts
        stop as the close is read, as they would for a ``session/cancel`` read there
        (session-setup.mdx: "as if session/cancel had been called").  The close
        itself runs in a task a moment later; a turn left running until then could
        still end otherwise after the close was read."""
        session = self.table.find(params)
        if session is not None:
            session.prompts.cancel(self.table.spawn)

    def cancel_request(self, request_id: RequestId, params: dict[str, Any]) -> None:
        """``$/cancel_request`` for one prompt: that prompt only, not the session."""
        session = self.table.find(params)
        if session is not None:
            session.prompts.cancel_request(request_id, self.table.spawn)


async def _cancel_is_a_notification(params: dict[str, Any]) -> None:
    raise RpcError.invalid_request(
        "session/cancel is a notification: send it without an id (nothing was cancelled)"
    )
