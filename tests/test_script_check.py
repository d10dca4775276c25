"""The quick check of a script (no pydantic) against the script's models.

Start-up passes a script by `acp_bridge.providers.script_check.passes` and
builds its models later, so the check must never pass a script the models
refuse; and it should pass every script they accept (else start-up is slow
for no reason), except where the two JSON readers could differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.providers import script_check
from acp_bridge.providers.base import ModelRequest, ProviderError
from acp_bridge.providers.script_check import (
    PreparedScript,
    ScriptError,
    passes,
    prepare_data,
    prepare_file,
)
from acp_bridge.providers.script_format import EVENT_KINDS, parse_script
from acp_bridge.providers.scripted import ScriptedProvider

pytestmark = pytest.mark.anyio

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.json"))


def _models_accept(data: Any) -> bool:
    try:
        parse_script(data, "test")
    except ScriptError:
        return False
    return True


def _passes(data: Any) -> bool:
    return passes(json.dumps(data), data)


# -- scripts near the edge of valid -------------------------------------------------

_numbers = st.one_of(
    st.integers(-2, 3), st.floats(-1, 3, allow_nan=False), st.booleans(), st.none(), st.just("1")
)
_texts = st.one_of(st.sampled_from(["", "a", "héllo"]), st.integers(0, 1), st.none())
_facts = st.sampled_from(["message_count", "tool_names", "last_user_text", "nope"])


def _with(kind: str, value: st.SearchStrategy[Any], **options: st.SearchStrategy[Any]) -> Any:
    """An event of ``kind``, with any subset of ``options``."""
    return st.builds(
        lambda v, opts: {kind: v, **opts},
        value,
        st.fixed_dictionaries({}, optional=options),
    )


_options = st.fixed_dictionaries(
    {},
    optional={
        "seconds": _numbers,
        "ignore_cancel": st.one_of(st.booleans(), st.none()),
        "text": _texts,
        "delay_ms": _numbers,
        "message": _texts,
        "kind": _texts,
        "status": _numbers,
        "retryable": st.one_of(st.booleans(), st.integers(0, 1)),
        "request_id": _texts,
        "id": _texts,
        "name": _texts,
        "arguments": st.one_of(st.just({"a": 1}), st.just("{bad"), st.just([1]), st.none()),
        "chunks": _numbers,
        "input_tokens": _numbers,
        "output_tokens": _numbers,
        "context_window": _numbers,
        "bogus": st.just(1),
    },
)
_events = st.one_of(
    _with("text", _texts, chunk_size=_numbers, chunk_delay_ms=_numbers),
    _with("reasoning", _texts, chunk_size=_numbers),
    _with("delay_ms", _numbers),
    _with("stall_ms", _numbers),
    _with("tool_call", _options),
    _with("tool_call_start", _options),
    _with("tool_args", _texts),
    _with("usage", _options),
    _with("hang", st.one_of(st.booleans(), _options, st.integers(0, 1))),
    _with("endless", _options),
    _with("error", _options),
    _with("report", st.lists(_facts, max_size=3)),
    st.just({"text": "a", "reasoning": "b"}),
    st.just({"chunk_size": 2}),
    st.just("text"),
)
_responses = st.fixed_dictionaries(
    {"events": st.lists(_events, max_size=4)},
    optional={"finish": st.sampled_from(["end_turn", "tool_use", "stop", None]), "x": st.none()},
)
_scripts = st.fixed_dictionaries(
    {"responses": st.lists(_responses, max_size=3)},
    optional={
        "when_exhausted": st.sampled_from(["error", "repeat_last", "repeat_all", "again", None]),
        "chunk_delay_ms": _numbers,
        "compaction": st.one_of(_responses, st.none()),
        "description": _texts,
        "extra": st.just(True),
    },
)


@settings(max_examples=1500)
@given(_scripts)
def test_the_check_passes_exactly_what_the_models_accept(data: dict[str, Any]) -> None:
    assert _passes(data) == _models_accept(data), data


def test_the_generated_scripts_are_both_valid_and_not() -> None:
    """The strategy reaches both verdicts (else the property says little)."""
    valid = {"responses": [{"events": [{"hang": {"seconds": 1, "ignore_cancel": True}}]}]}
    invalid = {"responses": [{"events": [{"hang": {"ignore_cancel": True}}]}]}
    assert _passes(valid)
    assert _models_accept(valid)
    assert not _passes(invalid)
    assert not _models_accept(invalid)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_passes_the_check(path: Path) -> None:
    text = path.read_text()
    assert passes(text, json.loads(text))


def test_the_check_knows_the_kinds_of_the_models() -> None:
    assert script_check._event_kinds(script_check._load_schema()) == frozenset(EVENT_KINDS)


def test_escaped_surrogates_are_left_to_the_models() -> None:
    text = '{"responses": [{"events": [{"text": "\\ud83d\\ude00"}]}]}'
    assert not passes(text, json.loads(text))
    script = prepare_data(json.loads(text))
    assert script.built  # validated at once, by the models
    assert script.get().responses[0].events[0].text == "😀"  # type: ignore[union-attr]


def test_a_script_the_check_passes_is_built_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"responses": [{"events": [{"text": "hi"}]}]}))
    script = prepare_file(path)
    assert not script.built
    assert script.get() is script.get()
    assert script.get().source == str(path)


async def test_models_that_refuse_a_passed_script_fail_its_requests() -> None:
    """Should the check ever pass what the models refuse, each model request
    fails with the models' message (a provider error, not a crash)."""
    data = {"responses": [{"events": [{"tetx": "hi"}]}]}
    script = PreparedScript(json.dumps(data), data, "odd.json")  # as if it had passed
    provider = ScriptedProvider(script)
    for _ in range(2):
        async with provider.stream(ModelRequest(messages=[], tools=[])) as stream:
            with pytest.raises(ProviderError, match=r"odd\.json: responses\[0\]\.events\[0\]"):
                await stream.__anext__()
