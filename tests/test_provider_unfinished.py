"""A model stream that ends cleanly without its finish event, for both vendors.

Anthropic without ``message_stop``, OpenAI-compatible without a
``finish_reason`` or ``[DONE]``: the body is cut short even though the
connection closed cleanly.  Before any output the request is retried (and the
retry is really made); once retries are spent, or after output, the turn fails
with kind ``cut``.  Never does such a stream end a turn as ``end_turn``.
Through the real subprocess against the loopback vendor server.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from provider_server import (
    Reply,
    anthropic_text,
    anthropic_unfinished,
    openai_text,
    openai_unfinished,
)
from test_provider_sessions import prompt, run

from acp_bridge.client import AcpClient, PromptResult

pytestmark = pytest.mark.anyio

VENDORS = {
    "anthropic": (anthropic_unfinished, anthropic_text),
    "openai": (openai_unfinished, openai_text),
}


def _fast_retries(tmp_path: Path, provider: str, retries: int) -> tuple[str, ...]:
    config = tmp_path / "bridge.toml"
    config.write_text(
        f'[profiles.fast]\nprovider = "{provider}"\nretry_base_delay = 0.01\n'
        f"max_retries = {retries}\n"
    )
    return ("--config", str(config), "--profile", "fast")


@pytest.mark.parametrize("provider", sorted(VENDORS))
async def test_an_unfinished_stream_before_output_is_retried(tmp_path: Path, provider: str) -> None:
    unfinished, finished = VENDORS[provider]
    results: list[PromptResult] = []

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    s = await run(
        tmp_path,
        provider,
        [Reply(unfinished()), Reply(finished(["After ", "the retry."]))],
        play,
        extra=_fast_retries(tmp_path, provider, 3),
    )
    assert len(s.server.requests) == 2  # the announced retry was made
    assert results[0].stop_reason == "end_turn", results[0].response
    assert results[0].text() == "After the retry."
    [retry] = s.errors()
    assert retry["retrying"] is True
    assert retry["error"]["kind"] == "cut"
    [message] = [r for r in s.logs()[0] if r["type"] == "assistant/message"]
    assert message["content"] == [{"type": "text", "text": "After the retry."}]


@pytest.mark.parametrize("provider", sorted(VENDORS))
async def test_unfinished_streams_past_the_retries_fail_as_cut(
    tmp_path: Path, provider: str
) -> None:
    unfinished, _ = VENDORS[provider]
    results: list[PromptResult] = []

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    s = await run(
        tmp_path,
        provider,
        [Reply(unfinished()), Reply(unfinished())],
        play,
        extra=_fast_retries(tmp_path, provider, 1),
    )
    assert len(s.server.requests) == 2
    error = results[0].response.get("error")
    assert error is not None, results[0].response  # never {"stopReason": "end_turn"}
    assert error["data"]["kind"] == "cut"
    assert [e.get("retrying", False) for e in s.errors()] == [True, False]
    records = s.logs()[0]
    assert not [r for r in records if r["type"] == "assistant/message"]
    [end] = [r for r in records if r["type"] == "turn/end"]
    assert end["reason"] == "error"


@pytest.mark.parametrize("provider", sorted(VENDORS))
async def test_an_unfinished_stream_after_output_fails_as_cut(
    tmp_path: Path, provider: str
) -> None:
    unfinished, _ = VENDORS[provider]
    results: list[PromptResult] = []

    async def play(client: AcpClient, sid: str) -> None:
        results.append(await prompt(client, sid, "Hi"))

    s = await run(
        tmp_path,
        provider,
        [Reply(unfinished(["Half an ", "answer"]))],
        play,
        extra=_fast_retries(tmp_path, provider, 3),
    )
    assert len(s.server.requests) == 1  # output reached the editor: no retry
    assert results[0].text() == "Half an answer"
    assert results[0].response["error"]["data"]["kind"] == "cut"
    records = s.logs()[0]
    assert not [r for r in records if r["type"] == "assistant/message"]
    [attempt] = [r for r in records if r["type"] == "assistant/attempt"]
    assert attempt["outcome"] == "provider_error"
