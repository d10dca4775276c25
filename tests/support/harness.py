"""Driving the real `acp-bridge` subprocess and normalizing what it did.

A scenario spawns the bridge with a script, plays an editor's part through
`acp_bridge.client.AcpClient`, and returns the wire transcript (both
directions, in order) and the session logs.  `normalize` and `coalesce_deltas`
(from the public kit, `acp_bridge.testing`, re-exported here) replace ids,
times and paths with stable placeholders so whole sessions can be snapshot-tested.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import mmap
import os
import subprocess
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import jsonschema

from acp_bridge.client import AcpClient, AgentExited, PromptResult, prompt_params
from acp_bridge.log.check import check_log
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.reader import read_records
from acp_bridge.providers.scripted import parse_report
from acp_bridge.testing import STDIN_CLOSED, TranscriptSnapshot
from acp_bridge.testing import coalesce_deltas as coalesce_deltas
from acp_bridge.testing import normalize as normalize
from support.bridge import Mode, barrier, start_bridge
from support.pipe_peer import InProcessClient

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ACP_SCHEMA = ROOT.parent / "shared" / "acp" / "schema.json"
EVENT_LOG_SCHEMA_PATH = ROOT / "schemas" / "event-log.schema.json"
EVENT_LOG_SCHEMA: dict[str, Any] = json.loads(EVENT_LOG_SCHEMA_PATH.read_text())
# Checks one record against the event-log JSON Schema.
EVENT_LOG_VALIDATOR = jsonschema.Draft202012Validator(EVENT_LOG_SCHEMA)


class SessionSnapshot(TranscriptSnapshot):
    """Snapshots of whole sessions live in the top-level ``snapshots/`` folder."""

    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        return str(ROOT / "snapshots" / test_location.basename)


@dataclass
class Run:
    client: AcpClient
    state_dir: Path
    returncode: int | None = None
    # Where the bridge's stderr went, when `run_bridge` was given a file for it.
    stderr_path: Path | None = None

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path is not None else ""

    def logs(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        sessions = self.state_dir / "sessions"
        if sessions.is_dir():
            for path in sorted(sessions.glob("*.jsonl")):
                out[path.stem] = read_records(path)
        return out

    def history(self, session_id: str) -> list[dict[str, Any]]:
        return derive_messages(self.logs()[session_id])

    def check_logs(self) -> None:
        for records in self.logs().values():
            check_log(records)


def write_script(tmp: Path, script: dict[str, Any]) -> Path:
    path = tmp / "script.json"
    path.write_text(json.dumps(script))
    return path


def tool_call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    """A scripted model event: the model calls tool ``name`` with ``arguments``."""
    return {"tool_call": {"id": call_id, "name": name, "arguments": arguments}}


async def run_bridge(
    script: Path,
    state_dir: Path,
    play: Callable[[AcpClient], Awaitable[None]],
    *,
    extra: tuple[str, ...] = (),
    close_stdin: bool = True,
    command: list[str] | None = None,
    stderr: Path | None = None,
    mode: Mode = "subprocess",
) -> Run:
    """Start the bridge (`support.bridge.start_bridge`; or ``command``, given the
    bridge's options), run ``play``, then close stdin and wait for exit.  With
    ``stderr``, the bridge's stderr goes to that file (read as `Run.stderr`).
    ``mode="inprocess"`` serves it in this process (no ``command``, no ``stderr``)."""
    async with start_bridge(
        state_dir,
        *extra,
        script=script,
        command=command,
        stderr=(stderr if stderr is not None else subprocess.DEVNULL)
        if mode == "subprocess"
        else None,
        mode=mode,
    ) as client:
        run = Run(client, state_dir, stderr_path=stderr)
        with anyio.fail_after(30):
            await play(client)
        if close_stdin:
            await client.close_stdin()
        # A failure (a hang past its bound, say) fails now, not whenever a
        # wedged bridge exits; start_bridge leaves no bridge behind.
        run.returncode = await wait_exit(client, within=15)
    return run


async def wait_exit(client: AcpClient, *, within: float = 15) -> int:
    """The bridge's exit status once it has exited and its stdout is at EOF, in
    either mode (stdin left as it is)."""
    if isinstance(client, InProcessClient):
        return await client.wait_exit(within=within)
    with anyio.fail_after(within):
        status = await client.agent.wait()
        await client.eof.wait()
    return status


def read_available(fd: int) -> bytes:
    """Everything a non-blocking pipe holds now (up to EOF)."""
    out = b""
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return out
        if not data:
            return out
        out += data


def report(result: PromptResult) -> dict[str, Any]:
    """The facts of a scripted ``report`` answer."""
    return parse_report(result.text())


async def prompt_and_look(
    client: AcpClient, session_id: str, text: str, **options: Any
) -> PromptResult:
    """`AcpClient.prompt`: ``late`` holds every update that arrived after the
    response and before the answer to a `barrier` (the client's ``settle``)."""
    return await client.prompt(session_id, text, **options)


def assert_cancelled(result: PromptResult) -> None:
    assert result.response.get("result") == {"stopReason": "cancelled"}, result.response


def cwd_for_tests() -> str:
    """A session's cwd for tests: an absolute directory that exists (``session/new``
    refuses any other), the same for every test of a run; snapshots replace it
    by ``<cwd>``."""
    path = os.path.join(os.path.realpath(tempfile.gettempdir()), "acp-bridge-tests-workspace")
    os.makedirs(path, exist_ok=True)
    return path


# -- stopping a turn at a chosen point ------------------------------------------

# STDIN_CLOSED (from the kit) is the transcript entry `prompt_until` adds where
# it closed the bridge's stdin.


async def wait_for_a_full_pipe(client: AcpClient) -> None:
    """Until the agent's stdout pipe is full: the bridge's next frame cannot be written.

    A pipe takes a write into the last page's slack or a free page: it is full
    once less than a page is left.  The client must not be reading
    (``client.agent.stdout.pause()``).
    """
    stdout = client.agent.stdout
    room = fcntl.fcntl(stdout.fd, fcntl.F_GETPIPE_SZ) - mmap.PAGESIZE
    # Polling: a pipe has no event for "full".
    with anyio.fail_after(30):
        while stdout.unread() < room:  # noqa: ASYNC110
            await anyio.sleep(0.002)


async def wait_until(condition: Callable[[], bool]) -> None:
    """Poll ``condition`` every couple of milliseconds until it holds (bound it with
    `anyio.fail_after`; `run_bridge` bounds the whole play)."""
    # Polling: a log file or the client's update list has no event to wait on.
    while not condition():  # noqa: ASYNC110
        await anyio.sleep(0.002)


def update_seen(client: AcpClient, kind: str, *, since: int = 0) -> Callable[[], bool]:
    """A condition: a ``session/update`` of ``kind`` arrived after ``client.updates[since]``."""
    return lambda: any(u.get("sessionUpdate") == kind for u in client.updates[since:])


def chunks_seen(client: AcpClient, count: int, *, since: int = 0) -> Callable[[], bool]:
    """A condition: ``count`` message or thought chunks arrived since ``client.updates[since]``."""
    kinds = ("agent_message_chunk", "agent_thought_chunk")
    return lambda: sum(u.get("sessionUpdate") in kinds for u in client.updates[since:]) >= count


def record_logged(state_dir: Path, type: str, *, turn: int | None = None) -> Callable[[], bool]:
    """A condition: a session log under ``state_dir`` holds a record of ``type`` (of ``turn``).

    For points the editor cannot see, such as a model stream that has started
    but not yet produced a token.
    """

    def check() -> bool:
        for path in (state_dir / "sessions").glob("*.jsonl"):
            for rec in read_records(path):
                if rec["type"] == type and (turn is None or rec["turn"] == turn):
                    return True
        return False

    return check


async def prompt_until(
    client: AcpClient,
    session_id: str,
    text: str,
    until: Callable[[AcpClient, int], Callable[[], bool]],
    *,
    then: str = "cancel",
    settle: bool | float = True,
) -> PromptResult:
    """Send a prompt; once ``until(client, first_update_index)()`` holds, stop the turn.

    ``then`` is ``"cancel"`` (send ``session/cancel``) or ``"disconnect"``
    (close the bridge's stdin; the transcript gets a `STDIN_CLOSED` entry).
    If the turn ends first, nothing is sent.  The result is that of
    `AcpClient.prompt`; after a disconnect with no answer, the response is ``{}``.
    Updates after the response are in ``late``: unless ``settle`` is false, they
    are looked for up to a `barrier` (after a disconnect: up to the bridge's EOF).
    """
    start = len(client.updates)
    condition = until(client, start)
    result: dict[str, Any] = {}

    async def run_prompt() -> None:
        params = prompt_params(session_id, text)
        with contextlib.suppress(AgentExited):
            result.update(await client.request("session/prompt", params))
        tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_prompt)
        await wait_until(condition)
        if then == "cancel":
            await client.notify("session/cancel", {"sessionId": session_id})
        elif then == "disconnect":
            assert client.process.stdin is not None
            client.record(*STDIN_CLOSED)
            await client.process.stdin.aclose()
        else:
            raise ValueError(f"then must be 'cancel' or 'disconnect', not {then!r}")
        await anyio.sleep_forever()
    end = len(client.updates)
    if settle:
        # Room for a late update to show: after a Stop, a barrier (the bridge
        # answers in order); after a disconnect, the bridge's last byte.
        if then == "disconnect":
            with anyio.fail_after(30):
                await client.eof.wait()
        else:
            await barrier(client)
    return PromptResult(result, client.updates[start:end], client.updates[end:])


def nested_pytest_env() -> dict[str, str]:
    """This environment for a pytest run a test starts, without what pytest-xdist
    sets in its workers (syrupy would take the inner run for a worker and keep
    its snapshot report to itself)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
