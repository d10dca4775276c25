"""A program run in a pseudo-terminal, driven like a person at the keyboard.

The pty is the child's controlling terminal (a new session, then
``TIOCSCTTY``), so ``getpass`` reads from it with echo off, as it does for a
user.  `expect` waits for text on the screen; `type` sends a line.
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

# Makes the pty (its stdin) the controlling terminal of a new session, then
# runs the real command.
_CONTROLLING_TTY = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execvpe(sys.argv[1], sys.argv[1:], os.environ)"
)


class PtySession:
    def __init__(self, command: Sequence[str], env: Mapping[str, str], timeout: float = 60) -> None:
        self.master, slave = pty.openpty()
        self.timeout = timeout
        self.screen = b""  # everything the program wrote, as the terminal showed it
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CONTROLLING_TTY, *command],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=dict(env),
            start_new_session=True,
            close_fds=True,
        )
        os.close(slave)
        self._seen = 0

    def _read(self, deadline: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return False
        try:
            data = os.read(self.master, 4096)
        except OSError:  # EIO: the program closed the terminal
            data = b""
        if not data:
            raise EOFError
        self.screen += data
        return True

    def expect(self, pattern: str) -> str:
        """Wait until ``pattern`` (a regex) shows after what was already matched."""
        regex = re.compile(pattern.encode())
        deadline = time.monotonic() + self.timeout
        while True:
            match = regex.search(self.screen, self._seen)
            if match:
                self._seen = match.end()
                return match.group(0).decode(errors="replace")
            try:
                if not self._read(deadline) and time.monotonic() >= deadline:
                    raise AssertionError(f"{pattern!r} never showed; the screen:\n{self.text}")
            except EOFError:
                raise AssertionError(
                    f"the program ended before {pattern!r}; the screen:\n{self.text}"
                ) from None

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def wait(self) -> int:
        """Read to the end, then the exit status."""
        deadline = time.monotonic() + self.timeout
        try:
            while time.monotonic() < deadline:
                self._read(deadline)
        except EOFError:
            pass
        try:
            status = self.process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the program did not end; the screen:\n{self.text}") from None
        finally:
            os.close(self.master)
        return status

    @property
    def text(self) -> str:
        return self.screen.decode(errors="replace")
