"""The protocol edge (`acp_bridge.protocol`): the engine below it never imports
it, a connection gets its dialect at ``initialize``, and v1's turn end is the
prompt's answer."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from acp_bridge.acp.edge import to_rpc_error
from acp_bridge.errors import LogNotWritable
from acp_bridge.protocol import V1, negotiate
from acp_bridge.protocol.frames import UpdateFrames

PACKAGE = Path(__file__).resolve().parent.parent / "acp_bridge"
# The engine and what is below it: none of it speaks a wire format.
ENGINE = ("loop", "compaction", "log", "tools", "providers", "context", "transport", "jsonrpc")


def _imports(path: Path) -> list[str]:
    """The modules ``path`` imports, as absolute names."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names.append(module)
            names += [f"{module}.{alias.name}" for alias in node.names]
    return names


@pytest.mark.parametrize("layer", ENGINE)
def test_the_engine_does_not_import_the_protocol_edge(layer: str) -> None:
    offenders = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        for name in _imports(path)
        if name == "acp_bridge.protocol" or name.startswith("acp_bridge.protocol.")
    ]
    assert offenders == []


@pytest.mark.parametrize("asked", [0, 1, 3, 65535])
def test_every_client_but_one_asking_2_gets_v1(asked: int) -> None:
    assert negotiate(2, 1) is V1  # --protocol 1
    assert negotiate(2).version == 2
    dialect = negotiate(asked)
    assert dialect is V1
    assert dialect.version == 1
    frames = dialect.session_frames("sess_x")
    assert isinstance(frames, UpdateFrames)
    assert frames.session_id == "sess_x"


class _Reply:
    def __init__(self) -> None:
        self.results: list[Any] = []
        self.errors: list[Any] = []

    def result(self, value: Any) -> None:
        self.results.append(value)

    def error(self, value: Any) -> None:
        self.errors.append(value)


def test_v1_ends_a_turn_with_the_prompts_answer() -> None:
    reply = _Reply()
    V1.answer_turn(reply, "end_turn")  # type: ignore[arg-type]
    V1.answer_turn(reply, "cancelled", log_error="disk full")  # type: ignore[arg-type]
    V1.answer_unstarted(reply)  # type: ignore[arg-type]
    assert reply.results == [
        {"stopReason": "end_turn"},
        {"stopReason": "cancelled", "_meta": {"acpBridge": {"logError": "disk full"}}},
        {"stopReason": "cancelled"},
    ]


def test_the_chunk_suffix_ends_a_chunk_of_the_builders_shape() -> None:
    frames = V1.session_frames("sess_x")
    prefix = frames.chunk_prefix("agent_message_chunk", "m1")
    whole = prefix + b'"hi"' + frames.chunk_suffix
    assert whole == frames.update(
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m1",
            "content": {"type": "text", "text": "hi"},
        }
    )


def test_v1_ends_a_failed_turn_with_the_prompts_error() -> None:
    reply = _Reply()
    failure = LogNotWritable("/x/s.jsonl", "disk full", 2, lost=False)
    V1.answer_turn(reply, None, error=failure)  # type: ignore[arg-type]
    assert reply.results == []
    assert [e.to_wire() for e in reply.errors] == [to_rpc_error(failure).to_wire()]
