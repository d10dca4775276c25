"""Many sessions streaming and being stopped at once in ONE bridge process.

The real ``acp-bridge`` subprocess serves ``SESSIONS`` sessions.  The test
plays waves: in each wave every session sends one prompt (after a small
random delay, so a wave has many prompts in flight at once), and sends
``session/cancel`` once a random number K of chunks has arrived.  Odd turns
of a session stream forever (a ``report`` of the prompt the model received,
then paced ``endless`` chunks), so they can only end cancelled; even turns
stream a short finite answer, so a cancel may come before, during or after
its end (``cancelled`` or ``end_turn``).  Waves go on for ``SECONDS``.

Asserted:

* no cross talk: every ``session/update`` names a session opened here, and
  arrives while a prompt of that session is streaming; each turn's text
  starts with the report of that turn's own prompt (so the model was sent
  that session's history), and each turn's log holds exactly the text the
  editor was shown for that turn (interrupted message for a stop, committed
  message for an end), per session and per turn;
* no update after any prompt response of its session (invariant I1);
* every prompt is answered: ``cancelled``, or ``end_turn`` for a finite
  answer that ended first;
* `check_log` accepts every session log, and the history has one user and
  one assistant message per turn;
* memory stays flat (see `check_memory`); no traceback on stderr.

Environment (defaults in brackets): ``ACP_BRIDGE_LOAD_SECONDS`` [20] is the
time spent playing waves (a soak test: ``ACP_BRIDGE_LOAD_SECONDS=600``),
``ACP_BRIDGE_LOAD_SESSIONS`` [20] the number of sessions,
``ACP_BRIDGE_LOAD_SEED`` the random seed (printed in every failure).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from support.harness import cwd_for_tests
from support.pipe_peer import Prompt, PromptTracker, Spawned, bridge_subprocess

from acp_bridge.log.check import check_log
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.reader import read_records
from acp_bridge.log.records import MODEL_TYPES

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not os.path.exists("/proc/self/status"), reason="reads the bridge's RSS from /proc"
    ),
]

SECONDS = float(os.environ.get("ACP_BRIDGE_LOAD_SECONDS", "20"))
SESSIONS = int(os.environ.get("ACP_BRIDGE_LOAD_SESSIONS", "20"))
SEED = int(os.environ.get("ACP_BRIDGE_LOAD_SEED", str(random.randrange(1 << 32))))
# At least this many waves, whatever SECONDS says: the memory check needs a
# warm-up wave and a second half of several samples.
MIN_WAVES = 6
# Cancel after K chunks, K drawn from 1..MAX_K (the report is chunk 1).
MAX_K = 30

CWD = cwd_for_tests()
ENDLESS_CHUNK = "tok "
FINITE_CHUNKS = ["fin "] * 12
SCRIPT: dict[str, Any] = {
    "description": "Odd turns stream until stopped, even turns end by themselves.",
    "when_exhausted": "repeat_all",
    "responses": [
        {
            "events": [
                {"report": ["last_user_text"]},
                {"endless": {"text": ENDLESS_CHUNK, "delay_ms": 2}},
            ]
        },
        {
            "events": [
                {"report": ["last_user_text"]},
                {"text": "".join(FINITE_CHUNKS), "chunk_size": 4, "chunk_delay_ms": 2},
            ]
        },
    ],
}
Json = dict[str, Any]


def report_line(prompt_text: str) -> str:
    """The first chunk of every answer: the report of the last user text."""
    return f"last_user_text: {json.dumps(prompt_text, ensure_ascii=False)}"


# -- memory ---------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def retained_size(value: Any, strings: set[str]) -> int:
    """About what ``value`` costs in a Python heap, counting each distinct string once
    (the bridge shares keys, record types, attempt ids and the scripted chunk texts;
    this test process is the same Python, so the sizes match)."""
    if isinstance(value, dict):
        return sys.getsizeof(value) + sum(retained_size(v, strings) for v in value.values())
    if isinstance(value, list):
        return sys.getsizeof(value) + sum(retained_size(v, strings) for v in value)
    if isinstance(value, str):
        if value in strings:
            return 0
        strings.add(value)
        return sys.getsizeof(value)
    if isinstance(value, bool) or value is None or (isinstance(value, int) and -5 <= value <= 256):
        return 0  # shared singletons
    return sys.getsizeof(value)


class RetainedRecords:
    """The growing estimate of the records the bridge holds, read from the logs.

    By design the bridge keeps the records the model history is derived from
    (`MODEL_TYPES`, without the timed ``stream`` copy) in memory for the life of
    the session; this share of its RSS grows with every turn and is not a leak.
    """

    def __init__(self, sessions_dir: Path) -> None:
        self.sessions_dir = sessions_dir
        self.offsets: dict[Path, int] = {}
        self.strings: set[str] = set()
        self.total = 0

    def update(self) -> int:
        for path in sorted(self.sessions_dir.glob("*.jsonl")):
            with path.open("rb") as f:
                f.seek(self.offsets.get(path, 0))
                data = f.read()
            end = data.rfind(b"\n") + 1  # a record being written is read next time
            self.offsets[path] = self.offsets.get(path, 0) + end
            for line in data[:end].splitlines():
                record = orjson.loads(line)
                if record["type"] in MODEL_TYPES:
                    record.pop("stream", None)
                    self.total += retained_size(record, self.strings)
        return self.total


@dataclass
class Sample:
    wave: int
    rss: int
    retained: int


# Memory must stay flat: over the second half of the run (the first wave is
# warm-up), the RSS may grow by what the session records kept by design
# explain, times RETAINED_FACTOR, plus SLACK: 8 MiB, or 15% of the RSS at the
# start of the second half if that is more.
#
# * The records: the estimate is computed from the logs with this process's
#   object sizes; the bridge's RSS grows about 1.5 times faster than that
#   (dicts built key by key are over-allocated, pymalloc keeps partly used
#   pools), hence the factor of 2.  On a 20 s run this share is ~2 MiB per
#   half; it matters only for long soak runs.
# * The slack covers allocator noise: arenas and the heap's high-water mark
#   stay mapped after a busy wave, which moves the RSS by a few MiB at most.
# * What it catches: anything kept per turn or per chunk beyond the records
#   (a turn's stream state, tasks, cancel scopes, request copies, queued
#   frames).  A 20 s run plays well over a thousand turns and tens of
#   thousands of chunks, about as many in each half, so a few KiB kept per
#   turn already exceeds the bound, and anything that grows faster than
#   linearly (one copy of the history kept per request) exceeds it by far.
RETAINED_FACTOR = 2
SLACK_BYTES = 8 * 1024 * 1024
SLACK_RATIO = 0.15


def check_memory(samples: list[Sample]) -> None:
    """RSS after each wave, the first wave being warm-up, must not grow over the
    second half by more than the records retained meanwhile plus the slack."""
    samples = samples[1:]
    second = samples[len(samples) // 2 :]
    first, last = second[0], second[-1]
    grown = last.rss - first.rss
    retained = (last.retained - first.retained) * RETAINED_FACTOR
    slack = max(SLACK_BYTES, int(first.rss * SLACK_RATIO))
    mib = 1024 * 1024
    step = max(1, len(samples) // 20)
    trace = ", ".join(
        f"w{s.wave}:{s.rss / mib:.1f}/{s.retained / mib:.1f}" for s in samples[::step]
    )
    assert grown - retained < slack, (
        f"memory is not flat: the bridge's RSS grew by {grown / mib:.1f} MiB from wave "
        f"{first.wave} to wave {last.wave}, of which the session records kept by design "
        f"explain at most {retained / mib:.1f} MiB; unexplained growth "
        f"{(grown - retained) / mib:.1f} MiB >= {slack / mib:.1f} MiB (seed {SEED}).  Something "
        f"is kept per turn (growth that speeds up wave after wave points at a copy of the "
        f"history kept per model request).\nRSS/records MiB after some waves: {trace}"
    )


# -- playing --------------------------------------------------------------------------


@dataclass
class Load:
    spawned: Spawned
    tracker: PromptTracker
    rng: random.Random
    sessions: list[str] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)


async def one_turn(load: Load, session_id: str, wave: int) -> None:
    tracker = load.tracker
    k = load.rng.randint(1, MAX_K)
    await anyio.sleep(load.rng.uniform(0, 0.02))
    text = f"wave {wave} in {session_id[-8:]}: k={k} \u2028 é"
    prompt = await tracker.send(session_id, text, cancel_after=k)
    with anyio.fail_after(30):
        await prompt.reached.wait()
        if prompt.response is None:
            await tracker.cancel(prompt)
        await prompt.answered.wait()


async def play(load: Load) -> None:
    peer = load.spawned.peer
    await peer.initialize()
    for _ in range(SESSIONS):
        session_id = await peer.new_session(CWD)
        load.tracker.open(session_id)
        load.sessions.append(session_id)
    retained = RetainedRecords(load.spawned.state_dir / "sessions")
    pid = load.spawned.process.pid
    start = time.monotonic()
    wave = 0
    while wave < MIN_WAVES or time.monotonic() - start < SECONDS:
        wave += 1
        async with anyio.create_task_group() as tg:
            for session_id in load.sessions:
                tg.start_soon(one_turn, load, session_id, wave)
        load.samples.append(Sample(wave, rss_bytes(pid), retained.update()))
        assert not load.tracker.violations, load.tracker.violations[:5]


# -- checking -------------------------------------------------------------------------


def check_turn(prompt: Prompt, number: int, records: list[Json]) -> None:
    where = f"turn {number} of {prompt.session_id} (k={prompt.cancel_after}, seed {SEED})"
    endless = number % 2 == 1
    reason = prompt.stop_reason
    assert reason is not None, f"{where}: not a stop reason: {prompt.response}"
    if endless:
        assert reason == "cancelled", f"{where}: an endless answer ended with {reason}"
    elif not prompt.cancel_sent:
        assert reason == "end_turn", f"{where}: not stopped, yet {reason}"
    else:
        assert reason in ("cancelled", "end_turn"), f"{where}: {reason}"

    delivered = prompt.delivered()
    report = report_line(prompt.text)
    assert delivered.startswith(report), (
        f"{where}: the answer does not start with the report of its own prompt:\n"
        f"  got:      {delivered[: len(report) + 20]!r}\n  expected: {report!r}"
    )
    rest = delivered[len(report) :]
    chunk = ENDLESS_CHUNK if endless else FINITE_CHUNKS[0]
    # Only this turn's own chunks; a reader that fell behind may get several
    # in one frame (the writer merges them), never fewer than it counted.
    assert rest == chunk * (len(rest) // len(chunk)), f"{where}: foreign text in {rest!r}"
    assert len(rest) // len(chunk) >= prompt.chunks - 1, f"{where}: chunks lost in {rest!r}"
    if reason == "end_turn":
        assert rest == "".join(FINITE_CHUNKS), f"{where}: ended early with {rest!r}"

    turn = [r for r in records if r["turn"] == number]
    users = [r for r in turn if r["type"] == "user/message"]
    assert [u["content"] for u in users] == [[{"type": "text", "text": prompt.text}]], (
        f"{where}: the logged prompt differs: {users}"
    )
    ends = [r for r in turn if r["type"] == "turn/end"]
    assert [e["reason"] for e in ends] == [reason], f"{where}: turn/end {ends}"
    messages = [r for r in turn if r["type"] == "assistant/message"]
    assert len(messages) == 1, f"{where}: {len(messages)} assistant messages"
    message = messages[0]
    assert message["interrupted"] is (reason == "cancelled"), f"{where}: {message}"
    assert message["content"] == [{"type": "text", "text": delivered}], (
        f"{where}: the log keeps other text than the editor was shown:\n"
        f"  log:       {message['content']!r}\n  delivered: {delivered!r}"
    )


def check_session(load: Load, session_id: str) -> None:
    path = load.spawned.state_dir / "sessions" / f"{session_id}.jsonl"
    records = read_records(path)
    check_log(records)
    prompts = load.tracker.by_session[session_id]
    for number, prompt in enumerate(prompts, start=1):
        check_turn(prompt, number, records)
    history = derive_messages(records)
    assert [m["role"] for m in history] == ["user", "assistant"] * len(prompts), (
        f"{session_id}: the history does not alternate one user and one assistant "
        f"message per turn (seed {SEED})"
    )


@pytest.mark.slow
async def test_many_sessions_streaming_and_stopping_at_once(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    stderr_path = tmp_path / "stderr.txt"
    with stderr_path.open("wb") as stderr:
        async with bridge_subprocess(
            script, tmp_path / "state", stderr, "--cancel-deadline", "10", keep=False
        ) as spawned:
            load = Load(spawned, PromptTracker(spawned.peer), random.Random(SEED))
            with anyio.fail_after(SECONDS + 120):
                await play(load)
    stderr_text = stderr_path.read_text(errors="replace")
    assert spawned.returncode == 0, f"exit status {spawned.returncode}; stderr:\n{stderr_text}"
    assert "Traceback" not in stderr_text, stderr_text[-4000:]
    assert not spawned.peer.bad_lines, spawned.peer.bad_lines[:5]
    assert not load.tracker.violations, load.tracker.violations[:5]
    for session_id in load.sessions:
        check_session(load, session_id)
    check_memory(load.samples)
