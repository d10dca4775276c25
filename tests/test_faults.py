"""Faults around a running turn, against the real bridge subprocess.

The editor goes away mid-stream (stdin closed, stdout closed, SIGTERM,
SIGINT), the provider wedges past the cancel deadline, stalls past the idle
timeout or fails before its first token, and a client floods cancels and then
sends two prompts at once.  Every test checks the session log with
`check_log` and the model history derived from it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from support.bridge import barrier
from support.harness import EXAMPLES, prompt_and_look, run_bridge, write_script

from acp_bridge.client import AcpClient, AgentExited, PromptResult, bridge_command
from acp_bridge.log.check import check_log
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.reader import read_records, session_path

pytestmark = pytest.mark.anyio

# Guards against hangs only; nothing here measures speed.
HANG_GUARD = 20


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "interrupted": False}


def assistant(text: str, *, interrupted: bool = False) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "interrupted": interrupted,
    }


def of_type(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == kind]


def message_ids(updates: list[dict[str, Any]]) -> set[str]:
    return {u["messageId"] for u in updates if "messageId" in u}


def check_session(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`check_log` the records and return the history derived from them."""
    check_log(records)
    return derive_messages(records)


# -- the editor goes away mid-stream ------------------------------------------


class FdReceiveStream(anyio.abc.ByteReceiveStream):
    """The read end of the bridge's stdout pipe, owned by the test.

    anyio's process streams do not close the pipe on ``aclose``; this one
    does, so the bridge sees a closed stdout exactly as when an editor dies.
    """

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self.fd: int | None = fd

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self.fd is None:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self.fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    async def aclose(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)


@dataclass
class Stream:
    """A prompt streaming from the endless script, and how it ended."""

    process: anyio.abc.Process
    client: AcpClient
    stdout: FdReceiveStream
    state_dir: Path
    session_id: str = ""
    response: dict[str, Any] | None = None
    returncode: int | None = None
    notes: list[str] = field(default_factory=list)

    def records(self) -> list[dict[str, Any]]:
        return read_records(session_path(str(self.state_dir), self.session_id))


@asynccontextmanager
async def spawn_bridge(tmp_path: Path, script: Path, *extra: str) -> AsyncIterator[Stream]:
    """The bridge on pipes the test owns; killed on exit if it is still running."""
    state = tmp_path / "state"
    read_fd, write_fd = os.pipe()
    try:
        with (tmp_path / "stderr.txt").open("wb") as stderr:
            process = await anyio.open_process(
                bridge_command(
                    "--provider",
                    "fake",
                    "--script",
                    str(script),
                    "--state-dir",
                    str(state),
                    *extra,
                ),
                stdout=write_fd,
                stderr=stderr,
            )
    finally:
        os.close(write_fd)
    stdout = FdReceiveStream(read_fd)
    assert process.stdin is not None
    client = AcpClient.over(process.stdin, stdout)
    try:
        yield Stream(process, client, stdout, state)
    finally:
        if process.returncode is None:
            process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()
        await stdout.aclose()
        await process.aclose()


async def fault_mid_stream(tmp_path: Path, fault: str) -> Stream:
    """Start a prompt on the endless script, wait for chunks, then apply ``fault``."""
    async with spawn_bridge(tmp_path, EXAMPLES / "endless.json") as run:
        client = run.client
        async with anyio.create_task_group() as tg:
            reader = anyio.CancelScope()

            async def read() -> None:
                with reader:
                    await client.read_loop()

            tg.start_soon(read)
            with anyio.fail_after(HANG_GUARD):
                await client.initialize()
                run.session_id = await client.new_session(str(tmp_path))
                streaming = anyio.Event()

                def on_update(update: dict[str, Any]) -> None:
                    if len(client.updates) >= 20:
                        streaming.set()

                async def prompt() -> None:
                    try:
                        result = await client.prompt(
                            run.session_id, "go on forever", on_update=on_update, settle=0
                        )
                        run.response = result.response
                    except* AgentExited as group:  # went away without answering
                        run.notes.extend(str(exc) for exc in group.exceptions)

                tg.start_soon(prompt)
                await streaming.wait()  # mid-stream
            if fault == "stdin":
                assert run.process.stdin is not None
                await run.process.stdin.aclose()
            elif fault == "stdout":
                reader.cancel()
                await run.stdout.aclose()
            else:
                run.process.send_signal(getattr(signal, fault))
            with anyio.fail_after(HANG_GUARD):
                run.returncode = await run.process.wait()
                await client.eof.wait()
    return run


@pytest.mark.parametrize("fault", ["stdin", "stdout", "SIGTERM", "SIGINT"])
async def test_editor_gone_mid_stream_is_recorded_as_disconnected(
    tmp_path: Path, fault: str
) -> None:
    run = await fault_mid_stream(tmp_path, fault)
    stderr = (tmp_path / "stderr.txt").read_text(errors="replace")
    assert run.returncode == 0, f"exit status {run.returncode}; stderr:\n{stderr}"

    records = run.records()
    history = check_session(records)
    last = records[-1]
    assert (last["type"], last["turn"], last.get("reason")) == ("turn/end", 1, "disconnected"), (
        f"the log should end with turn 1's turn/end 'disconnected', it ends with {last}"
    )
    assert last["forced"] is False
    attempts = of_type(records, "assistant/attempt")
    assert [a["outcome"] for a in attempts] == ["disconnected"]
    assert of_type(records, "assistant/message") == [], "a disconnect is not a user stop"
    assert [r["reason"] for r in of_type(records, "step/end")] == ["disconnected"]
    assert [r["outcome"] for r in of_type(records, "stream/end")] == ["abandoned"]
    # The turn is not in the model history: only the prompt is.
    assert history == [user("go on forever")]

    shown = "".join(
        u["content"]["text"]
        for u in run.client.updates
        if u.get("sessionUpdate") == "agent_message_chunk"
    )
    kept = "".join(b["text"] for b in attempts[0]["content"] if b["type"] == "text")
    if fault == "stdout":
        # The client stopped reading: it saw a prefix of what the bridge sent.
        assert kept.startswith(shown)
    else:
        # The editor could still read: every queued chunk was written before
        # exit, and the attempt keeps exactly that.
        assert kept == shown
        # The pending prompt is answered before exit, and nothing follows it.
        response = run.response
        assert response is not None, run.notes
        assert response.get("result") == {"stopReason": "cancelled"}, response
        received = [msg for direction, msg in run.client.transcript if direction == "recv"]
        assert received[-1] == response, "frames after the prompt response"


# -- a provider that ignores the cancel -----------------------------------------

HANG_SECONDS = 5.0
PREFIX = "The answer starts here and then the provider wedges"


def _wedged_script(
    tmp_path: Path, seconds: float, after: list[dict[str, Any]], then: dict[str, Any]
) -> Path:
    """A script whose first reply streams `PREFIX`, then wedges for ``seconds``
    ignoring the Stop (``after``: what it would stream next); every later
    request gets ``then``."""
    wedge = {"hang": {"ignore_cancel": True, "seconds": seconds}}
    first = {"events": [{"text": PREFIX, "chunk_size": 5}, wedge, *after]}
    return write_script(tmp_path, {"when_exhausted": "repeat_last", "responses": [first, then]})


@pytest.mark.slow
async def test_cancel_deadline_abandons_a_wedged_provider(tmp_path: Path) -> None:
    asked = ["last_user_text", "last_assistant_text", "last_assistant_interrupted"]
    script = _wedged_script(
        tmp_path, HANG_SECONDS, [{"text": " LEAKED"}], then={"events": [{"report": asked}]}
    )
    chunks = -(-len(PREFIX) // 5)
    results: list[PromptResult] = []
    quiet: list[int] = []

    async def play(client: AcpClient) -> None:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        start = time.monotonic()
        first = await prompt_and_look(client, sid, "first", cancel_after=chunks)
        results.append(first)
        results.append(await prompt_and_look(client, sid, "second"))
        # Let the wedged provider come back; nothing of it may surface.
        seen = len(client.transcript)
        await anyio.sleep(max(0.0, start + HANG_SECONDS + 0.5 - time.monotonic()))
        await barrier(client)  # what the bridge made of it has arrived
        quiet.append(len(client.transcript) - seen)
        results.append(await prompt_and_look(client, sid, "third"))

    run = await run_bridge(script, tmp_path / "state", play, extra=("--cancel-deadline", "0.5"))
    assert run.returncode == 0
    first, second, third = results

    assert first.stop_reason == "cancelled"
    assert first.text() == PREFIX
    # Answered at the cancel deadline, not when the wedged provider returned:
    # the turn's end is recorded as forced (asserted below with the log).

    def report(user: str, text: str, interrupted: bool) -> str:
        return (
            f"last_user_text: {json.dumps(user)}\n"
            f"last_assistant_text: {json.dumps(text)}\n"
            f"last_assistant_interrupted: {json.dumps(interrupted)}"
        )

    assert second.stop_reason == "end_turn"
    assert second.text() == report("second", PREFIX, True)
    assert third.stop_reason == "end_turn"
    assert third.text() == report("third", second.text(), False)
    assert [r.late for r in results] == [[], [], []], "updates after a prompt response"
    assert quiet == [0], "the wedged turn wrote to the editor after it was abandoned"
    ids = [message_ids(r.updates) for r in results]
    assert [len(i) for i in ids] == [1, 1, 1], ids
    assert len(set().union(*ids)) == 3, ids

    (sid,) = run.logs()
    records = run.logs()[sid]
    history = check_session(records)
    end1 = next(r for r in records if r["type"] == "turn/end" and r["turn"] == 1)
    assert (end1["reason"], end1["forced"]) == ("cancelled", True)
    after_end1 = [r for r in records if r["seq"] > end1["seq"] and r["turn"] == 1]
    assert after_end1 == [], f"turn 1 logged after its turn/end: {after_end1}"
    (interrupted,) = [m for m in of_type(records, "assistant/message") if m["turn"] == 1]
    assert interrupted["interrupted"] is True
    assert interrupted["content"] == [{"type": "text", "text": PREFIX}]
    assert "LEAKED" not in json.dumps(records)
    assert history == [
        user("first"),
        assistant(PREFIX, interrupted=True),
        user("second"),
        assistant(second.text()),
        user("third"),
        assistant(third.text()),
    ]


async def test_a_wedged_turn_does_not_hold_its_sessions_next_prompt(tmp_path: Path) -> None:
    """The watchdog ends a turn whose provider ignores the Stop; the session's
    next prompt then runs at once, while the wedged task still has its minute
    to go (the turn's task is not the prompt's: it holds no lock of the queue)."""
    wedge = 60.0
    script = _wedged_script(tmp_path, wedge, [], then={"events": [{"text": "next"}]})
    chunks = -(-len(PREFIX) // 5)
    results: list[PromptResult] = []

    async def play(client: AcpClient) -> None:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        with anyio.fail_after(HANG_GUARD):  # a third of the wedge
            results.append(await prompt_and_look(client, sid, "first", cancel_after=chunks))
            results.append(await prompt_and_look(client, sid, "second"))

    run = await run_bridge(script, tmp_path / "state", play, extra=("--cancel-deadline", "0.5"))
    assert run.returncode == 0
    first, second = results
    assert first.stop_reason == "cancelled"
    assert (second.stop_reason, second.text()) == ("end_turn", "next")
    records = next(iter(run.logs().values()))
    end1 = next(r for r in records if r["type"] == "turn/end" and r["turn"] == 1)
    assert (end1["reason"], end1["forced"]) == ("cancelled", True)


@pytest.mark.parametrize("stop", ["cancel-then-quit", "quit-while-wedged"])
async def test_an_abandoned_turn_does_not_hold_the_exit(tmp_path: Path, stop: str) -> None:
    wedge = 60.0
    script = write_script(
        tmp_path,
        {
            "responses": [
                {
                    "events": [
                        {"text": PREFIX, "chunk_size": 5},
                        {"hang": {"ignore_cancel": True, "seconds": wedge}},
                    ]
                }
            ]
        },
    )
    chunks = -(-len(PREFIX) // 5)
    exited_in_time = False
    async with spawn_bridge(tmp_path, script, "--cancel-deadline", "0.5") as run:
        client = run.client
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.read_loop)
            with anyio.fail_after(HANG_GUARD):
                await client.initialize()
                run.session_id = await client.new_session(str(tmp_path))
                if stop == "cancel-then-quit":
                    first = await client.prompt(run.session_id, "first", cancel_after=chunks)
                    assert first.stop_reason == "cancelled"
                else:
                    prefix_shown = anyio.Event()

                    def on_update(update: dict[str, Any]) -> None:
                        if len(client.updates) == chunks:
                            prefix_shown.set()

                    async def prompt() -> None:
                        result = await client.prompt(run.session_id, "first", on_update=on_update)
                        run.response = result.response

                    tg.start_soon(prompt)
                    await prefix_shown.wait()
            assert run.process.stdin is not None
            await run.process.stdin.aclose()
            # Shutdown is bounded by the cancel deadline + 1 s and a 2 s drain;
            # the wedged provider would hold on for a minute.
            with anyio.move_on_after(6):
                run.returncode = await run.process.wait()
                exited_in_time = True
            tg.cancel_scope.cancel()
    records = run.records()
    check_log(records)
    end1 = next(r for r in records if r["type"] == "turn/end")
    want = "cancelled" if stop == "cancel-then-quit" else "disconnected"
    assert (end1["reason"], end1["forced"]) == (want, True)
    assert exited_in_time, (
        "the bridge was still running 6 s after its stdin closed: its exit waits for "
        "the abandoned turn's provider call"
    )
    assert run.returncode == 0


# -- a stalled stream and a failing provider ------------------------------------


@pytest.mark.parametrize("prefix", ["", "Half an ans"], ids=["before-first-token", "mid-stream"])
async def test_idle_timeout_fails_the_request(tmp_path: Path, prefix: str) -> None:
    events: list[dict[str, Any]] = [{"text": prefix, "chunk_size": 4}] if prefix else []
    script = write_script(
        tmp_path,
        {
            "responses": [
                {"events": [*events, {"stall_ms": 3000}, {"text": "never sent"}]},
                {"events": [{"report": ["message_count", "last_assistant_text"]}]},
            ]
        },
    )
    results: list[PromptResult] = []

    async def play(client: AcpClient) -> None:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        results.append(await prompt_and_look(client, sid, "stall"))
        results.append(await prompt_and_look(client, sid, "again"))

    run = await run_bridge(script, tmp_path / "state", play, extra=("--idle-timeout", "0.5"))
    assert run.returncode == 0
    failed, again = results
    assert "result" not in failed.response, f"expected a JSON-RPC error: {failed.response}"
    error = failed.response["error"]
    assert error["code"] == -32603
    assert error["data"]["kind"] == "idle_timeout", error
    assert failed.text() == prefix
    assert [failed.late, again.late] == [[], []]
    # The failed attempt is not in what the model is sent next.
    assert again.stop_reason == "end_turn"
    assert again.text() == "message_count: 1\nlast_assistant_text: null"

    (records,) = run.logs().values()
    history = check_session(records)
    turn1 = [r for r in records if r["turn"] == 1]
    (attempt,) = of_type(turn1, "assistant/attempt")
    assert attempt["outcome"] == "timed_out"
    assert attempt["content"] == ([{"type": "text", "text": prefix}] if prefix else [])
    (request_error,) = of_type(turn1, "agent/request-error")
    assert request_error["attempt"] == attempt["attempt"]
    assert [r["reason"] for r in of_type(turn1, "step/end")] == ["timed_out"]
    assert [r["reason"] for r in of_type(turn1, "turn/end")] == ["error"]
    assert of_type(turn1, "assistant/message") == []
    assert history[0] == {
        "role": "user",
        "content": [{"type": "text", "text": "stall"}, {"type": "text", "text": "again"}],
        "interrupted": False,
    }


async def test_provider_error_before_the_first_token(tmp_path: Path) -> None:
    script = write_script(
        tmp_path,
        {
            "responses": [
                {
                    "events": [
                        {
                            "error": {
                                "message": "Overloaded",
                                "kind": "overloaded",
                                "status": 529,
                                "retryable": True,
                            }
                        }
                    ]
                },
                {"events": [{"text": "Recovered.", "chunk_size": 3}]},
            ]
        },
    )
    results: list[PromptResult] = []

    async def play(client: AcpClient) -> None:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        results.append(await prompt_and_look(client, sid, "hello"))
        results.append(await prompt_and_look(client, sid, "hello again"))

    run = await run_bridge(script, tmp_path / "state", play)
    assert run.returncode == 0
    failed, again = results
    assert "result" not in failed.response, f"expected a JSON-RPC error: {failed.response}"
    error = failed.response["error"]
    assert error["code"] == -32603
    assert "Overloaded" in error["message"]
    assert {k: error["data"][k] for k in ("kind", "retryable", "status")} == {
        "kind": "overloaded",
        "retryable": True,
        "status": 529,
    }
    # The first turn announces the session's title, nothing more (its
    # commands came right after session/new).
    assert [u["sessionUpdate"] for u in failed.updates] == ["session_info_update"]
    assert failed.late == []
    assert again.stop_reason == "end_turn"
    assert again.text() == "Recovered."

    (records,) = run.logs().values()
    history = check_session(records)
    turn1 = [r for r in records if r["turn"] == 1]
    (attempt,) = of_type(turn1, "assistant/attempt")
    assert (attempt["outcome"], attempt["content"]) == ("provider_error", [])
    (request_error,) = of_type(turn1, "agent/request-error")
    assert request_error["error"]["kind"] == "overloaded"
    assert request_error["attempt"] == attempt["attempt"]
    assert [r["reason"] for r in of_type(turn1, "turn/end")] == ["error"]
    assert history == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "text", "text": "hello again"},
            ],
            "interrupted": False,
        },
        assistant("Recovered."),
    ]


# -- a noisy client -------------------------------------------------------------


async def test_cancel_flood_then_two_prompts_at_once(tmp_path: Path) -> None:
    first_answer = "The first answer, slowly."
    script = write_script(
        tmp_path,
        {
            "responses": [
                {"events": [{"text": first_answer, "chunk_size": 3, "chunk_delay_ms": 15}]},
                {"events": [{"report": ["last_user_text", "last_assistant_text"]}]},
            ]
        },
    )
    responses: dict[str, dict[str, Any]] = {}
    session: list[str] = []

    async def play(client: AcpClient) -> None:
        await client.initialize()
        sid = await client.new_session(str(tmp_path))
        session.append(sid)
        for _ in range(50):
            await client.notify("session/cancel", {"sessionId": sid})

        async def prompt(text: str) -> None:
            responses[text] = await client.request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt, "one")
            await anyio.lowlevel.checkpoint()
            tg.start_soon(prompt, "two")
        # No waiting here: `run_bridge` reads stdout to EOF, so a frame sent
        # after the last answer is in the transcript checked below.

    run = await run_bridge(script, tmp_path / "state", play)
    assert run.returncode == 0
    for text in ("one", "two"):
        assert responses[text].get("result") == {"stopReason": "end_turn"}, responses[text]

    # Wire order: the first prompt's updates, its answer, then the second's.
    sent = [
        m for d, m in run.client.transcript if d == "send" and m.get("method") == "session/prompt"
    ]
    assert [m["params"]["prompt"][0]["text"] for m in sent] == ["one", "two"]
    (new,) = [m for d, m in run.client.transcript if d == "send" and m["method"] == "session/new"]
    received = [m for d, m in run.client.transcript if d == "recv"]

    def answer(request: dict[str, Any]) -> int:
        return next(
            i for i, m in enumerate(received) if m.get("id") == request["id"] and "method" not in m
        )

    opened, answers = answer(new), [answer(p) for p in sent]
    assert answers[0] < answers[1], "the second prompt was answered first"
    spans = [received[opened + 1 : answers[0]], received[answers[0] + 1 : answers[1]]]
    streamed: list[tuple[set[str], str]] = []
    for span in spans:
        assert all(m.get("method") == "session/update" for m in span), span
        updates = [m["params"]["update"] for m in span]
        # The session's first turn also announces its commands and title.
        session_state = ("available_commands_update", "session_info_update")
        updates = [u for u in updates if u["sessionUpdate"] not in session_state]
        assert {u["sessionUpdate"] for u in updates} == {"agent_message_chunk"}
        streamed.append((message_ids(updates), "".join(u["content"]["text"] for u in updates)))
    assert received[answers[1] + 1 :] == [], "frames after the last answer"
    (one_id,), (two_id,) = streamed[0][0], streamed[1][0]
    assert one_id != two_id
    second_answer = 'last_user_text: "two"\n' + f"last_assistant_text: {json.dumps(first_answer)}"
    assert [text for _, text in streamed] == [first_answer, second_answer]

    records = run.logs()[session[0]]
    history = check_session(records)
    lifecycle = [(r["type"], r["turn"]) for r in records if r["type"] in ("turn/start", "turn/end")]
    assert lifecycle == [("turn/start", 1), ("turn/end", 1), ("turn/start", 2), ("turn/end", 2)]
    assert [r["reason"] for r in of_type(records, "turn/end")] == ["end_turn", "end_turn"]
    assert history == [
        user("one"),
        assistant(first_answer),
        user("two"),
        assistant(second_answer),
    ]
