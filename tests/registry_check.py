"""What the ACP registry's CI does to a submitted agent, and what it checks in an entry.

`auth_check` follows the registry's own client (``.github/workflows/client.py``
of github.com/agentclientprotocol/registry): it starts the agent with a fresh,
empty HOME and an allow-listed environment (PATH, TMP*, XDG_*: no API key),
sends only its ``initialize`` (terminal auth flagged in ``_meta`` only), and
fails on a timeout, an error, a line on stdout that is not JSON, or
``authMethods`` without a method of type ``agent`` or ``terminal`` (a missing
``type`` means ``agent``; a ``_meta`` ``terminal-auth`` key means ``terminal``).
Here every line the agent writes to stdout must be JSON, not only the first.

`icon_errors` follows its ``build_registry.py``: 16×16, square, fills and
strokes only ``currentColor``/``none``/``inherit``, and ``currentColor`` used.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The registry waits this long for the answer (its DEFAULT_AUTH_TIMEOUT); a
# hang guard, not a speed limit.
REGISTRY_TIMEOUT = 60.0
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": 1,
        "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
        "clientCapabilities": {
            "terminal": True,
            "fs": {"readTextFile": True, "writeTextFile": True},
            "_meta": {"terminal_output": True, "terminal-auth": True},
        },
    },
}
ALLOWED_PAINT = {"currentcolor", "none", "inherit"}


def sandbox_env(home: Path) -> dict[str, str]:
    """The allow-listed environment: PATH, TMP*, XDG_* from ours, an empty HOME."""
    env = {k: v for k, v in os.environ.items() if k == "PATH" or k.startswith(("TMP", "XDG_"))}
    # XDG folders of the person running the tests are not the sandbox's.
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        env.pop(name, None)
    env.update(HOME=str(home), TERM="dumb")
    return env


def auth_type(method: dict[str, Any]) -> str:
    kind = method.get("type")
    if not kind:
        meta = method.get("_meta")
        if isinstance(meta, dict) and "terminal-auth" in meta:
            kind = "terminal"
        elif isinstance(meta, dict) and "agent-auth" in meta:
            kind = "agent"
    return str(kind or "agent")


def auth_check(command: Sequence[str], home: Path, cwd: Path) -> dict[str, Any]:
    """The registry's check of ``command``; the ``initialize`` result.  Raises
    AssertionError saying what the registry would reject."""
    home.mkdir(parents=True, exist_ok=True)
    with subprocess.Popen(
        list(command),
        cwd=cwd,
        env=sandbox_env(home),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        out, stderr = _talk(process)
    first, _, rest = out.partition(b"\n")
    lines = [first, *rest.splitlines()]
    for line in lines:
        try:
            json.loads(line)
        except ValueError:
            raise AssertionError(f"stdout holds a line that is not JSON: {line!r}") from None
    response = json.loads(first)
    assert "error" not in response, f"the agent answered an error: {response['error']}"
    result: dict[str, Any] = response["result"]
    methods = result.get("authMethods") or []
    assert methods, "no authMethods in the answer"
    kinds = [auth_type(m) for m in methods]
    assert {"agent", "terminal"} & set(kinds), f"no agent or terminal auth method: {kinds}"
    assert process.returncode == 0, stderr.decode(errors="replace")
    return result


def _talk(process: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Send the registry's initialize; everything on stdout, then stderr."""
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    fd = process.stdout.fileno()
    out = b""
    try:
        process.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        process.stdin.flush()
        deadline = time.monotonic() + REGISTRY_TIMEOUT
        while b"\n" not in out:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, left))
            assert ready, f"no initialize answer within {REGISTRY_TIMEOUT:g} s"
            data = os.read(fd, 65536)
            assert data, "the agent closed stdout before answering initialize"
            out += data
        # The registry stops the agent after this answer; we end it as an
        # editor does (stdin closed) and read the rest of its stdout.
        process.stdin.close()
        while data := os.read(fd, 65536):
            out += data
        process.wait(timeout=REGISTRY_TIMEOUT)
        return out, process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def icon_errors(path: Path) -> list[str]:
    """What the registry's build would say about ``path`` (nothing: it passes)."""
    content = path.read_text()
    errors = []
    root = ET.fromstring(content)
    width, height = root.get("width"), root.get("height")
    if width is None or height is None:
        box = (root.get("viewBox") or "").split()
        if len(box) != 4:
            return ["no width/height and no viewBox"]
        width, height = box[2], box[3]
    if float(width) != float(height):
        errors.append(f"not square: {width}x{height}")
    if (float(width), float(height)) != (16, 16):
        errors.append(f"not 16x16: {width}x{height}")
    for element in root.iter():
        paints = {k: str(element.get(k)) for k in ("fill", "stroke") if element.get(k) is not None}
        for declaration in (element.get("style") or "").split(";"):
            name, _, value = declaration.partition(":")
            if name.strip() in ("fill", "stroke"):
                paints[name.strip()] = value
        for name, value in paints.items():
            if str(value).strip().lower() not in ALLOWED_PAINT:
                errors.append(f"{element.tag}: {name}={value!r} is a hard-coded colour")
    # The registry's own check is on the text: the same regexes, so a colour
    # hidden where the XML walk does not look is caught too.
    for value in re.findall(r"\b(?:fill|stroke)\s*[=:]\s*[\"']?([^\"';]+)", content, re.I):
        if value.strip().lower() not in ALLOWED_PAINT:
            errors.append(f"hard-coded colour {value!r}")
    if not re.search("currentColor", content, re.I):
        errors.append("currentColor is not used")
    return list(dict.fromkeys(errors))
