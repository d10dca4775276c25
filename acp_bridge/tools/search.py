"""Built-in search tools over the session's directories: ``find_files`` and ``search_text``.

ACP has no editor method for searching, so these read the local file system,
only under the session's ``cwd`` and additional directories, or a directory
the user allowed for the call (hidden directories such as ``.git`` and
``node_modules`` are skipped).  The walk is confined (`acp_bridge.tools.walk`):
a file whose real path leaves those directories, or leads into a system
directory, is skipped, and so is a FIFO, socket or device; the result says
what was skipped.

``search_text`` matches with RE2, whose time is linear in the text searched
whatever the pattern (a backtracking engine can spin for hours on
``(a+)+$`` and never let go of the interpreter).  Patterns are matched within
one line: ``^`` and ``$`` are the line's ends and nothing matches a newline.
RE2 has no backreferences, lookaround or atomic groups; such a pattern gets
an error that names what RE2 lacks.  A search runs in a worker thread that
looks at a stop flag between files and between blocks of a file: a Stop, the
tool timeout or the bridge's exit set it, so no search outlives its call.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import threading
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, Final, TypeVar

import anyio

from . import localfs
from .base import LazyArgs, Tool, ToolContext, ToolError, ToolOutput
from .paths import truncate
from .walk import Walk

if TYPE_CHECKING:
    from .arguments import FindArgs, SearchArgs

MAX_MATCHES = 200


# Where a call's walk may go: the session's directories and the real paths the
# user allowed for the call (resolved into `localfs.Bounds` in the worker thread).
Scope = tuple[list[str], tuple[str, ...]]


def _scope(ctx: ToolContext) -> Scope:
    return list(ctx.roots), ctx.allowed


# The arguments of a search: each names in ``path`` the directory (or file) to search.
S = TypeVar("S", "FindArgs", "SearchArgs")


class _SearchTool(Tool[S]):
    """A read-only search of ``path`` or, by default, of all the session's directories
    (which are no locations for the editor to follow)."""

    kind = "search"
    read_only = True

    def paths(self, args: S, ctx: ToolContext) -> list[str]:
        return [ctx.resolve(args.path)] if args.path else list(ctx.roots)

    def locations(self, args: S, ctx: ToolContext) -> list[dict[str, Any]]:
        return []


class FindFiles(_SearchTool["FindArgs"]):
    name = "find_files"
    description = "Find files by name (a glob pattern) in the session's directories."
    args_model = LazyArgs["FindArgs"]("FindArgs")

    def title(self, args: FindArgs) -> str:
        return f"Find {args.pattern}"

    async def run(self, args: FindArgs, ctx: ToolContext) -> ToolOutput:
        roots = self.paths(args, ctx)
        found, notes = await _in_thread(_find, _scope(ctx), roots, args.pattern)
        return _listing(found, "files", ctx, notes)


class _Stopped(Exception):
    """The call was stopped (a Stop, its timeout, the bridge's exit): the search gives up."""


Found = tuple[list[str], list[str]]


async def _in_thread(search: Callable[..., Found], *args: Any) -> Found:
    """``search(*args, stop)`` in a worker thread.  However the call ends, the
    ``stop`` flag is set, and the search, which looks at it often, returns
    soon after: no thread of a stopped call keeps running."""
    stop = threading.Event()
    try:
        call = functools.partial(search, *args, stop)
        return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
    finally:
        stop.set()


def _find(scope: Scope, roots: list[str], pattern: str, stop: threading.Event) -> Found:
    walk = Walk(localfs.Bounds.of(*scope))
    out: list[str] = []
    for root in roots:
        for path, _ in walk.files(root):
            if stop.is_set():
                raise _Stopped
            rel = os.path.relpath(path, root)
            if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(os.path.basename(path), pattern):
                out.append(path)
                if len(out) > MAX_MATCHES:
                    return out, walk.notes()
    return out, walk.notes()


class SearchText(_SearchTool["SearchArgs"]):
    name = "search_text"
    description = "Search text files in the session's directories for a regular expression."
    args_model = LazyArgs["SearchArgs"]("SearchArgs")

    def title(self, args: SearchArgs) -> str:
        return f"Search for {args.pattern!r}"

    async def run(self, args: SearchArgs, ctx: ToolContext) -> ToolOutput:
        regex = compile_pattern(args.pattern)
        roots = self.paths(args, ctx)
        found, notes = await _in_thread(_search, _scope(ctx), roots, regex, args.glob)
        return _listing(found, "matching lines", ctx, notes)


def _search(
    scope: Scope, roots: list[str], regex: Any, glob: str | None, stop: threading.Event
) -> Found:
    walk = Walk(localfs.Bounds.of(*scope))
    out: list[str] = []
    for root in roots:
        for path, real in walk.files(root):
            if stop.is_set():
                raise _Stopped
            if glob and not fnmatch.fnmatch(os.path.basename(path), glob):
                continue
            fd = walk.open(path, real)
            if fd is None:
                continue
            try:
                with open(fd, "rb") as f:
                    if _match_lines(f, path, regex, out, stop):
                        return out, walk.notes()
            except (OSError, UnicodeDecodeError):
                continue  # binary or unreadable: not a text match
    return out, walk.notes()


# -- matching ---------------------------------------------------------------------


@functools.cache
def _engine() -> tuple[Any, Any, Any]:
    """RE2, loaded with the first pattern (not at start-up), and its options:
    errors are ours to report (not RE2's to print on stderr), and no match
    crosses a line's end."""
    import re2

    check = re2.Options()
    check.log_errors = False
    lines = re2.Options()
    lines.log_errors = False
    lines.never_nl = True
    return re2, check, lines


# A file is searched a block at a time (cut at a line's end), and the stop
# flag is looked at between blocks.
_BLOCK: Final = 1 << 20

# What RE2 lacks, recognized in its error message, and how to do without it.
_UNSUPPORTED: Final = (
    (
        re.compile(r"escape sequence: \\[1-9k]|perl operator: \(\?P(?!<)"),
        r"backreferences (\1, (?P=name))",
    ),
    (
        re.compile(r"perl operator: \(\?<?[=!]"),
        "lookahead or lookbehind ((?=...), (?!...), (?<=...), (?<!...))",
    ),
    (
        re.compile(r"perl operator: \(\?>|repetition operator: [*+?}]\+"),
        "atomic groups or possessive quantifiers ((?>...), a++); RE2 never backtracks, "
        "so the plain group or quantifier does the same",
    ),
    (re.compile(r"perl operator: \(\?\("), "conditionals ((?(1)...|...))"),
    (re.compile(r"escape sequence: \\Z"), r"\Z (use $ for the end of the line)"),
    (
        re.compile(r"perl operator: \(\?[aLux#]"),
        "the flags a, L, u, x or (?#...) comments (RE2 has i, m, s and U)",
    ),
    (
        re.compile(r"escape sequence: \\[uUN]"),
        r"\u, \U or \N escapes (write \x{263A} for a code point)",
    ),
)


def compile_pattern(pattern: str) -> Any:
    """``pattern`` compiled for `_match_lines`; a ToolError says what is wrong
    with it, and names the syntax RE2 does not support."""
    re2, check, lines = _engine()
    try:
        # Checked alone first, so that an error quotes the pattern as given.
        re2.compile(pattern, options=check)
        return re2.compile("(?m)" + pattern, options=lines)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else ""
        reason = detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
        for shape, what in _UNSUPPORTED:
            if shape.search(reason):
                raise ToolError(
                    f"the pattern uses {what}, which RE2, the engine of search_text, does not "
                    f"support ({reason}); rewrite the pattern without it"
                ) from None
        raise ToolError(f"not a valid regular expression (RE2 syntax): {reason}") from None


def _match_lines(
    f: IO[bytes],
    path: str,
    regex: Any,
    out: list[str],
    stop: threading.Event,
    block_size: int = _BLOCK,
) -> bool:
    """Append ``path:LINE: text`` to ``out`` for each line of ``f`` that
    ``regex`` matches; True once ``out`` holds more than MAX_MATCHES.  Raises
    UnicodeDecodeError for a file that is not UTF-8 (what matched before
    stays), and `_Stopped` when ``stop`` is set.

    The file is read a block at a time, cut at a line's end.  A line longer
    than a block is searched in pieces of about a block (a file of one endless
    line takes no endless memory); such a line is reported once, but a match
    across two pieces is missed and ``^`` also matches where a piece starts."""
    number = 1  # the number of the line that starts at ``pos`` (or goes on there)
    carry = b""  # the last character of a piece, given to the next one
    reported = False  # the line going on at a block's start was already reported
    while True:
        if stop.is_set():
            raise _Stopped
        block = carry + f.read(block_size)
        if not block:
            return False
        carry = b""
        whole = block.endswith(b"\n")
        if not whole:
            rest = f.readline(block_size)
            block += rest
            # The line ends in this block, or the file does.
            whole = rest.endswith(b"\n") or len(rest) < block_size
            if not whole:
                # Cut after the last line end ("\r" ones included), else in the line.
                cut = max(block.rfind(b"\n"), block.rfind(b"\r", 0, len(block) - 1)) + 1
                whole = cut > 0
                cut = cut if whole else _piece_end(block)
                block, carry = block[:cut], block[cut:]
        block.decode("utf-8")  # a text file, or skipped as before
        if b"\r" in block:
            # Line ends as text mode reads them ("\r\n" and "\r" are "\n").
            block = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        pos = 0
        if reported:
            # Skip the rest of the line reported from the previous piece.
            newline = block.find(b"\n")
            reported = newline < 0
            if not reported:
                pos = newline + 1
                number += 1
            else:
                pos = len(block)
        while pos < len(block):
            match = regex.search(block, pos)
            if match is None:
                break
            at = match.start()
            if at == len(block) and block.endswith(b"\n"):
                break  # an empty match after the last line's end: no line there
            start = block.rfind(b"\n", 0, at) + 1 if at > pos else pos
            end = block.find(b"\n", at)
            end = len(block) if end < 0 else end
            number += block.count(b"\n", pos, start)
            line = block[start:end].decode("utf-8", errors="replace")
            out.append(f"{path}:{number}: {line.rstrip()[:300]}")
            if len(out) > MAX_MATCHES:
                return True
            if end == len(block):
                reported = not whole  # the line goes on in the next piece
                pos = end
                break
            number += 1
            pos = end + 1
        number += block.count(b"\n", pos)


def _piece_end(block: bytes) -> int:
    """Where to cut a piece of a long line: before its last character (which
    may be incomplete) and before a "\r" that a "\n" may follow."""
    cut = len(block) - 1
    while cut > len(block) - 4 and 0x80 <= block[cut] < 0xC0:
        cut -= 1
    if cut > 0 and block[cut - 1 : cut] == b"\r":
        cut -= 1
    return cut if cut > 0 else len(block)


def _listing(found: list[str], what: str, ctx: ToolContext, notes: list[str]) -> ToolOutput:
    skipped = "".join("\n" + note for note in notes)
    if not found:
        return ToolOutput(f"No {what} found.{skipped}", raw_output={"count": 0})
    more = len(found) > MAX_MATCHES
    shown = found[:MAX_MATCHES]
    text = "\n".join(shown)
    if more:
        text += f"\n[more than {MAX_MATCHES} {what}; showing the first {MAX_MATCHES}: narrow it]"
    return ToolOutput(
        truncate(text, ctx.max_output) + skipped, raw_output={"count": len(shown), "more": more}
    )
