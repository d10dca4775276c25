"""The seam: what a dialect of ACP implements (`acp_bridge.protocol`).

Everything here is a wire shape: what the engine hands over are plain facts
(a turn's stop reason or error, a session's records, its config options).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..errors import BridgeError
    from ..jsonrpc.connection import Reply
    from ..jsonrpc.errors import RpcError
    from ..log.replay_read import DeltaRun
    from ..loop.output import SessionFrames

__all__ = ["Dialect"]


class Dialect(Protocol):
    """One version of the protocol, as the handlers in `acp_bridge.acp` use it."""

    @property
    def version(self) -> int:
        """The ``protocolVersion`` this dialect answers ``initialize`` with."""

    def read_initialize(
        self, params: dict[str, Any]
    ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """``initialize``'s params checked: the client's capabilities and info."""

    def initialize_answer(
        self,
        client_capabilities: dict[str, Any] | None,
        *,
        logout: bool,
        setup_command: Sequence[str] | None,
    ) -> dict[str, Any]:
        """The result of ``initialize``."""

    def session_frames(self, session_id: str) -> SessionFrames:
        """The serializer of one session's ``session/update`` notifications
        (the chunk templates of the streaming path among them)."""

    def answer_turn(
        self,
        reply: Reply,
        stop_reason: str | None,
        *,
        error: BridgeError | RpcError | None = None,
        log_error: str | None = None,
    ) -> None:
        """Put the end of a prompt's turn on the wire: it stopped for
        ``stop_reason`` (the log's, `acp_bridge.loop.stop`) or failed with
        ``error``; ``log_error``: its records could not all be written."""

    def session_fields(
        self, model_options: list[dict[str, Any]] | None, mode: str | None
    ) -> dict[str, Any]:
        """A session's config options (and modes) in the answer of
        ``session/new`` and of the methods that open a stored session."""

    def answer_unstarted(self, reply: Reply) -> None:
        """Answer a prompt whose turn never ran or never ended (a shutdown)."""

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
        """What a stored session's editor is sent to show its conversation again."""
