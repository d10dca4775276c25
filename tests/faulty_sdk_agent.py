"""The reference agent of the benchmark (``bench/ref_sdk_agent.py``, on the official
Python SDK), with faults and extras a flag away, for the tests of ``acp-bridge check``
and of the test kit.

    python tests/faulty_sdk_agent.py                 # the reference agent as it is
    python tests/faulty_sdk_agent.py --end-turn      # a Stop is answered end_turn
    python tests/faulty_sdk_agent.py --leak 3        # 3 chunks after the cancelled response
    python tests/faulty_sdk_agent.py --ask-permission  # every prompt asks first
    python tests/faulty_sdk_agent.py --read-anyway   # fs/read_text_file, capability or not
    python tests/faulty_sdk_agent.py --late-register # a cancel right behind the prompt is lost
    python tests/faulty_sdk_agent.py --sticky-cancel # a cancel while idle stops the next prompt
    python tests/faulty_sdk_agent.py --crash-on-cancel # exits (status 3) on session/cancel
    python tests/faulty_sdk_agent.py --uuid-ids      # session ids are bare UUIDs, not sess_...
    python tests/faulty_sdk_agent.py --one-line      # each prompt answers one line, end_turn

With ``--ask-permission`` each prompt first announces a tool call and asks for
permission: an allow streams as usual; a ``cancelled`` outcome (the client's answer
on Stop) or a rejection ends the turn, the call marked failed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import acp
from acp import (
    NewSessionResponse,
    PromptResponse,
    start_tool_call,
    text_block,
    update_agent_message,
    update_tool_call,
)
from acp.schema import PermissionOption

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.ref_sdk_agent import CHUNK_TEXT, RefSdkAgent


class FaultySdkAgent(RefSdkAgent):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(one_line=args.one_line)
        self._uuid_ids: bool = args.uuid_ids
        self._end_turn: bool = args.end_turn
        self._leak: int = args.leak
        self._ask: bool = args.ask_permission
        self._read: bool = args.read_anyway
        self._late: bool = args.late_register
        self._sticky: bool = args.sticky_cancel
        self._crash: bool = args.crash_on_cancel
        self._stopped_while_idle: set[str] = set()
        self._leaks: list[str] = []

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        if not self._uuid_ids:
            return await super().new_session(cwd, additional_directories, mcp_servers, **kwargs)
        session_id = str(uuid.uuid4())
        self._sessions.add(session_id)
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if self._crash and session_id in self._turns:
            os._exit(3)
        if self._sticky and session_id not in self._turns:
            self._stopped_while_idle.add(session_id)
        await super().cancel(session_id, **kwargs)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        if session_id in self._stopped_while_idle:
            self._stopped_while_idle.discard(session_id)
            return PromptResponse(stop_reason="cancelled")
        if self._read and self._conn is not None:
            await self._conn.read_text_file(path="/etc/hostname", session_id=session_id)
        if self._late:
            # Work before the turn is registered: a cancel read meanwhile finds no turn.
            await asyncio.sleep(0.2)
        if self._ask and session_id in self._sessions and session_id not in self._turns:
            assert self._conn is not None
            if not await self._permission(session_id):
                return PromptResponse(stop_reason="cancelled")
        response = await super().prompt(session_id, prompt, **kwargs)
        if response.stop_reason != "cancelled":
            return response
        if self._leak:
            # Written when the next request comes in: surely after this response.
            self._leaks.append(session_id)
        if self._end_turn:
            return PromptResponse(stop_reason="end_turn")
        return response

    async def _permission(self, session_id: str) -> bool:
        assert self._conn is not None
        call = start_tool_call("call_1", "Write note.txt", kind="edit", status="pending")
        await self._conn.session_update(session_id, call)
        options = [
            PermissionOption(option_id="allow", name="Allow", kind="allow_once"),
            PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
        ]
        answer = await self._conn.request_permission(
            session_id, update_tool_call("call_1"), options
        )
        outcome = answer.outcome
        allowed = getattr(outcome, "outcome", None) == "selected" and (
            getattr(outcome, "option_id", None) == "allow"
        )
        final = update_tool_call("call_1", status="completed" if allowed else "failed")
        await self._conn.session_update(session_id, final)
        return allowed

    async def ext_method(self, method: str, params: dict[str, Any]) -> Any:
        # A stopped turn's chunks, leaked once the client sends its next request
        # (the checker's barrier, an extension method).
        while self._leaks and self._conn is not None:
            session_id = self._leaks.pop(0)
            for _ in range(self._leak):
                chunk = update_agent_message(text_block(CHUNK_TEXT))
                await self._conn.session_update(session_id, chunk)
        return await super().ext_method(method, params)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--end-turn", action="store_true")
    parser.add_argument("--leak", type=int, default=0)
    parser.add_argument("--ask-permission", action="store_true")
    parser.add_argument("--read-anyway", action="store_true")
    parser.add_argument("--late-register", action="store_true")
    parser.add_argument("--sticky-cancel", action="store_true")
    parser.add_argument("--crash-on-cancel", action="store_true")
    parser.add_argument("--uuid-ids", action="store_true")
    parser.add_argument("--one-line", action="store_true")
    await acp.run_agent(FaultySdkAgent(parser.parse_args()))


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    asyncio.run(main())
