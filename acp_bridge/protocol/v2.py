"""ACP v2 (the Preview of 2026-11): the second dialect, for a client that asks
``initialize`` for ``protocolVersion: 2``.

What differs from v1 (`acp_bridge.protocol.v1`), and what this module does for it:

* ``initialize`` takes and gives ``info``/``capabilities`` (v1: ``clientInfo``,
  ``agentCapabilities``...); the answer is `initialize_answer`.
* ``session/prompt`` is answered as soon as its turn starts, with the
  ``messageId`` of the user's message (`turn_started`); the turn's progress is
  ``state_update``: ``running`` then, ``requires_action`` while a permission
  request waits (`editor_request`), and ``idle`` with the stop reason when it
  ends (`answer_turn`, so a Stop is confirmed by ``idle(cancelled)``, after
  every update of the turn: they are queued ahead of it on the one writer).
* Every message update has a ``messageId``: the agent's chunks have their
  stream's (logged in ``stream/start``); a user's message has `user_message_id`
  of its log record, so a resume replays the same ids.
* There is no ``tool_call``: a call's first update is a ``tool_call_update``
  (``title`` shown as ``name``), and `acp_bridge.protocol.v2_tools` adds the
  cancel capability and the ``cancelled`` status; no ``current_mode_update``
  (modes are the ``mode`` config option only).
* Plans are v2's ``plan_update`` by ``planId`` (an upsert: the client replaces
  that plan) and ``plan_removed``, with no capability to ask for: a v2
  session keeps plans by id as a v1 client with ``clientCapabilities.plan``
  does (`OPTED_IN`), live and on a resume's replay; v1's whole-list ``plan``
  is never sent.
* Subagent sessions (the ``task`` tool's children) are shown to every v2
  client, which the schema requires to understand ``subagent_update``: the
  announcement on the parent, the child's updates and ``state_update`` under
  its own id, the hand-over and the answer as ``session_message``
  (`acp_bridge.acp.subagents`).
* The editor has no ``fs/*`` or ``terminal/*``: a v2 session's tools use the
  local workspace (`local_tools`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import anyio

from .. import __version__
from ..acp import params as P
from ..acp.edge import to_rpc_error
from . import answers
from .frames import UpdateFrames
from .v2_tools import tool_update

if TYPE_CHECKING:
    from ..errors import BridgeError
    from ..jsonrpc.connection import Reply
    from ..jsonrpc.errors import RpcError
    from ..log.replay_read import DeltaRun
    from ..loop.output import SessionFrames

__all__ = ["V2", "user_message_id"]

PROTOCOL_VERSION: Final = 2

# v1 updates v2 has no place for (modes are a config option; a v2 session's
# plans are by id, so v1's whole-list ``plan`` is not made for it).
_DROPPED: Final = frozenset({"current_mode_update", "plan"})


# v2 has ``notice``, ``compaction_update``, ``plan_update`` by ``planId`` and
# subagent sessions (``subagent_update``: "baseline v2 requirements. No Client
# capability is required") among its updates, with no capability that gates
# them: a v2 session takes them as a v1 client that opted in does (its
# capabilities as the engine reads them; the client's own are what its log
# records).
OPTED_IN: Final[dict[str, Any]] = {
    "session": {"notices": {}, "compaction": {}},
    "plan": {},
    "subagents": {},
}


def user_message_id(seq: int) -> str:
    """The ``messageId`` of the user's message whose log record is ``seq``."""
    return f"msg_user_{seq}"


class V2Frames(UpdateFrames):
    """A session's updates in v2's shapes (the chunk templates are v1's: a
    chunk with its ``messageId`` is the same in both)."""

    __slots__ = ()

    def update(self, update: dict[str, Any]) -> bytes:
        shown = v2_update(update)
        return b"" if shown is None else super().update(shown)

    def state(self, state: str, **fields: Any) -> bytes:
        return super().update({"sessionUpdate": "state_update", "state": state, **fields})


def v2_update(update: dict[str, Any]) -> dict[str, Any] | None:
    """A v1-shaped update (`acp_bridge.update_builders`) as v2 has it; None
    for one v2 has no place for."""
    kind = update.get("sessionUpdate")
    if kind == "tool_call":
        fields = {k: v for k, v in update.items() if k not in ("sessionUpdate", "title")}
        if "title" in update:
            fields["name"] = update["title"]
        return {"sessionUpdate": "tool_call_update", **tool_update(fields)}
    if kind == "tool_call_update":
        if "title" in update:
            update = {k: v for k, v in update.items() if k != "title"} | {"name": update["title"]}
        return tool_update(update)
    if kind == "config_option_update":
        return {**update, "configOptions": config_options(update["configOptions"])}
    if kind == "available_commands_update":
        commands = [
            {
                "type": "command",
                **c,
                **({"input": {"type": "text", **c["input"]}} if "input" in c else {}),
            }
            for c in update["availableCommands"]
        ]
        return {**update, "availableCommands": commands}
    if kind in _DROPPED:
        return None
    return update


def config_options(options: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """v1's config options (``id``) as v2's (``configId``)."""
    return [{"configId": o["id"], **{k: v for k, v in o.items() if k != "id"}} for o in options]


class _V2:
    """The v2 dialect (one instance, `V2`)."""

    version: Final = PROTOCOL_VERSION
    # Commands and files on this machine, not the editor's (v2 has no fs/terminal).
    local_tools: Final = True

    def read_initialize(
        self, params: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        P.protocol_version(params)
        info: dict[str, Any] | None = P.optional(params, "info", dict)
        capabilities: dict[str, Any] | None = P.optional(params, "capabilities", dict)
        return capabilities, info

    def initialize_answer(
        self,
        client_capabilities: dict[str, Any] | None,
        *,
        logout: bool,
        setup_command: Sequence[str] | None,
    ) -> dict[str, Any]:
        # auth/logout is always there (v2 advertises both with authMethods);
        # v2's terminal auth is not offered yet.
        del client_capabilities, setup_command, logout
        method = answers.agent_method()
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "info": {"name": "acp-bridge", "version": __version__},
            "capabilities": {
                "session": {
                    "prompt": {"image": {}, "embeddedContext": {}},
                    "mcp": {"stdio": {}, "http": {}},
                    "delete": {},
                    "additionalDirectories": {},
                },
            },
            "authMethods": [
                {"type": "agent", "methodId": method["id"], "name": method["name"]}
                | {"description": method["description"]}
            ],
        }

    def session_frames(self, session_id: str) -> V2Frames:
        return V2Frames(session_id)

    def session_fields(
        self, model_options: list[dict[str, Any]] | None, mode: str | None
    ) -> dict[str, Any]:
        options = answers.config_options(model_options, mode)
        return {"configOptions": config_options(options)} if options else {}

    def turn_started(self, reply: Reply, frames: SessionFrames, seq: int) -> bytes:
        """Answer the prompt (its user message's id, from its record ``seq``)
        and return the ``running`` frame to send after it."""
        reply.result({"messageId": user_message_id(seq)})
        assert isinstance(frames, V2Frames)
        return frames.state("running")

    def opened_state(self, frames: SessionFrames) -> bytes:
        """A resumed session runs nothing (no stop reason: it ended no work now)."""
        assert isinstance(frames, V2Frames)
        return frames.state("idle")

    def answer_turn(
        self,
        reply: Reply,
        stop_reason: str | None,
        *,
        frames: SessionFrames | None = None,
        error: BridgeError | RpcError | None = None,
        log_error: str | None = None,
    ) -> bytes:
        """The ``idle`` frame of the turn's end (the prompt was answered at its start)."""
        assert isinstance(frames, V2Frames)
        fields: dict[str, Any] = {"stopReason": stop_reason}
        if error is not None:
            fields = {"stopReason": "error", "error": to_rpc_error(error).to_wire()}
        if log_error is not None:
            fields["_meta"] = {"acpBridge": {"logError": log_error}}
        del reply
        return frames.state("idle", **fields)

    config_options = staticmethod(config_options)

    def opt_ins(self, client_capabilities: dict[str, Any] | None) -> dict[str, Any]:
        """v2 has notices, compaction updates, plans by id and subagent sessions."""
        del client_capabilities
        return OPTED_IN

    def answer_unstarted(self, reply: Reply) -> None:
        from ..jsonrpc.errors import RpcError

        reply.error(RpcError.internal("the prompt was not started: acp-bridge is shutting down"))

    def editor_request(
        self,
        request: Callable[[str, dict[str, Any]], Awaitable[Any]],
        frames: SessionFrames,
        send: Callable[[bytes], None],
    ) -> Callable[[str, dict[str, Any]], Awaitable[Any]]:
        """``request`` with a permission request in v2's shape, the turn
        ``requires_action`` while it waits and ``running`` again after."""
        assert isinstance(frames, V2Frames)

        async def v2_request(method: str, params: dict[str, Any]) -> Any:
            if method != "session/request_permission":
                return await request(method, params)
            send(frames.state("requires_action"))
            # Running again once answered, or once the editor failed it (the
            # turn goes on); not when a Stop cancelled it: its idle follows.
            try:
                result = await request(method, permission_params(params))
            except anyio.get_cancelled_exc_class():
                raise
            except BaseException:
                send(frames.state("running"))
                raise
            send(frames.state("running"))
            return result

        return v2_request

    def replay_frames(
        self,
        records: Iterable[dict[str, Any] | DeltaRun],
        frames: SessionFrames,
        *,
        others: Sequence[dict[str, Any]] | None,
        compaction: bool,
        notices: bool,
        plans: bool = False,
    ) -> list[bytes]:
        from ..log.replay import replay_updates

        updates = replay_updates(
            records,
            others=others,
            compaction=compaction,
            notices=notices,
            plans=plans,
            user_ids=user_message_id,
        )
        frames_of = [frames.update(params["update"]) for params in updates]
        return [frame for frame in frames_of if frame]


def permission_params(params: dict[str, Any]) -> dict[str, Any]:
    """v1's ``session/request_permission`` params in v2's shape: the call is
    the ``subject``; ``title`` (which the schema requires though it defines no
    such property) is the call's."""
    call = v2_update({"sessionUpdate": "tool_call", **params["toolCall"]})
    assert call is not None
    del call["sessionUpdate"]
    call.pop("capabilities", None)
    return {
        "sessionId": params["sessionId"],
        "title": str(call.get("name") or call["toolCallId"]),
        "subject": {"type": "tool_call", "toolCall": call},
        "options": params["options"],
    }


V2: Final = _V2()
