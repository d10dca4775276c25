"""The protocol edge's structure: one error mapping, one-way imports, one update builder."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import orjson
import pytest

from acp_bridge import errors as E
from acp_bridge.acp.edge import at_edge, to_rpc_error
from acp_bridge.jsonrpc.errors import RpcError
from acp_bridge.protocol.frames import CHUNK_SUFFIX, UpdateFrames
from acp_bridge.update_builders import text_chunk

PACKAGE = Path(__file__).resolve().parent.parent / "acp_bridge"

# Each domain error and the JSON-RPC error the editor gets for it, exactly.
WIRE: list[tuple[E.BridgeError, dict[str, Any]]] = [
    (
        E.AuthNeeded("Set a key."),
        {
            "code": -32000,
            "message": "Authentication required. Set a key.",
            "data": {"kind": "auth_required", "detail": "Set a key.", "authMethods": ["api-key"]},
        },
    ),
    (
        E.StartupFailed("bad script"),
        {
            "code": -32603,
            "message": "acp-bridge cannot start a session: bad script",
            "data": {"detail": "bad script", "kind": "startup"},
        },
    ),
    (
        E.SessionBusy("sess_1", "loaded again"),
        {
            "code": -32603,
            "message": "Session sess_1 cannot be loaded again while a reply is still streaming "
            "or a prompt is waiting: stop it and wait for its answer first.",
            "data": {"kind": "session_busy", "sessionId": "sess_1"},
        },
    ),
    (
        E.SessionLockedElsewhere("sess_1", "42"),
        {
            "code": -32603,
            "message": "Session sess_1 is open in another acp-bridge process (pid 42); "
            "close it there first.",
            "data": {"kind": "session_locked", "sessionId": "sess_1", "pid": "42"},
        },
    ),
    (
        E.SessionLockedElsewhere("sess_1", ""),
        {
            "code": -32603,
            "message": "Session sess_1 is open in another acp-bridge process; "
            "close it there first.",
            "data": {"kind": "session_locked", "sessionId": "sess_1", "pid": None},
        },
    ),
    (
        E.NothingToRegenerate("sess_1"),
        {
            "code": -32603,
            "message": "Nothing to regenerate: this session has no message of yours yet.",
            "data": {"kind": "nothing_to_regenerate"},
        },
    ),
    (
        E.LogNotCreated("/s/a.jsonl", "No space left on device"),
        {
            "code": -32603,
            "message": "Cannot create the session log: No space left on device",
            "data": {"path": "/s/a.jsonl"},
        },
    ),
    (
        E.LogNotLocked("/s/a.jsonl", "Permission denied"),
        {
            "code": -32603,
            "message": "Cannot lock the session: Permission denied",
            "data": {"path": "/s/a.jsonl"},
        },
    ),
    (
        E.LogDamaged("/s/a.jsonl", "not JSON", 3, loading=True),
        {
            "code": -32603,
            "message": "The session log is damaged and cannot be loaded: not JSON",
            "data": {"path": "/s/a.jsonl", "line": 3},
        },
    ),
    (
        E.LogDamaged("/s/a.jsonl", "not JSON", 3, loading=False),
        {
            "code": -32603,
            "message": "The session log is damaged: not JSON",
            "data": {"path": "/s/a.jsonl", "line": 3},
        },
    ),
    (
        E.LogNotWritable("/s/a.jsonl", "gone", 10, lost=True),
        {
            "code": -32603,
            "message": "The session log can no longer be written: gone. Nothing more is "
            "written to it; what it could not take is saved beside it when acp-bridge exits.",
            "data": {"path": "/s/a.jsonl", "kind": "log_lost", "pendingBytes": 10},
        },
    ),
    (
        E.LogNotWritable("/s/a.jsonl", "No space left on device", 10, lost=False),
        {
            "code": -32603,
            "message": "Cannot write the session log (No space left on device); the "
            "conversation so far is kept in memory and will be written when the disk accepts "
            "it. Free space or fix permissions, then send the prompt again.",
            "data": {"path": "/s/a.jsonl", "pendingBytes": 10},
        },
    ),
    (
        E.TurnFailed("Model request failed: overloaded", {"kind": "http", "retryable": True}),
        {
            "code": -32603,
            "message": "Model request failed: overloaded",
            "data": {"kind": "http", "retryable": True},
        },
    ),
]


@pytest.mark.parametrize(("exc", "wire"), WIRE, ids=lambda v: type(v).__name__)
def test_each_domain_error_has_its_wire_error(exc: E.BridgeError, wire: dict[str, Any]) -> None:
    assert to_rpc_error(exc).to_wire() == wire


def _concrete(cls: type[E.BridgeError]) -> set[type[E.BridgeError]]:
    subclasses = set(cls.__subclasses__())
    for sub in list(subclasses):
        subclasses |= _concrete(sub)
    return subclasses


def test_every_domain_error_is_mapped() -> None:
    """A new error class without its case in `to_rpc_error` would reach the
    editor as a bare "Internal error": every leaf class has a row above."""
    leaves = {c for c in _concrete(E.BridgeError) if not c.__subclasses__()}
    assert leaves == {type(exc) for exc, _ in WIRE}


def test_an_rpc_error_passes_the_edge_unchanged() -> None:
    error = RpcError.invalid_params("cwd", "is required")
    assert to_rpc_error(error) is error


@pytest.mark.anyio
async def test_a_handler_at_the_edge_raises_the_mapped_error() -> None:
    async def handler(params: dict[str, Any]) -> None:
        raise E.SessionBusy(params["sessionId"], "regenerated")

    with pytest.raises(RpcError) as info:
        await at_edge(handler)({"sessionId": "sess_1"})
    assert info.value.data == {"kind": "session_busy", "sessionId": "sess_1"}


def _imports(path: Path) -> set[str]:
    """The modules of ``acp_bridge`` that ``path`` imports, as dotted names."""
    package = "acp_bridge." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("live", {"stored", "agent"}),
        ("stored", {"live", "agent"}),
        ("auth", {"live", "stored", "agent", "table"}),
        ("prompt_turns", {"live", "stored", "agent", "auth"}),
        ("table", {"live", "stored", "agent", "auth", "prompt_turns"}),
        ("tool_setup", {"live", "stored", "agent", "auth", "prompt_turns", "table"}),
        ("provider_slot", {"live", "stored", "agent", "auth", "prompt_turns", "table"}),
        ("edge", {"live", "stored", "agent", "auth", "prompt_turns", "table"}),
    ],
)
def test_the_protocol_modules_import_one_way(module: str, forbidden: set[str]) -> None:
    """Handlers → session table and services → loop: never back up, even lazily."""
    imported = _imports(PACKAGE / "acp" / f"{module}.py")
    assert not imported & {f"acp_bridge.acp.{name}" for name in forbidden}


@pytest.mark.parametrize("kind", ["agent_message_chunk", "agent_thought_chunk"])
@pytest.mark.parametrize("text", ["", "hi", 'a "quoted"\n\u2028line', "\x00"])
def test_the_chunk_template_is_the_builders_update(kind: str, text: str) -> None:
    frames = UpdateFrames("sess_1")
    live = frames.chunk_prefix(kind, "msg_1") + orjson.dumps(text) + CHUNK_SUFFIX
    assert live == frames.update(text_chunk(kind, text, message_id="msg_1"))
