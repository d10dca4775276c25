"""What stdout has not taken yet of a big write is a view of it, not a copy.

A session/load replay is one write of many megabytes through a pipe of a few
dozen KiB: copying what is left after each partial write made that write
quadratic (gigabytes copied for a 20 MB replay).  A real pipe, read without
blocking; no timing is asserted.
"""

from __future__ import annotations

import os

import anyio
import anyio.lowlevel
import pytest
from support.harness import read_available
from test_flush_now import frame_bigger_than_the_pipe, until_the_writer_took_it

from acp_bridge.transport.outbox import Outbox

pytestmark = pytest.mark.anyio


async def test_the_rest_of_a_big_write_is_a_view_of_it_and_arrives_whole() -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    outbox = Outbox(write_end)
    got = b""
    async with anyio.create_task_group() as tg:
        tg.start_soon(outbox.run)
        frame, _ = await frame_bigger_than_the_pipe(write_end)
        big = frame * 8
        outbox.send(big)
        await until_the_writer_took_it(outbox)
        # Looked at now, asserted once the pipe is read (the writer waits for
        # it, shielded: a failure here would leave it waiting).
        rest = list(outbox._rest)
        with anyio.fail_after(30):  # a hang guard, not a speed limit
            while len(got) < len(big):
                got += read_available(read_end)
                await anyio.lowlevel.checkpoint()
        await outbox.drain()
        outbox.close()
    assert got == big
    assert len(rest) == 1
    assert isinstance(rest[0], memoryview), "the rest was copied"
    assert rest[0].obj is big
    os.close(write_end)
    os.close(read_end)
