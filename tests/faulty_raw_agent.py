"""A bare ACP agent (JSON-RPC by hand, no SDK) with wire-level faults a flag away,
for the tests of ``acp-bridge check``: what an SDK would never let an agent do.

Every prompt streams "tok " chunks every 10 ms until ``session/cancel``, then is
answered cancelled; sessions are kept in ``.faulty-raw-sessions.json`` of their cwd.

    python tests/faulty_raw_agent.py --quick-turn        # 3 chunks, end_turn in one write
                                                         # (it advertises session/close)
    python tests/faulty_raw_agent.py --parse-error-no-id # -32700 answered without an id
    python tests/faulty_raw_agent.py --answer-notifications  # an error for each notification
    python tests/faulty_raw_agent.py --no-replay-text    # loadSession; the load replays no text
    python tests/faulty_raw_agent.py --exit-at-once      # writes to stderr and exits 4
    python tests/faulty_raw_agent.py --needs-auth        # session/new: -32000 auth required
    python tests/faulty_raw_agent.py --wrong-code        # unknown methods: -32600, not -32601
    python tests/faulty_raw_agent.py --ignore-eof        # stays when stdin closes (until a signal)
    python tests/faulty_raw_agent.py --ends-as-stopped   # a turn of N+1 chunks (--chunks N) whose
                                                         # last chunk and end_turn go out once the
                                                         # Stop is on stdin, before it is read
                                                         # (it advertises session/close)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import sys
import uuid
from pathlib import Path
from typing import Any

Json = dict[str, Any]
STORE = ".faulty-raw-sessions.json"


def write(*messages: Json) -> None:
    os.write(1, b"".join(json.dumps(m).encode() + b"\n" for m in messages))


def chunk(session_id: str, text: str = "tok ") -> Json:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session_id, "update": update},
    }


class RawAgent:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.turns: dict[str, asyncio.Event] = {}
        self.cwds: dict[str, str] = {}

    def _store(self, cwd: str) -> tuple[Path, Json]:
        path = Path(cwd) / STORE
        return path, json.loads(path.read_text()) if path.exists() else {}

    def handle(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            error = {"code": -32700, "message": "Parse error"}
            if self.args.parse_error_no_id:
                write({"jsonrpc": "2.0", "error": error})
            else:
                write({"jsonrpc": "2.0", "id": None, "error": error})
            return
        method, params = msg.get("method"), msg.get("params") or {}
        if method is None:
            return
        if "id" not in msg:
            if method == "session/cancel" and (
                turn := self.turns.get(str(params.get("sessionId")))
            ):
                turn.set()
            if self.args.answer_notifications:
                # As some agents do: an error response with no id at all.
                error = {"code": -32601, "message": f"no handler for {method}"}
                write({"jsonrpc": "2.0", "error": error})
            return
        rid = msg["id"]
        if method == "session/prompt" and not isinstance(params.get("prompt"), list):
            error = {"code": -32602, "message": "prompt: not an array of content blocks"}
            write({"jsonrpc": "2.0", "id": rid, "error": error})
            return
        if method == "session/prompt":
            asyncio.get_running_loop().create_task(self.prompt(rid, params))
            return
        result = self.answer(method, params)
        if isinstance(result, Exception):
            write({"jsonrpc": "2.0", "id": rid, "error": result.args[0]})
        else:
            write({"jsonrpc": "2.0", "id": rid, "result": result})

    def answer(self, method: str, params: Json) -> Json | Exception:
        if method == "initialize":
            return {
                "protocolVersion": 1,
                "agentCapabilities": {
                    "loadSession": self.args.no_replay_text,
                    "sessionCapabilities": {"close": {}}
                    if self.args.quick_turn or self.args.ends_as_stopped
                    else {},
                },
                "agentInfo": {"name": "faulty-raw-agent", "version": "0.1.0"},
            }
        if method == "session/new":
            if self.args.needs_auth:
                return Exception({"code": -32000, "message": "Authentication required"})
            session_id = "sess_" + uuid.uuid4().hex
            self.cwds[session_id] = params["cwd"]
            return {"sessionId": session_id}
        if method == "session/close":
            if turn := self.turns.get(str(params.get("sessionId"))):
                turn.set()
            return {}
        if method == "session/load":
            _path, store = self._store(params["cwd"])
            session_id = params["sessionId"]
            if session_id not in store:
                return Exception({"code": -32002, "message": "no such session"})
            self.cwds[session_id] = params["cwd"]
            # The fault: the user's prompts are replayed, the agent's text is not.
            for text in store[session_id]:
                update = {"sessionUpdate": "user_message_chunk"}
                update["content"] = {"type": "text", "text": text}  # type: ignore[assignment]
                write(
                    {
                        "jsonrpc": "2.0",
                        "method": "session/update",
                        "params": {"sessionId": session_id, "update": update},
                    }
                )
            return {}
        code = -32600 if self.args.wrong_code and not method.startswith("_acp_bridge/") else -32601
        return Exception({"code": code, "message": f"Method not found: {method}"})

    async def prompt(self, rid: Any, params: Json) -> None:
        session_id = params["sessionId"]
        text = "".join(b.get("text", "") for b in params.get("prompt", []) if isinstance(b, dict))
        if session_id in self.cwds:
            path, store = self._store(self.cwds[session_id])
            store.setdefault(session_id, []).append(text)
            path.write_text(json.dumps(store))
        if self.args.quick_turn:
            # The whole turn in one write: it is over before any Stop can be sent.
            done = {"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}}
            write(chunk(session_id), chunk(session_id), chunk(session_id), done)
            return
        if self.args.ends_as_stopped:
            # Not a fault: a turn that ends as the Stop crosses it.  The agent has
            # not read the Stop when it writes its end (the read waits for it).
            write(*(chunk(session_id) for _ in range(self.args.chunks)))
            select.select([0], [], [], 30)
            done = {"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}}
            write(chunk(session_id, "end."), done)
            return
        stop = self.turns[session_id] = asyncio.Event()
        while not stop.is_set():
            write(chunk(session_id))
            await asyncio.sleep(0.01)
        del self.turns[session_id]
        write({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "cancelled"}})


async def main() -> None:
    parser = argparse.ArgumentParser()
    for flag in (
        "--quick-turn",
        "--parse-error-no-id",
        "--answer-notifications",
        "--no-replay-text",
        "--exit-at-once",
        "--needs-auth",
        "--wrong-code",
        "--ends-as-stopped",
        "--ignore-eof",
    ):
        parser.add_argument(flag, action="store_true")
    parser.add_argument("--chunks", type=int, default=3)
    args = parser.parse_args()
    if args.exit_at_once:
        print("faulty-raw-agent: no configuration found, giving up", file=sys.stderr)
        sys.exit(4)
    agent = RawAgent(args)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        if line.strip():
            agent.handle(line)
    if args.ignore_eof:
        await asyncio.Event().wait()  # the editor went away: stays anyway


if __name__ == "__main__":
    asyncio.run(main())
