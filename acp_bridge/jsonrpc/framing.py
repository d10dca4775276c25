"""Newline-delimited JSON framing, free of I/O.

Bytes go in with `LineFramer.feed`; complete frames come out.  The framer
splits on the byte ``\\n`` only (never on Unicode line separators such as
U+2028, which may legally appear raw inside JSON strings), drops a trailing
``\\r`` and skips blank lines.

Frame limit: ACP carries whole files as embedded resources, so frames can be
large; we accept up to 64 MiB (`DEFAULT_MAX_FRAME`).  That is far above any
real editor message and still bounds the memory one bad peer can pin.  A
longer line is discarded up to its newline and reported as `FrameTooLarge`,
so the stream resynchronises on the next frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

DEFAULT_MAX_FRAME: Final = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class FrameTooLarge:
    size: int
    limit: int


class LineFramer:
    __slots__ = ("_buf", "_discarded", "_discarding", "max_frame")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()
        self._discarding = False
        self._discarded = 0

    def feed(self, data: bytes) -> list[bytes | FrameTooLarge]:
        """Add bytes; return the frames completed by them, in order."""
        out: list[bytes | FrameTooLarge] = []
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                break
            piece = data[start:nl]
            start = nl + 1
            if self._discarding:
                out.append(FrameTooLarge(self._discarded + len(piece), self.max_frame))
                self._discarding = False
                self._discarded = 0
                continue
            if self._buf:
                self._buf += piece
                frame = bytes(self._buf)
                self._buf.clear()
            else:
                frame = piece
            if len(frame) > self.max_frame:
                out.append(FrameTooLarge(len(frame), self.max_frame))
                continue
            if frame.endswith(b"\r"):
                frame = frame[:-1]
            if frame.strip():
                out.append(frame)
        rest = data[start:]
        if rest:
            if self._discarding:
                self._discarded += len(rest)
            else:
                self._buf += rest
                if len(self._buf) > self.max_frame:
                    self._discarding = True
                    self._discarded = len(self._buf)
                    self._buf.clear()
        return out

    @property
    def discarding(self) -> bool:
        """Whether the unfinished frame went over the limit (the rest of it is
        dropped, up to its newline)."""
        return self._discarding

    def pending(self) -> int:
        """Bytes of an unfinished frame held in the buffer."""
        return len(self._buf)
