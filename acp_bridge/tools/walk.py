"""Walking a directory for the search tools, inside the call's bounds.

`Walk.files` yields ``(path, real)`` for each file under a root: ``path``
spelled from the root as given, ``real`` where it really is.  A directory's
files come by name, then its subdirectories by name; hidden directories,
``node_modules`` and ``__pycache__`` are skipped.

* Each directory is listed through a descriptor opened component by component
  without following symlinks (`localfs.open_dir`): a symlink swapped in
  cannot make it list another directory.
* A symlinked directory is never descended into: one whose real path is in
  the bounds is walked where it really lies, one outside them is noted.
* A symlinked file is followed only when its real path is in the bounds and
  not in a system directory; otherwise it is noted and skipped.
* `Walk.open` opens a file the walk yielded, regular files only: FIFOs,
  sockets and devices are noted and never opened.

`Walk.notes` says what was skipped, for the tool's result.  Blocking calls
throughout: run it in a worker thread.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from . import localfs
from .paths import in_system_dir

SKIP_DIRS = frozenset({"node_modules", "__pycache__"})
SHOWN_SKIPS = 20

Kind = Literal["link", "dir", "file"]


@dataclass
class Walk:
    bounds: localfs.Bounds
    # What was skipped, by why: spelled paths.
    outside: list[str] = field(default_factory=list)
    system: list[str] = field(default_factory=list)
    special: list[str] = field(default_factory=list)
    # The directory whose files are being yielded: its real path and descriptor.
    _here: tuple[str, int] | None = field(default=None, repr=False)

    def files(self, root: str) -> Iterator[tuple[str, str]]:
        """Every file under ``root`` (or ``root`` itself when it is a file)."""
        try:
            real_root = localfs.confine(root, self.bounds, "searched")
        except localfs.Refused:
            try:
                self._skip(root, localfs.real_path(root))
            except localfs.Refused:
                self._skip(root, root)
            return
        if not os.path.isdir(real_root):
            if os.path.lexists(real_root):
                yield root, real_root
            return
        stack = [(root, real_root)]
        while stack:
            shown, real = stack.pop()
            listing = self._list(real, shown)
            if listing is None:
                continue
            fd, entries = listing
            subdirs: list[tuple[str, str]] = []
            # The directory stays open while its files are yielded: `open` opens them from it.
            self._here = (real, fd)
            try:
                for name, kind in entries:
                    path, entry = os.path.join(shown, name), os.path.join(real, name)
                    if kind == "dir":
                        if not name.startswith(".") and name not in SKIP_DIRS:
                            subdirs.append((path, entry))
                    elif kind == "file":
                        yield path, entry
                    else:
                        target = self._follow(path, entry)
                        if target is not None:
                            yield path, target
            finally:
                self._here = None
                os.close(fd)
            stack.extend(reversed(subdirs))

    def open(self, path: str, real: str) -> int | None:
        """A read-only descriptor of a file `files` yielded; None when it is skipped."""
        try:
            here = self._here
            parent, name = os.path.split(real)
            if here is not None and here[0] == parent:
                return localfs.open_in(here[1], name, path)
            return localfs.open_regular(real, path)
        except localfs.NotRegular:
            self.special.append(path)
        except (localfs.Refused, OSError):
            pass  # gone, swapped or unreadable: nothing to search
        return None

    def notes(self) -> list[str]:
        """What was skipped, one line per reason."""
        out = []
        if self.outside:
            out.append(
                _note(
                    self.outside,
                    "whose real path is outside the session's directories "
                    "(name one as the path of a tool call to ask the user)",
                )
            )
        if self.system:
            out.append(_note(self.system, "leading into /proc, /sys or /dev (never read)"))
        if self.special:
            out.append(_note(self.special, "that are FIFOs, sockets or devices (never opened)"))
        return out

    def _list(self, real: str, shown: str) -> tuple[int, list[tuple[str, Kind]]] | None:
        """A descriptor of the real directory ``real`` and its entries, sorted by name."""
        try:
            fd = localfs.open_dir(real, listed=True, shown=shown)
        except (localfs.Refused, OSError):
            return None
        try:
            with os.scandir(fd) as it:
                entries = [(e.name, _kind(e)) for e in it]
        except OSError:
            os.close(fd)
            return None
        return fd, sorted(entries)

    def _follow(self, path: str, entry: str) -> str | None:
        """The real path of the symlinked file ``entry``, if the walk may yield it."""
        try:
            target = localfs.real_path(entry)
        except localfs.Refused:
            return None  # swapped while resolved: nothing to search
        if in_system_dir(target) or not self.bounds.admits(target):
            self._skip(path, target)
            return None
        if os.path.isdir(target):
            return None  # walked where it really lies
        return target if os.path.lexists(target) else None

    def _skip(self, path: str, real: str) -> None:
        (self.system if in_system_dir(real) or in_system_dir(path) else self.outside).append(path)


def _kind(entry: os.DirEntry[str]) -> Kind:
    if entry.is_symlink():
        return "link"
    return "dir" if entry.is_dir(follow_symlinks=False) else "file"


def _note(paths: list[str], why: str) -> str:
    shown = ", ".join(paths[:SHOWN_SKIPS])
    more = f" and {len(paths) - SHOWN_SKIPS} more" if len(paths) > SHOWN_SKIPS else ""
    what = "entry" if len(paths) == 1 else "entries"
    return f"[skipped {len(paths)} {what} {why}: {shown}{more}]"
