"""The model history projection: one test per rule of `derive_messages`.

The logs here are hand-written lists of surface records (and some noise),
not full turns: each test shows one rule with the fewest records.  Whole
realistic logs, every cut of them, and random logs are in test_log_check.py.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.harness import EVENT_LOG_VALIDATOR

from acp_bridge.log.check import check_history
from acp_bridge.log.derive import _settle_paired, delivered_prefix, derive_messages, settle

Record = dict[str, Any]


def numbered(*groups: Record | list[Record]) -> list[Record]:
    """Flatten records, number them, and check each one against the schema."""
    records: list[Record] = []
    for group in groups:
        records.extend(group if isinstance(group, list) else [group])
    for seq, record in enumerate(records):
        record.update(v=1, seq=seq, at=1_700_000_000.0 + seq)
        errors = [error.message for error in EVENT_LOG_VALIDATOR.iter_errors(record)]
        assert errors == [], (record, errors)
    return records


def rec(type: str, turn: int, step: int, **fields: Any) -> Record:
    return {"type": type, "turn": turn, "step": step, **fields}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def reasoning(value: str) -> dict[str, Any]:
    return {"type": "reasoning", "text": value}


def call(call_id: str, name: str = "read", **input: Any) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "input": input}


def prompt(turn: int, *blocks: dict[str, Any]) -> list[Record]:
    return [rec("turn/start", turn, 0), rec("user/message", turn, 0, content=list(blocks))]


def reply(turn: int, step: int, *blocks: dict[str, Any], interrupted: bool = False) -> Record:
    fields: dict[str, Any] = {
        "attempt": f"att_{turn}_{step}{'_i' if interrupted else ''}",
        "content": list(blocks),
        "interrupted": interrupted,
        "finish": None if interrupted else "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    if interrupted:
        fields["stream"] = [[0.0, i, b["type"], b["text"]] for i, b in enumerate(blocks)]
    return rec("assistant/message", turn, step, **fields)


def result(turn: int, step: int, call_id: str, output: str, is_error: bool = False) -> Record:
    return rec(
        "tool/result", turn, step, tool_call_id=call_id, content=[text(output)], is_error=is_error
    )


def end(turn: int, reason: str = "end_turn") -> Record:
    return rec("turn/end", turn, 0, reason=reason, forced=False)


def user_msg(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks), "interrupted": False}


def assistant_msg(*blocks: dict[str, Any], interrupted: bool = False) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks), "interrupted": interrupted}


def tool_result(call_id: str, output: str, is_error: bool = False) -> dict[str, Any]:
    content = [text(output)] if output.strip() else []
    return {
        "type": "tool_result",
        "tool_call_id": call_id,
        "content": content,
        "is_error": is_error,
    }


def derive_checked(records: list[Record]) -> list[dict[str, Any]]:
    messages = derive_messages(records)
    check_history(messages)
    return messages


# -- the basic shape ----------------------------------------------------------


def test_empty_log_has_empty_history() -> None:
    assert derive_messages([]) == []


def test_a_plain_conversation() -> None:
    records = numbered(
        rec("session/start", 0, 0, session_id="s", cwd="/p", provider="scripted"),
        prompt(1, text("Hi")),
        rec("step/start", 1, 1),
        reply(1, 1, reasoning("greet back"), text("Hello!")),
        rec("step/end", 1, 1, reason="end_turn"),
        end(1),
        prompt(2, text("Bye")),
        reply(2, 1, text("See you.")),
        end(2),
    )
    assert derive_checked(records) == [
        user_msg(text("Hi")),
        assistant_msg(reasoning("greet back"), text("Hello!")),
        user_msg(text("Bye")),
        assistant_msg(text("See you.")),
    ]


def test_only_surface_records_contribute() -> None:
    records = numbered(
        prompt(1, text("Hi")),
        rec("step/start", 1, 1),
        rec("stream/start", 1, 1, attempt="a1", provider="scripted"),
        rec("stream/delta", 1, 1, attempt="a1", parts=[[0, "text", "LEAKED delta"]]),
        rec(
            "assistant/attempt",
            1,
            1,
            attempt="a1",
            outcome="provider_error",
            content=[text("LEAKED attempt")],
        ),
        rec("stream/end", 1, 1, attempt="a1", outcome="abandoned"),
        rec(
            "agent/request-error",
            1,
            1,
            attempt="a1",
            error={
                "kind": "http",
                "message": "LEAKED error",
                "retryable": True,
                "status": 529,
                "request_id": "req_1",
            },
        ),
        rec("step/end", 1, 1, reason="provider_error"),
        end(1, "error"),
    )
    assert derive_checked(records) == [user_msg(text("Hi"))]
    assert "LEAKED" not in json.dumps(derive_messages(records))


def test_user_blocks_from_the_editor_are_kept() -> None:
    link = {"type": "resource_link", "uri": "file:///p/a.py", "name": "a.py", "size": 12}
    resource = {"type": "resource", "uri": "file:///p/b.py", "text": "x = 1\n"}
    blob = {"type": "resource", "uri": "file:///p/c.bin", "blob": "AAE=", "mimeType": "x/y"}
    image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
    records = numbered(prompt(1, text("Look:"), link, resource, blob, image))
    assert derive_checked(records) == [user_msg(text("Look:"), link, resource, blob, image)]
    bad_resource = {**records[1], "content": [{"type": "resource", "uri": "u"}]}
    assert not EVENT_LOG_VALIDATOR.is_valid(bad_resource)


def test_every_message_says_whether_it_was_interrupted() -> None:
    records = numbered(prompt(1, text("Hi")), reply(1, 1, text("Hello")), end(1))
    messages = derive_messages(records)
    assert [message["interrupted"] for message in messages] == [False, False]
    assert all(set(message) == {"role", "content", "interrupted"} for message in messages)


# -- tool calls and results ---------------------------------------------------


def test_tool_results_open_the_next_user_message() -> None:
    records = numbered(
        prompt(1, text("Read both")),
        reply(1, 1, text("Reading."), call("c1", path="a"), call("c2", path="b")),
        rec(
            "tool/call",
            1,
            1,
            tool_call_id="c1",
            name="read",
            input={"path": "a"},
            status="dispatched",
        ),
        result(1, 1, "c1", "A"),
        rec(
            "tool/call",
            1,
            1,
            tool_call_id="c2",
            name="read",
            input={"path": "b"},
            status="dispatched",
        ),
        result(1, 1, "c2", "no such file", is_error=True),
        reply(1, 2, text("A, and b is missing.")),
        end(1),
    )
    assert derive_checked(records) == [
        user_msg(text("Read both")),
        assistant_msg(text("Reading."), call("c1", path="a"), call("c2", path="b")),
        user_msg(tool_result("c1", "A"), tool_result("c2", "no such file", is_error=True)),
        assistant_msg(text("A, and b is missing.")),
    ]


def test_tool_results_then_user_text_make_one_user_message() -> None:
    # Cancelled during tool execution: results are logged, then the turn ends;
    # the next prompt joins the same user message, after the results.
    records = numbered(
        prompt(1, text("Run it")),
        reply(1, 1, call("c1", name="run")),
        result(1, 1, "c1", "partial output"),
        end(1, "cancelled"),
        prompt(2, text("Never mind")),
        reply(2, 1, text("OK.")),
        end(2),
    )
    assert derive_checked(records) == [
        user_msg(text("Run it")),
        assistant_msg(call("c1", name="run")),
        user_msg(tool_result("c1", "partial output"), text("Never mind")),
        assistant_msg(text("OK.")),
    ]


def test_tool_results_come_first_even_if_logged_after_the_prompt() -> None:
    # A late result (a fenced turn should never write one, see I6) still
    # leaves a history a provider accepts: results before the user's text.
    records = numbered(
        prompt(1, text("Run it")),
        reply(1, 1, call("c1", name="run")),
        end(1, "cancelled"),
        prompt(2, text("Hello?")),
        result(1, 1, "c1", "late"),
    )
    assert derive_checked(records)[-1] == user_msg(tool_result("c1", "late"), text("Hello?"))


def test_tool_call_without_result_is_dropped() -> None:
    records = numbered(
        prompt(1, text("Go")),
        reply(1, 1, text("Let me look."), call("c1"), call("c2")),
        result(1, 1, "c1", "found"),
        # crash: c2 never got a result
    )
    assert derive_checked(records) == [
        user_msg(text("Go")),
        assistant_msg(text("Let me look."), call("c1")),
        user_msg(tool_result("c1", "found")),
    ]


def test_assistant_message_left_empty_is_dropped_and_users_merge() -> None:
    records = numbered(
        prompt(1, text("Go")),
        reply(1, 1, text("  \n"), call("c1")),
        # crash before the result; the next process starts turn 2
        prompt(2, text("Again")),
    )
    assert derive_checked(records) == [user_msg(text("Go"), text("Again"))]


def test_result_without_its_call_is_dropped() -> None:
    records = numbered(
        prompt(1, text("Go")),
        reply(1, 1, text("Done.")),
        result(1, 1, "ghost", "who called me?"),
        prompt(2, text("Next")),
    )
    assert derive_checked(records) == [
        user_msg(text("Go")),
        assistant_msg(text("Done.")),
        user_msg(text("Next")),
    ]


def test_result_must_answer_the_message_just_before() -> None:
    records = numbered(
        prompt(1, text("Go")),
        reply(1, 1, call("c1")),
        result(1, 1, "c1", "one"),
        reply(1, 2, text("And more.")),
        result(1, 2, "c1", "stale answer to an older call"),
        prompt(2, text("Next")),
    )
    assert derive_checked(records) == [
        user_msg(text("Go")),
        assistant_msg(call("c1")),
        user_msg(tool_result("c1", "one")),
        assistant_msg(text("And more.")),
        user_msg(text("Next")),
    ]


def test_a_second_result_for_one_call_is_dropped() -> None:
    records = numbered(
        prompt(1, text("Go")),
        reply(1, 1, call("c1")),
        result(1, 1, "c1", "first"),
        result(1, 1, "c1", "second"),
    )
    assert derive_checked(records)[-1] == user_msg(tool_result("c1", "first"))


def test_a_reused_tool_call_id_is_dropped_with_its_result() -> None:
    records = numbered(
        prompt(1, text("Go")),
        reply(1, 1, call("c1")),
        result(1, 1, "c1", "first"),
        reply(1, 2, text("Again:"), call("c1")),
        result(1, 2, "c1", "second"),
        reply(1, 3, text("Done.")),
    )
    assert derive_checked(records) == [
        user_msg(text("Go")),
        assistant_msg(call("c1")),
        user_msg(tool_result("c1", "first")),
        assistant_msg(text("Again:"), text("Done.")),
    ]


def test_malformed_tool_call_is_dropped() -> None:
    bad_input = {"type": "tool_call", "id": "c1", "name": "read", "input": "{not json"}
    no_id = {"type": "tool_call", "id": "", "name": "read", "input": {}}
    records = [
        rec("user/message", 1, 0, content=[text("Go")]),
        rec("assistant/message", 1, 1, content=[text("Hm."), bad_input, no_id]),
        rec("tool/result", 1, 1, tool_call_id="c1", content=[text("x")], is_error=True),
    ]
    assert derive_checked(records) == [user_msg(text("Go")), assistant_msg(text("Hm."))]


# -- blank content -------------------------------------------------------------


def test_whitespace_only_blocks_are_dropped() -> None:
    records = numbered(
        prompt(1, text("Q"), text(" ")),
        reply(1, 1, reasoning("\n\n"), text("A"), text("\t"), call("c1")),
        rec(
            "tool/result",
            1,
            1,
            tool_call_id="c1",
            content=[text("  "), text("out")],
            is_error=False,
        ),
        reply(1, 2, text("")),
        end(1),
    )
    assert derive_checked(records) == [
        user_msg(text("Q")),
        assistant_msg(text("A"), call("c1")),
        user_msg(
            {
                "type": "tool_result",
                "tool_call_id": "c1",
                "content": [text("out")],
                "is_error": False,
            }
        ),
    ]


def test_blank_tool_output_gives_a_result_with_no_content() -> None:
    records = numbered(prompt(1, text("Go")), reply(1, 1, call("c1")), result(1, 1, "c1", " \n"))
    assert derive_checked(records)[-1] == user_msg(tool_result("c1", ""))


def test_blank_first_prompt_drops_the_reply_before_any_user_message() -> None:
    records = numbered(
        prompt(1, text("   ")),
        reply(1, 1, text("What do you mean?"), call("c1")),
        result(1, 1, "c1", "out"),
        reply(1, 2, text("Still here.")),
        end(1),
        prompt(2, text("Real question")),
    )
    assert derive_checked(records) == [user_msg(text("Real question"))]


def test_blocks_of_the_wrong_role_are_dropped() -> None:
    records = [
        rec("user/message", 1, 0, content=[text("Q"), call("c9"), reasoning("r"), {"x": 1}]),
        rec(
            "assistant/message",
            1,
            1,
            content=[text("A"), {"type": "image", "data": "", "mimeType": "image/png"}],
        ),
    ]
    assert derive_checked(records) == [user_msg(text("Q")), assistant_msg(text("A"))]


# -- turns that end early ------------------------------------------------------


def test_refused_turn_is_dropped_entirely() -> None:
    records = numbered(
        prompt(1, text("Hello")),
        reply(1, 1, text("Hi.")),
        end(1),
        prompt(2, text("Something bad")),
        reply(2, 1, text("Checking."), call("c1")),
        result(2, 1, "c1", "output"),
        reply(2, 2, text("I can't help with that.")),
        rec("step/end", 2, 2, reason="refusal"),
        end(2, "refusal"),
        prompt(3, text("Something fine")),
        reply(3, 1, text("Sure.")),
        end(3),
    )
    assert derive_checked(records) == [
        user_msg(text("Hello")),
        assistant_msg(text("Hi.")),
        user_msg(text("Something fine")),
        assistant_msg(text("Sure.")),
    ]


def test_a_turn_without_its_refusal_turn_end_is_kept() -> None:
    # Only turn/end decides: at a cut before it, the turn is still in.
    records = numbered(
        prompt(1, text("Something bad")),
        reply(1, 1, text("I can't help with that.")),
        rec("step/end", 1, 1, reason="refusal"),
    )
    assert derive_checked(records) == [
        user_msg(text("Something bad")),
        assistant_msg(text("I can't help with that.")),
    ]
    assert derive_messages([*records, end(1, "refusal")]) == []


def test_cancel_before_first_token_merges_the_prompts() -> None:
    records = numbered(
        prompt(1, text("First")),
        rec("step/start", 1, 1),
        rec("stream/start", 1, 1, attempt="a1", provider="scripted"),
        rec("assistant/attempt", 1, 1, attempt="a1", outcome="empty", content=[]),
        rec("stream/end", 1, 1, attempt="a1", outcome="abandoned"),
        rec("step/end", 1, 1, reason="cancelled"),
        end(1, "cancelled"),
        prompt(2, text("Second")),
        reply(2, 1, text("Answer to both.")),
        end(2),
    )
    assert derive_checked(records) == [
        user_msg(text("First"), text("Second")),
        assistant_msg(text("Answer to both.")),
    ]


def test_interrupted_message_is_kept_and_marked() -> None:
    records = numbered(
        prompt(1, text("Explain")),
        reply(1, 1, reasoning("Two points"), text("First, the"), interrupted=True),
        rec("stream/end", 1, 1, attempt="att_1_1_i", outcome="committed"),
        rec("step/end", 1, 1, reason="cancelled"),
        end(1, "cancelled"),
        prompt(2, text("Go on")),
    )
    assert derive_checked(records) == [
        user_msg(text("Explain")),
        assistant_msg(reasoning("Two points"), text("First, the"), interrupted=True),
        user_msg(text("Go on")),
    ]


@pytest.mark.parametrize(
    ("first", "second", "merged"), [(True, False, True), (False, True, True), (False, False, False)]
)
def test_merged_assistant_messages_are_interrupted_if_any_part_was(
    first: bool, second: bool, merged: bool
) -> None:
    records = numbered(
        prompt(1, text("Q")),
        reply(1, 1, text("one"), interrupted=first),
        reply(1, 2, text("two"), interrupted=second),
    )
    assert derive_checked(records)[1] == assistant_msg(text("one"), text("two"), interrupted=merged)


# -- purity --------------------------------------------------------------------


def test_derive_neither_mutates_nor_shares_its_input() -> None:
    records = numbered(
        prompt(1, text("Q")),
        reply(1, 1, text(" "), call("c1", path="a")),
        result(1, 1, "c1", "out"),
        prompt(2, text("Next")),
    )
    before = copy.deepcopy(records)
    messages = derive_messages(iter(records))
    assert records == before
    messages[1]["content"][0]["input"]["path"] = "changed"
    messages[2]["content"][0]["content"].clear()
    messages[0]["content"].append(text("more"))
    assert records == before
    assert derive_messages(records) != messages


# -- the fast path of settle ------------------------------------------------------

_TOOL_FREE_MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant"]),
        "content": st.lists(
            st.builds(
                lambda kind, t: {"type": kind, "text": t},
                st.sampled_from(["text", "reasoning"]),
                st.sampled_from(["a", "b c"]),
            ),
            max_size=2,
        ),
        "interrupted": st.booleans(),
    }
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_TOOL_FREE_MESSAGE, max_size=8),
    st.frozensets(st.sampled_from(["c1", "c2"])),
    st.booleans(),
)
def test_settle_without_tool_blocks_equals_the_paired_settle(
    messages: list[dict[str, Any]], used: frozenset[str], keep_leading: bool
) -> None:
    """Messages without tool calls or results take a shortcut (nothing to pair):
    it gives what the pass that pairs them gives, ids kept included."""
    expected = _settle_paired(copy.deepcopy(messages), used, keep_leading)
    assert settle(messages, used, keep_leading) == expected


# -- the delivered prefix -------------------------------------------------------


def test_delivered_prefix_concatenates_the_deltas_of_one_attempt() -> None:
    records = numbered(
        rec("stream/start", 1, 1, attempt="a1", provider="scripted"),
        rec("stream/delta", 1, 1, attempt="a1", parts=[[0, "reasoning", "Thin"]]),
        rec("stream/delta", 1, 1, attempt="a2", parts=[[0, "text", "other attempt"]]),
        rec(
            "stream/delta",
            1,
            1,
            attempt="a1",
            parts=[[0, "reasoning", "king"], [1, "text", "Hel"], [2, "tool_args", '{"p']],
        ),
        rec("stream/delta", 1, 1, attempt="a1", parts=[[1, "text", "lo"], [2, "tool_args", '":1']]),
    )
    prefix = delivered_prefix(records, "a1")
    assert prefix == {
        (0, "reasoning"): "Thinking",
        (1, "text"): "Hello",
        (2, "tool_args"): '{"p":1',
    }
    assert list(prefix) == [(0, "reasoning"), (1, "text"), (2, "tool_args")]
    assert delivered_prefix(records, "a2") == {(0, "text"): "other attempt"}
    assert delivered_prefix(records, "a3") == {}
