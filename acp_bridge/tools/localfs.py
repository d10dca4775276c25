"""The local disk as the tools see it: confined, resolved at the moment of use,
never a special file.

* `confine` resolves a path (symlinks included) and checks the real path
  against the session's directories and the paths the user allowed for this
  call; nothing in ``/proc``, ``/sys`` or ``/dev`` ever passes.
* `open_dir` opens a real directory one component at a time from ``/`` with
  ``O_DIRECTORY | O_NOFOLLOW``: a symlink swapped into the path after
  `confine` makes it fail instead of leading elsewhere.
* `open_regular` (`open_in`, given the directory's descriptor) opens a regular
  file of such a directory with ``O_NOFOLLOW | O_NONBLOCK`` after an ``lstat``
  of it, and checks with ``fstat`` what it opened: FIFOs, sockets and devices
  are refused before they are opened (and one swapped in meanwhile cannot
  block the open), and so is a file of the file systems of /proc, /sys or
  /dev mounted elsewhere.
* `check_regular` refuses a special file before its path is handed to the
  editor (which cannot be kept from following a symlink swapped in later,
  but gets the path resolved).
* `write_text` writes a temporary file in the same real directory and renames
  it over the target relative to that directory (an existing file keeps its
  mode), so a swapped symlink can neither redirect the write nor leave half a
  file.

Every function here makes blocking system calls: call it from a worker thread
(`anyio.to_thread.run_sync`), never on the event loop.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .paths import SYSTEM_DIRS, in_system_dir, within

# Directories on the way are opened only to be walked through (O_PATH needs
# no read permission); the last one is readable when it is to be listed.
_THROUGH = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_LISTED = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(Exception):
    """A path a tool may not use; the message says why, for the model."""


class NotRegular(Refused):
    """A FIFO, socket or device: never opened."""


@dataclass(frozen=True)
class Bounds:
    """Where a call may go: the session's directories (as named and as real
    paths) and the real paths the user allowed for this call."""

    roots: tuple[tuple[str, str], ...]
    allowed: tuple[str, ...] = ()

    @classmethod
    def of(cls, roots: Iterable[str], allowed: Iterable[str] = ()) -> Bounds:
        return cls(tuple((root, real_path(root)) for root in roots), tuple(allowed))

    def admits(self, real: str) -> bool:
        """Whether the real path ``real`` lies in a root or in an allowed path."""
        bases = [r for _, r in self.roots] + list(self.allowed)
        return any(within(real, base) for base in bases)

    def spelled(self, real: str) -> str:
        """``real`` spelled from the root it lies in as the session names that root
        (the editor knows the workspace by that name); else ``real`` itself."""
        for named, base in self.roots:
            if within(real, base):
                rel = os.path.relpath(real, base)
                return named if rel == os.curdir else os.path.join(named, rel)
        return real

    def names(self, path: str) -> bool:
        """Whether the absolute, normalized ``path`` lies in a root as it is
        named or as it really is (not following symlinks in ``path``)."""
        return any(within(path, base) for root in self.roots for base in root)


def system_text(path: str, real: str) -> str:
    where = path if path == real else f"{path} (which leads to {real})"
    dirs = ", ".join(SYSTEM_DIRS)
    return f"{where} is a system path: tools never read or write anything in {dirs}"


# How often `real_path` resolves a path again when a symlink changed under it.
_RESOLVE_TRIES = 3


def real_path(path: str) -> str:
    """``os.path.realpath(path)``, which raises OSError when a symlink on the way
    is replaced while it is being read (lstat saw a link, readlink finds none):
    resolved again, then `Refused`."""
    if "\0" in path:
        raise Refused(f"{path!r} contains a NUL character: no file has such a name")
    for _ in range(_RESOLVE_TRIES):
        try:
            return os.path.realpath(path)
        except OSError:
            continue
    raise Refused(f"{path} kept changing while it was being resolved: it was not used")


def confine(path: str, bounds: Bounds, verb: str = "read") -> str:
    """The real path of ``path`` (absolute), if a call within ``bounds`` may use it."""
    real = real_path(path)
    if in_system_dir(path) or in_system_dir(real):
        raise Refused(system_text(path, real))
    if not bounds.admits(real):
        where = f"{path} is" if path == real else f"{path} leads to {real}, which is"
        raise Refused(
            f"{where} outside the session's directories and was not allowed for this call: "
            f"it was not {verb}"
        )
    return real


@functools.cache
def _system_devices() -> frozenset[int]:
    """The devices of /proc, /sys and /dev where they are file systems of their own."""
    try:
        root = os.stat("/").st_dev
    except OSError:
        return frozenset()
    devices = set()
    for path in SYSTEM_DIRS:
        try:
            device = os.stat(path).st_dev
        except OSError:
            continue
        if device != root:
            devices.add(device)
    return frozenset(devices)


def _swapped(path: str) -> Refused:
    return Refused(f"{path} changed while it was being opened (a symlink appeared in its path)")


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _parts(real: str) -> list[str]:
    return [part for part in real.split(os.sep) if part]


def open_dir(real: str, *, create: bool = False, listed: bool = False, shown: str = "") -> int:
    """A descriptor of the real directory ``real``, opened component by component
    without following a symlink; missing directories are made when ``create``.

    ``listed`` opens the last one readable (for `os.scandir`).  Raises
    `Refused` when a component is a symlink or no directory, FileNotFoundError
    when one is missing.
    """
    shown = shown or real
    parts = _parts(real)
    fd = os.open(os.sep, _LISTED if listed and not parts else _THROUGH)
    try:
        for i, part in enumerate(parts):
            flags = _LISTED if listed and i == len(parts) - 1 else _THROUGH
            try:
                next_fd = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                next_fd = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise
                if stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode):
                    raise _swapped(shown) from None
                where = os.sep + os.sep.join(parts[: i + 1])
                raise Refused(f"{shown}: {where} is not a directory") from None
            os.close(fd)
            fd = next_fd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _check_entry(name: str, dir_fd: int, shown: str) -> os.stat_result | None:
    """What ``name`` in ``dir_fd`` is, without following it (None: missing);
    refused unless it is a regular file."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise _swapped(shown)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", shown)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegular(f"{shown} is {_kind(st.st_mode)}: only regular files are opened")
    if st.st_dev in _system_devices():
        raise Refused(system_text(shown, shown))
    return st


def check_regular(real: str, shown: str) -> None:
    """Refuse the real path ``real`` if it exists and is not a regular file
    (for a path handed to the editor, which would open it)."""
    try:
        mode = os.lstat(real).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", shown)
    if not stat.S_ISREG(mode):
        raise NotRegular(f"{shown} is {_kind(mode)}: only regular files are opened")


def open_regular(real: str, shown: str = "") -> int:
    """A read-only descriptor of the regular file at the real path ``real``."""
    shown = shown or real
    parent, name = os.path.split(real)
    if not name:
        raise IsADirectoryError(errno.EISDIR, "is a directory", shown)
    dir_fd = open_dir(parent, shown=shown)
    try:
        return open_in(dir_fd, name, shown)
    finally:
        os.close(dir_fd)


def open_in(dir_fd: int, name: str, shown: str) -> int:
    """A read-only descriptor of the regular file ``name`` of the directory ``dir_fd``."""
    st = _check_entry(name, dir_fd, shown)
    if st is None:
        raise FileNotFoundError(errno.ENOENT, "no such file", shown)
    try:
        fd = os.open(name, _READ, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _swapped(shown) from None
        raise
    opened = os.fstat(fd)
    if not stat.S_ISREG(opened.st_mode) or not os.path.samestat(st, opened):
        os.close(fd)
        raise Refused(f"{shown} changed while it was being opened: it was not read")
    return fd


def read_text(path: str, bounds: Bounds, line: int | None = None, limit: int | None = None) -> str:
    """The text of the file ``path`` (``limit`` lines from ``line``, 1-based)."""
    fd = open_regular(confine(path, bounds, "read"), path)
    with open(fd, encoding="utf-8", errors="replace") as f:
        if line is None and limit is None:
            return f.read()
        start = max(line or 1, 1)
        out: list[str] = []
        for number, text in enumerate(f, 1):
            if number < start:
                continue
            if limit is not None and len(out) >= limit:
                break
            out.append(text)
        return "".join(out)


def write_text(path: str, bounds: Bounds, content: str) -> None:
    """Create or replace the file ``path`` with ``content``, atomically."""
    real = confine(path, bounds, "written")
    parent, name = os.path.split(real)
    if not name:
        raise IsADirectoryError(errno.EISDIR, "is a directory", path)
    dir_fd = open_dir(parent, create=True, shown=path)
    try:
        st = _check_entry(name, dir_fd, path)
        temp = f".{name}.{os.urandom(6).hex()}.tmp"
        # A new file gets the usual 0666 less the umask; an existing one its own mode.
        fd = os.open(temp, _CREATE, 0o600 if st else 0o666, dir_fd=dir_fd)
        try:
            with open(fd, "w", encoding="utf-8") as f:
                f.write(content)
                f.flush()
                if st is not None:
                    os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode))
                os.fsync(f.fileno())
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            raise
    finally:
        os.close(dir_fd)


def check_paths(
    paths: Sequence[str], roots: Sequence[str]
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(outside, system)``: the paths (each with its real path) that lie outside
    ``roots``, and those that are, or lead into, a system directory.  Raises
    `Refused` for a path that keeps changing while it is resolved."""
    bounds = Bounds.of(roots)
    outside: list[tuple[str, str]] = []
    system: list[tuple[str, str]] = []
    for path in paths:
        real = real_path(path)
        if in_system_dir(path) or in_system_dir(real):
            system.append((path, real))
        elif not (bounds.admits(real) and bounds.names(os.path.normpath(path))):
            outside.append((path, real))
    return outside, system
