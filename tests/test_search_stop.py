"""search_text can always be stopped, and nothing of it outlives the bridge (invariant I7).

Through the real subprocess.  A pattern that makes a backtracking engine spin
(``(a+)+$`` over forty ``a`` and a ``!``) answers at once: RE2 is linear.
Syntax RE2 lacks gets an error naming it.  A search that would read for a
very long time (a sparse file of a terabyte of NULs, valid UTF-8 with no line
end) answers a Stop with ``cancelled``, a ``--tool-timeout`` with its
timeout result, and a stdin EOF or a SIGTERM with the process's exit: the
search's thread stops too, or the interpreter would wait for it at exit.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from support.harness import assert_cancelled, prompt_until, report, tool_call, wait_until
from test_tools import REPORT
from test_tools import play as play_in_either_mode
from workspace_editor import WorkspaceEditor

from acp_bridge.client import AcpClient, AgentExited, PromptResult, prompt_params

pytestmark = pytest.mark.anyio
linux = pytest.mark.skipif(sys.platform != "linux", reason="watches /proc/PID/fd")

# Every test of this file runs the real command (its /proc entry, its signals, its exit).
play = functools.partial(play_in_either_mode, mode="subprocess")

HUGE = 1 << 40  # a terabyte, sparse: it takes no disk, and reading it takes hours


def search(pattern: str, **kw: str) -> dict[str, object]:
    return {
        "responses": [
            {"events": [tool_call("call_1", "search_text", pattern=pattern, **kw)]},
            REPORT,
        ]
    }


def reading(path: Path) -> Callable[[AcpClient, int], Callable[[], bool]]:
    """A condition: the bridge has ``path`` open (its search thread is reading it)."""

    def until(client: AcpClient, since: int) -> Callable[[], bool]:
        pid = cast(Any, client.process).pid  # the anyio process run_bridge started
        fds = Path(f"/proc/{pid}/fd")

        def check() -> bool:
            for fd in fds.iterdir():
                with contextlib.suppress(OSError):
                    if fd.readlink() == path:
                        return True
            return False

        return check

    return until


async def test_a_catastrophic_pattern_for_backtracking_answers_at_once(tmp_path: Path) -> None:
    files = {"evil.txt": "a" * 40 + "!\n", "fine.txt": "a" * 40 + "\n"}

    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        return [await client.prompt(sid, "Search")]

    # run_bridge bounds the play: with a backtracking engine this never ends.
    played = await play(tmp_path, search("(a+)+$"), turns, files=files)
    (result,) = report(played.results[0])["tool_results"]
    assert result["is_error"] is False
    assert result["text"] == f"{played.workspace / 'fine.txt'}:1: {'a' * 40}"


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        (r"(a)\1", r"backreferences (\1, (?P=name))"),
        (r"(?P<x>a)(?P=x)", r"backreferences (\1, (?P=name))"),
        ("foo(?=bar)", "lookahead or lookbehind"),
        ("(?<!x)y", "lookahead or lookbehind"),
        ("(?>a+)b", "atomic groups or possessive quantifiers"),
        (r"end\Z", r"\Z (use $ for the end of the line)"),
    ],
)
async def test_syntax_re2_lacks_is_named(tmp_path: Path, pattern: str, named: str) -> None:
    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        return [await client.prompt(sid, "Search")]

    played = await play(
        tmp_path, search(pattern), turns, files={"a.txt": "a\n"}, stderr=tmp_path / "stderr"
    )
    (result,) = report(played.results[0])["tool_results"]
    assert result["is_error"] is True
    assert result["text"].startswith(f"search_text failed: the pattern uses {named}")
    assert "which RE2, the engine of search_text, does not support" in result["text"]
    # RE2 prints nothing of its own on stderr.
    assert "re2" not in played.run.stderr.lower()


async def test_an_invalid_pattern_says_so(tmp_path: Path) -> None:
    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        return [await client.prompt(sid, "Search")]

    played = await play(tmp_path, search("[a-"), turns)
    (result,) = report(played.results[0])["tool_results"]
    assert result["text"] == (
        "search_text failed: not a valid regular expression (RE2 syntax): missing ]: [a-"
    )


def huge_file(workspace: Path) -> None:
    with (workspace / "huge.txt").open("wb") as f:
        f.truncate(HUGE)


@linux
async def test_stop_during_a_long_search_answers_cancelled(tmp_path: Path) -> None:
    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        huge_file(editor.root)
        stopped = await prompt_until(client, sid, "Search", reading(editor.root / "huge.txt"))
        return [stopped, await client.prompt(sid, "What happened?")]

    # The bridge then exits on stdin EOF within run_bridge's bound: a search
    # thread still reading would hold the interpreter at exit.
    played = await play(tmp_path, search("needle"), turns)
    stopped, after = played.results
    assert_cancelled(stopped)
    (result,) = report(after)["tool_results"]
    assert "stopped the turn while this search_text call was running" in result["text"]
    assert played.run.returncode == 0


async def test_the_tool_timeout_stops_a_long_search(tmp_path: Path) -> None:
    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        huge_file(editor.root)
        return [await client.prompt(sid, "Search")]

    played = await play(tmp_path, search("needle"), turns, extra=("--tool-timeout", "0.5"))
    (result,) = report(played.results[0])["tool_results"]
    assert result["text"] == "search_text timed out after 0.5 s: stopped."
    assert played.run.returncode == 0


@linux
async def test_stdin_eof_during_a_long_search_ends_the_process(tmp_path: Path) -> None:
    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        huge_file(editor.root)
        until = reading(editor.root / "huge.txt")
        return [await prompt_until(client, sid, "Search", until, then="disconnect")]

    played = await play(tmp_path, search("needle"), turns)
    assert played.run.returncode == 0
    # The search was recorded as stopped by the disconnect, and the log is whole.
    (result,) = played.of_type("tool/result")
    assert result["is_error"] is True
    assert "stopped the turn while this search_text call was running" in str(result["content"])


@linux
async def test_sigterm_during_a_long_search_ends_the_process(tmp_path: Path) -> None:
    async def turns(client: AcpClient, sid: str, editor: WorkspaceEditor) -> list[PromptResult]:
        huge_file(editor.root)

        async def prompt() -> None:
            with contextlib.suppress(AgentExited):
                await client.request("session/prompt", prompt_params(sid, "Search"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt)
            await wait_until(reading(editor.root / "huge.txt")(client, 0))
            cast(Any, client.process).send_signal(signal.SIGTERM)
        return []

    played = await play(tmp_path, search("needle"), turns)
    assert played.run.returncode == 0
    (result,) = played.of_type("tool/result")
    assert result["is_error"] is True
