"""What a turn needs from the process's ordered writer.

The loop does no I/O: a session's frames go through a `TurnOutput` (the
process's `acp_bridge.transport.outbox.Outbox` implements it), and its log
records through the `acp_bridge.log.writer.RecordWriter` its log was opened
with.  Frames are written in the order they are queued, each batch's log
records before its frames (invariants I1 and I4).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["SessionFrames", "TurnOutput"]


class SessionFrames(Protocol):
    """A session's ``session/update`` frames, as its dialect serializes them
    (`acp_bridge.protocol.Dialect.session_frames`): the loop hands it updates
    and the texts of chunks, never bytes of its own making."""

    # What ends every chunk frame after its JSON text (`chunk_prefix`).
    chunk_suffix: bytes

    def chunk_prefix(self, kind: str, message_id: str) -> bytes:
        """The bytes of a ``kind`` chunk's frame before its JSON text, made
        once per stream (the streaming path adds only the text)."""

    def update(self, update: dict[str, Any]) -> bytes:
        """The frame (a complete line) of one update."""


class TurnOutput(Protocol):
    """The ordered writer, as a session and its turns see it."""

    # Reads stdin now, from the caller: a turn streaming at full rate calls
    # it every few chunks, so a Stop is read as soon as it arrives.
    poll_input: Callable[[], None]

    def send(self, frame: bytes) -> None:
        """Queue one stdout frame (a complete line); never blocks."""

    def retract(self, prefixes: tuple[bytes, ...], count: int) -> bool:
        """Take back the last ``count`` queued frames starting with one of
        ``prefixes``, all or none; False if fewer are still queued."""

    def merge_chunks(self, prefixes: tuple[bytes, ...], suffix: bytes) -> None:
        """Chunk frames ``prefix + JSON string + suffix`` may reach the editor
        merged (same text, fewer frames) once taken by the writer."""

    def unmerge_chunks(self, prefixes: tuple[bytes, ...]) -> None: ...

    def add_pre_flush(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` before each batch is taken (it may queue more)."""

    def remove_pre_flush(self, hook: Callable[[], None]) -> None: ...

    @property
    def high_water(self) -> int:
        """Above this `backlog` a streaming turn waits (`wait_writable`)."""

    @property
    def batch_bytes(self) -> int:
        """How much a streaming turn queues before it hands over a batch
        (more while the editor reads fast)."""

    def write_batch(self) -> bool:
        """Write what is queued now, from the caller, if the editor reads
        fast and keeps up; False (nothing done) otherwise: the writer task
        then takes the batch at the caller's next yield."""

    @property
    def backlog(self) -> int:
        """Bytes queued that the editor has still to read."""

    async def wait_writable(self) -> None:
        """Return once the backlog is under the high-water mark again."""

    def narrow_stdout(self) -> None:
        """A turn is about to stream: keep what stdout holds small."""
