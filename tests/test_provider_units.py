"""The pure parts of the real providers: key scrubbing, retry delays, the parsers' edge cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_bridge.providers.anthropic import AnthropicParser
from acp_bridge.providers.base import (
    ProviderError,
    StreamIdleTimeout,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)
from acp_bridge.providers.config import ConfigError, load_profile
from acp_bridge.providers.errors import http_error
from acp_bridge.providers.openai import OpenAIParser
from acp_bridge.providers.recording import Recorder
from acp_bridge.providers.retry import RetryPolicy
from acp_bridge.providers.script_format import HangEvent, StallEvent, load_script
from acp_bridge.redact import REDACTED, SECRETS, scrub


def test_scrub_removes_the_key_and_key_shaped_text() -> None:
    text = "bad key sk-ant-abcdef0123456789 and MYKEYVALUE and Bearer abc.def-123456"
    SECRETS.add(["MYKEYVALUE"])
    out = scrub(text)
    assert "sk-ant" not in out
    assert "MYKEYVALUE" not in out
    assert "abc.def" not in out
    assert out.count(REDACTED) == 3


def test_http_error_message_never_carries_the_key() -> None:
    body = b'{"error":{"type":"authentication_error","message":"key sk-live-0123456789abcd bad"}}'
    err = http_error("X", 401, body, {}, key_env="K", has_key=True, request_id_header="r")
    assert "sk-live" not in err.message
    assert err.kind == "auth"
    assert "the API key in K was rejected" in err.message
    missing = http_error("X", 401, b"{}", {}, key_env="K", has_key=False, request_id_header="r")
    assert "set K" in missing.message


@pytest.mark.parametrize(
    ("status", "body", "kind", "retryable"),
    [
        (429, b"{}", "rate_limited", True),
        (529, b"{}", "overloaded", True),
        (503, b"{}", "server", True),
        (
            400,
            b'{"error":{"code":"context_length_exceeded","message":"too long"}}',
            "context_length",
            False,
        ),
        (400, b'{"error":{"message":"bad field"}}', "bad_request", False),
    ],
)
def test_http_error_kinds(status: int, body: bytes, kind: str, retryable: bool) -> None:
    err = http_error("X", status, body, {}, key_env="K", has_key=True, request_id_header="r")
    assert (err.kind, err.retryable) == (kind, retryable)


def test_retry_after_wins_over_backoff_and_backoff_grows() -> None:
    policy = RetryPolicy(base_delay=1.0, jitter=0.0)
    assert policy.delay(1, {"retry-after": "7"}) == 7.0
    assert policy.delay(1, {"retry-after-ms": "250"}) == 0.25
    assert [policy.delay(n) for n in (1, 2, 3)] == [1.0, 2.0, 4.0]


def test_anthropic_stream_without_message_stop_is_cut() -> None:
    parser = AnthropicParser()
    parser.feed("content_block_delta", '{"type":"ping"}')
    with pytest.raises(ProviderError) as info:
        parser.end()
    assert info.value.kind == "cut"


def test_openai_tool_call_continuations_without_id() -> None:
    parser = OpenAIParser()
    first = parser.feed(
        "message",
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
        '"id":"c1","function":{"name":"f","arguments":"{\\""}}]}}]}',
    )
    more = parser.feed(
        "message",
        '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,'
        '"function":{"arguments":"a\\":1}"}}]}}]}',
    )
    assert first == [ToolCallStart(0, "c1", "f"), ToolCallDelta(0, '{"')]
    assert more == [ToolCallDelta(0, 'a":1}')]


def test_httpx_is_not_imported_unless_a_real_provider_is_chosen() -> None:
    import subprocess
    import sys

    code = (
        "import sys, acp_bridge.cli, acp_bridge.server, acp_bridge.acp.agent, "
        "acp_bridge.providers.scripted; print('httpx' in sys.modules, 'httpx_sse' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_openai_stream_without_finish_reason_is_cut() -> None:
    parser = OpenAIParser()
    parser.feed("message", '{"choices":[{"index":0,"delta":{"content":"Hal"}}]}')
    with pytest.raises(ProviderError) as info:
        parser.end()
    assert info.value.kind == "cut"


def test_config_profile_errors_say_what_to_fix(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[profiles.a]\nprovider = "openai"\nmodle = "x"\n')
    with pytest.raises(ConfigError, match="unknown key\\(s\\) modle"):
        load_profile(str(path), "a")
    with pytest.raises(ConfigError, match="no profile 'b' \\(profiles: a\\)"):
        load_profile(str(path), "b")
    assert load_profile(str(path), None) == {}  # no 'default' profile: nothing


def test_recording_of_an_idle_stream_replays_as_silence(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    response = Recorder(str(path), "openai").response()
    response.event(TextDelta(0, "Slow"))
    response.error(StreamIdleTimeout(0.5))
    script = load_script(path)
    events = script.responses[0].events
    assert isinstance(events[-1], HangEvent)
    assert isinstance(events[-2], StallEvent)


def test_anthropic_redacted_thinking_is_accepted_and_not_shown() -> None:
    parser = AnthropicParser()
    start = (
        '{"type":"content_block_start","index":0,'
        '"content_block":{"type":"redacted_thinking","data":"opaque"}}'
    )
    assert parser.feed("content_block_start", start) == []
    assert parser.feed("content_block_stop", '{"type":"content_block_stop","index":0}') == []


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "room"), [("anthropic", 5024), ("openai", 1024)])
async def test_a_thinking_budget_adds_to_the_output_room_where_the_wire_sends_it(
    provider: str, room: int
) -> None:
    """The wire declares whether it sends a thinking budget (`Wire.thinks`):
    Anthropic's adds to the room kept for the output; OpenAI's wire sends none."""
    from acp_bridge.providers.build import http_provider_factory, provider_config

    settings = {"provider": provider, "max_tokens": 1024, "thinking_budget": 4000}
    config = provider_config(settings, idle_timeout=None)
    info = await http_provider_factory(config, None, key="k" * 40)().model_info()
    assert info.max_output_tokens == room
