"""``initialize`` never waits for the provider to load.

The provider (and the tool machinery) load in a worker thread while the
server answers.  Here the script is a FIFO that nobody writes yet, so the
provider's loading blocks for as long as the test likes: ``initialize`` is
answered meanwhile, and ``session/new`` once the script arrives.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import anyio.to_thread
import orjson
import pytest

from acp_bridge.client import bridge_command, running

pytestmark = pytest.mark.anyio

SCRIPT = {"responses": [{"events": [{"text": "hi"}]}]}


def _write_fifo(path: Path) -> None:
    with open(path, "wb") as f:  # blocks until the bridge opens it to read
        f.write(orjson.dumps(SCRIPT))


async def test_initialize_is_answered_while_the_provider_is_still_loading(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "script.json"
    os.mkfifo(fifo)
    command = bridge_command(
        "--provider", "fake", "--script", str(fifo), "--state-dir", str(tmp_path / "state")
    )
    async with running(command) as client:
        with anyio.fail_after(30):
            response = await client.initialize()
        assert response["result"]["protocolVersion"] == 1
        # The provider is still loading: its script has not been written.
        new = await client.send_request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        with anyio.fail_after(30):
            await anyio.to_thread.run_sync(_write_fifo, fifo)
        answer = await client.wait_response(new)
        assert answer["result"]["sessionId"].startswith("sess_")
        assert await client.finish() == 0
