"""search_text's matching (RE2 over blocks of a file) against the line-by-line meaning.

The reference is what the tool always meant: each line of the file read as
text (universal newlines), without its line end, searched with Python's
``re``.  For every file whose lines fit in a block the two agree exactly,
whatever the block size (so cutting blocks, carrying characters across them
and counting lines is right); for longer lines, searched in pieces, no line
is reported twice, none that does not match, and line numbers stay right.
"""

from __future__ import annotations

import io
import re
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.tools.base import ToolError
from acp_bridge.tools.search import MAX_MATCHES, _match_lines, _Stopped, compile_pattern

# Patterns both engines read the same way (no \b, \w or \d: ASCII-only in RE2).
PATTERNS = ["a", "^a", "a$", "^$", "^", "$", "a.*b", "[^a]+", r"\s", "b+$", "x*", "(?i)A",
            "^.{0,2}$", "a|^b", " $", "é", "é+b", "€|😀"]  # fmt: skip
# Patterns with no anchor: a piece of a long line can only match where the line does.
UNANCHORED = ["a", "é", "éb", "[^a]+", "b b", "€"]
PIECES = ["a", "b", " ", "\n", "\r", "\r\n", "é", "€", "😀"]
texts = st.lists(st.sampled_from(PIECES), max_size=60).map("".join)


def reference(text: str, pattern: str) -> list[tuple[int, str]]:
    regex = re.compile(pattern)
    return [
        (number, line.rstrip()[:300])
        for number, line in enumerate(io.StringIO(text, newline=None), 1)
        if regex.search(line.removesuffix("\n"))
    ]


def matched(data: bytes, pattern: str, block_size: int) -> list[tuple[int, str]]:
    out: list[str] = []
    _match_lines(
        io.BytesIO(data), "f", compile_pattern(pattern), out, threading.Event(), block_size
    )
    return [(int(n), text) for n, text in (line[2:].split(": ", 1) for line in out)]


def longest_line(data: bytes) -> int:
    return max(
        len(line) for line in data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    )


@settings(max_examples=1500, deadline=None)
@given(text=texts, pattern=st.sampled_from(PATTERNS), block_size=st.sampled_from([4, 5, 8, 64]))
@pytest.mark.slow
def test_lines_that_fit_a_block_match_as_line_by_line(
    text: str, pattern: str, block_size: int
) -> None:
    data = text.encode()
    if longest_line(data) + 2 > block_size:
        return  # the next test's case
    assert matched(data, pattern, block_size) == reference(text, pattern)


@settings(max_examples=1500, deadline=None)
@given(text=texts, pattern=st.sampled_from(UNANCHORED), block_size=st.sampled_from([4, 5, 8]))
@pytest.mark.slow
def test_long_lines_searched_in_pieces_are_reported_once_and_truly(
    text: str, pattern: str, block_size: int
) -> None:
    numbers = [n for n, _ in matched(text.encode(), pattern, block_size)]
    assert numbers == sorted(set(numbers))
    assert set(numbers) <= {n for n, _ in reference(text, pattern)}


def test_a_file_that_is_not_utf8_is_refused_and_earlier_matches_stay() -> None:
    out: list[str] = []
    data = b"a first\n" + b"x" * 100 + b"\n\xff\xfe a\n"
    with pytest.raises(UnicodeDecodeError):
        _match_lines(io.BytesIO(data), "f", compile_pattern("a"), out, threading.Event(), 16)
    assert out == ["f:1: a first"]


def test_a_set_stop_flag_stops_the_search() -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(_Stopped):
        _match_lines(io.BytesIO(b"a\n"), "f", compile_pattern("a"), [], stop)


def test_matching_stops_after_max_matches() -> None:
    out: list[str] = []
    data = b"a\n" * (MAX_MATCHES * 2)
    assert _match_lines(io.BytesIO(data), "f", compile_pattern("a"), out, threading.Event())
    assert len(out) == MAX_MATCHES + 1


def test_an_error_quotes_the_pattern_as_given() -> None:
    with pytest.raises(ToolError) as caught:
        compile_pattern("a)|(b")
    assert str(caught.value) == "not a valid regular expression (RE2 syntax): unexpected ): a)|(b"
