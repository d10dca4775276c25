"""Reference agent for the provider benchmark: the official ACP Python SDK + the official
``openai`` package, written the way an SDK user would.

Each ``session/prompt`` streams a Chat Completion from ``--base-url`` (an
OpenAI-compatible server) with ``openai.AsyncOpenAI`` and forwards every text
delta as an ``agent_message_chunk`` with ``await conn.session_update(...)``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from typing import Any

import acp
import openai
from acp import (
    NewSessionResponse,
    PromptResponse,
    text_block,
    update_agent_message,
)

from bench.ref_sdk_agent import RefSdkAgent


class RefOpenAIAgent(RefSdkAgent):
    """The SDK reference agent's refusals of unsupported methods, with a real prompt."""

    agent_name = "ref-openai-agent"

    def __init__(self, base_url: str) -> None:
        super().__init__()
        self._client = openai.AsyncOpenAI(base_url=base_url, api_key="bench-key")

    async def new_session(self, cwd: str, *args: Any, **kwargs: Any) -> Any:
        return NewSessionResponse(session_id=f"sess_{uuid.uuid4().hex}")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        assert self._conn is not None
        text = "".join(getattr(b, "text", "") for b in prompt)
        stream = await self._client.chat.completions.create(
            model="bench", messages=[{"role": "user", "content": text}], stream=True
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                await self._conn.session_update(
                    session_id, update_agent_message(text_block(chunk.choices[0].delta.content))
                )
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


async def main(base_url: str) -> None:
    await acp.run_agent(RefOpenAIAgent(base_url))


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    asyncio.run(main(sys.argv[1]))
