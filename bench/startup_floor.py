"""The start-up floor of an agent built on anyio: nothing of acp-bridge, only what it stands on.

It imports what any anyio agent on asyncio imports before its first answer
(anyio and its asyncio backend, orjson, logging, dataclasses, argparse, uuid),
then answers ``initialize`` and ``session/new`` from stdin in the event loop
and every other request with "method not found".  It is no agent to stream
with: it is the lower bound of the start-up test for the bridge's design,
measured in place of the bridge in the same run as the references::

    python -m bench.run --tests startup --bridge-cmd "{python} bench/startup_floor.py"

(the ``acp-bridge`` column is then this floor, and its ratio to ``ref-raw``
is what no anyio-based agent gets below on the machine).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import uuid
from typing import Any

import anyio
import orjson

__all__ = ["main"]

log = logging.getLogger("startup_floor")


@dataclasses.dataclass
class Floor:
    sessions: set[str] = dataclasses.field(default_factory=set)

    def answer(self, message: dict[str, Any]) -> bytes | None:
        if "id" not in message:
            return None
        method = message.get("method")
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if method == "initialize":
            reply["result"] = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
        elif method == "session/new":
            session_id = "sess_" + uuid.uuid4().hex
            self.sessions.add(session_id)
            reply["result"] = {"sessionId": session_id}
        else:
            reply["error"] = {"code": -32601, "message": f"method not found: {method}"}
        return orjson.dumps(reply) + b"\n"


async def serve() -> None:
    floor = Floor()
    rest = b""
    while True:
        await anyio.wait_readable(0)
        data = os.read(0, 1 << 16)
        if not data:
            return
        lines = (rest + data).split(b"\n")
        rest = lines.pop()
        for line in lines:
            if line.strip():
                out = floor.answer(orjson.loads(line))
                if out is not None:
                    os.write(1, out)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    anyio.run(serve)


if __name__ == "__main__":
    main()
