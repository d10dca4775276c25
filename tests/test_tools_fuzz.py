"""A timed fuzz of the local-disk tools' arguments (invariant I7), through the real subprocess.

One bridge, an editor without fs capabilities (so every read, write and
search uses the local disk) that rejects every permission request.  The
workspace holds text, binary and large files, a FIFO, subfolders, and
symlinks to an outside folder of canary files and to /proc/self/environ
(whose canary is in the bridge's environment).  Session A is prompted with
batches of random tool calls (paths with ``..`` chains, absolute, through the
links, the FIFO, the big file, missing; regexes catastrophic for a
backtracking engine, invalid, or with syntax RE2 lacks), while a thread
swaps workspace entries between a real file or folder and a symlink out, and
session B is pinged with ``session/set_mode`` all along.

At the end: no canary in anything the bridge wrote (wire, logs, stderr),
the outside folder and /dev/shm unchanged, every ping answered within 1 s,
the logs valid, and nothing of the bridge's process session left once it
exited on stdin EOF.

``ACP_BRIDGE_FUZZ_SECONDS`` sets the fuzzing time (default 60) and
``ACP_BRIDGE_FUZZ_SEED`` the seed (printed; the swaps race with the calls, so
a replay takes the same calls, not the same interleaving).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.bridge import running_bridge
from support.harness import tool_call

from acp_bridge.client import AcpClient, bridge_command
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(sys.platform != "linux", reason="uses /proc, FIFOs and /dev/shm"),
]

FUZZ_SECONDS = float(os.environ.get("ACP_BRIDGE_FUZZ_SECONDS", "60"))
# How long another session's request may wait: a hang guard, not a speed limit.
# What it catches (a FIFO or a device opened on the event loop) blocks for ever;
# a busy shared machine (load 8 on 2 cores) has delayed a healthy ping by 1.1 s.
PING_BOUND = 5.0
BIG_BYTES = 4 << 20
CANARY_VAR = "ACP_BRIDGE_FUZZ_MARK"  # a name no secret filter knows: only confinement hides it

# Started in a process session of its own (same pid: exec, no fork), so every
# process it starts can be found by that session id after it exits.
NEW_SESSION = (
    "import os, sys; os.getsid(0) == os.getpid() or os.setsid(); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def canary() -> str:
    return "CANARY" + secrets.token_hex(16)


@dataclass
class World:
    ws: Path
    outside: Path
    shm: Path  # a writable place under /dev that must stay absent
    canaries: list[str]
    inside_marker: str
    files: dict[str, str] = field(default_factory=dict)  # text files of the workspace


def build_world(tmp_path: Path, rng: random.Random) -> World:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    (outside / "deep").mkdir(parents=True)
    canaries = [canary() for _ in range(5)]
    (outside / "canary1.txt").write_text(f"one {canaries[0]}\naaaaaaaaaaaaaaaaaaaaaaaaaaaa!\n")
    (outside / "canary2.txt").write_text(f"two {canaries[1]}\nalpha beta\n")
    (outside / "deep" / "canary3.txt").write_text(f"{canaries[2]}\n")
    (outside / "canary.bin").write_bytes(b"\0\xff" + canaries[3].encode() + bytes(range(256)))
    (outside / "env").symlink_to("/proc/self/environ")
    world = World(ws, outside, Path("/dev/shm") / f"acp-bridge-fuzz-{secrets.token_hex(8)}",
                  canaries, "INSIDE" + secrets.token_hex(8))  # fmt: skip
    world.files = {
        "a.txt": "alpha\nline two\naaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!\n",
        "sub/b.txt": "beta\nfoo bar\nx = 1\n",
        "sub/deep/c.txt": "gamma\n" * 50,
        "swap_file": "swapped file, as a regular file\n",
        "swap_dir/inner.txt": "inside the swapped folder\n",
    }
    for name, text in world.files.items():
        (ws / name).parent.mkdir(parents=True, exist_ok=True)
        (ws / name).write_text(text)
    (ws / "bin.dat").write_bytes(rng.randbytes(64 << 10))
    # Never written (no generated write path names it): its marker shows that reads work.
    (ws / "data").mkdir()
    with (ws / "data" / "big.txt").open("w") as f:
        f.write(f"{world.inside_marker}\n")
        line = "the big file, line of text aaaaaaaaaaaaaaaaaaaaaaaa\n"
        f.write(line * (BIG_BYTES // len(line)))
    os.mkfifo(ws / "pipe")
    (ws / "out_dir").symlink_to(outside)
    (ws / "rel_out").symlink_to(Path("..") / "outside")
    (ws / "out_file.txt").symlink_to(outside / "canary1.txt")
    (ws / "out_deep.txt").symlink_to(outside / "deep" / "canary3.txt")
    (ws / "env_link").symlink_to("/proc/self/environ")
    (ws / "dev_link").symlink_to("/dev/zero")
    (ws / "sub" / "up").symlink_to(Path("..") / ".." / "outside")
    (ws / "inner_link").symlink_to(ws / "a.txt")
    return world


Snapshot = dict[str, tuple[int, int, int, bytes | str]]


def snapshot(folder: Path) -> Snapshot:
    """Every entry under ``folder`` (and itself), not following symlinks:
    mode, size, mtime and content (a link's target)."""
    out: Snapshot = {}
    for here, dirs, names in os.walk(folder):
        for name in [".", *dirs, *names]:
            path = Path(here) / name
            st = path.lstat()
            body: bytes | str = b""
            if path.is_symlink():
                body = os.readlink(path)
            elif path.is_file():
                body = path.read_bytes()
            out[str(path.relative_to(folder))] = (st.st_mode, st.st_size, st.st_mtime_ns, body)
    return out


# -- generated tool calls ------------------------------------------------------------

NAMES = [
    "a.txt", "sub", "sub/b.txt", "sub/deep/c.txt", "sub/up", "sub/up/canary1.txt", "bin.dat",
    "data", "data/big.txt", "pipe", "swap_file", "swap_dir", "swap_dir/inner.txt",
    "swap_dir/canary1.txt",
    "out_dir", "out_dir/canary1.txt", "out_dir/deep/canary3.txt", "out_dir/env", "rel_out",
    "rel_out/canary2.txt", "out_file.txt", "out_deep.txt", "env_link", "dev_link", "inner_link",
    "missing", "missing/x.txt", "new.txt", ".", "..", "../outside", "../outside/canary2.txt",
    "../outside/env", "../outside/deep", "../ws/a.txt", "", "~", "~/.bashrc", "a.txt\0",
]  # fmt: skip
SYSTEM = [
    "/proc/self/environ", "/proc/self/cmdline", "/proc/self/mem", "/proc/1/environ",
    "//proc/self/environ", "/./proc/self/../self/environ", "/sys/kernel/hostname",
    "/dev/zero", "/dev/urandom", "/dev/null", "/dev/stdin", "/dev/fd/0", "/etc/passwd", "/",
]  # fmt: skip
REGEXES = [
    "(a+)+$", "(a|aa)+$", "(a|a?)+b", "(.*a){25}", "(x+x+)+y", "^(([a-z])+.)+[A-Z]([a-z])+$",
    "[a-", "(", ")", "*a", "a{99999}", "a{1000}{1000}", "(?P<n>", "\\", "(?i", "[[:nope:]]",
    "foo(?=bar)", "(?<!x)y", "(?<=a)b", "(a)\\1", "(?P<x>a)(?P=x)", "end\\Z", "(?>a+)b", "a++",
    "", ".", "^", "$", "CANARY", "alpha|beta", "\\x00", "\\C", "\\p{Greek}", "[^\\n]*$",
    "(?s).*", "line", "INSIDE", "\\bthe\\b", "[A-Z]{6}", "\\w+", "one|two", "(?i)canary",
]  # fmt: skip
REGEX_PIECES = [*"ab.*+?()[]{}|^$\\-", "\\d", "\\w", "\\s", "a", "CAN", "(?:", "{2,}"]
GLOBS = [None, "*", "*.txt", "**/*", "[", "*.bin", "sub/*", "c*", "[!a]*", "canary*"]


class Calls:
    def __init__(self, rng: random.Random, world: World) -> None:
        self.rng = rng
        self.world = world
        self.count = 0

    def path(self, *, for_write: bool = False) -> str:
        rng = self.rng
        names = [n for n in NAMES if not for_write or "big" not in n]
        roll = rng.random()
        if roll < 0.12:
            return rng.choice([*SYSTEM, str(self.world.shm)])
        if roll < 0.2:
            return rng.choice([str(self.world.outside), str(self.world.outside / "canary1.txt"),
                               str(self.world.outside / "new.txt")])  # fmt: skip
        parts = [rng.choice(names) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
        if rng.random() < 0.35:
            for _ in range(rng.randint(1, 3)):
                dots = rng.choice(["..", "../..", ".", "sub/.."])
                parts.insert(rng.randint(0, len(parts)), dots)
        if for_write and rng.random() < 0.5:
            where = rng.choice([".", "sub", "swap_dir", "out_dir", "sub/up", "missing"])
            parts = [where, rng.choice(["w.txt", "new.txt", ".hidden", "x/y/z.txt"])]
        path = "/".join(p for p in parts if p)
        roll = rng.random()
        if roll < 0.25:
            path = f"{self.world.ws}/{path}"
        elif roll < 0.3:
            path = "./" + path
        elif roll < 0.33:
            path += "/"
        return path

    def regex(self) -> str:
        if self.rng.random() < 0.6:
            return self.rng.choice(REGEXES)
        return "".join(self.rng.choice(REGEX_PIECES) for _ in range(self.rng.randint(1, 12)))

    def text(self) -> str:
        rng = self.rng
        alphabet = "abc xyz\n\t=é€\U0001f600\\\"'"
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))

    def one(self) -> dict[str, Any]:
        rng = self.rng
        self.count += 1
        cid = f"call_{self.count}"
        tool = rng.choice(["read_file", "read_file", "write_file", "edit_file", "find_files",
                           "search_text", "search_text"])  # fmt: skip
        if tool == "read_file":
            args: dict[str, Any] = {"path": self.path()}
            if rng.random() < 0.3:
                args["line"] = rng.randint(1, 100_000)
                args["limit"] = rng.randint(1, 50)
            return tool_call(cid, tool, **args)
        if tool == "write_file":
            return tool_call(cid, tool, path=self.path(for_write=True), content=self.text())
        if tool == "edit_file":
            old = rng.choice(["alpha", "x = 1", "beta", "line", "a", "", self.text()])
            return tool_call(cid, tool, path=self.path(for_write=True), old_text=old,
                             new_text=self.text())  # fmt: skip
        args = {"pattern": self.regex() if tool == "search_text" else rng.choice(GLOBS) or "*"}
        if rng.random() < 0.6:
            args["path"] = self.path()
        glob = rng.choice(GLOBS)
        if tool == "search_text" and glob is not None:
            args["glob"] = glob
        return tool_call(cid, tool, **args)

    def script(self, batches: int) -> dict[str, Any]:
        responses: list[dict[str, Any]] = []
        for _ in range(batches):
            responses.append({"events": [self.one() for _ in range(self.rng.randint(3, 8))]})
            responses.append({"events": [{"text": "done"}]})
        # A fixed start, so the final checks that the fuzz read and wrote in the
        # workspace do not depend on the draw.
        responses[0]["events"][:0] = [
            tool_call("call_read", "read_file", path="data/big.txt", limit=3),
            tool_call("call_search", "search_text", pattern="INSIDE"),
            tool_call("call_write", "write_file", path="sub/fresh.txt", content="fresh\n"),
        ]
        return {"responses": responses, "when_exhausted": "error"}


# -- the swapper ---------------------------------------------------------------------


def swapper(world: World, stop: threading.Event, rng: random.Random) -> Iterator[int]:
    """Keep turning swap_file and swap_dir into symlinks out and back (a generator
    run by a thread: each step is one swap)."""
    ws, n = world.ws, 0
    file, folder = ws / "swap_file", ws / "swap_dir"
    while not stop.is_set():
        n += 1
        try:
            if rng.random() < 0.5:
                temp = ws / f".swap_file.{n}"
                if file.is_symlink():
                    temp.write_text(world.files["swap_file"])
                else:
                    temp.symlink_to(
                        rng.choice([world.outside / "canary1.txt", Path("/proc/self/environ")])
                    )
                os.replace(temp, file)
            elif folder.is_symlink():
                temp = ws / f".swap_dir.{n}"
                temp.mkdir()
                (temp / "inner.txt").write_text(world.files["swap_dir/inner.txt"])
                folder.unlink()
                temp.rename(folder)
            else:
                moved = ws / f".swap_dir.old.{n}"
                folder.rename(moved)
                folder.symlink_to(world.outside)
                shutil.rmtree(moved, ignore_errors=True)
        except OSError:
            pass  # the bridge wrote there meanwhile: the next swap sorts it out
        yield n


def run_swapper(world: World, stop: threading.Event, seed: int, counter: list[int]) -> None:
    for n in swapper(world, stop, random.Random(seed)):
        counter[0] = n
        time.sleep(0.003)


# -- the test ------------------------------------------------------------------------


def leftover_processes(session_id: int) -> list[str]:
    """Processes (other than zombies already reaped) in the process session ``session_id``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[3]) == session_id:
            found.append(f"{entry.name}: {stat.strip()}")
    return found


@pytest.mark.timeout(FUZZ_SECONDS + 240)
@pytest.mark.slow
async def test_fuzzed_tool_arguments_stay_confined_and_never_block(tmp_path: Path) -> None:
    seed = int(os.environ.get("ACP_BRIDGE_FUZZ_SEED", secrets.randbits(32)))
    print(f"fuzz seed: ACP_BRIDGE_FUZZ_SEED={seed}")
    rng = random.Random(seed)
    world = build_world(tmp_path, rng)
    env_canary = canary()
    world.canaries.append(env_canary)
    before = snapshot(world.outside)
    calls = Calls(rng, world)
    # More batches than the time usually allows (the fuzz ends early when they run out).
    batches = max(200, int(FUZZ_SECONDS * 80))
    script = calls.script(batches)
    script_path = tmp_path / "script.json"
    script_path.write_text(json.dumps(script))
    state, stderr = tmp_path / "state", tmp_path / "stderr.txt"
    command = [sys.executable, "-c", NEW_SESSION, *bridge_command(
        "--provider", "fake", "--script", str(script_path), "--state-dir", str(state),
        "--tool-timeout", "20",
    )[1:]]  # fmt: skip
    env = {**os.environ, CANARY_VAR: env_canary}
    asked: list[dict[str, Any]] = []
    latencies: list[float] = []
    results: list[dict[str, Any]] = []
    stop_swapping = threading.Event()
    swaps = [0]
    swap_thread = threading.Thread(
        target=run_swapper, args=(world, stop_swapping, seed, swaps), daemon=True
    )

    async def reject(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}

    async def ping(client: AcpClient, sid: str) -> None:
        modes = ["accept_edits", "ask"]
        while True:
            started = time.monotonic()
            answer = await client.request(
                "session/set_mode", {"sessionId": sid, "modeId": modes[len(latencies) % 2]}
            )
            latencies.append(time.monotonic() - started)
            assert answer.get("result") == {}, answer
            await anyio.sleep(0.02)

    async def fuzz(client: AcpClient) -> None:
        # One session plays the whole script (each session's model starts it over).
        sid = await client.new_session(str(world.ws))
        # Edits in the workspace run without asking; anything outside still asks.
        answer = await client.request(
            "session/set_mode", {"sessionId": sid, "modeId": "accept_edits"}
        )
        assert answer.get("result") == {}, answer
        deadline = time.monotonic() + FUZZ_SECONDS
        while time.monotonic() < deadline and len(results) < batches:
            with anyio.fail_after(60):
                result = await client.prompt(sid, f"batch {len(results)}", settle=0)
            assert result.stop_reason == "end_turn", (seed, result.response)
            results.append(result.response)

    async with running_bridge(command, env=env, stderr=stderr) as client:
        client.handlers["session/request_permission"] = reject
        pid = client.agent.pid
        await client.initialize({})
        session_b = await client.new_session(str(world.ws))
        swap_thread.start()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(ping, client, session_b)
                await fuzz(client)
                tg.cancel_scope.cancel()
        finally:
            stop_swapping.set()
            swap_thread.join()
        returncode = await client.finish(within=30)
    transcript = client.transcript

    records = [read_records(path) for path in (state / "sessions").glob("*.jsonl")]
    ran = sum(r["type"] == "tool/call" for log in records for r in log)
    print(f"{len(results)} prompts, {ran} tool calls, {len(asked)} permission requests, "
          f"{swaps[0]} swaps, {len(latencies)} pings, slowest {max(latencies):.3f} s")  # fmt: skip
    assert returncode == 0, seed
    assert leftover_processes(pid) == [], seed

    # Nothing read outside reached the wire, the logs or stderr.
    sent = json.dumps([m for d, m in transcript if d == "recv"])
    logs = {p: p.read_bytes() for p in state.rglob("*") if p.is_file()}
    written = {"wire": sent.encode(), "stderr": stderr.read_bytes()}
    written.update({str(p): body for p, body in logs.items()})
    for where, body in written.items():
        for mark in world.canaries:
            at = body.find(mark.encode())
            assert at < 0, (seed, where, body[max(at - 300, 0) : at + 100])
    # Nothing written outside.
    after = snapshot(world.outside)
    assert sorted(after) == sorted(before), seed
    for name, facts in before.items():
        assert after[name] == facts, (seed, name)
    assert not world.shm.exists(), seed
    assert not world.shm.is_symlink(), seed
    # Another session's request never waited long (a blocked event loop waits for ever).
    assert latencies
    assert max(latencies) < PING_BOUND, (seed, max(latencies))
    for log in records:
        check_log(log)

    # The fuzz did something: it read inside, wrote inside, and was asked about outside paths.
    assert world.inside_marker in sent
    assert len(asked) > 0
    methods = {m.get("method") for d, m in transcript if d == "recv"}
    assert not {m for m in methods if isinstance(m, str) and m.startswith(("fs/", "terminal/"))}
    assert any(b"Created " in body or b"Wrote " in body for body in logs.values())
