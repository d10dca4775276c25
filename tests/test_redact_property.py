"""The redactor, for any secret and any text around it: a secret's value, its
parts and (at a cut) its start never come out (`acp_bridge.redact`)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.redact import MIN_PART, MIN_PREFIX, REDACTED, SECRETS, Redactor
from acp_bridge.tools.paths import truncate

# Keys are drawn from the characters of real keys (base64 and URL-safe ones);
# the text around them from characters no key has, so that whatever of a key's
# characters comes out came from the key.
KEY_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"
keys = st.text(alphabet=KEY_CHARS, min_size=8, max_size=60).filter(
    lambda k: any(c.isalnum() for c in k)
)
filler = st.text(alphabet=" .,:;!?()<>\n\täöü漢字", max_size=80)
_RUNS = re.compile(f"[{re.escape(KEY_CHARS)}]+")


def _key_runs(text: str) -> list[str]:
    """The runs of key characters in ``text`` outside the ``[redacted]`` marks
    (whole or cut: neither keys nor the text around them have a ``[``)."""
    return _RUNS.findall(re.sub(r"\[[a-z]*\]?", " ", text))


def _parts(key: str) -> list[str]:
    return [p for p in re.split(r"[+/=]+", key) if len(p) >= MIN_PART]


@settings(max_examples=400, deadline=None)
@given(keys, filler, filler, st.integers(0, 3), st.data())
def test_a_key_anywhere_never_comes_out_cut_or_not(
    key: str, before: str, after: str, copies: int, data: st.DataObject
) -> None:
    redactor = Redactor()
    redactor.add([key], min_length=4)
    text = before + (key + after) * (copies + 1)
    limit = data.draw(st.integers(0, len(text) + 5))
    for out in (redactor.text(text), redactor.cut(text, limit)):
        assert key not in out
        for run in _key_runs(out):
            # Nothing of the key longer than a start too short to tell.
            assert len(run) < MIN_PREFIX, (run, out)


@settings(max_examples=300, deadline=None)
@given(keys, filler, filler, st.data())
def test_a_part_echoed_alone_is_redacted(
    key: str, before: str, after: str, data: st.DataObject
) -> None:
    parts = _parts(key)
    if not parts:
        return
    part = data.draw(st.sampled_from(parts))
    redactor = Redactor()
    redactor.add([key], min_length=4)
    out = redactor.text(before + part + after)
    assert part not in out
    assert REDACTED in out


@settings(max_examples=300, deadline=None)
@given(keys, filler, filler.filter(bool), st.data())
def test_a_cut_text_does_not_end_with_a_keys_start(
    key: str, before: str, after: str, data: st.DataObject
) -> None:
    """A text that already holds only the start of a key (cut by its source),
    cut right after it: that start is redacted."""
    size = data.draw(st.integers(MIN_PREFIX, len(key) - 1))
    text = before + key[:size] + after
    redactor = Redactor()
    redactor.add([key], min_length=4)
    out = redactor.cut(text, len(before) + size)
    assert key[:size] not in out


def test_a_key_across_the_tool_output_limit_leaves_nothing_of_itself() -> None:
    key = "s4hostileSTRADDLE0123456789abcdefXYZ"
    SECRETS.add([key])
    limit = 50_000
    text = "x" * (limit - 35) + key + "y" * 100
    out = truncate(text, limit)
    assert "s4hostile" not in out
    assert "[output truncated" in out
    assert out.startswith("x" * (limit - 35))


def test_short_parts_and_short_values_are_left() -> None:
    redactor = Redactor()
    redactor.add(["ab+cd/efghijklmnop"], min_length=4)
    redactor.add(["short"])  # under the minimum for a variable's value
    assert redactor.text("ab cd short efghijklmnop") == f"ab cd short {REDACTED}"
