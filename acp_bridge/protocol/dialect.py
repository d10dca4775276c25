"""The seam: what a dialect of ACP implements (`acp_bridge.protocol`).

Everything here is a wire shape: what the engine hands over are plain facts
(a turn's stop reason or error, a session's records, its config options).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
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

    @property
    def local_tools(self) -> bool:
        """A session's tools run commands and edit files on this machine
        (`acp_bridge.tools.local_workspace`), never through the editor."""

    def session_frames(self, session_id: str) -> SessionFrames:
        """The serializer of one session's ``session/update`` notifications
        (the chunk templates of the streaming path among them)."""

    def turn_started(self, reply: Reply, frames: SessionFrames, seq: int) -> bytes | None:
        """A prompt's turn has started, its user message (or its start) logged
        as record ``seq``: v2 answers the prompt now; the frame to send after."""

    def opened_state(self, frames: SessionFrames) -> bytes | None:
        """The frame that tells the editor an opened (resumed) session is at rest,
        sent after any replay and before the answer: v2's ``state_update``."""

    def answer_turn(
        self,
        reply: Reply,
        stop_reason: str | None,
        *,
        frames: SessionFrames | None = None,
        error: BridgeError | RpcError | None = None,
        log_error: str | None = None,
    ) -> bytes | None:
        """Put the end of a prompt's turn on the wire: it stopped for
        ``stop_reason`` (the log's, `acp_bridge.loop.stop`) or failed with
        ``error``; ``log_error``: its records could not all be written.  The
        frame to send on the session's updates, if any."""

    def editor_request(
        self,
        request: Callable[[str, dict[str, Any]], Awaitable[Any]],
        frames: SessionFrames,
        send: Callable[[bytes], None],
    ) -> Callable[[str, dict[str, Any]], Awaitable[Any]]:
        """How a session's tools send the editor a request (a permission request)."""

    def session_fields(
        self, model_options: list[dict[str, Any]] | None, mode: str | None
    ) -> dict[str, Any]:
        """A session's config options (and modes) in the answer of
        ``session/new`` and of the methods that open a stored session."""

    def opt_ins(self, client_capabilities: dict[str, Any] | None) -> dict[str, Any] | None:
        """The capabilities the engine reads for the updates a client opts in
        to (notices, compaction): the client's own, or a dialect's fixed set."""

    def config_options(self, options: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A session's config options (v1's shapes, `answers.config_options`)
        as this dialect has them."""

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
