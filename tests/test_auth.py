"""The bare command, auth methods, ``acp-bridge setup`` and ``logout``, through the
real subprocess.

Every bridge here runs in a sandbox: an empty HOME, its own config and state
directories, no API key unless the test sets one, and a keyring backend the
test chose (keyring's fail backend, or a JSON file), never the system's.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from acp_schema import AcpSchema
from provider_server import Reply, WireServer, anthropic_text, openai_text
from pty_session import PtySession
from support.bridge import running_bridge

from acp_bridge.client import AcpClient, bridge_command
from acp_bridge.jsonrpc.errors import AUTH_REQUIRED
from acp_bridge.setup_cli import server_name

pytestmark = pytest.mark.anyio

TESTS = Path(__file__).resolve().parent
KEY = "sk-test-SETUP-0123456789abcdefXYZ"
ENV_KEY = "sk-test-ENV-0123456789abcdefXYZ"
# What the ACP registry's check sends: terminal auth flagged in _meta only.
REGISTRY_INIT: dict[str, Any] = {
    "terminal": True,
    "fs": {"readTextFile": True, "writeTextFile": True},
    "_meta": {"terminal_output": True, "terminal-auth": True},
}


@dataclass
class Sandbox:
    root: Path
    env: dict[str, str]

    @property
    def setup_file(self) -> Path:
        return self.root / "home" / ".config" / "acp-bridge" / "setup.json"

    @property
    def config_file(self) -> Path:
        return self.root / "home" / ".config" / "acp-bridge" / "config.toml"

    @property
    def keyring_file(self) -> Path:
        return self.root / "keyring.json"

    def use_test_keyring(self) -> None:
        self.env["PYTHON_KEYRING_BACKEND"] = "json_keyring.JsonKeyring"

    def bridge(self, *args: str) -> list[str]:
        return bridge_command("--state-dir", str(self.root / "state"), "--log-level", "info", *args)

    def outputs(self) -> str:
        """Everything the bridges and setup wrote to disk (logs, stderr files)."""
        texts = []
        for path in self.root.rglob("*"):
            if path.is_file() and path != self.keyring_file and path != self.setup_file:
                texts.append(path.read_text(errors="replace"))
        return "\n".join(texts)


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    home = tmp_path / "home"
    home.mkdir()
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        HOME=str(home),
        PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
        PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring",
        ACP_BRIDGE_TEST_KEYRING=str(tmp_path / "keyring.json"),
        TERM="dumb",
    )
    return Sandbox(tmp_path, env)


def error_of(response: dict[str, Any]) -> dict[str, Any]:
    assert "error" in response, response
    error: dict[str, Any] = response["error"]
    return error


async def test_initialize_advertises_an_agent_method_and_logout(
    sandbox: Sandbox, acp_schema: AcpSchema
) -> None:
    async with running_bridge(sandbox.bridge(), env=sandbox.env) as client:
        plain = (await client.initialize())["result"]
        flagged = (await client.initialize(REGISTRY_INIT))["result"]
        standard = (await client.initialize({"auth": {"terminal": True}}))["result"]
        assert await client.finish() == 0
    acp_schema.check_transcript(client.transcript)
    # No type: the protocol's default, "agent"; it describes the key setup.
    (agent,) = plain["authMethods"]
    assert "type" not in agent
    assert agent["id"] == "api-key"
    for needed in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "acp-bridge setup"):
        assert needed in agent["description"]
    assert plain["agentCapabilities"]["auth"] == {"logout": {}}
    # The terminal method only for a client that can run one, either way it says so.
    for result in (flagged, standard):
        first, terminal = result["authMethods"]
        assert first == agent
        assert terminal["type"] == "terminal"
        assert terminal["args"] == ["setup"]
        # The form earlier Zed releases read: the whole command line.
        legacy = terminal["_meta"]["terminal-auth"]
        assert [legacy["command"], *legacy["args"]] == bridge_command("setup")


async def test_the_bare_command_without_a_key_asks_for_auth(sandbox: Sandbox) -> None:
    stderr = sandbox.root / "stderr.txt"
    async with running_bridge(sandbox.bridge(), env=sandbox.env, stderr=stderr) as client:
        await client.initialize()
        answer = await client.request("session/new", {"cwd": str(sandbox.root), "mcpServers": []})
        error = error_of(answer)
        assert error["code"] == AUTH_REQUIRED
        for needed in (
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "acp-bridge setup",
            "--provider fake",
        ):
            assert needed in error["message"]
        assert error["data"]["authMethods"] == ["api-key"]
        # authenticate checks the same thing and answers the same error.
        checked = await client.request("authenticate", {"methodId": "api-key"})
        assert error_of(checked)["code"] == AUTH_REQUIRED
        unknown = await client.request("authenticate", {"methodId": "oauth"})
        assert error_of(unknown)["code"] == -32602
        terminal = await client.request("authenticate", {"methodId": "setup"})
        assert "never passed to authenticate" in error_of(terminal)["message"]
        # Nothing was created for the refused session, and the agent keeps serving.
        assert not (sandbox.root / "state" / "sessions").exists()
        assert "result" in await client.request("session/list", {})
        assert await client.finish() == 0  # not a failure: the exit status is 0
    assert "no model provider can start yet" in stderr.read_text()


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
async def test_a_key_in_the_environment_chooses_its_provider(sandbox: Sandbox, vendor: str) -> None:
    upper = vendor.upper()
    pieces = ["Hello", " from ", vendor]
    events = anthropic_text(pieces) if vendor == "anthropic" else openai_text(pieces)
    stderr = sandbox.root / "stderr.txt"
    with WireServer([Reply(events)]) as server:
        sandbox.env[f"{upper}_API_KEY"] = ENV_KEY
        sandbox.env[f"{upper}_BASE_URL"] = server.url
        async with running_bridge(sandbox.bridge(), env=sandbox.env, stderr=stderr) as client:
            await client.initialize()
            assert "result" in await client.request("authenticate", {"methodId": "api-key"})
            session = await client.new_session(str(sandbox.root))
            result = await client.prompt(session, "hi")
            assert result.text() == "".join(pieces)
            assert await client.finish() == 0
    (request,) = server.requests
    sent = request.headers.get("x-api-key") or request.headers.get("authorization", "")
    assert sent.endswith(ENV_KEY)
    log = stderr.read_text()
    assert f"provider {vendor}" in log
    assert f"chosen by {upper}_API_KEY in the environment" in log
    assert ENV_KEY not in sandbox.outputs()
    assert ENV_KEY not in json.dumps(client.transcript)


async def test_a_config_profile_wins_over_a_key_in_the_environment(sandbox: Sandbox) -> None:
    with WireServer([Reply(openai_text(["from the profile"]))]) as server:
        sandbox.config_file.parent.mkdir(parents=True)
        sandbox.config_file.write_text(
            f'[profiles.default]\nprovider = "openai"\nbase_url = "{server.url}"\n'
            'model = "profile-model"\n'
        )
        sandbox.env["ANTHROPIC_API_KEY"] = ENV_KEY
        stderr = sandbox.root / "stderr.txt"
        async with running_bridge(sandbox.bridge(), env=sandbox.env, stderr=stderr) as client:
            await client.initialize()
            session = await client.new_session(str(sandbox.root))
            assert (await client.prompt(session, "hi")).text() == "from the profile"
            assert await client.finish() == 0
    assert server.requests[0].body["model"] == "profile-model"
    assert "chosen by the profile 'default' of" in stderr.read_text()


async def test_the_vendor_api_without_its_key_asks_for_auth(sandbox: Sandbox) -> None:
    async with running_bridge(sandbox.bridge("--provider", "anthropic"), env=sandbox.env) as client:
        await client.initialize()
        answer = await client.request("session/new", {"cwd": str(sandbox.root), "mcpServers": []})
        error = error_of(answer)
        assert error["code"] == AUTH_REQUIRED
        assert "Set ANTHROPIC_API_KEY" in error["message"]
        assert await client.finish() == 0


def run_setup(sandbox: Sandbox, base_url: str, key: str, *extra: str) -> PtySession:
    """Drive ``acp-bridge setup`` as a person would: an OpenAI-compatible service."""
    term = PtySession(bridge_command("setup", *extra), sandbox.env)
    term.expect(r"Provider \(1-4\): ")
    term.type("3")
    term.expect(r"Base URL: ")
    term.type(base_url)
    term.expect(r"API key \(not shown as you type\): ")
    term.type(key)
    term.expect(r"Model: ")
    term.type("test-model")
    # A server on loopback is named as one, not as the provider that speaks to it.
    term.expect(r"Testing with one tiny request to test-model on a local server at ")
    term.expect(r"it answered\.")
    return term


async def new_session_error(client: AcpClient, cwd: Path) -> dict[str, Any] | None:
    answer = await client.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    return answer.get("error")


@pytest.mark.slow
async def test_setup_stores_a_key_that_the_waiting_bridge_then_uses_and_logout_forgets(
    sandbox: Sandbox, acp_schema: AcpSchema
) -> None:
    replies = [Reply(openai_text(["ok"])), Reply(openai_text(["served from setup"]))]
    stderr = sandbox.root / "stderr.txt"
    with WireServer(replies) as server:
        async with running_bridge(sandbox.bridge(), env=sandbox.env, stderr=stderr) as client:
            await client.initialize(REGISTRY_INIT)
            first = await new_session_error(client, sandbox.root)
            assert first is not None
            assert first["code"] == AUTH_REQUIRED

            # The editor's terminal auth: setup runs while this bridge waits.
            term = await anyio.to_thread.run_sync(run_setup, sandbox, server.url, KEY)
            await anyio.to_thread.run_sync(term.expect, r"Stored in .*setup\.json, key included")
            assert await anyio.to_thread.run_sync(term.wait) == 0

            # The same process serves it now, without a restart (and without an
            # authenticate first: session/new looks again by itself).
            session = await client.new_session(str(sandbox.root))
            assert (await client.prompt(session, "hi")).text() == "served from setup"
            assert "result" in await client.request("authenticate", {"methodId": "api-key"})

            assert (await client.request("logout", {}))["result"] == {}
            assert not sandbox.setup_file.exists()
            after = await new_session_error(client, sandbox.root)
            assert after is not None
            assert after["code"] == AUTH_REQUIRED
            assert await client.finish() == 0
    acp_schema.check_transcript(client.transcript)
    # The test request and the prompt both carried the stored key.
    assert [r.headers["authorization"] for r in server.requests] == [f"Bearer {KEY}"] * 2
    assert server.requests[0].body["model"] == "test-model"
    # Never echoed, logged or sent to the editor.
    assert KEY not in term.text
    assert KEY not in stderr.read_text()
    assert KEY not in sandbox.outputs()
    assert KEY not in json.dumps(client.transcript)


@pytest.mark.slow
async def test_setup_file_is_private_and_a_new_bridge_uses_it(sandbox: Sandbox) -> None:
    replies = [Reply(openai_text(["ok"])), Reply(openai_text(["a new process"]))]
    with WireServer(replies) as server:
        term = await anyio.to_thread.run_sync(run_setup, sandbox, server.url, KEY)
        assert await anyio.to_thread.run_sync(term.wait) == 0
        assert stat.S_IMODE(sandbox.setup_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(sandbox.setup_file.parent.stat().st_mode) == 0o700
        stored = json.loads(sandbox.setup_file.read_text())
        assert stored["key"] == "file"
        stderr = sandbox.root / "stderr.txt"
        async with running_bridge(sandbox.bridge(), env=sandbox.env, stderr=stderr) as client:
            await client.initialize()
            session = await client.new_session(str(sandbox.root))
            assert (await client.prompt(session, "hi")).text() == "a new process"
            assert await client.finish() == 0
    assert server.requests[1].headers["authorization"] == f"Bearer {KEY}"
    assert "chosen by acp-bridge setup" in stderr.read_text()


@pytest.mark.slow
async def test_setup_uses_the_keyring_when_one_is_available(sandbox: Sandbox) -> None:
    sandbox.use_test_keyring()
    replies = [Reply(openai_text(["ok"])), Reply(openai_text(["from the keyring"]))]
    with WireServer(replies) as server:
        term = await anyio.to_thread.run_sync(run_setup, sandbox, server.url, KEY)
        await anyio.to_thread.run_sync(term.expect, r"the key is in the system keyring")
        assert await anyio.to_thread.run_sync(term.wait) == 0
        stored = sandbox.setup_file.read_text()
        assert KEY not in stored
        assert json.loads(stored)["key"] == "keyring"
        assert KEY in sandbox.keyring_file.read_text()
        async with running_bridge(sandbox.bridge(), env=sandbox.env) as client:
            await client.initialize()
            session = await client.new_session(str(sandbox.root))
            assert (await client.prompt(session, "hi")).text() == "from the keyring"
            assert "result" in await client.request("logout", {})
            assert await client.finish() == 0
    assert server.requests[1].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in sandbox.keyring_file.read_text()
    assert not sandbox.setup_file.exists()


async def _setup_refused(sandbox: Sandbox, body: bytes, key: str, said: str) -> PtySession:
    """``acp-bridge setup`` at a terminal, for a server that answers 401 with
    ``body``: the test request fails, ``said`` is shown, and the key is not
    stored (exit 1)."""
    with WireServer([Reply(status=401, body=body)]) as server:

        def drive() -> PtySession:
            term = PtySession(bridge_command("setup"), sandbox.env)
            for prompt, answer in (
                (r"Provider \(1-4\): ", "3"),
                (r"Base URL: ", server.url),
                (r"API key \(not shown as you type\): ", key),
                (r"Model: ", "m"),
            ):
                term.expect(prompt)
                term.type(answer)
            term.expect(said)
            term.expect(r"Store it anyway\? \(y/N\) \[n\]: ")
            term.type("")
            return term

        term = await anyio.to_thread.run_sync(drive)
        assert await anyio.to_thread.run_sync(term.wait) == 1
    return term


async def test_a_failed_test_request_stores_nothing(sandbox: Sandbox) -> None:
    body = b'{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}'
    term = await _setup_refused(
        sandbox, body, KEY, r"it failed: the API key in your entry was rejected"
    )
    assert not sandbox.setup_file.exists()
    assert KEY not in term.text


async def test_setup_does_not_show_a_key_the_service_echoes(sandbox: Sandbox) -> None:
    """A key of no known shape, echoed whole and by its last part in a 401, is
    redacted from what ``setup`` prints."""
    key = "s4hostileSETUPKEY0123456789+tailPART0099"
    message = f"Incorrect API key provided: {key} ({key.rsplit('+', 1)[-1]})"
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
    term = await _setup_refused(sandbox, body, key, r"Incorrect API key provided: \[redacted\]")
    assert "s4hostile" not in term.text
    assert "tailPART0099" not in term.text


async def test_a_local_server_needs_no_key_and_gets_none(sandbox: Sandbox) -> None:
    sandbox.env["OPENAI_API_KEY"] = ENV_KEY  # not for the local server
    replies = [Reply(openai_text(["ok"])), Reply(openai_text(["local"]))]
    with WireServer(replies) as server:

        def drive() -> PtySession:
            term = PtySession(bridge_command("setup"), sandbox.env)
            term.expect(r"Provider \(1-4\): ")
            term.type("4")
            term.expect(r"Ollama http://127\.0\.0\.1:11434/v1")
            term.expect(r"Base URL \[http://127\.0\.0\.1:11434/v1\]: ")
            term.type(server.url)
            term.expect(r"Enter for none\): ")
            term.type("")
            term.expect(r"Model: ")
            term.type("qwen3:8b")
            term.expect(r"Stored in .*setup\.json \(no key\)")
            return term

        term = await anyio.to_thread.run_sync(drive)
        assert await anyio.to_thread.run_sync(term.wait) == 0
        async with running_bridge(sandbox.bridge(), env=sandbox.env) as client:
            await client.initialize()
            session = await client.new_session(str(sandbox.root))
            assert (await client.prompt(session, "hi")).text() == "local"
            assert await client.finish() == 0
    assert [r.headers.get("authorization") for r in server.requests] == [None, None]


def test_setup_outside_a_terminal_says_so(sandbox: Sandbox) -> None:
    import subprocess

    result = subprocess.run(
        bridge_command("setup"),
        env=sandbox.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "run it in a terminal" in result.stderr


def test_logout_on_the_command_line(sandbox: Sandbox) -> None:
    import subprocess

    sandbox.setup_file.parent.mkdir(parents=True)
    sandbox.setup_file.write_text(json.dumps({"version": 1, "provider": "openai", "key": "none"}))
    result = subprocess.run(
        bridge_command("logout"), env=sandbox.env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "Forgot" in result.stdout
    assert not sandbox.setup_file.exists()


SPOILED = ["fifo", "link to /dev/zero", "too large"]


def _spoil(sandbox: Sandbox, kind: str) -> None:
    sandbox.setup_file.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(sandbox.setup_file)
    elif kind == "link to /dev/zero":
        sandbox.setup_file.symlink_to("/dev/zero")
    else:
        sandbox.setup_file.write_bytes(b" " * (5 * 1024 * 1024))


@pytest.mark.parametrize("kind", SPOILED)
async def test_a_setup_file_that_is_not_a_small_regular_file(sandbox: Sandbox, kind: str) -> None:
    """setup.json made a FIFO (whose open would wait for a writer), a link to
    /dev/zero (endless) or a huge file: the bridge says so and keeps serving."""
    _spoil(sandbox, kind)
    why = "larger than 4 MiB" if kind == "too large" else "not a regular file"
    async with running_bridge(sandbox.bridge(), env=sandbox.env) as client:
        await client.initialize()
        answer = await client.request("session/new", {"cwd": str(sandbox.root), "mcpServers": []})
        message = error_of(answer)["message"]
        assert f"cannot read {sandbox.setup_file} (it is " in message
        assert why in message
        assert "result" in await client.request("session/list", {})
        assert await client.finish() == 2  # a configuration that cannot work


@pytest.mark.parametrize("kind", SPOILED)
def test_logout_removes_a_setup_file_that_is_not_a_small_regular_file(
    sandbox: Sandbox, kind: str
) -> None:
    import subprocess

    _spoil(sandbox, kind)
    result = subprocess.run(
        bridge_command("logout"), env=sandbox.env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert not os.path.lexists(sandbox.setup_file)


@pytest.mark.parametrize(
    ("provider", "base_url", "name"),
    [
        ("openai", "http://127.0.0.1:11434/v1", "Ollama"),
        ("openai", "http://localhost:1234/v1", "LM Studio"),
        ("openai", "http://127.0.0.1:9/v1", "a local server"),
        ("openai", None, "OpenAI"),
        ("openai", "https://api.deepseek.com", "an OpenAI-compatible service"),
        ("anthropic", None, "Anthropic"),
    ],
)
def test_setup_names_the_server_not_the_provider(
    provider: str, base_url: str | None, name: str
) -> None:
    assert server_name(provider, base_url) == name
