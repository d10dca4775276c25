"""The turn's lifecycle, alone: one ending per turn, and imports that point one way.

The loop's modules, compaction's (which the turn runs) and the tool runner
(which reaches the turn through `acp_bridge.tools.turn_port`) must not import
each other in a circle, and neither must any modules of the package: every
import counts, also those under ``TYPE_CHECKING`` and inside functions.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import anyio
import pytest
from support.harness import wait_until
from test_retract import FedProvider

from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records
from acp_bridge.log.writer import SessionLog
from acp_bridge.loop.lifecycle import Ending
from acp_bridge.loop.session import Session
from acp_bridge.loop.turn import Turn, TurnConfig, TurnKind, TurnState
from acp_bridge.protocol.frames import UpdateFrames
from acp_bridge.providers.base import StreamEvent, TextDelta
from acp_bridge.transport.outbox import Outbox

PACKAGE = Path(__file__).resolve().parent.parent / "acp_bridge"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, modules: set[str] | frozenset[str] = frozenset()) -> set[str]:
    """Every module that ``path`` imports, anywhere in the file (``from . import
    x`` names the module ``x`` of ``modules``, not the package)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = node.module or ""
            if node.level:
                target = f"{base}.{target}" if target else base
            submodules = {f"{target}.{alias.name}" for alias in node.names}
            if submodules <= modules:
                found.update(submodules)  # ``from . import ending``: modules only
            else:
                found.add(target)
    return found


def _graph(folders: tuple[str, ...]) -> dict[str, set[str]]:
    files = [p for folder in folders for p in sorted((PACKAGE / folder).glob("*.py"))]
    modules = {_module_name(p): p for p in files}
    names = set(modules)
    return {name: _imports(path, names) & names - {name} for name, path in modules.items()}


def _a_circle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for target in sorted(graph[node]):
            circle = visit(target, [*path, node])
            if circle is not None:
                return circle
        done.add(node)
        return None

    for node in sorted(graph):
        circle = visit(node, [])
        if circle is not None:
            return circle
    return None


def test_the_loop_and_the_tools_import_one_way() -> None:
    graph = _graph(("loop", "compaction", "tools"))
    assert "acp_bridge.loop.turn" in graph
    assert "acp_bridge.compaction.run" in graph
    assert "acp_bridge.tools.runner" in graph
    assert _a_circle(graph) is None


def test_the_package_has_no_import_circle() -> None:
    """Across the whole package.  The package root is left out: it holds the
    version and names its exports for type checkers only (each is imported
    on first use), so ``from .. import __version__`` reads a constant."""
    folders = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*")
        if p.is_dir() and p.name != "__pycache__"
    )
    graph = _graph(("", *folders))
    del graph["acp_bridge"]
    graph = {name: targets - {"acp_bridge"} for name, targets in graph.items()}
    assert "acp_bridge.acp.table" in graph
    assert "acp_bridge.cli" in graph
    assert "acp_bridge.check.scenarios.stops" in graph
    assert _a_circle(graph) is None


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _a_circle(graph) == ["a", "b", "c", "a"]


def test_the_tools_never_name_the_turn() -> None:
    for path in sorted((PACKAGE / "tools").glob("*.py")):
        imported = _imports(path)
        assert not any(name.startswith("acp_bridge.loop") for name in imported), path.name
        names = {n.id for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Name)}
        assert "Turn" not in names, path.name


def test_the_ending_runs_once() -> None:
    turn = Turn.__new__(Turn)
    turn.number = 1
    turn._enter(TurnState.ENDED)
    assert turn.over
    assert turn.ended
    with pytest.raises(AssertionError, match="ending ran twice"):
        turn._end(Ending("stopped"))


def test_over_is_set_by_entering_the_ending_and_only_then() -> None:
    turn = Turn.__new__(Turn)
    turn.number = 1
    turn._enter(TurnState.STREAMING)
    turn._enter(TurnState.RUNNING_TOOLS)
    turn._enter(TurnState.AWAITING_EDITOR)
    assert not turn.over
    turn._enter(TurnState.SETTLING)
    assert turn.over
    assert not turn.ended


@pytest.mark.anyio
async def test_a_synchronous_stop_ends_the_turn_once_and_its_task_returns(
    tmp_path: Path,
) -> None:
    """A Stop while STREAMING ends the turn inside ``cancel``; the turn's own
    task then unwinds through ``run`` without ending it a second time."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        outbox = Outbox(write_end, pipe_size=0)  # its writer task never runs
        slog = SessionLog(str(tmp_path / "s.jsonl"), outbox)
        send, receive = anyio.create_memory_object_stream[StreamEvent]()
        session = Session(
            "sess_1", str(tmp_path), slog, FedProvider(receive), outbox, UpdateFrames("sess_1")
        )
        returned = anyio.Event()
        async with send, receive, anyio.create_task_group() as tg:
            turn = Turn(
                session,
                1,
                TurnKind.prompt([{"type": "text", "text": "Go"}]),
                TurnConfig(),
                tg.start_soon,
            )

            async def run() -> None:
                await turn.run()
                returned.set()

            tg.start_soon(run)
            await send.send(TextDelta(0, "Some text"))
            await wait_until(lambda: turn.stream is not None and bool(outbox._queue))
            assert turn.cancel("user") is False  # ended here: no watchdog needed
            assert turn.ended
            with anyio.fail_after(10):
                await returned.wait()  # an AssertionError from a second ending fails here
        outbox.write_log_now(slog.file)
    finally:
        os.close(read_end)
        os.close(write_end)
    records = read_records(tmp_path / "s.jsonl")
    assert [r["reason"] for r in records if r["type"] == "turn/end"] == ["cancelled"]
    check_log(records)
