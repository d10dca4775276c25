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

Beyond the baseline, each flag advertises (or does) one thing and gets it wrong:

    --terminal-auth      a terminal auth method for a client that did not enable it
    --auth-method        an agent auth method, and authenticate not implemented
    --logout             agentCapabilities.auth.logout, and logout not implemented
    --modes              modes in session/new, and session/set_mode not implemented
    --config-options     two config options; set_config_option answers the one set only
    --delete             session/delete; deleting an unknown session is an error
    --additional-directories  advertised, and a session/new with them refused
    --refuse-links       a prompt with a resource_link block refused
    --image              promptCapabilities.image, and an image block refused
    --refuse-meta        a session/new with _meta refused
    --number-ids         a string id made of digits answered as a number
    --mojibake           each prompt's text echoed back decoded as Latin-1

With ``--ask-permission`` each prompt first announces a tool call and asks for
permission: an allow streams as usual; a ``cancelled`` outcome (the client's answer
on Stop) or a rejection ends the turn, the call marked failed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import sys
import uuid
from pathlib import Path
from typing import Any

import acp
import acp.agent.connection
from acp import (
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    start_tool_call,
    text_block,
    update_agent_message,
    update_tool_call,
)
from acp.schema import (
    AuthMethodAgent,
    DeleteSessionRequest,
    DeleteSessionResponse,
    PermissionOption,
    SetSessionConfigOptionResponse,
)
from acp.utils import normalize_result

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
        self._args = args

    async def initialize(self, *args: Any, **kwargs: Any) -> InitializeResponse:
        answer = await super().initialize(*args, **kwargs)
        data = answer.model_dump(by_alias=True, exclude_none=True)
        caps = data.setdefault("agentCapabilities", {})
        methods = data.setdefault("authMethods", [])
        if self._args.terminal_auth:
            methods.append({"type": "terminal", "id": "login", "name": "Log in", "args": []})
        if self._args.auth_method:
            methods.append(AuthMethodAgent(id="login", name="Log in").model_dump(by_alias=True))
        if self._args.logout:
            caps["auth"] = {"logout": {}}
        sessions = caps.setdefault("sessionCapabilities", {})
        if self._args.delete:
            sessions["delete"] = {}
        if self._args.additional_directories:
            sessions["additionalDirectories"] = {}
        if self._args.image:
            caps["promptCapabilities"] = {"image": True}
        return InitializeResponse.model_validate(data)

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        if self._args.refuse_meta and "acpBridgeCheck" in kwargs:
            raise acp.RequestError.invalid_params({"_meta": "not expected"})
        if self._args.additional_directories and additional_directories:
            raise acp.RequestError.invalid_params({"additionalDirectories": "not taken"})
        if self._uuid_ids:
            answer = NewSessionResponse(session_id=str(uuid.uuid4()))
            self._sessions.add(answer.session_id)
        else:
            answer = await super().new_session(cwd, additional_directories, mcp_servers, **kwargs)
        data = answer.model_dump(by_alias=True, exclude_none=True)
        if self._args.modes:
            modes = [{"id": "ask", "name": "Ask"}, {"id": "code", "name": "Code"}]
            data["modes"] = {"currentModeId": "ask", "availableModes": modes}
        if self._args.config_options:
            data["configOptions"] = [_select("mode", "ask", "code"), _select("model", "a", "b")]
        return NewSessionResponse.model_validate(data)

    async def set_config_option(  # type: ignore[override]
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        if not self._args.config_options:
            return await super().set_config_option(config_id, session_id, value, **kwargs)
        # The option set, and not the others: not the complete list.
        option = _select(config_id, str(value), "other")
        return SetSessionConfigOptionResponse.model_validate({"configOptions": [option]})

    async def delete_session(self, session_id: str, **kwargs: Any) -> DeleteSessionResponse:
        if session_id not in self._sessions:
            raise acp.RequestError.invalid_params({"sessionId": session_id, "reason": "unknown"})
        self._sessions.discard(session_id)
        return DeleteSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if self._crash and session_id in self._turns:
            os._exit(3)
        if self._sticky and session_id not in self._turns:
            self._stopped_while_idle.add(session_id)
        await super().cancel(session_id, **kwargs)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        kinds = {getattr(block, "type", None) for block in prompt}
        if (self._args.refuse_links and "resource_link" in kinds) or (
            self._args.image and "image" in kinds
        ):
            raise acp.RequestError.invalid_params({"prompt": "a block of this type is refused"})
        if self._args.mojibake and self._conn is not None:
            text = "".join(getattr(block, "text", "") for block in prompt)
            echo = text.encode("utf-8").decode("latin-1")
            await self._conn.session_update(session_id, update_agent_message(text_block(echo)))
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


def _select(option_id: str, current: str, other: str) -> dict[str, Any]:
    values = [{"value": current, "name": current}, {"value": other, "name": other}]
    return {
        "id": option_id,
        "name": option_id.title(),
        "type": "select",
        "currentValue": current,
        "options": values,
    }


def _number_ids(writer: asyncio.StreamWriter) -> None:
    """The agent's stdout: each string id made of digits written as a number."""
    write = writer.write

    def rewrite(data: bytes | bytearray | memoryview) -> None:
        write(re.sub(rb'"id":\s*"(\d+)"', rb'"id":\1', bytes(data)))

    writer.write = rewrite  # type: ignore[method-assign]


def _route_delete() -> None:
    """The SDK routes no session/delete: route it to the agent's delete_session."""
    connection: Any = acp.agent.connection
    build = connection.build_agent_router

    def build_with_delete(agent: Any, **kwargs: Any) -> Any:
        router = build(agent, **kwargs)
        router.route_request(
            "session/delete",
            DeleteSessionRequest,
            agent,
            "delete_session",
            adapt_result=normalize_result,
        )
        return router

    connection.build_agent_router = build_with_delete


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--end-turn", action="store_true")
    parser.add_argument("--leak", type=int, default=0)
    parser.add_argument("--ask-permission", action="store_true")
    parser.add_argument("--read-anyway", action="store_true")
    parser.add_argument("--late-register", action="store_true")
    parser.add_argument("--sticky-cancel", action="store_true")
    parser.add_argument("--crash-on-cancel", action="store_true")
    for flag in (
        "--terminal-auth",
        "--auth-method",
        "--logout",
        "--modes",
        "--config-options",
        "--delete",
        "--additional-directories",
        "--refuse-links",
        "--image",
        "--refuse-meta",
        "--number-ids",
        "--mojibake",
    ):
        parser.add_argument(flag, action="store_true")
    parser.add_argument("--uuid-ids", action="store_true")
    parser.add_argument("--one-line", action="store_true")
    args = parser.parse_args()
    if args.delete:
        _route_delete()
    if args.number_ids:
        from acp.stdio import stdio_streams

        reader, writer = await stdio_streams()
        # run_agent's "input stream" is the one it writes to.
        _number_ids(writer)
        await acp.run_agent(FaultySdkAgent(args), writer, reader)
        return
    await acp.run_agent(FaultySdkAgent(args))


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    asyncio.run(main())
