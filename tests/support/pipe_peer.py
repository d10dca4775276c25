"""Test plumbing for many prompts at once: a raw peer, a prompt tracker, two ways to run.

The editor is the package's client, `acp_bridge.client.AcpClient`: it writes any
bytes to the bridge's stdin and reads its stdout line by line (every line must
be a JSON-RPC 2.0 object, anything else is kept in ``bad_lines``), responses
are indexed by id (a reused id may legitimately be answered more than once,
so each id maps to a list), and an optional hook sees every message in wire
order.

`PromptTracker` plays prompts on many sessions at once.  A session runs its
prompts one at a time and in order, so every ``session/update`` belongs to
the oldest unanswered prompt of its session; the tracker attributes it there
and records each violation: an update for a session never opened here (cross
talk), an update for a session with no unanswered prompt (an update after the
response: invariant I1), a prompt answered before an older one of its session.

`bridge_on_pipes` serves the bridge in this process on two `os.pipe` pairs
(as ``test_cancel_property`` does); `bridge_subprocess` runs the real
``acp-bridge`` command.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.abc

from acp_bridge.client import (
    CHUNK_KINDS,
    AcpClient,
    FdSink,
    FdSource,
    Json,
    RequestId,
    bridge_command,
    id_key,
    is_response,
)
from acp_bridge.log.reader import read_records
from acp_bridge.loop.turn import TurnConfig
from acp_bridge.providers.base import Provider
from acp_bridge.providers.script_format import parse_script
from acp_bridge.providers.scripted import ScriptedProvider
from acp_bridge.server import ServeOptions, serve

# -- prompts on many sessions -----------------------------------------------------------


@dataclass(eq=False)
class Prompt:
    session_id: str
    text: str
    rid: RequestId
    cancel_after: int | None = None
    updates: list[Json] = field(default_factory=list)
    chunks: int = 0
    response: Json | None = None
    cancel_sent: bool = False
    # Set once ``cancel_after`` chunks have arrived, or when answered.
    reached: anyio.Event = field(default_factory=anyio.Event)
    answered: anyio.Event = field(default_factory=anyio.Event)

    @property
    def stop_reason(self) -> str | None:
        result = (self.response or {}).get("result")
        return result.get("stopReason") if isinstance(result, dict) else None

    def delivered(self, kind: str = "agent_message_chunk") -> str:
        return "".join(
            u["content"]["text"]
            for u in self.updates
            if u.get("sessionUpdate") == kind and u["content"].get("type") == "text"
        )

    def params(self) -> Json:
        return {"sessionId": self.session_id, "prompt": [{"type": "text", "text": self.text}]}


class PromptTracker:
    """Attributes updates and responses to prompts (see the module docstring)."""

    def __init__(self, peer: AcpClient) -> None:
        self.peer = peer
        peer.on_message = self.observe
        self.queues: dict[str, deque[Prompt]] = {}
        self.by_session: dict[str, list[Prompt]] = {}
        self.prompts: list[Prompt] = []
        self.violations: list[str] = []
        self._by_id: dict[bytes, Prompt] = {}

    def open(self, session_id: str) -> None:
        self.queues[session_id] = deque()
        self.by_session[session_id] = []

    def register(self, prompt: Prompt) -> Prompt:
        """Track ``prompt``; call it right before the prompt is written, in wire order."""
        key = id_key(prompt.rid)
        assert key not in self._by_id, f"prompt id {prompt.rid!r} is already tracked"
        self._by_id[key] = prompt
        self.queues[prompt.session_id].append(prompt)
        self.by_session[prompt.session_id].append(prompt)
        self.prompts.append(prompt)
        return prompt

    async def send(self, session_id: str, text: str, *, cancel_after: int | None = None) -> Prompt:
        prompt = self.register(Prompt(session_id, text, self.peer.next_id(), cancel_after))
        await self.peer.send(prompt_frame(prompt))
        return prompt

    async def cancel(self, prompt: Prompt) -> None:
        prompt.cancel_sent = True
        await self.peer.notify("session/cancel", {"sessionId": prompt.session_id})

    def observe(self, msg: Json) -> None:
        if msg.get("method") == "session/update":
            self._update(msg)
        elif is_response(msg):
            self._response(msg)

    def _update(self, msg: Json) -> None:
        params = msg.get("params")
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        update = params.get("update") if isinstance(params, dict) else None
        if isinstance(update, dict) and update.get("sessionUpdate") == "available_commands_update":
            return  # about the session, sent as it opens (maybe before `open`): no prompt's
        if not isinstance(session_id, str) or session_id not in self.queues:
            self.violations.append(f"an update for a session never opened here: {msg}")
            return
        if not isinstance(update, dict):
            self.violations.append(f"an update without an update object: {msg}")
            return
        queue = self.queues[session_id]
        if not queue:
            self.violations.append(
                f"an update for {session_id} with no prompt in flight (after its response?): "
                f"{update.get('sessionUpdate')}"
            )
            return
        prompt = queue[0]
        prompt.updates.append(update)
        if update.get("sessionUpdate") in CHUNK_KINDS:
            prompt.chunks += 1
            if prompt.cancel_after is not None and prompt.chunks >= prompt.cancel_after:
                prompt.reached.set()

    def _response(self, msg: Json) -> None:
        key = id_key(msg["id"])
        prompt = self._by_id.get(key)
        if prompt is None:
            return
        if prompt.response is not None:
            self.violations.append(f"prompt {prompt.rid!r} answered twice: {msg}")
            return
        queue = self.queues[prompt.session_id]
        if queue and queue[0] is not prompt:
            self.violations.append(
                f"prompt {prompt.rid!r} answered before the older prompt {queue[0].rid!r} "
                f"of session {prompt.session_id}"
            )
        if prompt in queue:
            queue.remove(prompt)
        prompt.response = msg
        prompt.answered.set()
        prompt.reached.set()


def prompt_frame(prompt: Prompt) -> Json:
    return {
        "jsonrpc": "2.0",
        "id": prompt.rid,
        "method": "session/prompt",
        "params": prompt.params(),
    }


# -- running the bridge -----------------------------------------------------------------


class PipeSend(FdSink):
    """`FdSink` whose owner closes the descriptor."""

    async def aclose(self) -> None:
        pass


PipeReceive = FdSource


class CorkedSend(PipeSend):
    """A pipe writer that can hold what is sent and write it all at once."""

    def __init__(self, fd: int) -> None:
        super().__init__(fd)
        self.corked: list[bytes] | None = None

    def cork(self) -> None:
        """Hold what is sent until `uncork`, which writes it all at once."""
        self.corked = []

    async def uncork(self) -> None:
        held, self.corked = self.corked or [], None
        await super().send(b"".join(held))

    async def send(self, data: bytes, /) -> None:
        if self.corked is not None:
            self.corked.append(data)
            return
        await super().send(data)


class InProcessClient(AcpClient):
    """The editor's side of an in-process bridge (`bridge_on_pipes`): like a
    client of a subprocess, `finish` closes stdin and returns the exit status;
    there is no process (``agent`` raises `TypeError`)."""

    served: InProcess

    async def wait_exit(self, *, within: float = 60) -> int:
        """The bridge's exit status once `serve` has returned and stdout is at EOF."""
        with anyio.fail_after(within):
            await self.served.done.wait()
            await self.eof.wait()
        assert self.served.status is not None, "serve() raised"
        return self.served.status

    async def finish(self, *, within: float = 60) -> int:
        await self.close_stdin()
        return await self.wait_exit(within=within)


@dataclass
class InProcess:
    client: InProcessClient
    state_dir: str
    status: int | None = None
    # Set when `serve` has returned (or raised).
    done: anyio.Event = field(default_factory=anyio.Event)

    def records(self, session_id: str) -> list[Json]:
        return read_records(os.path.join(self.state_dir, "sessions", f"{session_id}.jsonl"))


def scripted_factory(script: Json) -> Callable[[], Provider]:
    parsed = parse_script(script, "test")

    def factory() -> Provider:
        return ScriptedProvider(parsed)

    return factory


@asynccontextmanager
async def bridge_on_pipes(
    script: Json,
    state_dir: str,
    *,
    keep: bool = True,
    cancel_deadline: float = 5.0,
    provider: Callable[[], Provider] | None = None,
    turn: TurnConfig | None = None,
    load_provider: Callable[[], Callable[[], Provider]] | None = None,
    command_line: Mapping[str, Any] | None = None,
) -> AsyncIterator[InProcess]:
    """Serve ``script`` (or the providers ``provider`` makes) in this process;
    on exit close stdin and read stdout to EOF.

    The body plays the editor through ``served.client``; when it ends (or closes
    stdin itself), the bridge shuts down and ``served.status`` is its exit status.
    ``turn`` replaces the turn settings (``cancel_deadline``, no idle timeout),
    ``load_provider`` the loading of the provider, and ``command_line`` adds
    the other `ServeOptions` the command sets (`support.bridge.start_bridge`).
    """
    factory = provider or scripted_factory(script)
    to_agent_r, to_agent_w = os.pipe()
    from_agent_r, from_agent_w = os.pipe()
    closed: set[int] = set()

    def close(fd: int) -> None:
        if fd not in closed:
            closed.add(fd)
            os.close(fd)

    class _Stdin(CorkedSend):
        async def aclose(self) -> None:
            # Marked closed first: an answer the client sends later (a request
            # of the bridge's that crossed the close) meets ClosedResourceError,
            # never a closed descriptor or one reused since.
            self.closed = True
            close(self.fd)

    options = ServeOptions(
        state_dir=state_dir,
        load_provider=load_provider or (lambda: factory),
        turn=turn or TurnConfig(cancel_deadline=cancel_deadline, idle_timeout=None),
        stdin_fd=to_agent_r,
        stdout_fd=from_agent_w,
        handle_signals=False,
        # An abandoned turn must not make the test's own process exit.
        exit_when_stuck=False,
        **(command_line or {}),
    )
    client = InProcessClient.over(_Stdin(to_agent_w), PipeReceive(from_agent_r), keep=keep)
    assert isinstance(client, InProcessClient)
    served = InProcess(client, state_dir)
    client.served = served

    async def run_server() -> None:
        try:
            served.status = await serve(options)
        finally:
            close(from_agent_w)  # the bridge is done: the client sees EOF
            served.done.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_server)
            tg.start_soon(client.read_loop)
            yield served
            await client.close_stdin()
            with anyio.fail_after(20):
                await client.eof.wait()
    finally:
        for fd in (to_agent_r, to_agent_w, from_agent_r, from_agent_w):
            close(fd)


@dataclass
class Spawned:
    peer: AcpClient
    process: anyio.abc.Process
    state_dir: Path
    returncode: int | None = None


@asynccontextmanager
async def bridge_subprocess(
    script: Path, state_dir: Path, stderr: IO[bytes], *extra: str, keep: bool = True
) -> AsyncIterator[Spawned]:
    """Run ``acp-bridge --provider fake``; on exit close stdin and wait for the exit."""
    command = bridge_command(
        "--provider", "fake", "--script", str(script), "--state-dir", str(state_dir), *extra
    )
    process = await anyio.open_process(command, stderr=stderr)
    assert process.stdin is not None
    assert process.stdout is not None
    peer = AcpClient(process, keep=keep)
    spawned = Spawned(peer, process, state_dir)
    async with process, anyio.create_task_group() as tg:
        tg.start_soon(peer.read_loop)
        try:
            yield spawned
            await peer.close_stdin()
            with anyio.fail_after(20):
                spawned.returncode = await process.wait()
                await peer.eof.wait()
        finally:
            if process.returncode is None:
                process.kill()
            tg.cancel_scope.cancel()


__all__ = [
    "CHUNK_KINDS",
    "InProcess",
    "Json",
    "Prompt",
    "PromptTracker",
    "Spawned",
    "bridge_on_pipes",
    "bridge_subprocess",
    "id_key",
    "is_response",
    "prompt_frame",
    "scripted_factory",
]
