"""ACP v1: the dialect of every client today.

A turn ends on the wire as the answer of its ``session/prompt``: its
``stopReason`` (the stop reasons the log records are v1's own, `STOP_REASONS`,
so the mapping is the identity), or the JSON-RPC error of its failure; updates are the shapes of
`acp_bridge.update_builders`, serialized by `acp_bridge.protocol.frames`;
``session/load`` replays them (`acp_bridge.log.replay`); the answers of
``initialize`` and ``session/new`` are `acp_bridge.protocol.answers`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from ..acp.edge import to_rpc_error
from . import answers
from .frames import UpdateFrames

if TYPE_CHECKING:
    from ..errors import BridgeError
    from ..jsonrpc.connection import Reply
    from ..jsonrpc.errors import RpcError
    from ..log.replay_read import DeltaRun
    from ..loop.output import SessionFrames

__all__ = ["STOP_REASONS", "V1"]

# The stop reasons of a v1 prompt's answer (the schema's ``StopReason``).
STOP_REASONS: Final = frozenset(
    {"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"}
)


class _V1:
    """The v1 dialect (one instance, `V1`: it holds nothing of a connection)."""

    version: Final = answers.PROTOCOL_VERSION

    local_tools: Final = False

    read_initialize = staticmethod(answers.read_initialize)
    initialize_answer = staticmethod(answers.initialize_answer)

    def session_frames(self, session_id: str) -> UpdateFrames:
        return UpdateFrames(session_id)

    session_fields = staticmethod(answers.session_fields)

    def turn_started(self, reply: Reply, frames: SessionFrames, seq: int) -> None:
        """v1 answers a prompt when its turn ends."""

    def opened_state(self, frames: SessionFrames) -> None:
        """v1 has no session state."""

    def answer_turn(
        self,
        reply: Reply,
        stop_reason: str | None,
        *,
        frames: SessionFrames | None = None,
        error: BridgeError | RpcError | None = None,
        log_error: str | None = None,
    ) -> None:
        if error is not None:
            reply.error(to_rpc_error(error))
            return
        result: dict[str, Any] = {"stopReason": stop_reason}
        if log_error is not None:
            result["_meta"] = {"acpBridge": {"logError": log_error}}
        reply.result(result)

    def editor_request(
        self,
        request: Callable[[str, dict[str, Any]], Awaitable[Any]],
        frames: SessionFrames,
        send: Callable[[bytes], None],
    ) -> Callable[[str, dict[str, Any]], Awaitable[Any]]:
        return request

    def opt_ins(self, client_capabilities: dict[str, Any] | None) -> dict[str, Any] | None:
        return client_capabilities

    def config_options(self, options: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return options

    def answer_unstarted(self, reply: Reply) -> None:
        reply.result({"stopReason": "cancelled"})

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
        from ..log.replay import replay_frames

        return replay_frames(
            records,
            frames.update,
            others=others,
            compaction=compaction,
            notices=notices,
            plans=plans,
        )


V1: Final = _V1()
