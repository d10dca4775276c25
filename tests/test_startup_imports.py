"""What ``session/new`` needs loads without pydantic; the rest loads on first use or in the warm-up.

Each check runs in a fresh interpreter (this one has long imported everything).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC


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
        from acp_bridge.acp import tool_session
        from acp_bridge.context.session import SessionContext
        from acp_bridge.tools.base import ClientCapabilities
        registry = tool_session.registry_for(ClientCapabilities())
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


def test_the_warm_up_loads_what_a_turn_needs_once() -> None:
    out = _run(
        """
        import sys
        from acp_bridge import warm_up
        print("before", [m for m in warm_up.MODULES if m in sys.modules])
        warm_up.start()
        first = warm_up._thread
        warm_up.start()
        assert warm_up.wait(100)
        print("same thread", first is not None and warm_up._thread is first)
        print("missing", [m for m in warm_up.MODULES if m not in sys.modules])
        """
    )
    assert out.splitlines() == ["before []", "same thread True", "missing []"]


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
