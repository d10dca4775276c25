"""``--record``: a session seen once with a provider replays keyless with ``--provider fake``.

The recorded session streams text and reasoning (with usage), is stopped
mid-answer, then gets a follow-up; the replay plays the same editor part
without a key or a server and must give the same normalized wire transcript
(less the model choice, which only a real provider offers).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from provider_server import (
    Reply,
    WireServer,
    openai_chunk,
    openai_text,
)
from support.bridge import running_bridge
from support.harness import cwd_for_tests, normalize

from acp_bridge.client import bridge_command

pytestmark = pytest.mark.anyio

KEY = "sk-PLANTEDrecordingKEY0123456789"


async def _play(command: list[str], env: dict[str, str]) -> list[list[Any]]:
    async with running_bridge(command, env=env, stderr=subprocess.DEVNULL) as client:
        with anyio.fail_after(30):
            await client.initialize()
            sid = await client.new_session(cwd_for_tests())
            first = await client.prompt(sid, "Think, then answer")
            assert first.stop_reason == "end_turn"
            stopped = await client.prompt(sid, "A long one", cancel_after=2)
            assert stopped.stop_reason == "cancelled"
            await client.prompt(sid, "Short please")
        await client.finish(within=15)
    wire: list[list[Any]] = normalize([[d, m] for d, m in client.transcript])
    for _, message in wire:
        result = message.get("result")
        if isinstance(result, dict):
            result.pop("configOptions", None)
    return wire


async def test_recorded_session_replays_keyless(tmp_path: Path) -> None:
    record = tmp_path / "recorded.json"
    replies = [
        Reply(openai_text(["The ", "answer ", "is 4."], reasoning=["Two ", "plus two"])),
        Reply(
            [openai_chunk({"content": "Once upon"}), openai_chunk({"content": " a time"})],
            hold=True,
        ),
        Reply(openai_text(["Fine."])),
    ]
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    with WireServer(replies) as server:
        live = await _play(
            bridge_command(
                "--provider",
                "openai",
                "--base-url",
                server.url,
                "--state-dir",
                str(tmp_path / "a"),
                "--record",
                str(record),
            ),
            env,
        )
    text = record.read_text()
    assert KEY not in text
    script = json.loads(text)
    assert len(script["responses"]) == 3
    assert script["responses"][1]["events"][-1] == {"hang": True}
    keyless = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    replay = await _play(
        bridge_command(
            "--provider", "fake", "--script", str(record), "--state-dir", str(tmp_path / "b")
        ),
        keyless,
    )
    assert replay == live
