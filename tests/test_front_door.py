"""The start-up's front door (`acp_bridge.front_door`), through the real subprocess.

The same editor session with the front door on and off gets the same answers,
notifications and log records; whatever the front door does not handle (a bad
first message, a session/new it is not sure of, a bad script) gets the
server's own answer; stdin's end and signals during it end the process as the
server would; and it answers both requests before asyncio, anyio or pydantic
is imported.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from provider_server import Reply, WireServer, anthropic_text, openai_text
from support.bridge import start_bridge
from support.harness import coalesce_deltas, normalize, wait_exit, write_script

from acp_bridge.client import AcpClient, id_key
from acp_bridge.front_door import ENV_FRONT_DOOR, ENV_FRONT_DOOR_IDLE, ENV_FRONT_DOOR_REPORT
from acp_bridge.log.reader import read_records

pytestmark = pytest.mark.anyio

SCRIPT: dict[str, Any] = {
    "responses": [{"events": [{"text": "one "}, {"text": "two"}]}],
    "when_exhausted": "repeat_last",
}
# A new interpreter (``python -m acp_bridge`` would be forked from the tests' zygote).
FRESH = [sys.executable, "-c", "from acp_bridge.cli import main; raise SystemExit(main())"]
CHUNKS = ("agent_message_chunk", "agent_thought_chunk")
Play = Callable[[AcpClient, str], Awaitable[None]]


# What would choose a real provider, or where it is: only a test's own settings count.
VENDOR_ENV = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL")


def _env(tmp: Path, *, on: bool, **more: str) -> dict[str, str]:
    drop = (ENV_FRONT_DOOR_REPORT, *VENDOR_ENV)
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env[ENV_FRONT_DOOR] = "1" if on else "0"
    env[ENV_FRONT_DOOR_REPORT] = str(tmp / "front-door.json")
    env.update(more)
    return env


def _report(tmp: Path) -> dict[str, Any]:
    path = tmp / "front-door.json"
    return json.loads(path.read_text()) if path.exists() else {}


async def _run(
    tmp: Path,
    play: Play,
    *,
    on: bool,
    script: dict[str, Any] = SCRIPT,
    command: list[str] | None = None,
    provider: str | None = "fake",
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> tuple[list[Any], dict[str, list[dict[str, Any]]], int, dict[str, Any]]:
    """``play`` against a bridge with the front door on or off: the messages it
    received, the records of each log, its exit status and the front door's report."""
    await anyio.Path(tmp).mkdir()
    work = tmp.parent / "work"
    await anyio.Path(work).mkdir(exist_ok=True)
    state = tmp / "state"
    async with start_bridge(
        state,
        *extra,
        script=write_script(tmp, script) if provider == "fake" else None,
        provider=provider,
        env=_env(tmp, on=on, **(env or {})),
        stderr=tmp / "stderr.txt",
        command=command,
    ) as client:
        with anyio.fail_after(60):
            await play(client, str(work))
        await client.close_stdin()
        status = await wait_exit(client, within=30)
    logs = {p.stem: read_records(p) for p in sorted((state / "sessions").glob("*.jsonl"))}
    messages = [m for m in client.messages if m.get("method") != "_acp-bridge/barrier"]
    return messages, logs, status, _report(tmp)


def _same(on: tuple[Any, ...], off: tuple[Any, ...]) -> None:
    """The messages and log records of the two runs, ids and times normalized,
    and the batching of the stream (which depends on timing) undone."""
    assert normalize(_chunks_joined(on[0])) == normalize(_chunks_joined(off[0]))
    logs_on, logs_off = ([coalesce_deltas(r) for r in run[1].values()] for run in (on, off))
    assert normalize(logs_on) == normalize(logs_off)
    assert on[2] == off[2] == 0


def _chunks_joined(messages: list[Any]) -> list[Any]:
    """The messages with consecutive text chunks of one kind in one (the writer
    may send several chunks as one)."""
    out: list[Any] = []
    for msg in messages:
        update = msg.get("params", {}).get("update", {}) if msg.get("method") else {}
        kind = update.get("sessionUpdate")
        last = out[-1].get("params", {}).get("update", {}) if out and out[-1].get("method") else {}
        if kind in CHUNKS and last.get("sessionUpdate") == kind:
            last["content"] = {"type": "text", "text": last["content"]["text"] + _text(update)}
            continue
        out.append(json.loads(json.dumps(msg)))
    return out


def _text(update: dict[str, Any]) -> str:
    return str(update["content"]["text"])


async def _a_session_prompted_and_loaded(client: AcpClient, cwd: str) -> None:
    await client.initialize()
    new = await client.request("session/new", {"cwd": cwd, "mcpServers": []})
    session_id = new["result"]["sessionId"]
    result = await client.prompt(session_id, "hi")
    assert (result.stop_reason, result.text()) == ("end_turn", "one two")
    load = {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
    assert "result" in await client.request("session/load", load)
    await client.request("session/new", {"cwd": "relative/path", "mcpServers": []})


async def test_a_session_is_the_same_with_and_without_the_front_door(tmp_path: Path) -> None:
    on = await _run(tmp_path / "on", _a_session_prompted_and_loaded, on=True)
    off = await _run(tmp_path / "off", _a_session_prompted_and_loaded, on=False)
    assert on[3]["answered"] == ["initialize", "session/new"]  # it did answer them
    assert off[3] == {}
    _same(on, off)
    [records] = on[1].values()
    assert [r["type"] for r in records][:2] == ["session/start", "turn/start"]
    assert [r["seq"] for r in records] == list(range(len(records)))


async def _handed_off_at_session_new(client: AcpClient, cwd: str) -> None:
    await client.initialize()
    bad = await client.request("session/new", {"cwd": "relative/path", "mcpServers": []})
    assert bad["error"]["code"] == -32602
    servers = [{"name": "x", "command": 1, "args": [], "env": []}]  # not a command
    bad = await client.request("session/new", {"cwd": cwd, "mcpServers": servers})
    assert bad["error"]["code"] == -32602
    session_id = await client.new_session(cwd)
    result = await client.prompt(session_id, "hi")
    assert result.stop_reason == "end_turn"


async def test_a_session_new_it_is_not_sure_of_goes_to_the_server(tmp_path: Path) -> None:
    on = await _run(tmp_path / "on", _handed_off_at_session_new, on=True)
    off = await _run(tmp_path / "off", _handed_off_at_session_new, on=False)
    assert (on[3]["answered"], on[3]["why"]) == (["initialize"], "a message for the server")
    _same(on, off)


async def _session_new_fails(client: AcpClient, cwd: str) -> None:
    await client.initialize()
    answer = await client.request("session/new", {"cwd": cwd, "mcpServers": []})
    assert "error" in answer, answer


async def test_a_bad_script_fails_session_new_with_the_server_s_message(tmp_path: Path) -> None:
    bad = {"responses": [{"events": [{"text": 5}]}]}
    on = await _run(tmp_path / "on", _session_new_fails, on=True, script=bad)
    off = await _run(tmp_path / "off", _session_new_fails, on=False, script=bad)
    assert on[3]["answered"] == ["initialize"]
    [on_error] = [m["error"] for m in on[0] if m.get("id") == 2]
    [off_error] = [m["error"] for m in off[0] if m.get("id") == 2]
    # The file's name differs between the runs (each has its own folder).
    assert on_error == json.loads(json.dumps(off_error).replace("/off/", "/on/"))
    assert "script.json" in json.dumps(on_error)
    assert on[1] == off[1] == {}
    assert on[2] == off[2] == 2


FIRST_MESSAGES = [
    (b"{not json\n", -32700),
    (b'{"jsonrpc":"2.0","id":7,"method":"no/such_method","params":{}}\n', -32601),
    (b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"1"}}\n', -32602),
    (b'[{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1}}]\n', -32600),
]


@pytest.mark.parametrize(("frame", "code"), FIRST_MESSAGES)
async def test_a_bad_first_message_gets_the_server_s_error(
    tmp_path: Path, frame: bytes, code: int
) -> None:
    async with start_bridge(
        tmp_path / "state", env=_env(tmp_path, on=True), stderr=tmp_path / "stderr.txt"
    ) as client:
        with anyio.fail_after(60):
            await client.send_raw(frame)
            await client.wait_until(lambda: bool(client.messages))
            [error] = client.messages
            assert error["error"]["code"] == code
            # Still serving: the usual start follows.
            assert (await client.initialize())["result"]["protocolVersion"] == 1
            await client.new_session(str(tmp_path))
        assert await client.finish() == 0
    report = _report(tmp_path)
    assert (report["answered"], report["unread"]) == ([], len(frame))


async def test_what_follows_session_new_in_the_same_read_is_handled_by_the_server(
    tmp_path: Path,
) -> None:
    """Bytes the front door read and left (behind the session/new it answered)
    reach the server, which by then knows the session."""
    cwd = str(tmp_path)
    lines = [
        {"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": "n", "method": "session/new", "params": {"cwd": cwd}},
        {"jsonrpc": "2.0", "id": "l", "method": "session/list", "params": {}},
    ]
    async with start_bridge(
        tmp_path / "state", env=_env(tmp_path, on=True), stderr=tmp_path / "stderr.txt"
    ) as client:
        with anyio.fail_after(60):
            await client.send_raw(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
            listed = await client.wait_response("l")
            new = await client.wait_response("n")
            session_id = new["result"]["sessionId"]
            assert [s["sessionId"] for s in listed["result"]["sessions"]] == [session_id]
            result = await client.prompt(session_id, "hi")
            assert result.text() == "Hello from acp-bridge (the keyless scripted provider). " + (
                "Pass --script FILE to script the model."
            )
        assert await client.finish() == 0
    report = _report(tmp_path)
    assert report["answered"] == ["initialize", "session/new"]
    assert report["unread"] == len(json.dumps(lines[2])) + 1


async def test_a_prompt_right_after_session_new_streams_in_a_fresh_process(
    tmp_path: Path,
) -> None:
    """A fresh interpreter: the prompt arrives while the server is still being
    imported, and waits for the session the front door opened."""

    async def play(client: AcpClient, cwd: str) -> None:
        await client.initialize()
        session_id = await client.new_session(cwd)
        result = await client.prompt(session_id, "hi")
        assert (result.stop_reason, result.text()) == ("end_turn", "one two")

    on = await _run(tmp_path / "on", play, on=True, command=FRESH)
    assert on[2] == 0
    assert on[3]["answered"] == ["initialize", "session/new"]
    modules = set(on[3]["modules"])
    # Nothing heavy before session/new is answered.
    heavy = {"asyncio", "anyio", "pydantic", "jsonschema", "acp_bridge.server", "tomllib"}
    assert not {m for m in modules if m.split(".")[0] in heavy or m in heavy}
    assert "acp_bridge.front_door" in modules


@pytest.mark.parametrize("after", ["nothing", "initialize"])
async def test_stdin_closed_during_the_front_door_exits_as_usual(
    tmp_path: Path, after: str
) -> None:
    async def play(client: AcpClient, cwd: str) -> None:
        if after == "initialize":
            await client.initialize()

    on = await _run(tmp_path / "on", play, on=True)
    off = await _run(tmp_path / "off", play, on=False)
    assert on[3]["why"] == "stdin closed"
    assert on[2] == off[2] == 0
    assert normalize(on[0]) == normalize(off[0])


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
async def test_a_signal_during_the_front_door_ends_the_bridge_as_the_server_would(
    tmp_path: Path, signum: signal.Signals
) -> None:
    statuses = []
    for on in (True, False):
        run = tmp_path / ("on" if on else "off")
        run.mkdir()
        env = _env(run, on=on, **{ENV_FRONT_DOOR_IDLE: "600"})
        async with start_bridge(run / "state", env=env, stderr=run / "stderr.txt") as client:
            with anyio.fail_after(60):
                await client.initialize()
                client.agent.send_signal(signum)
                statuses.append(await wait_exit(client, within=30))
        if on:
            assert _report(run)["why"] == "signal"
    assert statuses == [0, 0]


CONFIGS = [
    ("# no MCP server\n[profiles.default]\nprovider = 'fake'\n", ["initialize", "session/new"]),
    ("[[mcp_servers]]\nname = 'x'\ncommand = '/nonexistent/mcp-server'\n", ["initialize"]),
    ("not = [toml\n", ["initialize"]),  # the server says why it cannot read it
]


@pytest.mark.parametrize(("config", "answered"), CONFIGS)
async def test_a_config_file_with_mcp_servers_leaves_session_new_to_the_server(
    tmp_path: Path, config: str, answered: list[str]
) -> None:
    path = tmp_path / "config.toml"
    await anyio.Path(path).write_text(config)
    async with start_bridge(
        tmp_path / "state",
        "--config",
        str(path),
        "--mcp-start-timeout",
        "1",
        env=_env(tmp_path, on=True),
        stderr=tmp_path / "stderr.txt",
    ) as client:
        with anyio.fail_after(60):
            await client.initialize()
            await client.new_session(str(tmp_path))
        assert await client.finish() == 0
    assert _report(tmp_path)["answered"] == answered


async def test_stdout_stays_small_through_the_hand_off_and_widens_for_a_replay(
    tmp_path: Path,
) -> None:
    """The pipe is small from the start, never its old size while the server
    starts (a fresh interpreter: that takes a while), and a replay gets that
    old size back from the server's writer."""
    from acp_bridge.transport.pipe import STDOUT_PIPE_SIZE

    async def play(client: AcpClient, cwd: str) -> None:
        fd = client.agent.stdout.fd
        await client.initialize()
        session_id = await client.new_session(cwd)
        sizes = set()
        rid = await client.send_request("session/list", {})
        while not client.responses.get(id_key(rid)):
            sizes.add(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))
            await anyio.sleep(0.001)
        assert sizes == {STDOUT_PIPE_SIZE}
        await client.prompt(session_id, "hi")
        load = {"sessionId": session_id, "cwd": cwd, "mcpServers": []}
        rid = await client.send_request("session/load", load)
        await client.wait_response(rid)
        assert fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) > STDOUT_PIPE_SIZE

    on = await _run(tmp_path / "on", play, on=True, command=FRESH)
    assert on[3]["answered"] == ["initialize", "session/new"]


# -- a real provider ---------------------------------------------------------------

KEY = "sk-ant-front-door-test"
TESTS = str(Path(__file__).resolve().parent)  # for the test keyring's backend
MODELS = ["claude-front-a", "claude-front-b"]


def _profile(base_url: str, vendor: str = "anthropic", **more: str) -> str:
    lines = [
        "[profiles.default]",
        f"provider = '{vendor}'",
        f"model = {MODELS!r}",
        f"base_url = '{base_url}'",
        *(f"{k} = {v}" for k, v in more.items()),
    ]
    return "\n".join(lines) + "\n"


def _http_env(root: Path, **more: str) -> dict[str, str]:
    """No stored setup (a config folder of the test's own) and ``more``."""
    return {"ACP_BRIDGE_CONFIG_DIR": str(root / "config-dir"), **more}


def _replies(vendor: str = "anthropic") -> list[Reply]:
    text = anthropic_text if vendor == "anthropic" else openai_text
    return [Reply(text(["Hel", "lo ", "there"]))]


async def _a_real_provider_s_session(client: AcpClient, cwd: str) -> None:
    await client.initialize()
    new = await client.request("session/new", {"cwd": cwd, "mcpServers": []})
    session_id = new["result"]["sessionId"]
    [model] = [o for o in new["result"]["configOptions"] if o["id"] == "model"]
    assert [o["value"] for o in model["options"]] == MODELS
    assert model["currentValue"] == MODELS[0]
    result = await client.prompt(session_id, "hi")
    assert (result.stop_reason, result.text()) == ("end_turn", "Hello there")
    change = {"sessionId": session_id, "configId": "model", "value": MODELS[1]}
    assert "result" in await client.request("session/set_config_option", change)


async def _run_http(
    root: Path, play: Play, *, on: bool, config: str, vendor: str, **kw: Any
) -> tuple[tuple[Any, ...], WireServer]:
    """``play`` against a bridge of the config file's real provider (on loopback)."""
    with WireServer(_replies(vendor)) as server:
        path = root / "config.toml"
        path.write_text(config.replace("{url}", server.url))
        extra = ("--config", str(path))
        tmp = root / ("on" if on else "off")
        run = await _run(
            tmp, play, on=on, provider=None, extra=extra, env=_http_env(root, **kw), command=FRESH
        )
    return run, server


@pytest.mark.parametrize("vendor", ["anthropic", "openai"])
async def test_a_real_provider_s_session_is_the_same_with_and_without_the_front_door(
    tmp_path: Path, vendor: str
) -> None:
    """The answers (the profile's models as config options), notifications and
    log records; and the model requests the loopback server received."""
    runs, servers = [], []
    for door in (True, False):
        run, server = await _run_http(
            tmp_path,
            _a_real_provider_s_session,
            on=door,
            config=_profile("{url}", vendor),
            vendor=vendor,
            **{f"{vendor.upper()}_API_KEY": KEY},
        )
        runs.append(run)
        servers.append(server)
    on, off = runs
    assert on[3]["answered"] == ["initialize", "session/new"]
    assert off[3] == {}
    _same(on, off)
    [records] = on[1].values()
    assert records[0]["type"] == "session/start"
    assert records[0]["provider"] == vendor
    auth = "x-api-key" if vendor == "anthropic" else "authorization"
    requests = [[(r.path, r.headers.get(auth), r.body) for r in s.requests] for s in servers]
    assert requests[0] == requests[1]
    [(_, key, body)] = requests[0]
    assert KEY in str(key)
    assert body["model"] == MODELS[0]
    assert servers[0].gets == servers[1].gets


async def test_a_real_provider_s_front_door_loads_no_http_nor_event_loop(
    tmp_path: Path,
) -> None:
    """session/new is answered before asyncio, anyio, httpx or pydantic is
    imported, and nothing reaches the model's server before the prompt, which
    is sent right after session/new and streams from it."""
    requests_at_session_new: list[int] = []
    server_box: list[WireServer] = []

    async def play(client: AcpClient, cwd: str) -> None:
        await client.initialize()
        session_id = await client.new_session(cwd)
        requests_at_session_new.append(len(server_box[0].requests) + len(server_box[0].gets))
        result = await client.prompt(session_id, "hi")
        assert (result.stop_reason, result.text()) == ("end_turn", "Hello there")

    with WireServer(_replies()) as server:
        server_box.append(server)
        env = _http_env(tmp_path, ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=server.url)
        on = await _run(
            tmp_path / "on", play, on=True, provider="anthropic", env=env, command=FRESH
        )
    assert on[2] == 0
    assert on[3]["answered"] == ["initialize", "session/new"]
    assert requests_at_session_new == [0]
    assert len(server.requests) == 1
    modules = set(on[3]["modules"])
    heavy = {"asyncio", "anyio", "httpx", "httpx_sse", "h11", "pydantic", "keyring"}
    assert not {m for m in modules if m.split(".")[0] in heavy} - {"httpx._main"}
    assert "acp_bridge.providers.choose" in modules


async def _session_new_error(client: AcpClient, cwd: str) -> None:
    await client.initialize()
    answer = await client.request("session/new", {"cwd": cwd, "mcpServers": []})
    assert "error" in answer, answer
    await client.initialize()  # still serving


NO_KEY = [
    ("--provider anthropic", None, -32000),  # the vendor's own API, without a key
    ("no provider at all", None, -32000),
    ("a bad config file", _profile("{url}", bogus="1"), -32603),
    ("not TOML", "[profiles.default\n", -32603),
    ("an unknown provider", "[profiles.default]\nprovider = 'nope'\n", -32603),
]


@pytest.mark.parametrize(("case", "config", "code"), NO_KEY, ids=[c[0] for c in NO_KEY])
async def test_a_real_provider_that_cannot_start_gets_the_server_s_error(
    tmp_path: Path, case: str, config: str | None, code: int
) -> None:
    """No key, a bad config file, an unknown provider: the front door hands
    off, and session/new gets the same error with and without it."""
    runs = []
    for door in (True, False):
        with WireServer([]) as server:
            extra: tuple[str, ...] = ()
            if config is not None:
                path = tmp_path / "config.toml"  # one file: the messages name it
                path.write_text(config.replace("{url}", server.url))
                extra = ("--config", str(path))
            provider = "anthropic" if case.startswith("--provider") else None
            tmp = tmp_path / ("on" if door else "off")
            runs.append(
                await _run(
                    tmp,
                    _session_new_error,
                    on=door,
                    provider=provider,
                    extra=extra,
                    env=_http_env(tmp_path),
                )
            )
    on, off = runs
    assert (on[3]["answered"], on[3]["why"]) == (["initialize"], "a message for the server")
    [on_error] = [m["error"] for m in on[0] if m.get("id") == 2]
    [off_error] = [m["error"] for m in off[0] if m.get("id") == 2]
    assert on_error == off_error
    assert on_error["code"] == code
    assert normalize(on[0]) == normalize(off[0])
    assert on[1] == off[1] == {}
    assert on[2] == off[2]


async def test_a_provider_that_fails_after_the_answer_fails_the_session_s_prompts(
    tmp_path: Path,
) -> None:
    """The HTTP stack cannot be loaded (a broken httpx on the path): the session
    the front door answered stays, each prompt fails with the reason, which
    also goes to stderr; a later session/new gets it as its error."""
    broken = tmp_path / "broken"
    (broken / "httpx").mkdir(parents=True)
    (broken / "httpx" / "__init__.py").write_text("raise ImportError('httpx is broken here')\n")
    path = os.pathsep.join([str(broken), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)

    async def play(client: AcpClient, cwd: str) -> None:
        await client.initialize()
        session_id = await client.new_session(cwd)
        for _ in range(2):
            result = await client.prompt(session_id, "hi")
            assert "error" in result.response, result.response
            assert "httpx is broken here" in json.dumps(result.response["error"])
        again = await client.request("session/new", {"cwd": cwd, "mcpServers": []})
        assert "httpx is broken here" in json.dumps(again["error"])

    with WireServer(_replies()) as server:
        env = _http_env(tmp_path, ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=server.url)
        on = await _run(
            tmp_path / "on",
            play,
            on=True,
            provider="anthropic",
            env={**env, "PYTHONPATH": path},
            command=FRESH,
        )
    assert on[3]["answered"] == ["initialize", "session/new"]
    assert on[2] == 2  # a configuration that cannot work
    assert server.requests == []
    stderr = (tmp_path / "on" / "stderr.txt").read_text()
    assert "cannot make the anthropic provider: ImportError: httpx is broken here" in stderr
    [records] = on[1].values()
    assert records[0]["provider"] == "anthropic"


async def test_a_key_in_the_system_keyring_is_left_to_the_server(tmp_path: Path) -> None:
    """Asking the keyring costs more than the front door saves: the server
    answers session/new, with the key the keyring gives."""
    config_dir = tmp_path / "config-dir"
    config_dir.mkdir()
    ring = tmp_path / "keyring.json"
    ring.write_text(json.dumps({"acp-bridge-agent/api-key": KEY}))
    path = os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)

    async def play(client: AcpClient, cwd: str) -> None:
        await client.initialize()
        session_id = await client.new_session(cwd)
        result = await client.prompt(session_id, "hi")
        assert (result.stop_reason, result.text()) == ("end_turn", "Hello there")

    with WireServer(_replies("openai")) as server:
        setup = {"version": 1, "provider": "openai", "base_url": server.url, "model": "m1"}
        (config_dir / "setup.json").write_text(json.dumps({**setup, "key": "keyring"}))
        env = _http_env(
            tmp_path,
            PYTHONPATH=path,
            PYTHON_KEYRING_BACKEND="json_keyring.JsonKeyring",
            ACP_BRIDGE_TEST_KEYRING=str(ring),
        )
        on = await _run(tmp_path / "on", play, on=True, provider=None, env=env, command=FRESH)
    assert on[2] == 0
    assert (on[3]["answered"], on[3]["why"]) == (["initialize"], "a message for the server")
    assert not [m for m in on[3]["modules"] if m.split(".")[0] == "keyring"]
    [request] = server.requests
    assert request.headers.get("authorization") == f"Bearer {KEY}"
