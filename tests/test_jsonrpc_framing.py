"""The sans-IO NDJSON framer: frames do not depend on how the bytes were split."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.jsonrpc.errors import INVALID_REQUEST, RpcError
from acp_bridge.jsonrpc.framing import DEFAULT_MAX_FRAME, FrameTooLarge, LineFramer
from acp_bridge.jsonrpc.messages import Request, parse_frame

Frame = bytes | FrameTooLarge


def feed_whole(data: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> list[Frame]:
    return LineFramer(max_frame).feed(data)


def feed_bytewise(data: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> list[Frame]:
    framer = LineFramer(max_frame)
    out: list[Frame] = []
    for i in range(len(data)):
        out.extend(framer.feed(data[i : i + 1]))
    return out


def feed_split(data: bytes, cuts: list[int], max_frame: int = DEFAULT_MAX_FRAME) -> list[Frame]:
    framer = LineFramer(max_frame)
    out: list[Frame] = []
    bounds = [0, *sorted(set(cuts)), len(data)]
    for start, end in pairwise(bounds):
        out.extend(framer.feed(data[start:end]))
    return out


def assert_split_invariant(data: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> list[Frame]:
    """h11 style: the whole buffer and one byte at a time give the same frames."""
    whole = feed_whole(data, max_frame)
    bytewise = feed_bytewise(data, max_frame)
    assert bytewise == whole, f"byte-by-byte framing differs for {data!r}"
    return whole


def frame(obj: object) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


REQUEST = frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
NOTE = frame({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}})


# -- basics -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", []),
        (REQUEST, []),  # no newline yet: nothing is complete
        (REQUEST + b"\n", [REQUEST]),
        (REQUEST + b"\n" + NOTE + b"\n", [REQUEST, NOTE]),
        (REQUEST + b"\n" + NOTE, [REQUEST]),
        (b'{"a":1}\n{"b":2}\n{"c":3}\n', [b'{"a":1}', b'{"b":2}', b'{"c":3}']),
    ],
)
def test_frames_whole_and_bytewise(data: bytes, expected: list[bytes]) -> None:
    assert assert_split_invariant(data) == expected


def test_unfinished_frame_is_pending() -> None:
    framer = LineFramer()
    assert framer.feed(REQUEST[:10]) == []
    assert framer.pending() == 10
    assert framer.feed(REQUEST[10:]) == []
    assert framer.pending() == len(REQUEST)
    assert framer.feed(b"\n") == [REQUEST]
    assert framer.pending() == 0


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (REQUEST + b"\r\n", [REQUEST]),
        (REQUEST + b"\r\n" + NOTE + b"\n", [REQUEST, NOTE]),
        (REQUEST + b"\r\n" + NOTE + b"\r\n", [REQUEST, NOTE]),
        # Only one trailing CR is a line ending; an inner CR is the frame's.
        (b'{"a":\r1}\r\n', [b'{"a":\r1}']),
    ],
)
def test_crlf_tolerated(data: bytes, expected: list[bytes]) -> None:
    assert assert_split_invariant(data) == expected


def test_crlf_split_between_cr_and_lf() -> None:
    framer = LineFramer()
    assert framer.feed(REQUEST + b"\r") == []
    assert framer.feed(b"\n") == [REQUEST]


@pytest.mark.parametrize(
    "data",
    [
        b"\n",
        b"\n\n\n",
        b"\r\n",
        b"   \n",
        b" \t \r\n",
        b"\n\r\n  \n",
    ],
)
def test_blank_lines_skipped(data: bytes) -> None:
    assert assert_split_invariant(data) == []
    assert assert_split_invariant(data + REQUEST + b"\n" + data + NOTE + b"\n" + data) == [
        REQUEST,
        NOTE,
    ]


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"])
def test_unicode_line_separators_inside_strings_do_not_split(separator: str) -> None:
    text = f"before{separator}after"
    raw = frame({"jsonrpc": "2.0", "id": 7, "method": "x", "params": {"text": text}})
    assert separator.encode() in raw  # raw, not escaped
    frames = assert_split_invariant(raw + b"\n" + NOTE + b"\n")
    assert frames == [raw, NOTE]
    message = parse_frame(frames[0])
    assert isinstance(message, Request)
    assert message.params == {"text": text}


# -- the frame limit ----------------------------------------------------------------


def test_default_limit_is_64_mib() -> None:
    assert DEFAULT_MAX_FRAME == 64 * 1024 * 1024
    assert LineFramer().max_frame == DEFAULT_MAX_FRAME


@pytest.mark.parametrize("limit", [8, 16, 40])
def test_frame_at_the_limit_is_accepted(limit: int) -> None:
    data = b"x" * limit
    assert assert_split_invariant(data + b"\n", limit) == [data]


@pytest.mark.parametrize("limit", [8, 16, 40])
def test_frame_over_the_limit_is_reported_and_stream_resynchronises(limit: int) -> None:
    big = b"y" * (limit * 3 + 1)
    ok = b"ok"
    data = ok + b"\n" + big + b"\n" + ok + b"\n" + big + b"\r\n" + ok + b"\n"
    frames = assert_split_invariant(data, limit)
    assert frames == [
        ok,
        FrameTooLarge(len(big), limit),
        ok,
        FrameTooLarge(len(big) + 1, limit),
        ok,
    ]


def test_over_limit_frame_without_newline_is_discarded_not_buffered() -> None:
    limit = 16
    framer = LineFramer(limit)
    assert framer.feed(b"z" * 10) == []
    assert framer.feed(b"z" * 10) == []  # now over the limit: discarding
    assert framer.pending() == 0, "an over-limit frame must not stay in memory"
    for _ in range(100):
        assert framer.feed(b"z" * 1000) == []
        assert framer.pending() == 0
    assert framer.feed(b"zz\nabc\n") == [FrameTooLarge(20 + 100_000 + 2, limit), b"abc"]


def test_over_limit_then_valid_frame_in_one_chunk() -> None:
    limit = 8
    assert LineFramer(limit).feed(b"a" * 9 + b"\n" + REQUEST[:8] + b"\n") == [
        FrameTooLarge(9, limit),
        REQUEST[:8],
    ]


def test_over_limit_frame_parses_to_invalid_request() -> None:
    (too_large,) = LineFramer(4).feed(b"123456\n")
    assert isinstance(too_large, FrameTooLarge)
    error = parse_frame(too_large)
    assert isinstance(error, RpcError)
    assert error.code == INVALID_REQUEST
    assert error.id is None


# -- property: random split points ------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.text(
        alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]),
        max_size=20,
    )
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=10,
)
frames_strategy = st.lists(
    json_values.map(lambda v: json.dumps(v, ensure_ascii=False).encode()), max_size=12
)
line_endings = st.sampled_from([b"\n", b"\r\n"])
blank_lines = st.sampled_from([b"", b"", b"\n", b"  \n", b"\r\n"])


@settings(max_examples=200, deadline=None)
@given(
    frames=frames_strategy,
    endings=st.lists(line_endings, min_size=12, max_size=12),
    blanks=st.lists(blank_lines, min_size=12, max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
)
@pytest.mark.slow
def test_random_split_points_give_the_same_frames(
    frames: list[bytes], endings: list[bytes], blanks: list[bytes], cuts: list[int]
) -> None:
    data = b"".join(blank + f + end for f, end, blank in zip(frames, endings, blanks, strict=False))
    cuts = [c % (len(data) + 1) for c in cuts]
    expected = list(frames)  # json.dumps never yields a blank frame
    assert feed_whole(data) == expected
    assert feed_split(data, cuts) == expected
    assert feed_bytewise(data) == expected


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=10),
    limit=st.integers(min_value=1, max_value=32),
    cuts=st.lists(st.integers(min_value=0, max_value=1000), max_size=20),
)
def test_random_bytes_and_small_limit_split_invariant(
    lines: list[bytes], limit: int, cuts: list[int]
) -> None:
    data = b"".join(line + b"\n" for line in lines)
    cuts = [c % (len(data) + 1) for c in cuts]
    whole = feed_whole(data, limit)
    assert feed_split(data, cuts, limit) == whole
    assert feed_bytewise(data, limit) == whole
    # Every line is accounted for: a frame, a skipped blank, or a FrameTooLarge.
    expected: list[Frame] = []
    for line in lines:
        if len(line) > limit:
            expected.append(FrameTooLarge(len(line), limit))
            continue
        body = line[:-1] if line.endswith(b"\r") else line
        if body.strip():
            expected.append(body)
    assert whole == expected
