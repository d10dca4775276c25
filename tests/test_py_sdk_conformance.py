"""Every frame of a complete session with the official Python SDK, checked
against the ACP JSON Schema.

`tests/test_sdk_client.py` drives the bridge with the Python SDK and checks
the text and ordering of what arrives; this module adds the schema check of
every frame in both directions, on the same session shape as
`tests/test_ts_sdk_client.py`, whose wire helpers it shares: initialize, a
new session, a streamed prompt stopped after K message chunks, and a
follow-up whose scripted answer reports what the model was sent.  A stream
observer on the SDK connection records every message in wire order.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, cast

import acp
import anyio
import pytest
from acp.connection import StreamDirection, StreamEvent
from acp.schema import ClientCapabilities, Implementation, PromptResponse
from acp_schema import load_acp_schema
from support.harness import EXAMPLES, ROOT
from test_ts_sdk_client import (
    SDK_PACKAGE,
    SDK_SCHEMA,
    install_ts_client,
    is_update,
    prompt_spans,
    streamed_text,
    toolchain_problem,
    unavailable,
    wire_errors,
)

from acp_bridge import __version__
from acp_bridge.client import BARRIER_METHOD
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records, session_path
from acp_bridge.providers.scripted import parse_report

STORY: Final = EXAMPLES / "story-then-report.json"
FIRST_PROMPT: Final = "Tell me a story about a lighthouse keeper."
FOLLOW_UP_PROMPT: Final = "Expand on your second point."
CANCEL_AFTER: Final = (1, 14)


class Client:
    """A duck-typed SDK client keeping the updates of the current prompt."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.changed = anyio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        self.changed.set()

    def chunks(self) -> list[str]:
        return [
            u.content.text
            for u in self.updates
            if getattr(u, "session_update", None) == "agent_message_chunk"
        ]

    async def wait_for_chunks(self, count: int) -> None:
        while len(self.chunks()) < count:
            self.changed = anyio.Event()
            await self.changed.wait()


@dataclass
class PyRun:
    cancel_after: int
    state_dir: Path
    transcript: list[tuple[str, Any]] = field(default_factory=list)
    session_id: str = ""
    init: Any = None
    answers: list[PromptResponse] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    text_at_cancel: str = ""
    returncode: int | None = None

    barrier_ids: set[Any] = field(default_factory=set)

    def observe(self, event: StreamEvent) -> None:
        direction = "recv" if event.direction is StreamDirection.INCOMING else "send"
        message = event.message
        # The barrier's request and its answer are the test's, not the session's.
        if message.get("method") == BARRIER_METHOD:
            self.barrier_ids.add(message.get("id"))
            return
        if "method" not in message and message.get("id") in self.barrier_ids:
            return
        self.transcript.append((direction, event.message))


async def barrier(conn: Any) -> None:
    """Until the bridge answers a request sent now: everything it wrote before
    (a late update, say) has been observed by then."""
    with pytest.raises(acp.RequestError):  # an unknown method, answered in order
        await conn.ext_method(BARRIER_METHOD.removeprefix("_"), {})


async def stopped_prompt(conn: Any, client: Client, run: PyRun) -> PromptResponse:
    answers: list[PromptResponse] = []

    async def prompt() -> None:
        answers.append(
            await conn.prompt(session_id=run.session_id, prompt=[acp.text_block(FIRST_PROMPT)])
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(prompt)
        await client.wait_for_chunks(run.cancel_after)
        run.text_at_cancel = "".join(client.chunks())
        await conn.cancel(session_id=run.session_id)
    return answers[0]


async def play(tmp: Path, cancel_after: int) -> PyRun:
    run = PyRun(cancel_after, tmp / "state")
    client = Client()
    project = tmp / "project"
    project.mkdir()
    with (tmp / "agent-stderr.txt").open("wb") as stderr:
        async with acp.spawn_agent_process(
            cast(Any, client),  # duck-typed: implements only what this session uses
            sys.executable,
            *("-m", "acp_bridge", "--provider", "fake", "--script", str(STORY)),
            *("--state-dir", str(run.state_dir)),
            env=dict(os.environ),
            cwd=ROOT,
            transport_kwargs={"stderr": stderr},
            observers=[run.observe],
        ) as (conn, proc):
            with anyio.fail_after(30):
                run.init = await conn.initialize(
                    protocol_version=acp.PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(),
                    client_info=Implementation(name="acp-bridge-py-conformance", version="0"),
                )
                run.session_id = (
                    await conn.new_session(cwd=str(project), mcp_servers=[])
                ).session_id
                run.answers.append(await stopped_prompt(conn, client, run))
                run.texts.append("".join(client.chunks()))
                await barrier(conn)
                client.updates = []
                run.answers.append(
                    await conn.prompt(
                        session_id=run.session_id, prompt=[acp.text_block(FOLLOW_UP_PROMPT)]
                    )
                )
                run.texts.append("".join(client.chunks()))
                await barrier(conn)
                assert proc.stdin is not None
                proc.stdin.close()
                run.returncode = await proc.wait()
    return run


# The fast tier plays the first Stop point; CI plays every one.
@pytest.fixture(
    scope="module",
    params=[
        pytest.param(k, id=f"stop-after-{k}", marks=[pytest.mark.slow] if i else [])
        for i, k in enumerate(CANCEL_AFTER)
    ],
)
def py_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> PyRun:
    k: int = request.param
    tmp = tmp_path_factory.mktemp(f"py-sdk-{k}")
    return anyio.run(play, tmp, k)


def test_session_runs_and_the_agent_exits_cleanly(py_run: PyRun) -> None:
    assert py_run.init.protocol_version == 1
    assert py_run.init.agent_info.name == "acp-bridge"
    assert py_run.init.agent_info.version == __version__
    assert [a.stop_reason for a in py_run.answers] == ["cancelled", "end_turn"]
    sent = [m.get("method") for d, m in py_run.transcript if d == "send"]
    assert sent == [
        "initialize",
        "session/new",
        "session/prompt",
        "session/cancel",
        "session/prompt",
    ]
    assert py_run.returncode == 0


def test_nothing_arrives_after_a_prompt_response(py_run: PyRun) -> None:
    transcript = py_run.transcript
    spans = prompt_spans(transcript)
    assert len(spans) == 2
    for n, (_start, answer, stop) in enumerate(spans):
        late = [m for d, m in transcript[answer + 1 : stop] if d == "recv" and is_update(m)]
        assert late == [], f"prompt {n + 1}: {len(late)} updates after its response: {late}"
    start, answer, _ = spans[0]
    assert streamed_text(m for d, m in transcript[start:answer] if d == "recv") == py_run.texts[0]


def test_follow_up_model_received_exactly_the_interrupted_text(py_run: PyRun) -> None:
    shown = py_run.texts[0]
    assert shown.startswith(py_run.text_at_cancel)
    report = parse_report(py_run.texts[1])
    assert report["last_assistant_text"] == shown, (
        f"the model was sent {report['last_assistant_text']!r}; the client was shown {shown!r}"
    )
    assert report["last_assistant_interrupted"] is True
    assert report["last_user_text"] == FOLLOW_UP_PROMPT


def test_every_frame_validates_against_the_acp_schema(py_run: PyRun) -> None:
    schema = load_acp_schema()
    problems = wire_errors(schema, py_run.transcript)
    assert not problems, "frames the ACP schema rejects:\n" + "\n".join(problems)


def test_every_frame_validates_against_the_schema_shipped_with_the_ts_sdk(py_run: PyRun) -> None:
    """The TypeScript SDK package ships the schema of a later ACP release; it
    is installed (once) for `test_ts_sdk_client`, so this check also runs where
    the official schema file is absent."""
    problem = toolchain_problem()
    if problem is not None:
        unavailable(problem)
    install_ts_client()
    schema = load_acp_schema(SDK_SCHEMA)
    assert schema is not None, f"the installed {SDK_PACKAGE} has no {SDK_SCHEMA.name}"
    problems = wire_errors(schema, py_run.transcript)
    assert not problems, f"frames the {SDK_PACKAGE} schema rejects:\n" + "\n".join(problems)


def test_session_log_passes_check_log(py_run: PyRun) -> None:
    records = read_records(session_path(str(py_run.state_dir), py_run.session_id))
    check_log(records)
    ends = [(r["reason"], r["forced"]) for r in records if r["type"] == "turn/end"]
    assert ends == [("cancelled", False), ("end_turn", False)]
