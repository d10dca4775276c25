"""Start many bridges cheaply: fork them from a process that imported it once.

Run as a script.  Each line read from stdin is a JSON list
``[stdin_fifo, stdout_fifo, *args]``: the zygote forks a child that opens the
two FIFOs as its stdin and stdout (stderr goes to /dev/null) and runs
``acp-bridge *args`` (`acp_bridge.cli.main`), the same entry point the
installed command runs, then answers the child's pid on a line.  Children are
reaped by the kernel (SIGCHLD ignored here); a test sees a child end as EOF
on its stdout.  Used where a test needs hundreds of short-lived bridges and
the interpreter start-up would dominate its cost.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import acp_bridge.acp.agent
import acp_bridge.providers.scripted
import acp_bridge.server  # noqa: F401  (imported once, here, for every child)
from acp_bridge import cli


def main() -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for line in sys.stdin:
        stdin_fifo, stdout_fifo, *args = json.loads(line)
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            fd_in = os.open(stdin_fifo, os.O_RDONLY)
            fd_out = os.open(stdout_fifo, os.O_WRONLY)
            fd_err = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd_in, 0)
            os.dup2(fd_out, 1)
            os.dup2(fd_err, 2)
            for fd in (fd_in, fd_out, fd_err):
                os.close(fd)
            os._exit(cli.main(args))
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
