"""Unit tests of the confined local disk (`acp_bridge.tools.localfs`) and the
search tools' walk (`acp_bridge.tools.walk`): what the subprocess tests
cannot time, such as a symlink swapped in between the check of a path and
its use."""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from acp_bridge.tools import ToolContext, localfs
from acp_bridge.tools.base import ClientCapabilities
from acp_bridge.tools.walk import Walk


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    there = tmp_path / "elsewhere"
    there.mkdir()
    (there / "victim.txt").write_text("outside text\n")
    return there


def bounds(ws: Path, *allowed: Path) -> localfs.Bounds:
    return localfs.Bounds.of([str(ws)], [str(a) for a in allowed])


def test_confine_resolves_symlinks_and_admits_only_the_roots_and_what_was_allowed(
    ws: Path, outside: Path
) -> None:
    (ws / "notes.txt").symlink_to(outside / "victim.txt")
    (ws / "env.txt").symlink_to("/proc/self/environ")
    (ws / "a.txt").write_text("a")
    assert localfs.confine(str(ws / "a.txt"), bounds(ws)) == str(ws / "a.txt")
    with pytest.raises(localfs.Refused, match=r"leads to .*victim\.txt, which is outside"):
        localfs.confine(str(ws / "notes.txt"), bounds(ws))
    allowed = bounds(ws, outside / "victim.txt")
    assert localfs.confine(str(ws / "notes.txt"), allowed) == str(outside / "victim.txt")
    # /proc never passes, even when allowed.
    with pytest.raises(localfs.Refused, match="system path"):
        localfs.confine(str(ws / "env.txt"), bounds(ws, Path("/proc")))
    with pytest.raises(localfs.Refused, match="system path"):
        localfs.confine("/dev/null", bounds(ws, Path("/dev")))


def test_a_symlink_swapped_into_the_path_after_the_check_is_not_followed(
    ws: Path, outside: Path
) -> None:
    """The real path was checked; then a parent folder became a symlink to an
    outside folder: opening the checked path fails instead of leading there."""
    (ws / "sub").mkdir()
    (ws / "sub" / "victim.txt").write_text("inside text\n")
    real = localfs.confine(str(ws / "sub" / "victim.txt"), bounds(ws))
    (ws / "sub").rename(ws / "old-sub")
    (ws / "sub").symlink_to(outside)
    with pytest.raises(localfs.Refused, match="a symlink appeared"):
        localfs.open_regular(real)
    with pytest.raises(localfs.Refused, match="a symlink appeared"):
        localfs.open_dir(str(ws / "sub"), create=True)


def test_the_file_itself_swapped_for_a_symlink_is_neither_read_nor_written(
    ws: Path, outside: Path
) -> None:
    target = ws / "target.txt"
    target.write_text("old\n")
    real = localfs.confine(str(target), bounds(ws))
    target.unlink()
    target.symlink_to(outside / "victim.txt")
    with pytest.raises(localfs.Refused, match="a symlink appeared"):
        localfs.open_regular(real)
    # write_text checks again, and finds that the path now leads outside.
    with pytest.raises(localfs.Refused, match="outside the session's directories"):
        localfs.write_text(str(target), bounds(ws), "new\n")
    assert (outside / "victim.txt").read_text() == "outside text\n"


def test_a_symlink_swapped_in_while_writing_is_replaced_not_written_through(
    ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap comes after every check, while the temporary file is written:
    the rename replaces the symlink itself, the outside file is untouched."""
    target = ws / "target.txt"
    target.write_text("old\n")
    real_fsync = os.fsync

    def swap_then_fsync(fd: int) -> None:
        target.unlink()
        target.symlink_to(outside / "victim.txt")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", swap_then_fsync)
    localfs.write_text(str(target), bounds(ws), "new\n")
    assert (outside / "victim.txt").read_text() == "outside text\n"
    assert not target.is_symlink()
    assert target.read_text() == "new\n"


def test_a_write_keeps_the_mode_and_leaves_no_temporary_file(ws: Path) -> None:
    target = ws / "script.sh"
    target.write_text("echo old\n")
    target.chmod(0o751)
    localfs.write_text(str(target), bounds(ws), "echo new\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert target.read_text() == "echo new\n"
    umask = os.umask(0o022)
    os.umask(umask)
    localfs.write_text(str(ws / "deep" / "er" / "new.txt"), bounds(ws), "x")
    assert stat.S_IMODE((ws / "deep" / "er" / "new.txt").stat().st_mode) == 0o666 & ~umask
    assert sorted(p.name for p in ws.iterdir()) == ["deep", "script.sh"]


def test_a_symlink_inside_the_roots_is_written_where_it_leads(ws: Path) -> None:
    (ws / "docs").mkdir()
    (ws / "docs" / "README.md").write_text("old")
    (ws / "README.md").symlink_to("docs/README.md")
    localfs.write_text(str(ws / "README.md"), bounds(ws), "new")
    assert (ws / "README.md").is_symlink()
    assert (ws / "docs" / "README.md").read_text() == "new"


def test_special_files_are_refused_before_they_are_opened(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    # Opening a FIFO with no writer would block: the refusal comes first.
    with pytest.raises(localfs.NotRegular, match="is a FIFO"):
        localfs.read_text(str(ws / "pipe"), bounds(ws))
    with pytest.raises(localfs.NotRegular, match="is a FIFO"):
        localfs.write_text(str(ws / "pipe"), bounds(ws), "x")
    with pytest.raises(IsADirectoryError):
        localfs.read_text(str(ws), bounds(ws))


def test_read_text_reads_lines(ws: Path) -> None:
    (ws / "a.txt").write_text("1\n2\n3\n4\n")
    assert localfs.read_text(str(ws / "a.txt"), bounds(ws), 2, 2) == "2\n3\n"
    with pytest.raises(FileNotFoundError):
        localfs.read_text(str(ws / "missing" / "a.txt"), bounds(ws))


def test_check_paths_says_where_outside_paths_lead(ws: Path, outside: Path) -> None:
    (ws / "notes.txt").symlink_to(outside / "victim.txt")
    (ws / "env.txt").symlink_to("/proc/self/environ")
    paths = [str(ws / "a.txt"), str(ws / "notes.txt"), str(ws / "env.txt"), str(outside)]
    out, system = localfs.check_paths(paths, [str(ws)])
    assert out == [
        (str(ws / "notes.txt"), str(outside / "victim.txt")),
        (str(outside), str(outside)),
    ]
    assert [path for path, _ in system] == [str(ws / "env.txt")]


def test_the_walk_skips_what_leads_outside_and_never_opens_special_files(
    ws: Path, outside: Path
) -> None:
    (ws / "a.txt").write_text("a")
    (ws / "sub").mkdir()
    (ws / "sub" / "b.txt").write_text("b")
    (ws / "same.txt").symlink_to("sub/b.txt")
    (ws / "notes.txt").symlink_to(outside / "victim.txt")
    (ws / "env.txt").symlink_to("/proc/self/environ")
    (ws / "out-dir").symlink_to(outside)
    (ws / "in-dir").symlink_to("sub")
    (ws / ".hidden").mkdir()
    (ws / ".hidden" / "c.txt").write_text("c")
    os.mkfifo(ws / "pipe")
    walk = Walk(bounds(ws))
    found = list(walk.files(str(ws)))
    assert found == [
        (str(ws / "a.txt"), str(ws / "a.txt")),
        (str(ws / "pipe"), str(ws / "pipe")),
        (str(ws / "same.txt"), str(ws / "sub" / "b.txt")),
        (str(ws / "sub" / "b.txt"), str(ws / "sub" / "b.txt")),
    ]
    assert walk.open(str(ws / "pipe"), str(ws / "pipe")) is None
    assert sorted(walk.outside) == [str(ws / "notes.txt"), str(ws / "out-dir")]
    assert walk.system == [str(ws / "env.txt")]
    assert walk.special == [str(ws / "pipe")]
    notes = walk.notes()
    assert len(notes) == 3
    assert "outside the session's directories" in notes[0]
    assert "never opened" in notes[2]


def test_an_allowed_outside_folder_is_walked_but_not_its_links_into_proc(
    ws: Path, outside: Path
) -> None:
    (outside / "env").symlink_to("/proc/self/environ")
    walk = Walk(bounds(ws, outside))
    assert [p for p, _ in walk.files(str(outside))] == [str(outside / "victim.txt")]
    assert walk.system == [str(outside / "env")]


@pytest.mark.anyio
async def test_a_write_stopped_in_its_thread_says_what_the_file_holds(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Stop does not wait for a local write stuck in its worker thread; the
    call's partial result says the file holds its old or all its new content."""
    started, release = threading.Event(), threading.Event()

    def stuck_write(path: str, bounds: localfs.Bounds, content: str) -> None:
        started.set()
        release.wait(10)

    monkeypatch.setattr(localfs, "write_text", stuck_write)
    ctx = ToolContext(
        session_id="s",
        cwd=str(ws),
        roots=[str(ws)],
        capabilities=ClientCapabilities(),
        call_id="c",
        request=_unused,
        settle=_unused,
        cleanup=_unused,
        update=lambda fields: None,
        stopped=lambda: True,
    )
    try:
        with anyio.fail_after(10), anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(ctx.write_text, str(ws / "a.txt"), "new")
                await anyio.to_thread.run_sync(started.wait)
                scope.cancel()
    finally:
        release.set()
    assert ctx.partial is not None
    assert ctx.partial.is_error
    assert "either its old content or all of the new one" in ctx.partial.text


async def _unused(method: str, params: dict[str, Any]) -> Any:
    raise AssertionError(f"no editor request expected: {method}")


def test_a_symlink_replaced_while_it_is_resolved_is_resolved_again_then_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """realpath raises OSError when lstat saw a link and readlink then finds a
    file (a swap between the two): resolved again, and refused if it keeps
    changing, never an OSError out of the permission check."""
    (tmp_path / "a.txt").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "a.txt")
    real_readlink = os.readlink
    failures = [1]

    def swapped(path: Any, *args: Any, **kwargs: Any) -> str:
        if failures[0] > 0:
            failures[0] -= 1
            raise OSError(errno.EINVAL, "Invalid argument", path)
        return str(real_readlink(path, *args, **kwargs))

    monkeypatch.setattr(os, "readlink", swapped)
    link = str(tmp_path / "link")
    assert localfs.real_path(link) == str((tmp_path / "a.txt").resolve())
    failures[0] = 100
    with pytest.raises(localfs.Refused, match="kept changing"):
        localfs.check_paths([link], [str(tmp_path)])


def test_a_path_with_a_nul_character_is_refused_not_an_internal_error(tmp_path: Path) -> None:
    with pytest.raises(localfs.Refused, match="NUL"):
        localfs.check_paths([str(tmp_path / "a.txt\0")], [str(tmp_path)])
