"""A permission answer that is not one of the offered options is a dismissal.

Through the real subprocess: the editor answers ``session/request_permission``
with an option it was not offered (``allow_always`` for a path outside the
session's directories, where only allow once and reject are offered), an
unknown option, or a malformed result.  The call never runs, its result says
the request was dismissed, and stderr says what was wrong with the answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.harness import report, tool_call
from test_tools import REPORT, play
from workspace_editor import Raw, WorkspaceEditor

from acp_bridge.client import AcpClient, PromptResult

pytestmark = pytest.mark.anyio


def selected(option: Any) -> Raw:
    return Raw({"outcome": {"outcome": "selected", "optionId": option}})


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        pytest.param(
            selected("allow_always"),
            "option 'allow_always' was not offered (offered: allow_once, reject_once)",
            id="unoffered-allow-always",
        ),
        pytest.param(
            selected("allow_everything"),
            "option 'allow_everything' was not offered (offered: allow_once, reject_once)",
            id="unknown-option",
        ),
        pytest.param(Raw({}), "the result has no 'outcome'", id="no-outcome"),
        pytest.param(
            Raw({"outcome": "selected"}), "'outcome' is a string, not an object", id="outcome-str"
        ),
        pytest.param(
            Raw({"outcome": {"outcome": "selected"}}),
            "'outcome.optionId' is null, not a string",
            id="no-option-id",
        ),
        pytest.param(
            selected(["allow_once"]), "'outcome.optionId' is an array, not a string", id="id-list"
        ),
        pytest.param(
            Raw({"outcome": {"outcome": "granted", "optionId": "allow_once"}}),
            "'outcome.outcome' is 'granted', not 'selected' or 'cancelled'",
            id="unknown-outcome",
        ),
        pytest.param(Raw(None), "the result is null, not an object", id="null"),
        pytest.param(Raw([]), "the result is an array, not an object", id="array"),
    ],
)
async def test_an_answer_not_offered_is_a_dismissal(
    tmp_path: Path, answer: Raw, problem: str
) -> None:
    outside = tmp_path / "elsewhere.txt"
    script = {
        "responses": [
            {"events": [tool_call("call_1", "write_file", path=str(outside), content="out")]},
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = [answer]
        return [await client.prompt(sid, "Write it")]

    played = await play(tmp_path, script, turns, stderr=tmp_path / "stderr.txt")
    (result,) = played.results
    assert result.stop_reason == "end_turn"
    assert not outside.exists()
    assert played.editor.methods() == ["session/request_permission"]
    (tool_result,) = report(result)["tool_results"]
    assert tool_result["is_error"] is True
    assert "they dismissed the permission request" in tool_result["text"]
    (call,) = played.of_type("tool/call")
    assert call["status"] == "refused"
    assert played.of_type("permission/rule") == []
    assert f"permission answer for call_1 taken as a dismissal: {problem}" in played.run.stderr


async def test_an_offered_answer_is_followed_and_says_nothing_on_stderr(tmp_path: Path) -> None:
    """The barrier for the cases above: a well-formed allow once runs the call."""
    outside = tmp_path / "elsewhere.txt"
    script = {
        "responses": [
            {"events": [tool_call("call_1", "write_file", path=str(outside), content="out")]},
            REPORT,
        ]
    }

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        editor.permission_answers = [selected("allow_once")]
        return [await client.prompt(sid, "Write it")]

    played = await play(tmp_path, script, turns, stderr=tmp_path / "stderr.txt")
    assert outside.read_text() == "out"
    assert "permission answer" not in played.run.stderr
