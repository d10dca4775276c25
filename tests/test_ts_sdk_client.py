"""The official TypeScript SDK (``@agentclientprotocol/sdk``) as an outside client.

``tests/ts_client/client.mjs`` drives the real bridge with the SDK's client
API the way a Node-based editor would: initialize, a new session, a streamed
prompt that is stopped after K message chunks, and a follow-up whose scripted
answer reports what the model was sent.  It prints a JSON summary and writes
every raw line of both directions to a file, which these tests validate
against the ACP JSON Schema.

Node (>= 20) and npm are needed; without them, or when the SDK cannot be
installed (no network), the tests skip with the reason, except in CI
(``CI=true``) or with ``ACP_BRIDGE_REQUIRE_TS_SDK=1``, where they fail.  The
SDK is installed from ``package-lock.json`` into ``tests/ts_client/node_modules``
once and reused by later runs; its ``schema/v1/schema.json`` is also the
official schema of `acp_schema` when no override sits beside the checkout.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn

import pytest
from acp_schema import AcpSchema, load_acp_schema
from support.harness import EXAMPLES, ROOT

from acp_bridge import __version__
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records, session_path
from acp_bridge.providers.scripted import parse_report

TS_CLIENT: Final = Path(__file__).resolve().parent / "ts_client"
CLIENT_SCRIPT: Final = TS_CLIENT / "client.mjs"
SDK_PACKAGE: Final = "@agentclientprotocol/sdk"
SDK_DIR: Final = TS_CLIENT / "node_modules" / "@agentclientprotocol" / "sdk"
# The schema the pinned SDK release was generated from, shipped in its package.
SDK_SCHEMA: Final = SDK_DIR / "schema" / "v1" / "schema.json"
STORY: Final = EXAMPLES / "story-then-report.json"
FOLLOW_UP_PROMPT: Final = "Expand on your second point."
MIN_NODE: Final = 20
REQUIRE_ENV: Final = "ACP_BRIDGE_REQUIRE_TS_SDK"
NPM_TIMEOUT_S: Final = 300
RUN_TIMEOUT_S: Final = 120

# Stop after the first chunk, mid-way through the fast first sentence, and
# while the slow second sentence is pending (its chunks come 400 ms apart).
CANCEL_AFTER: Final = (1, 6, 14)


# -- toolchain and install -----------------------------------------------------


def required() -> str | None:
    """Why these tests must run here (CI or the opt-in variable), or None."""
    if os.environ.get(REQUIRE_ENV, "") not in ("", "0"):
        return f"{REQUIRE_ENV} is set"
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        return "CI is true"
    return None


def unavailable(reason: str) -> NoReturn:
    """Skip, or fail when the environment demands that these tests run."""
    why = required()
    if why is not None:
        pytest.fail(f"{reason} (and {why})", pytrace=False)
    pytest.skip(reason)


def parse_node_version(text: str) -> tuple[int, ...] | None:
    """``v20.11.1`` -> (20, 11, 1); None if ``text`` is not a Node version."""
    match = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)\S*", text.strip())
    return tuple(int(part) for part in match.groups()) if match else None


def toolchain_problem(
    which: Callable[[str], str | None] = shutil.which,
    node_version: Callable[[str], str] | None = None,
) -> str | None:
    """Why Node/npm cannot run the client here, or None if they can."""
    node = which("node")
    if node is None:
        return f"node is not installed (the TypeScript SDK client needs Node >= {MIN_NODE})"
    if which("npm") is None:
        return "npm is not installed (needed to install the TypeScript SDK)"
    try:
        raw = (node_version or _node_version)(node)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"`node --version` failed: {exc}"
    version = parse_node_version(raw)
    if version is None:
        return f"cannot read the Node version from {raw!r}"
    if version[0] < MIN_NODE:
        return f"Node {raw.strip()} is too old: the TypeScript SDK client needs Node >= {MIN_NODE}"
    return None


def _node_version(node: str) -> str:
    return subprocess.run(
        [node, "--version"], capture_output=True, text=True, check=True, timeout=30
    ).stdout


def pinned_sdk_version() -> str:
    package = json.loads((TS_CLIENT / "package.json").read_text(encoding="utf-8"))
    return str(package["dependencies"][SDK_PACKAGE])


def installed_sdk_version() -> str | None:
    try:
        package = json.loads((SDK_DIR / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (TS_CLIENT / "node_modules" / "zod" / "package.json").is_file():
        return None
    version = package.get("version")
    return version if isinstance(version, str) else None


def install_ts_client() -> float | None:
    """Install the client's dependencies unless the pinned SDK is there.

    Returns the install time in seconds, or None if nothing was installed.
    """
    if installed_sdk_version() == pinned_sdk_version():
        return None
    # Test processes running side by side (``pytest -n``) install it once.
    with open(TS_CLIENT / ".install.lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        return _install_ts_client_locked()


def _install_ts_client_locked() -> float | None:
    if installed_sdk_version() == pinned_sdk_version():
        return None
    npm = shutil.which("npm")
    assert npm is not None
    lock = TS_CLIENT / "package-lock.json"
    mode = ["ci"] if lock.is_file() else ["install"]
    command = [npm, *mode, "--no-audit", "--no-fund", "--no-update-notifier", "--loglevel=error"]
    # Fail in about a minute, not npm's default five, when the registry is unreachable.
    command += ["--fetch-retries=1", "--fetch-timeout=60000"]
    started = time.monotonic()
    try:
        result = subprocess.run(
            command,
            cwd=TS_CLIENT,
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT_S,
            env={**os.environ, "npm_config_update_notifier": "false"},
        )
    except subprocess.TimeoutExpired:
        unavailable(f"`npm {mode[0]}` did not finish in {NPM_TIMEOUT_S} s (no network?)")
    if result.returncode != 0:
        why = npm_error_summary(result.stderr or result.stdout)
        unavailable(f"`npm {mode[0]}` failed (no network?), exit {result.returncode}:\n{why}")
    if installed_sdk_version() != pinned_sdk_version():
        unavailable(f"`npm {mode[0]}` did not install {SDK_PACKAGE} {pinned_sdk_version()}")
    return time.monotonic() - started


def npm_error_summary(output: str, lines: int = 4) -> str:
    """The first lines of npm's error output, without stack frames."""
    kept = [
        line
        for line in output.splitlines()
        if line.strip() and not re.match(r"npm (error|ERR!)\s+at ", line)
    ]
    return "\n".join(kept[:lines])


@pytest.fixture(scope="session")
def ts_client() -> Path:
    """The client directory, with its dependencies installed."""
    problem = toolchain_problem()
    if problem is not None:
        unavailable(problem)
    install_ts_client()
    return TS_CLIENT


# -- one session through the SDK -------------------------------------------------


@dataclass
class TsRun:
    cancel_after: int
    summary: dict[str, Any]
    frames: list[dict[str, Any]]
    state_dir: Path
    stderr: str
    returncode: int

    @property
    def transcript(self) -> list[tuple[str, Any]]:
        """(direction, message) pairs in wire order, as `acp_schema` expects."""
        return [(f["dir"], json.loads(f["line"])) for f in self.frames]

    def explain(self) -> str:
        return (
            f"summary: {json.dumps(self.summary, indent=2)}\n"
            f"agent and client stderr (last 3000 chars): {self.stderr[-3000:]}"
        )


def run_ts_client(client_dir: Path, tmp: Path, cancel_after: int) -> TsRun:
    node = shutil.which("node")
    assert node is not None
    frames_file = tmp / "frames.jsonl"
    state = tmp / "state"
    cwd = tmp / "project"
    cwd.mkdir()
    agent = [sys.executable, "-m", "acp_bridge", "--provider", "fake"]
    agent += ["--script", str(STORY), "--state-dir", str(state)]
    command = [node, str(client_dir / "client.mjs"), "--frames", str(frames_file)]
    command += ["--cancel-after", str(cancel_after), "--cwd", str(cwd), "--", *agent]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env=dict(os.environ),
        cwd=ROOT,  # the bridge runs from the checkout, installed or not
    )
    try:
        summary = json.loads(result.stdout)
    except ValueError:
        pytest.fail(
            f"the client printed no JSON summary (exit {result.returncode})\n"
            f"stdout: {result.stdout[-2000:]}\nstderr: {result.stderr[-3000:]}"
        )
    frames = [json.loads(line) for line in frames_file.read_text(encoding="utf-8").splitlines()]
    run = TsRun(cancel_after, summary, frames, state, result.stderr, result.returncode)
    # Exit 1 is a failed check, reported by `test_the_sdk_client_checks_pass`;
    # anything else means the session could not run.
    if result.returncode not in (0, 1) or "error" in summary:
        pytest.fail(
            f"the TypeScript SDK client could not run the session (exit {result.returncode})\n"
            + run.explain()
        )
    return run


# The fast tier plays the first Stop point; CI plays every one.
@pytest.fixture(
    scope="module",
    params=[
        pytest.param(k, id=f"stop-after-{k}", marks=[pytest.mark.slow] if i else [])
        for i, k in enumerate(CANCEL_AFTER)
    ],
)
def ts_run(
    request: pytest.FixtureRequest, ts_client: Path, tmp_path_factory: pytest.TempPathFactory
) -> TsRun:
    k: int = request.param
    return run_ts_client(ts_client, tmp_path_factory.mktemp(f"ts-sdk-{k}"), k)


# -- wire helpers (also used by test_py_sdk_conformance) ---------------------------


def _methods(schema: AcpSchema, suffix: str, sides: Iterable[str]) -> dict[str, str]:
    return {
        d["x-method"]: name
        for name, d in schema.defs.items()
        if name.endswith(suffix) and d.get("x-side") in sides and "x-method" in d
    }


def client_message_errors(
    schema: AcpSchema, msg: Any, request_method: str | None = None
) -> list[str]:
    """Problems with one message written by a client (the mirror of
    `AcpSchema.agent_message_errors`): its JSON-RPC shape against
    ``ClientRequest``/``ClientNotification``/``ClientResponse``, then its params
    or result against the definition for its method."""
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        return ['JSON-RPC envelope: not an object with "jsonrpc": "2.0"']
    if "method" in msg:
        method = msg["method"]
        if "id" in msg:
            wrapper, defs, what = "ClientRequest", _methods(schema, "Request", ["agent"]), "request"
        else:
            wrapper = "ClientNotification"
            defs = _methods(schema, "Notification", ["agent", "protocol"])
            what = "notification"
        problems = schema.errors(wrapper, msg)
        name = defs.get(method)
        if name is None:
            if not str(method).startswith("_"):
                problems.append(f"a client does not send the {what} {method!r}")
            return problems
        return problems + schema.errors(name, msg.get("params"))
    problems = schema.errors("ClientResponse", msg)
    if problems and "error" in msg and "result" not in msg:
        return schema.errors("Error", msg["error"]) or problems
    if problems or "result" not in msg or request_method is None:
        return problems
    name = _methods(schema, "Response", ["client"]).get(request_method)
    if name is None:
        return [] if request_method.startswith("_") else [f"no response for {request_method!r}"]
    return schema.errors(name, msg["result"])


def wire_errors(schema: AcpSchema, transcript: Sequence[tuple[str, Any]]) -> list[str]:
    """Problems with every message in both directions (``send``: client to agent)."""
    problems = [f"agent: {p}" for p in schema.transcript_errors(transcript)]
    agent_requests: dict[Any, str] = {}
    for position, (direction, msg) in enumerate(transcript):
        if direction == "recv" and isinstance(msg, dict) and "method" in msg and "id" in msg:
            agent_requests[msg["id"]] = msg["method"]
        elif direction == "send":
            method = agent_requests.get(msg.get("id")) if isinstance(msg, dict) else None
            for problem in client_message_errors(schema, msg, method):
                problems.append(f"client: message {position} ({json.dumps(msg)[:300]}): {problem}")
    return problems


def is_update(msg: Mapping[str, Any]) -> bool:
    return msg.get("method") == "session/update"


def prompt_spans(transcript: Sequence[tuple[str, Any]]) -> list[tuple[int, int, int]]:
    """Per session/prompt request: (request index, response index, next prompt
    request index or the transcript's end)."""
    requests = [
        i
        for i, (d, m) in enumerate(transcript)
        if d == "send" and m.get("method") == "session/prompt" and "id" in m
    ]
    spans = []
    for n, start in enumerate(requests):
        stop = requests[n + 1] if n + 1 < len(requests) else len(transcript)
        rid = transcript[start][1]["id"]
        answer = next(
            (
                i
                for i in range(start + 1, stop)
                if transcript[i][0] == "recv"
                and "method" not in transcript[i][1]
                and transcript[i][1].get("id") == rid
            ),
            None,
        )
        assert answer is not None, f"prompt request {rid} got no response before the next prompt"
        spans.append((start, answer, stop))
    return spans


def streamed_text(messages: Iterable[Mapping[str, Any]]) -> str:
    return "".join(
        m["params"]["update"]["content"]["text"]
        for m in messages
        if is_update(m)
        and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
        and m["params"]["update"]["content"].get("type") == "text"
    )


# -- tests -----------------------------------------------------------------------


def test_toolchain_problem_names_what_is_missing() -> None:
    def which(*present: str) -> Callable[[str], str | None]:
        return lambda name: f"/bin/{name}" if name in present else None

    def version(v: str) -> Callable[[str], str]:
        return lambda _node: v

    assert "node is not installed" in str(toolchain_problem(which("npm")))
    assert "npm is not installed" in str(toolchain_problem(which("node"), version("v22.1.0")))
    assert "too old" in str(toolchain_problem(which("node", "npm"), version("v18.19.0\n")))
    assert "cannot read" in str(toolchain_problem(which("node", "npm"), version("weird")))
    assert toolchain_problem(which("node", "npm"), version("v20.0.0\n")) is None
    assert parse_node_version("v20.20.2") == (20, 20, 2)


def test_npm_error_summary_drops_stack_frames() -> None:
    output = (
        "npm error code ECONNREFUSED\nnpm error syscall connect\n"
        "npm error FetchError: request to http://registry.invalid/zod failed\n"
        "npm error     at ClientRequest.<anonymous> (index.js:130:14)\n"
        "npm error errno ECONNREFUSED\nnpm error more\n"
    )
    assert npm_error_summary(output) == (
        "npm error code ECONNREFUSED\nnpm error syscall connect\n"
        "npm error FetchError: request to http://registry.invalid/zod failed\n"
        "npm error errno ECONNREFUSED"
    )


def test_lockfile_pins_the_sdk() -> None:
    lock = json.loads((TS_CLIENT / "package-lock.json").read_text(encoding="utf-8"))
    pinned = pinned_sdk_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), f"{SDK_PACKAGE} must be pinned exactly"
    locked = lock["packages"][f"node_modules/{SDK_PACKAGE}"]
    assert locked["version"] == pinned
    assert locked["integrity"].startswith("sha512-")
    root = lock["packages"][""]["dependencies"]
    assert root == json.loads((TS_CLIENT / "package.json").read_text())["dependencies"]


def test_the_sdk_client_checks_pass(ts_run: TsRun) -> None:
    """The client's own checks: protocol version, agent info, stop reasons, no
    update after a response (as the SDK delivered them and on the wire), the
    report, a clean agent exit, no unexpected agent request."""
    assert ts_run.summary["problems"] == [], ts_run.explain()
    assert ts_run.summary["ok"] is True
    assert ts_run.returncode == 0
    assert ts_run.summary["exit"] == {"code": 0, "signal": None}


def test_the_sdk_receives_the_commands_after_session_new(ts_run: TsRun) -> None:
    """The SDK parsed the ``available_commands_update`` that follows ``session/new``."""
    assert ts_run.summary.get("commands") == [
        "regenerate",
        "compact",
        "model",
        "mode",
        "status",
        "clear",
        "help",
    ], ts_run.explain()


def test_initialize_answers_protocol_v1_with_agent_info(ts_run: TsRun) -> None:
    init = ts_run.summary["initialize"]
    assert init["protocolVersion"] == 1
    assert init["agentInfo"]["name"] == "acp-bridge"
    assert init["agentInfo"]["version"] == __version__
    first = ts_run.transcript[0][1]
    assert first["method"] == "initialize", "the SDK's first frame must be initialize"


def test_stop_mid_stream_answers_cancelled_and_nothing_follows(ts_run: TsRun) -> None:
    cancelled, follow_up = ts_run.summary["prompts"]
    assert cancelled["stopReason"] == "cancelled", ts_run.explain()
    assert follow_up["stopReason"] == "end_turn", ts_run.explain()
    assert cancelled["chunksAtCancel"] >= ts_run.cancel_after
    assert cancelled["text"].startswith(cancelled["textAtCancel"])
    for prompt in (cancelled, follow_up):
        assert prompt["sdkUpdatesAfterResponse"] == 0, ts_run.explain()
        assert prompt["wireUpdatesAfterResponse"] == 0, ts_run.explain()

    # The same, recomputed here from the raw frames.
    transcript = ts_run.transcript
    spans = prompt_spans(transcript)
    assert len(spans) == 2
    for n, (start, answer, stop) in enumerate(spans):
        late = [m for d, m in transcript[answer + 1 : stop] if d == "recv" and is_update(m)]
        assert late == [], f"prompt {n + 1}: {len(late)} updates after its response: {late}"
        stray = [m for d, m in transcript[start + 1 : answer] if d == "recv" and not is_update(m)]
        assert stray == [], f"prompt {n + 1}: unexpected agent frames {stray}"
    # The text on the wire before the response is the text the SDK delivered.
    start, answer, _ = spans[0]
    wire_text = streamed_text(m for d, m in transcript[start:answer] if d == "recv")
    assert wire_text == cancelled["text"], "the SDK did not deliver every streamed chunk"
    cancels = [i for i, (d, m) in enumerate(transcript) if m.get("method") == "session/cancel"]
    assert len(cancels) == 1
    assert start < cancels[0] < answer, "the cancel must go out while the prompt is in flight"


def test_follow_up_model_received_exactly_the_interrupted_text(ts_run: TsRun) -> None:
    cancelled, follow_up = ts_run.summary["prompts"]
    report = parse_report(follow_up["text"])
    assert report == ts_run.summary["report"]
    assert report["last_assistant_text"] == cancelled["text"], (
        f"the model was sent {report['last_assistant_text']!r}; the client was shown "
        f"{cancelled['text']!r} before the cancelled response"
    )
    assert cancelled["text"].startswith(cancelled["textAtCancel"])
    assert report["last_assistant_interrupted"] is True
    assert report["last_user_text"] == FOLLOW_UP_PROMPT


def test_every_raw_line_is_one_json_object(ts_run: TsRun) -> None:
    assert ts_run.frames, "no frames were recorded"
    for frame in ts_run.frames:
        assert frame["dir"] in ("send", "recv")
        assert not frame.get("partial"), f"unterminated last line: {frame['line']!r}"
        msg = json.loads(frame["line"])
        assert isinstance(msg, dict), f"{frame['dir']}: not a JSON object: {frame['line']!r}"
        assert frame["line"] == frame["line"].strip(), f"padded line: {frame['line']!r}"
    counts = ts_run.summary["frames"]
    assert counts["sent"] + counts["received"] == len(ts_run.frames)


def test_every_frame_validates_against_the_acp_schema(ts_run: TsRun) -> None:
    schema = load_acp_schema()
    problems = wire_errors(schema, ts_run.transcript)
    assert not problems, "frames the ACP schema rejects:\n" + "\n".join(problems)


def test_every_frame_validates_against_the_schema_shipped_with_the_sdk(ts_run: TsRun) -> None:
    schema = load_acp_schema(SDK_SCHEMA)
    assert schema is not None, f"the installed {SDK_PACKAGE} has no {SDK_SCHEMA.name}"
    problems = wire_errors(schema, ts_run.transcript)
    assert not problems, f"frames the {SDK_PACKAGE} schema rejects:\n" + "\n".join(problems)


def test_session_log_passes_check_log(ts_run: TsRun) -> None:
    sid = ts_run.summary["sessionId"]
    records = read_records(session_path(str(ts_run.state_dir), sid))
    check_log(records)
    ends = [(r["reason"], r["forced"]) for r in records if r["type"] == "turn/end"]
    assert ends == [("cancelled", False), ("end_turn", False)]
