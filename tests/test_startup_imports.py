"""What ``session/new`` needs loads without pydantic; the rest loads on first use.

Each check runs in a fresh interpreter (this one has long imported everything).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import UTC
from pathlib import Path

import anyio
import pytest
from harness import write_script
from support.bridge import start_bridge
from support.import_gate import gated_bridge_code

from acp_bridge.client import AcpClient
from acp_bridge.paths import ENV_CONFIG_DIR


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_session_s_tools_and_system_prompt_need_no_pydantic() -> None:
    out = _run(
        """
        import sys
        import acp_bridge.server, acp_bridge.serve_cli
        from acp_bridge.acp import tool_setup
        from acp_bridge.context.state import SessionContext
        from acp_bridge.tools.base import ClientCapabilities
        registry = tool_setup.registry_for(ClientCapabilities())
        listed = [(tool.name, tool.description) for tool in registry]
        assert len(listed) >= 7, listed
        print("before", "pydantic" in sys.modules, "acp_bridge.tools.arguments" in sys.modules)
        # First use: the model is imported and validates.
        args = registry.get("read_file").args_model.model_validate({"path": "a.txt", "line": 2})
        print("after", type(args).__name__, args.path, args.line)
        print("schema", registry.specs()[0].input_schema["required"])
        """
    )
    assert out.splitlines() == [
        "before False False",
        "after ReadArgs a.txt 2",
        "schema ['path']",
    ]


def test_a_retry_after_date_is_read_though_its_parser_loads_late() -> None:
    """``Retry-After`` as an HTTP date (its parser is imported on first use)."""
    from datetime import datetime, timedelta
    from email.utils import format_datetime

    from acp_bridge.providers.retry import retry_after_seconds

    when = datetime.now(UTC) + timedelta(seconds=120)
    seconds = retry_after_seconds({"retry-after": format_datetime(when, usegmt=True)})
    assert seconds is not None
    assert 100 < seconds <= 120
    assert retry_after_seconds({"retry-after": "not a date"}) is None
    assert "email.utils" not in _run(
        "import sys, acp_bridge.server; print(sorted(m for m in sys.modules if 'email' in m))"
    )


def test_httpx_loads_without_its_command_line_client() -> None:
    """An HTTP provider's first session does not pay for rich, click and pygments."""
    out = _run(
        """
        import sys
        from acp_bridge.providers import http
        import httpx
        print(sys.modules.get("httpx._main"), "rich" in sys.modules, callable(httpx.main))
        client = httpx.AsyncClient()
        print(type(client).__name__)
        """
    )
    assert out.splitlines() == ["None False True", "AsyncClient"]


# Not needed before session/new is answered (nor the config file's parser,
# without a config file).
NOT_FOR_SESSION_NEW = (
    "pydantic",
    "pydantic_core",
    "acp_bridge.providers.script_format",
    "acp_bridge.tools.arguments",
    "importlib.metadata",
    "jsonschema",
    "tomllib",
)


@pytest.mark.anyio
async def test_initialize_and_session_new_wait_for_nothing_heavy(tmp_path: Path) -> None:
    """``initialize`` is answered while the provider's module cannot load yet;
    ``session/new`` while pydantic (the script's models, the tools' models) and
    the config file's parser cannot load at all; the first prompt, once they
    can, streams the script's answer."""
    hold_until, refuse_until = tmp_path / "provider-may-load", tmp_path / "pydantic-may-load"
    code = gated_bridge_code(
        held=("acp_bridge.providers.scripted",),
        hold_until=str(hold_until),
        refused=NOT_FOR_SESSION_NEW,
        refuse_until=str(refuse_until),
    )
    script = {"responses": [{"events": [{"text": "one "}, {"text": "two"}]}]}

    env = {k: v for k, v in os.environ.items() if k != ENV_CONFIG_DIR}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "no-config")  # no config file to read
    env["HOME"] = str(tmp_path)
    stderr = tmp_path / "stderr.txt"
    async with start_bridge(
        tmp_path / "state",
        script=write_script(tmp_path, script),
        command=[sys.executable, "-c", code],
        env=env,
        stderr=stderr,
    ) as client:
        with anyio.fail_after(60):
            await _initialize_new_and_prompt(client, tmp_path, hold_until, refuse_until)
        assert await client.finish() == 0
    assert "Traceback" not in stderr.read_text()


async def _initialize_new_and_prompt(
    client: AcpClient, tmp_path: Path, hold_until: Path, refuse_until: Path
) -> None:
    init = await client.initialize()
    assert init["result"]["protocolVersion"] == 1
    await anyio.Path(hold_until).touch()
    answer = await client.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    assert "result" in answer, answer
    await anyio.Path(refuse_until).touch()
    result = await client.prompt(answer["result"]["sessionId"], "hi")
    assert (result.stop_reason, result.text()) == ("end_turn", "one two")
