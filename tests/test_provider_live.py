"""Opt-in live test against the vendors: one short prompt and one Stop each.

Runs only where the vendor's key is in the environment (``ANTHROPIC_API_KEY``,
``OPENAI_API_KEY``) and the network reaches the vendor; without a key it is
skipped and says so.  Model names can be set with ``ACP_BRIDGE_LIVE_ANTHROPIC_MODEL``
and ``ACP_BRIDGE_LIVE_OPENAI_MODEL``.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import pytest
from support.harness import cwd_for_tests

from acp_bridge.client import bridge_command, running

pytestmark = pytest.mark.anyio

VENDORS = {
    "anthropic": ("ANTHROPIC_API_KEY", "ACP_BRIDGE_LIVE_ANTHROPIC_MODEL", "claude-haiku-4-5"),
    "openai": ("OPENAI_API_KEY", "ACP_BRIDGE_LIVE_OPENAI_MODEL", "gpt-4o-mini"),
}


@pytest.mark.parametrize("provider", sorted(VENDORS))
async def test_live_prompt_and_stop(tmp_path: Path, provider: str) -> None:
    key_env, model_env, model = VENDORS[provider]
    if not os.environ.get(key_env):
        pytest.skip(f"live test: {key_env} is not set, so there is no {provider} key to use")
    command = bridge_command(
        "--provider",
        provider,
        "--model",
        os.environ.get(model_env, model),
        "--state-dir",
        str(tmp_path),
    )
    async with running(command, stderr=subprocess.DEVNULL) as client:
        with anyio.fail_after(120):
            await client.initialize()
            sid = await client.new_session(cwd_for_tests())
            short = await client.prompt(sid, "Reply with the single word: pong")
            assert short.stop_reason == "end_turn", short.response
            assert "pong" in short.text().lower()
            stopped = await client.prompt(
                sid, "Count from 1 to 300, one number per line.", cancel_after=3
            )
            assert stopped.stop_reason == "cancelled"
            assert not stopped.late
        await client.finish()
