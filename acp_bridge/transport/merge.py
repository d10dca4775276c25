"""Merging chunk frames: the same text in fewer frames, for an editor that reads slowly.

A text chunk frame is a fixed prefix, a JSON string and a fixed suffix
(`acp_bridge.protocol.frames.UpdateFrames.chunk_prefix`).  When the ordered
writer has fallen behind the editor, consecutive chunk frames of one message
say nothing the single frame carrying their joined text does not; sending
that one instead cuts what the editor has to read (and what waits ahead of
the answer to a Stop) by about the ratio of frame size to chunk size.
"""

from __future__ import annotations

from typing import Final

__all__ = ["MERGE_ABOVE", "MERGE_TEXT_MAX", "ChunkMerger", "merge_chunk_frames"]

# A batch of more frame bytes than this has its consecutive chunk frames of
# one message merged into one frame.  Only an editor that reads slower than
# the stream makes a batch that big; then the same text reaches it in a
# tenth of the bytes, and what it still has to read when it presses Stop is
# small.  A batch below it is written as queued.
MERGE_ABOVE: Final = 4 * 1024
# Only chunks whose JSON text is this short are merged: the frame's envelope
# (about 200 bytes) is then most of what the editor reads; a bigger chunk
# gains little and keeps its own frame.
MERGE_TEXT_MAX: Final = 256


class ChunkMerger:
    """The chunk frame prefixes (with their suffix) whose frames may be merged.

    Frames are merged only once the writer has taken them: a queued frame
    can still be taken back one by one (`acp_bridge.transport.outbox.Outbox.retract`).
    """

    __slots__ = ("_prefixes", "_suffixes")

    def __init__(self) -> None:
        self._suffixes: dict[bytes, bytes] = {}
        self._prefixes: tuple[bytes, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self._prefixes)

    def add(self, prefixes: tuple[bytes, ...], suffix: bytes) -> None:
        for prefix in prefixes:
            self._suffixes[prefix] = suffix
        self._prefixes = tuple(self._suffixes)

    def remove(self, prefixes: tuple[bytes, ...]) -> None:
        for prefix in prefixes:
            self._suffixes.pop(prefix, None)
        self._prefixes = tuple(self._suffixes)

    def merge(self, frames: list[bytes]) -> list[bytes]:
        """``frames``, merged if they are more than `MERGE_ABOVE` bytes."""
        if sum(map(len, frames)) <= MERGE_ABOVE:
            return frames
        return merge_chunk_frames(frames, self._suffixes, self._prefixes)


def merge_chunk_frames(
    frames: list[bytes], suffixes: dict[bytes, bytes], prefixes: tuple[bytes, ...]
) -> list[bytes]:
    """``frames`` with each run of consecutive chunk frames of one prefix merged.

    A chunk frame is ``prefix + '"' + body + '"' + suffix`` (an orjson string
    between them); a run becomes ``prefix + '"' + bodies + '"' + suffix``.
    JSON escapes never span two strings, so the merged string decodes to the
    texts joined.  Any other frame, or one whose text is over
    `MERGE_TEXT_MAX` bytes, keeps its place.
    """
    out: list[bytes] = []
    run: list[bytes] = []
    run_prefix = b""
    tail = b""

    def close_run() -> None:
        if len(run) == 1:
            out.append(run[0])
        elif run:
            start = len(run_prefix) + 1
            out.append(
                run[0][: -len(tail)]
                + b"".join(frame[start : -len(tail)] for frame in run[1:])
                + tail
            )
        run.clear()

    for frame in frames:
        if (
            run
            and len(frame) - len(run_prefix) - len(tail) <= MERGE_TEXT_MAX
            and frame.startswith(run_prefix)
            and frame.endswith(tail)
            and frame[len(run_prefix) : len(run_prefix) + 1] == b'"'
        ):
            run.append(frame)
            continue
        close_run()
        if frame.startswith(prefixes):
            prefix = next(p for p in prefixes if frame.startswith(p))
            suffix = suffixes[prefix]
            if (
                frame.endswith(b'"' + suffix)
                and frame[len(prefix) : len(prefix) + 1] == b'"'
                and len(frame) - len(prefix) - len(suffix) - 1 <= MERGE_TEXT_MAX
            ):
                run_prefix, tail = prefix, b'"' + suffix
                run.append(frame)
                continue
        out.append(frame)
    close_run()
    return out
