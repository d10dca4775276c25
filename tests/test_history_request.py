"""``acp-bridge history`` prints exactly the messages the model receives.

Through the real subprocess, for both vendors: a Stop while the model was
only reasoning (a message the request cannot carry: its thinking is
unsigned), and a Stop after some text.  The messages ``history`` prints are
compared with the request body the loopback server received for the next
prompt, role by role and text by text.
"""

from __future__ import annotations

import json
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio
import pytest
from provider_server import (
    Reply,
    anthropic_start,
    anthropic_text,
    openai_chunk,
    openai_text,
    sse,
)
from test_provider_sessions import prompt, run

from acp_bridge.client import AcpClient, PromptResult
from acp_bridge.log.check import check_history
from acp_bridge.providers.notes import INTERRUPTED_NOTE

pytestmark = pytest.mark.anyio

Json = dict[str, Any]


def anthropic_thinking(text: str, then_text: str | None) -> list[str]:
    out = [
        anthropic_start(),
        sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            },
        ),
        sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": text},
            },
        ),
    ]
    if then_text is not None:
        out += [
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 1,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "text_delta", "text": then_text},
                },
            ),
        ]
    return out


def openai_thinking(text: str, then_text: str | None) -> list[str]:
    out = [
        openai_chunk({"role": "assistant", "content": ""}),
        openai_chunk({"reasoning_content": text}),
    ]
    if then_text is not None:
        out.append(openai_chunk({"content": then_text}))
    return out


STREAMS = {
    "anthropic": (anthropic_thinking, anthropic_text),
    "openai": (openai_thinking, openai_text),
}


async def history_cli(state: Path, session_id: str) -> list[Json]:
    result = await anyio.run_process(
        [sys.executable, "-m", "acp_bridge", "history", "--state-dir", str(state), session_id],
        check=False,
    )
    assert result.returncode == 0, result.stderr
    messages: list[Json] = json.loads(result.stdout)
    return messages


def from_history(messages: list[Json]) -> list[tuple[str, list[str]]]:
    """(role, texts) of each message ``history`` printed; reasoning is not text."""
    return [(m["role"], [b["text"] for b in m["content"] if b["type"] == "text"]) for m in messages]


def from_body(provider: str, body: Json) -> list[tuple[str, list[str]]]:
    """(role, texts) of each message of a request body, in the vendor's format."""
    out: list[tuple[str, list[str]]] = []
    for message in body["messages"]:
        if message["role"] == "system":  # OpenAI's system prompt; history prints the conversation
            continue
        content = message["content"]
        if provider == "openai" and message["role"] == "user":
            # A text-only user message is one string, its parts joined by a blank line.
            texts = (
                content.split("\n\n") if isinstance(content, str) else [p["text"] for p in content]
            )
        elif provider == "openai":
            texts = [content] if content else []
        else:
            texts = [b["text"] for b in content if b["type"] == "text"]
        out.append((message["role"], texts))
    return out


@pytest.mark.parametrize(
    "shown_text", [None, "The answer"], ids=["reasoning-only", "reasoning-then-text"]
)
@pytest.mark.parametrize("provider", sorted(STREAMS))
async def test_history_prints_the_messages_of_the_next_request(
    tmp_path: Path, provider: str, shown_text: str | None
) -> None:
    thinking, finished = STREAMS[provider]
    results: list[PromptResult] = []
    chunks = 1 if shown_text is None else 2
    box: Json = {}

    async def play(client: AcpClient, sid: str) -> None:
        box["sid"] = sid
        results.append(await prompt(client, sid, "Think hard", cancel_after=chunks))
        results.append(await prompt(client, sid, "Never mind"))

    s = await run(
        tmp_path,
        provider,
        [Reply(thinking("Let me see", shown_text), hold=True), Reply(finished(["Ok."]))],
        play,
        extra=("--thinking-budget", "2000") if provider == "anthropic" else (),
    )
    assert results[0].stop_reason == "cancelled"
    assert results[0].text("agent_thought_chunk") == "Let me see"
    assert results[0].text() == (shown_text or "")
    with anyio.fail_after(60):
        history = await history_cli(s.state, box["sid"])
    check_history(history)
    # The request of the second prompt holds what history shows before its answer.
    *before, answer = history
    assert answer["role"] == "assistant"
    assert from_history([answer]) == [("assistant", ["Ok."])]
    assert from_body(provider, s.server.requests[1].body) == from_history(before)
    # Roles alternate in the request too, and the Stop is said once, where history says it.
    roles = [m["role"] for m in s.server.requests[1].body["messages"]]
    assert all(a != b for a, b in pairwise(roles)), roles
    if shown_text is None:
        # The thought-only reply is not sent: the two prompts are one message.
        expected = [("user", ["Think hard", INTERRUPTED_NOTE, "Never mind"])]
    else:
        expected = [
            ("user", ["Think hard"]),
            ("assistant", [shown_text]),
            ("user", [INTERRUPTED_NOTE, "Never mind"]),
        ]
    assert from_history(before) == expected
    # The reasoning the user saw stays in the log (I2), never in the request.
    assert "Let me see" not in json.dumps(s.server.requests[1].body)
