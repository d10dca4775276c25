"""The keyless scripted provider and its script format."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_bridge.loop.assembler import StreamAssembler
from acp_bridge.providers.base import (
    BlockEnd,
    Finish,
    ModelRequest,
    Provider,
    ProviderError,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from acp_bridge.providers.script_format import (
    EVENT_MODELS,
    REPORT_FACTS,
    Script,
    ScriptError,
    load_script,
    parse_script,
)
from acp_bridge.providers.script_schema import SCHEMA_PATH, build_script_schema, render
from acp_bridge.providers.script_schema import main as schema_main
from acp_bridge.providers.scripted import ScriptedProvider, _compile

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
REQUEST = ModelRequest(messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}])


def script_schema() -> dict[str, Any]:
    """The committed script JSON Schema (draft 2020-12), generated from the models."""
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def provider(*responses: list[dict[str, Any]], **options: Any) -> ScriptedProvider:
    """A provider for responses given as event lists."""
    data = {"responses": [{"events": events} for events in responses], **options}
    return ScriptedProvider(parse_script(data, "test"))


async def collect(p: ScriptedProvider, request: ModelRequest = REQUEST) -> list[StreamEvent]:
    async with p.stream(request) as events:
        return [event async for event in events]


async def drain(p: ScriptedProvider, into: list[StreamEvent]) -> None:
    """Iterate one stream into ``into``, so the events before an exception are kept."""
    async with p.stream(REQUEST) as events:
        async for event in events:
            into.append(event)


# -- the script file format -------------------------------------------------------


def test_schema_is_valid_draft_2020_12() -> None:
    from jsonschema import Draft202012Validator

    schema = script_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    report = schema["$defs"]["ReportEvent"]["properties"]["report"]["items"]["enum"]
    assert tuple(report) == REPORT_FACTS
    events = schema["$defs"]["ScriptResponse"]["properties"]["events"]["items"]["oneOf"]
    assert [e["$ref"].rsplit("/", 1)[1] for e in events] == [m.__name__ for m in EVENT_MODELS]


def test_the_committed_schema_is_generated_from_the_models() -> None:
    """Edit acp_bridge/providers/script_format.py, then run its generator."""
    assert SCHEMA_PATH.read_text(encoding="utf-8") == render(), (
        "schemas/script.schema.json is stale: run python -m acp_bridge.providers.script_schema"
    )
    assert script_schema() == build_script_schema()


def test_the_generator_checks_and_writes(tmp_path: Path) -> None:
    out = tmp_path / "script.schema.json"
    assert schema_main(["--check", "--out", str(out)]) == 1  # missing
    assert schema_main(["--out", str(out)]) == 0
    assert schema_main(["--check", "--out", str(out)]) == 0
    out.write_text(out.read_text().replace("chunk_size", "chunk_sise"))
    assert schema_main(["--check", "--out", str(out)]) == 1


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.name)
def test_examples_are_valid(path: Path) -> None:
    from jsonschema import Draft202012Validator

    script = load_script(path)
    assert script.responses
    assert script.source == str(path)
    # The generated schema, for editors and other tools, accepts them too.
    Draft202012Validator(script_schema()).validate(json.loads(path.read_text()))


def test_the_named_examples_exist() -> None:
    names = {p.name for p in EXAMPLES.glob("*.json")}
    assert {
        "endless.json",
        "hello.json",
        "story-then-report.json",
        "tool-call.json",
        "provider-error.json",
        "reasoning.json",
    } <= names


def test_defaults() -> None:
    script = parse_script({"responses": [{"events": [{"text": "x"}]}]})
    assert script == Script(
        responses=script.responses, when_exhausted="error", chunk_delay_ms=0, description=None
    )
    assert script.responses[0].finish_reason == "end_turn"


def test_an_option_given_as_null_is_not_given() -> None:
    from jsonschema import Draft202012Validator

    data = {"responses": [{"events": [{"text": "ab", "chunk_size": None}], "finish": None}]}
    assert parse_script(data) == parse_script({"responses": [{"events": [{"text": "ab"}]}]})
    assert Draft202012Validator(script_schema()).is_valid(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "test: 'responses' is a required property"),
        ([], "test: [] is not of type 'object'"),
        (
            {"responses": [{"events": []}, {"events": [{"text": "x"}, {"tetx": "y"}]}]},
            "test: responses[1].events[1]: 'tetx' is not a valid event "
            "(expected one of: text, reasoning, delay_ms, tool_call,",
        ),
        (
            {"responses": [{"events": [{"text": 5}]}]},
            "test: responses[0].events[0].text: 5 is not of type 'string'",
        ),
        (
            {"responses": [{"events": [{"text": "a", "reasoning": "b"}]}]},
            "responses[0].events[0]: an event has exactly one kind, "
            "this one has 2: text, reasoning",
        ),
        (
            {"responses": [{"events": [{"text": "a", "chunk_sise": 2}]}]},
            "responses[0].events[0]: 'chunk_sise' is not an option of a text event "
            "(options: chunk_size, chunk_delay_ms)",
        ),
        (
            {"responses": [{"events": [{"hang": True, "chunk_size": 2}]}]},
            "responses[0].events[0]: 'chunk_size' is not an option of a hang event (no options)",
        ),
        (
            {"responses": [{"events": [{"chunk_size": 2}]}]},
            "responses[0].events[0]: an event needs one of: text,",
        ),
        (
            {"responses": [{"events": ["text"]}]},
            'responses[0].events[0]: "text" is not a valid event (expected an object',
        ),
        (
            {"responses": [{"events": [{"text": "a", "chunk_size": 0}]}]},
            "responses[0].events[0].chunk_size: 0 is less than the minimum of 1",
        ),
        (
            {"responses": [{"events": [{"tool_call": {"id": "c1"}}]}]},
            "responses[0].events[0].tool_call: 'name' is a required property",
        ),
        (
            {"responses": [{"events": [{"hang": {"ignore_cancel": True}}]}]},
            "responses[0].events[0].hang: 'seconds' is a required property",
        ),
        (
            {"responses": [{"events": [{"report": ["message_cont"]}]}]},
            "responses[0].events[0].report[0]: 'message_cont' is not one of",
        ),
        (
            {"responses": [{"events": [], "finish": "stop"}]},
            "responses[0].finish: 'stop' is not one of",
        ),
        (
            {"responses": [], "when_exhausted": "loop"},
            "when_exhausted: 'loop' is not one of",
        ),
        (
            {"responses": [], "when_exhausted": "repeat_last"},
            "test: when_exhausted: 'repeat_last' needs a response",
        ),
        (
            {"responses": [{"events": [{"tool_args": "{}"}]}]},
            "test: responses[0].events[0]: tool_args must follow a tool_call_start",
        ),
        (
            {"responses": [{"events": [{"hang": True}, {"text": "never"}]}]},
            "test: responses[0].events[1]: unreachable: the event before it never ends",
        ),
        (
            {"responses": [{"events": [{"error": {"message": "x"}}, {"text": "never"}]}]},
            "responses[0].events[1]: unreachable",
        ),
        ({"responses": [], "respones": []}, "test: 'respones' is not allowed here"),
        (
            {"responses": [{"events": [{"hang": False}]}]},
            "test: responses[0].events[0].hang: False is not one of True",
        ),
        (
            {"responses": [{"events": [{"delay_ms": True}]}]},
            "responses[0].events[0].delay_ms: True is not of type 'number'",
        ),
        (
            {"responses": [{"events": [{"tool_call": {"id": "c", "name": "t", "arguments": 5}}]}]},
            "responses[0].events[0].tool_call.arguments: 5 is not of type 'object' or 'string'",
        ),
        (
            {"responses": [{"events": [{"report": ["message_count", "message_count"]}]}]},
            "responses[0].events[0].report: ['message_count', 'message_count'] has repeated facts",
        ),
        (
            {"responses": [{"events": [{"endless": {"text": ""}}]}]},
            "responses[0].events[0].endless.text: '' should be non-empty",
        ),
        (
            {"responses": [{"events": [{"tetx": 1}, {"x": 1}]}]},
            "responses[0].events[0]: 'tetx' is not a valid event (expected one of: text, "
            "reasoning, delay_ms, tool_call, tool_call_start, tool_args, usage, hang, endless, "
            "stall_ms, error, report) (and 1 more problem)",
        ),
    ],
)
def test_schema_errors_name_the_source_and_the_json_path(data: Any, message: str) -> None:
    from jsonschema import Draft202012Validator

    with pytest.raises(ScriptError) as info:
        parse_script(data, "test")
    assert message in str(info.value)
    # The generated JSON Schema rejects it too, unless only the models can
    # say why (the order of events, a repeat with nothing to repeat).
    if not any(rule in message for rule in ORDER_RULES):
        assert not Draft202012Validator(script_schema()).is_valid(data)


ORDER_RULES = ("needs a response", "must follow a tool_call_start", "unreachable")


def test_load_script_reports_invalid_json_with_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n  "responses": [\n    {"events": []},,\n  ]\n}\n', encoding="utf-8")
    with pytest.raises(ScriptError, match=r"bad\.json: invalid JSON at line 3, column 20: "):
        load_script(path)


def test_load_script_rejects_nan(tmp_path: Path) -> None:
    path = tmp_path / "nan.json"
    path.write_text('{"responses": [], "chunk_delay_ms": NaN}', encoding="utf-8")
    with pytest.raises(ScriptError, match=r"nan\.json: invalid JSON: NaN is not a JSON number"):
        load_script(path)


def test_load_script_reports_unreadable_files(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(ScriptError, match=r"missing\.json: cannot read script: No such file"):
        load_script(missing)
    with pytest.raises(ScriptError, match="cannot read script"):
        load_script(tmp_path)  # a directory
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"responses": [], "description": "caf\xe9"}')
    with pytest.raises(ScriptError, match=r"latin\.json: not UTF-8"):
        load_script(latin)


def test_load_script_reports_schema_errors_with_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"responses": [{"events": [{"tetx": "a"}]}]}), encoding="utf-8")
    with pytest.raises(ScriptError, match=r"x\.json: responses\[0\]\.events\[0\]: 'tetx'"):
        load_script(path)


@pytest.mark.parametrize(
    ("events", "finish"),
    [
        ([{"text": "x"}], "end_turn"),
        ([{"tool_call": {"id": "c", "name": "t"}}], "tool_use"),
        ([{"tool_call": {"id": "c", "name": "t", "arguments": "{bad"}}], "end_turn"),
        ([{"tool_call_start": {"id": "c", "name": "t"}}, {"tool_args": '{"a"'}], "end_turn"),
        (
            [
                {"tool_call_start": {"id": "c", "name": "t"}},
                {"tool_args": '{"a"'},
                {"delay_ms": 1},
                {"tool_args": ": 1}"},
            ],
            "tool_use",
        ),
    ],
)
def test_default_finish_depends_on_complete_tool_calls(
    events: list[dict[str, Any]], finish: str
) -> None:
    assert parse_script({"responses": [{"events": events}]}).responses[0].finish_reason == finish


# -- streaming --------------------------------------------------------------------


def test_provider_satisfies_the_protocol() -> None:
    p: Provider = provider([])
    assert p.name == "fake"


@pytest.mark.anyio
async def test_text_and_reasoning_blocks_get_indices_and_block_ends() -> None:
    p = provider(
        [
            {"reasoning": "abcdefg", "chunk_size": 3},
            {"reasoning": "h"},
            {"text": "Hello"},
            {"text": ", world", "chunk_size": 4},
            {"reasoning": "again"},
            {"usage": {"input_tokens": 3, "output_tokens": 5, "context_window": 100}},
        ]
    )
    assert await collect(p) == [
        ReasoningDelta(0, "abc"),
        ReasoningDelta(0, "def"),
        ReasoningDelta(0, "g"),
        ReasoningDelta(0, "h"),
        BlockEnd(0),
        TextDelta(1, "Hello"),
        TextDelta(1, ", wo"),
        TextDelta(1, "rld"),
        BlockEnd(1),
        ReasoningDelta(2, "again"),
        Usage(3, 5, 100),
        BlockEnd(2),
        Finish("end_turn"),
    ]


@pytest.mark.anyio
async def test_tool_call_is_streamed_in_chunks_and_assembles() -> None:
    p = provider(
        [
            {"text": "Reading."},
            {
                "tool_call": {
                    "id": "call_1",
                    "name": "read_file",
                    "arguments": {"path": "a b.txt", "lines": [1, 2]},
                    "chunks": 3,
                }
            },
        ]
    )
    events = await collect(p)
    args = '{"path":"a b.txt","lines":[1,2]}'
    assert events[:3] == [
        TextDelta(0, "Reading."),
        BlockEnd(0),
        ToolCallStart(1, "call_1", "read_file"),
    ]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(deltas) == 3
    assert "".join(d.args for d in deltas) == args
    assert events[-2:] == [BlockEnd(1), Finish("tool_use")]
    assembler = StreamAssembler()
    for event in events:
        assembler.feed(event)
    assert assembler.blocks() == [
        {"type": "text", "text": "Reading."},
        {
            "type": "tool_call",
            "id": "call_1",
            "name": "read_file",
            "input": {"path": "a b.txt", "lines": [1, 2]},
        },
    ]


@pytest.mark.anyio
async def test_tool_call_chunks_more_than_characters_and_raw_arguments() -> None:
    p = provider([{"tool_call": {"id": "c", "name": "t", "arguments": "{}", "chunks": 5}}])
    assert await collect(p) == [
        ToolCallStart(0, "c", "t"),
        ToolCallDelta(0, "{"),
        ToolCallDelta(0, "}"),
        BlockEnd(0),
        Finish("tool_use"),
    ]


@pytest.mark.anyio
async def test_half_streamed_tool_call_then_hang() -> None:
    p = provider(
        [
            {"text": "Writing it."},
            {"tool_call_start": {"id": "c1", "name": "write_file"}},
            {"tool_args": '{"path": "x", '},
            {"tool_args": '"content": "par'},
            {"hang": True},
        ]
    )
    seen: list[StreamEvent] = []
    with anyio.move_on_after(0.05) as scope:
        async with p.stream(REQUEST) as events:
            async for event in events:
                seen.append(event)
    assert scope.cancelled_caught
    assert seen == [
        TextDelta(0, "Writing it."),
        BlockEnd(0),
        ToolCallStart(1, "c1", "write_file"),
        ToolCallDelta(1, '{"path": "x", '),
        ToolCallDelta(1, '"content": "par'),
    ]
    assembler = StreamAssembler()
    for event in seen:
        assembler.feed(event)
    assert assembler.interrupted_blocks() == [{"type": "text", "text": "Writing it."}]


@pytest.mark.anyio
async def test_tool_call_start_is_closed_by_the_next_block() -> None:
    p = provider(
        [
            {"tool_call_start": {"id": "c1", "name": "t"}},
            {"tool_args": "{}"},
            {"tool_call_start": {"id": "c2", "name": "t"}},
            {"text": "done"},
        ]
    )
    assert await collect(p) == [
        ToolCallStart(0, "c1", "t"),
        ToolCallDelta(0, "{}"),
        BlockEnd(0),
        ToolCallStart(1, "c2", "t"),
        BlockEnd(1),
        TextDelta(2, "done"),
        BlockEnd(2),
        Finish("tool_use"),
    ]


@pytest.mark.anyio
async def test_explicit_finish_and_empty_response() -> None:
    p = ScriptedProvider(
        parse_script(
            {
                "responses": [
                    {"events": [{"text": "cut"}], "finish": "max_tokens"},
                    {"events": [], "finish": "refusal"},
                ]
            }
        )
    )
    assert (await collect(p))[-1] == Finish("max_tokens")
    assert await collect(p) == [Finish("refusal")]


@pytest.mark.anyio
async def test_error_as_first_event_fails_before_any_token() -> None:
    p = provider(
        [
            {
                "error": {
                    "message": "Overloaded",
                    "kind": "overloaded",
                    "status": 529,
                    "retryable": True,
                }
            }
        ]
    )
    async with p.stream(REQUEST) as events:
        with pytest.raises(ProviderError) as info:
            await events.__anext__()
        # The stream is over after the error.
        with pytest.raises(StopAsyncIteration):
            await events.__anext__()
    error = info.value
    assert (error.message, error.kind, error.status, error.retryable) == (
        "Overloaded",
        "overloaded",
        529,
        True,
    )


@pytest.mark.anyio
async def test_error_mid_stream_after_some_tokens() -> None:
    p = provider([{"text": "abcdef", "chunk_size": 2}, {"error": {"message": "boom"}}])
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderError, match="boom") as info:
        await drain(p, seen)
    assert seen == [TextDelta(0, "ab"), TextDelta(0, "cd"), TextDelta(0, "ef")]
    assert (info.value.kind, info.value.retryable, info.value.status) == ("scripted", False, None)


@pytest.mark.anyio
async def test_exhausted_script_errors_by_default() -> None:
    p = provider([{"text": "one"}])
    assert (await collect(p))[0] == TextDelta(0, "one")
    with pytest.raises(ProviderError, match="script exhausted"):
        await collect(p)
    with pytest.raises(ProviderError, match="script exhausted"):
        await collect(p)
    assert p.request_count == 3


@pytest.mark.anyio
async def test_exhausted_script_repeat_last() -> None:
    p = provider([{"text": "one"}], [{"text": "two"}], when_exhausted="repeat_last")
    texts = [(await collect(p))[0] for _ in range(4)]
    assert texts == [TextDelta(0, t) for t in ("one", "two", "two", "two")]


@pytest.mark.anyio
async def test_a_repeated_response_streams_what_it_compiles_to_afresh() -> None:
    """Each stream of a repeated response is the one a fresh compilation
    gives, in every session's provider of a script, and one that reports on
    its request is compiled for that request."""
    p = provider(
        [
            {"text": "Done.", "chunk_size": 2},
            {"reasoning": "why"},
            {"tool_call": {"id": "c1", "name": "t", "arguments": {"a": 1}}},
        ],
        when_exhausted="repeat_last",
    )
    fresh = _compile(p.script.responses[0], REQUEST, p.script.chunk_delay_ms)
    for _ in range(3):
        assert await collect(p) == fresh
    # Another session's provider of the same script streams it too.
    other = ScriptedProvider(p.script)
    assert await collect(other) == fresh
    reporting = provider([{"report": ["message_count"]}], when_exhausted="repeat_last")
    two = ModelRequest(
        messages=[*REQUEST.messages, {"role": "assistant", "content": []}, *REQUEST.messages]
    )
    first, second = await collect(reporting), await collect(reporting, two)
    assert first != second
    assert second == _compile(reporting.script.responses[0], two, 0)


@pytest.mark.anyio
async def test_exhausted_script_repeat_all() -> None:
    p = provider([{"text": "one"}], [{"text": "two"}], when_exhausted="repeat_all")
    texts = [(await collect(p))[0] for _ in range(5)]
    assert texts == [TextDelta(0, t) for t in ("one", "two", "one", "two", "one")]


@pytest.mark.anyio
async def test_each_stream_call_consumes_one_response_even_if_not_entered() -> None:
    p = provider([{"text": "one"}], [{"text": "two"}])
    p.stream(REQUEST)  # abandoned before use
    assert (await collect(p))[0] == TextDelta(0, "two")


@pytest.mark.anyio
async def test_iterator_is_exhausted_after_the_context_exits() -> None:
    p = provider([{"text": "a"}, {"text": "b", "chunk_size": 1}])
    async with p.stream(REQUEST) as events:
        first = await events.__anext__()
    assert first == TextDelta(0, "a")
    with pytest.raises(StopAsyncIteration):
        await events.__anext__()


# -- timing and cancellation ------------------------------------------------------
#
# No wall-clock limits: a pause is shown by the stream being blocked (every
# task waiting, `anyio.wait_all_tasks_blocked`) with the events before it
# delivered and none after; a lower bound on a pause the code sleeps is safe.

LONG_MS = 600_000  # a pause no test waits out


@asynccontextmanager
async def streaming(p: ScriptedProvider) -> AsyncIterator[list[StreamEvent]]:
    """Drain ``p`` in a background task; the list fills as events arrive.

    On exit the stream is cancelled and the task must end (a stream that
    ignored cancellation would hang here, and the test timeout would fail it).
    """
    seen: list[StreamEvent] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(drain, p, seen)
        yield seen
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_chunk_delay_applies_between_chunks_not_before_the_first() -> None:
    p = provider([{"text": "abc", "chunk_size": 1}], chunk_delay_ms=LONG_MS)
    async with streaming(p) as seen:
        await anyio.wait_all_tasks_blocked()
        assert seen == [TextDelta(0, "a")]
    short = provider([{"text": "abc", "chunk_size": 1}], chunk_delay_ms=60)
    start = anyio.current_time()
    times: list[float] = []
    async with short.stream(REQUEST) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                times.append(anyio.current_time() - start)
    assert times[1] - times[0] >= 0.055
    assert times[2] - times[1] >= 0.055


@pytest.mark.anyio
async def test_per_event_chunk_delay_overrides_the_default() -> None:
    p = provider([{"text": "ab", "chunk_size": 1, "chunk_delay_ms": 0}], chunk_delay_ms=LONG_MS)
    async with streaming(p) as seen:
        await anyio.wait_all_tasks_blocked()
        assert len(seen) == 4, "the stream waited for the default delay"


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["delay_ms", "stall_ms"])
async def test_delay_and_stall_pause_the_stream(kind: str) -> None:
    p = provider([{"text": "a"}, {kind: LONG_MS}, {"text": "b"}])
    async with streaming(p) as seen:
        await anyio.wait_all_tasks_blocked()
        assert seen == [TextDelta(0, "a")]
    short = provider([{"text": "a"}, {kind: 80}, {"text": "b"}])
    start = anyio.current_time()
    events = await collect(short)
    assert anyio.current_time() - start >= 0.075
    assert events[:2] == [TextDelta(0, "a"), TextDelta(0, "b")]


@pytest.mark.anyio
async def test_stall_is_cancellable() -> None:
    p = provider([{"text": "a"}, {"stall_ms": LONG_MS}, {"text": "b"}])
    async with streaming(p) as seen:
        await anyio.wait_all_tasks_blocked()
    assert seen == [TextDelta(0, "a")]


@pytest.mark.anyio
async def test_hang_waits_until_cancelled() -> None:
    p = provider([{"text": "Once upon a"}, {"hang": True}])
    async with streaming(p) as seen:
        await anyio.wait_all_tasks_blocked()
        assert seen == [TextDelta(0, "Once upon a")]
    assert seen == [TextDelta(0, "Once upon a")]


@pytest.mark.anyio
async def test_hang_with_seconds_continues_afterwards() -> None:
    p = provider([{"text": "a"}, {"hang": {"seconds": 0.05}}, {"text": "b"}])
    start = anyio.current_time()
    events = await collect(p)
    assert anyio.current_time() - start >= 0.045
    assert events[:2] == [TextDelta(0, "a"), TextDelta(0, "b")]


@pytest.mark.anyio
async def test_ignore_cancel_hang_outlives_the_cancel_until_its_seconds_pass() -> None:
    p = provider([{"text": "a"}, {"hang": {"ignore_cancel": True, "seconds": 0.3}}, {"text": "b"}])
    seen: list[StreamEvent] = []
    start = anyio.current_time()
    with anyio.move_on_after(0.02) as scope:
        async with p.stream(REQUEST) as events:
            async for event in events:
                seen.append(event)
    elapsed = anyio.current_time() - start
    assert scope.cancelled_caught
    assert elapsed >= 0.29  # the cancel at 0.02 s was held off
    assert seen == [TextDelta(0, "a")]  # ...and delivered before "b"


@pytest.mark.anyio
async def test_endless_streams_until_cancelled() -> None:
    p = provider([{"text": "start "}, {"endless": {"text": "tok "}}])
    seen: list[StreamEvent] = []
    with anyio.CancelScope() as scope:
        async with p.stream(REQUEST) as events:
            async for event in events:
                seen.append(event)
                if len(seen) == 500:
                    scope.cancel()  # lands at the stream's next checkpoint
    assert scope.cancelled_caught
    assert seen[0] == TextDelta(0, "start ")
    assert len(seen) >= 500
    assert set(seen[1:]) == {TextDelta(0, "tok ")}


@pytest.mark.anyio
async def test_endless_cancel_is_prompt() -> None:
    """With no delay the stream still checkpoints, so a cancel from another task
    lands (a stream that never yielded would starve this task: the test would hang)."""
    p = provider([{"endless": {"text": "x"}}])
    reached = anyio.Event()

    async def consume() -> None:
        count = 0
        async with p.stream(REQUEST) as events:
            async for _ in events:
                count += 1
                if count == 1000:
                    reached.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await reached.wait()
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_endless_with_delay_is_paced() -> None:
    p = provider([{"endless": {"text": "tok ", "delay_ms": LONG_MS}}])
    async with streaming(p) as seen:
        await anyio.wait_all_tasks_blocked()
        # One immediate chunk, then the pause.
        assert seen == [TextDelta(0, "tok ")]


@pytest.mark.anyio
async def test_endless_delay_defaults_to_the_script_chunk_delay() -> None:
    p = provider([{"endless": {"text": "tok "}}], chunk_delay_ms=LONG_MS)
    async with streaming(p) as seen:
        await anyio.wait_all_tasks_blocked()
        assert seen == [TextDelta(0, "tok ")]


# -- report -----------------------------------------------------------------------

HISTORY = ModelRequest(
    messages=[
        {
            "role": "user",
            "content": [{"type": "text", "text": "Tell me a story"}],
            "interrupted": False,
        },
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "text": "A short one."},
                {"type": "text", "text": "Once upon"},
                {"type": "text", "text": " a"},
            ],
            "interrupted": True,
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What did you "},
                {"type": "resource", "uri": "file:///x", "text": "ignored"},
                {"type": "text", "text": 'say "last"?'},
            ],
        },
    ]
)


@pytest.mark.anyio
async def test_report_describes_the_request() -> None:
    p = provider([{"report": list(REPORT_FACTS)}])
    events = await collect(p, HISTORY)
    lines = [e.text for e in events if isinstance(e, TextDelta)]
    assert lines == [
        "message_count: 3\n",
        'last_user_text: "What did you say \\"last\\"?"\n',
        'last_assistant_text: "Once upon a"\n',
        'last_assistant_reasoning: "A short one."\n',
        "last_assistant_interrupted: true\n",
        "tool_results: []\n",
        'first_user_text: "Tell me a story"\n',
        "tool_names: []",
    ]
    assert events[-2:] == [BlockEnd(0), Finish("end_turn")]


@pytest.mark.anyio
async def test_a_summary_request_takes_no_scripted_response() -> None:
    """A compaction's summary request gets the script's ``compaction`` answer, or
    the built-in summary, and leaves ``responses`` for the model requests."""
    summary = ModelRequest(messages=HISTORY.messages, metadata={"purpose": "compaction"})
    p = provider([{"text": "the answer"}])
    said = "".join(e.text for e in await collect(p, summary) if isinstance(e, TextDelta))
    assert said.startswith("Summary of the conversation: the user said ")
    assert '"Tell me a story"' in said
    assert "".join(e.text for e in await collect(p) if isinstance(e, TextDelta)) == "the answer"
    scripted = ScriptedProvider(
        parse_script(
            {
                "responses": [{"events": [{"text": "the answer"}]}],
                "compaction": {"events": [{"text": "Short."}]},
            }
        )
    )
    events = await collect(scripted, summary)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Short."]


@pytest.mark.anyio
async def test_report_without_an_assistant_message() -> None:
    p = provider(
        [{"report": ["message_count", "last_assistant_text", "last_assistant_interrupted"]}]
    )
    text = "".join(e.text for e in await collect(p) if isinstance(e, TextDelta))
    assert text == ("message_count: 1\nlast_assistant_text: null\nlast_assistant_interrupted: null")


@pytest.mark.anyio
async def test_report_tool_results_and_user_text_skip_tool_only_messages() -> None:
    request = ModelRequest(
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "Read a.txt"}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_call", "id": "c1", "name": "read_file", "input": {}}],
                "interrupted": False,
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_call_id": "c1",
                        "content": [{"type": "text", "text": "héllo"}],
                        "is_error": False,
                    }
                ],
            },
        ]
    )
    p = provider([{"report": ["last_user_text", "last_assistant_text", "tool_results"]}])
    text = "".join(e.text for e in await collect(p, request) if isinstance(e, TextDelta))
    assert text == (
        'last_user_text: "Read a.txt"\n'
        'last_assistant_text: ""\n'
        'tool_results: [{"tool_call_id": "c1", "is_error": false, "text": "héllo"}]'
    )


@pytest.mark.anyio
async def test_report_joins_the_text_block_before_it() -> None:
    p = provider([{"text": "Facts:\n"}, {"report": ["message_count"]}])
    assert await collect(p) == [
        TextDelta(0, "Facts:\n"),
        TextDelta(0, "message_count: 1"),
        BlockEnd(0),
        Finish("end_turn"),
    ]


@pytest.mark.anyio
async def test_story_then_report_example_reports_the_interrupted_text() -> None:
    """The demo script: stop the story mid-stream, then ask what the model saw."""
    p = ScriptedProvider(load_script(EXAMPLES / "story-then-report.json"))
    delivered: list[str] = []
    with anyio.fail_after(10):
        with anyio.move_on_after(0.3):
            async with p.stream(REQUEST) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        delivered.append(event.text)
        prefix = "".join(delivered)
        assert prefix.startswith("Once upon")
        followup = ModelRequest(
            messages=[
                *REQUEST.messages,
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": prefix}],
                    "interrupted": True,
                },
                {"role": "user", "content": [{"type": "text", "text": "Go on"}]},
            ]
        )
        events2 = await collect(p, followup)
    text = "".join(e.text for e in events2 if isinstance(e, TextDelta))
    assert text == (
        'last_user_text: "Go on"\n'
        f"last_assistant_text: {json.dumps(prefix)}\n"
        "last_assistant_interrupted: true"
    )


@pytest.mark.anyio
async def test_abort_stops_the_stream_at_once_unless_it_is_wedged() -> None:
    p = provider([{"text": "a"}, {"hang": True}])
    results: list[bool] = []
    async with p.stream(REQUEST) as events:
        assert await events.__anext__() == TextDelta(0, "a")
        results.append(events.abort())
        with pytest.raises(StopAsyncIteration):
            await events.__anext__()  # no hang: the stream is over
    wedged = provider([{"text": "a"}, {"hang": {"ignore_cancel": True, "seconds": 0.2}}])
    async with wedged.stream(REQUEST) as events, anyio.create_task_group() as tg:
        assert await events.__anext__() == TextDelta(0, "a")

        async def pull() -> None:
            await events.__anext__()

        tg.start_soon(pull)
        await anyio.wait_all_tasks_blocked()  # pull() is now inside the shielded hang
        results.append(events.abort())
        tg.cancel_scope.cancel()
    assert results == [True, False]
