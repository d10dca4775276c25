"""A client that floods the real ``acp-bridge`` subprocess.

One bridge process, four busy sessions, two idle ones.  The client sends, in
random writes of one to two dozen frames with random short pauses between
them:

* 500 ``session/cancel`` notifications for random session ids: busy
  sessions (often while a prompt streams or waits), idle sessions, unknown
  ids;
* prompts to the busy sessions, interleaved with those cancels (a session
  gets several prompts queued at times);
* responses to requests the bridge never sent (result and error).

Then: the same prompt five times back to back to one session (each answered,
in order, each streaming only after the previous one's response); duplicate
request ids while the first is in flight (each duplicate refused at once with
-32600 and id null, the id in its data, so the editor never sees two responses
with one id; the original answered);
and one prompt per idle session (the cancels they got while idle leave
nothing behind: both end normally).

Asserted: every prompt answered exactly once, in order per session, with
``cancelled`` or ``end_turn``; no update outside its prompt (`PromptTracker`);
stray responses get no answer; every session log passes `check_log`, holds
one turn per prompt with that prompt's text and stop reason and exactly the
delivered text, and its derived history has the right number of user
messages (a turn that showed nothing merges its prompt with the next one).

``ACP_BRIDGE_FLOOD_SEED`` fixes the random seed (printed in every failure).
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.harness import cwd_for_tests
from support.pipe_peer import (
    Prompt,
    PromptTracker,
    Spawned,
    bridge_subprocess,
    id_key,
    prompt_frame,
)

from acp_bridge.client import AcpClient
from acp_bridge.jsonrpc.errors import INVALID_REQUEST
from acp_bridge.log.check import check_log
from acp_bridge.log.derive import derive_messages, is_visible_text
from acp_bridge.log.reader import read_records

pytestmark = pytest.mark.anyio

SEED = int(os.environ.get("ACP_BRIDGE_FLOOD_SEED", str(random.randrange(1 << 32))))
CANCELS = 500
PROMPTS = 60
STRAY_RESPONSES = 30
CWD = cwd_for_tests()
ANSWER = "alpha beta gamma delta epsilon "
SCRIPT: dict[str, Any] = {
    "description": "A short answer in small paced chunks, for every request.",
    "when_exhausted": "repeat_last",
    "responses": [{"events": [{"text": ANSWER, "chunk_size": 4, "chunk_delay_ms": 1}]}],
}
Json = dict[str, Any]


def cancel_frame(session_id: str) -> Json:
    return {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}


def stray_response(n: int) -> Json:
    """A response to a request the bridge never sent."""
    rid: object = f"stray-{n}" if n % 2 else 900_000 + n
    if n % 3 == 0:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "no such"}}
    return {"jsonrpc": "2.0", "id": rid, "result": {"outcome": {"outcome": "cancelled"}}}


class Flood:
    def __init__(self, spawned: Spawned) -> None:
        self.spawned = spawned
        self.peer: AcpClient = spawned.peer
        self.tracker = PromptTracker(spawned.peer)
        self.rng = random.Random(SEED)
        self.busy: list[str] = []
        self.idle: list[str] = []
        self.stray_ids: list[object] = []
        self.duplicates: dict[bytes, int] = {}

    async def open_sessions(self) -> None:
        await self.peer.initialize()
        for group, n in ((self.busy, 4), (self.idle, 2)):
            for _ in range(n):
                session_id = await self.peer.new_session(CWD)
                self.tracker.open(session_id)
                group.append(session_id)

    def plan(self) -> list[Json | Prompt]:
        """The flood: cancels, prompts and stray responses, shuffled."""
        rng = self.rng
        items: list[Json | Prompt] = []
        for _ in range(CANCELS):
            roll = rng.random()
            if roll < 0.4:
                target = rng.choice(self.busy)
            elif roll < 0.7:
                target = rng.choice(self.idle)
            else:
                target = "sess_" + uuid.UUID(int=rng.getrandbits(128)).hex
            items.append(cancel_frame(target))
        for i in range(PROMPTS):
            session_id = rng.choice(self.busy)
            items.append(Prompt(session_id, f"flood prompt {i}", self.peer.next_id()))
        for n in range(STRAY_RESPONSES):
            frame = stray_response(n)
            self.stray_ids.append(frame["id"])
            items.append(frame)
        rng.shuffle(items)
        return items

    async def flood(self) -> None:
        items = self.plan()
        pos = 0
        while pos < len(items):
            batch = items[pos : pos + self.rng.randint(1, 24)]
            pos += len(batch)
            frames: list[Json] = []
            for item in batch:
                if isinstance(item, Prompt):
                    frames.append(prompt_frame(self.tracker.register(item)))
                else:
                    frames.append(item)
            await self.peer.send(*frames)
            if self.rng.random() < 0.5:
                await anyio.sleep(self.rng.uniform(0, 0.012))
        await self.all_answered()

    async def all_answered(self) -> None:
        with anyio.fail_after(60):
            for prompt in self.tracker.prompts:
                await prompt.answered.wait()

    async def same_prompt_five_times(self) -> list[Prompt]:
        session_id = self.busy[0]
        prompts = [
            self.tracker.register(Prompt(session_id, "the same prompt", self.peer.next_id()))
            for _ in range(5)
        ]
        await self.peer.send(*(prompt_frame(p) for p in prompts))
        await self.all_answered()
        return prompts

    async def duplicate_ids(self) -> list[Prompt]:
        """Requests that reuse the id of a prompt in flight, in the same write."""
        originals: list[Prompt] = []
        int_prompt = Prompt(self.busy[1], "duplicate ids, integer", 777_001)
        str_prompt = Prompt(self.busy[2], "duplicate ids, string", "dup-1")
        for prompt, reuses in (
            (
                int_prompt,
                [
                    prompt_frame(int_prompt),
                    {
                        "jsonrpc": "2.0",
                        "id": int_prompt.rid,
                        "method": "initialize",
                        "params": {"protocolVersion": 1},
                    },
                ],
            ),
            (
                str_prompt,
                [
                    {
                        "jsonrpc": "2.0",
                        "id": str_prompt.rid,
                        "method": "session/new",
                        "params": {"cwd": CWD, "mcpServers": []},
                    }
                ],
            ),
        ):
            self.tracker.register(prompt)
            self.duplicates[id_key(prompt.rid)] = len(reuses)
            originals.append(prompt)
            await self.peer.send(prompt_frame(prompt), *reuses)
        await self.all_answered()
        return originals

    async def prompt_idle_sessions(self) -> list[Prompt]:
        prompts = [await self.tracker.send(s, f"after the flood, {s[-6:]}") for s in self.idle]
        await self.all_answered()
        return prompts


# -- checks -----------------------------------------------------------------------------


def user_message_count(prompts: list[Prompt]) -> int:
    """User messages in the history: a prompt starts a new one unless the turn
    before it showed nothing visible (then the two prompts merge)."""
    return sum(
        1 for i, _ in enumerate(prompts) if i == 0 or is_visible_text(prompts[i - 1].delivered())
    )


def turns_of(records: list[Json]) -> Iterator[tuple[int, list[Json]]]:
    numbers = sorted({r["turn"] for r in records if r["turn"]})
    for number in numbers:
        yield number, [r for r in records if r["turn"] == number]


def check_session(flood: Flood, session_id: str) -> None:
    where = f"{session_id} (seed {SEED})"
    records = read_records(flood.spawned.state_dir / "sessions" / f"{session_id}.jsonl")
    check_log(records)
    prompts = flood.tracker.by_session[session_id]
    turns = list(turns_of(records))
    assert [n for n, _ in turns] == list(range(1, len(prompts) + 1)), (
        f"{where}: {len(prompts)} prompts were answered, the log has turns {[n for n, _ in turns]}"
    )
    for (number, turn), prompt in zip(turns, prompts, strict=True):
        at = f"turn {number} of {where}"
        users = [r["content"] for r in turn if r["type"] == "user/message"]
        assert users == [[{"type": "text", "text": prompt.text}]], f"{at}: prompt {users}"
        ends = [r["reason"] for r in turn if r["type"] == "turn/end"]
        assert ends == [prompt.stop_reason], f"{at}: turn/end {ends}, answered {prompt.response}"
        delivered = prompt.delivered()
        messages = [r for r in turn if r["type"] == "assistant/message"]
        if prompt.stop_reason == "end_turn":
            assert delivered == ANSWER, f"{at}: ended, but delivered {delivered!r}"
        if not is_visible_text(delivered):
            assert messages == [], f"{at}: nothing shown, yet {messages}"
            continue
        assert len(messages) == 1, f"{at}: {len(messages)} assistant messages"
        assert messages[0]["content"] == [{"type": "text", "text": delivered}], (
            f"{at}: the log keeps {messages[0]['content']!r}, the editor was shown {delivered!r}"
        )
        assert messages[0]["interrupted"] is (prompt.stop_reason == "cancelled"), f"{at}"
    history = derive_messages(records)
    users = [m for m in history if m["role"] == "user"]
    assert len(users) == user_message_count(prompts), (
        f"{where}: {len(users)} user messages in the history, expected "
        f"{user_message_count(prompts)} for {len(prompts)} prompts"
    )
    texts = "".join(b["text"] for m in users for b in m["content"] if b["type"] == "text")
    assert texts == "".join(p.text for p in prompts), f"{where}: the user texts differ"


def check_answers(flood: Flood) -> None:
    for prompt in flood.tracker.prompts:
        assert prompt.stop_reason in ("cancelled", "end_turn"), (
            f"prompt {prompt.rid!r} to {prompt.session_id}: {prompt.response} (seed {SEED})"
        )
    for rid in flood.stray_ids:
        assert id_key(rid) not in flood.peer.responses, (
            f"a response to a request never sent was answered: {flood.peer.responses[id_key(rid)]}"
        )
    for key, count in flood.duplicates.items():
        answers = flood.peer.responses[key]
        assert len(answers) == 1, (
            f"id {key.decode()}: {count} duplicates sent while in flight, answers {answers}"
        )
        assert "result" in answers[0], f"id {key.decode()}: the original's answer {answers[0]}"
        refusals = [
            m
            for m in flood.peer.responses.get(b"null", [])
            if id_key(m["error"].get("data", {}).get("requestId")) == key
        ]
        assert [m["error"]["code"] for m in refusals] == [INVALID_REQUEST] * count, (
            f"id {key.decode()}: {count} duplicates sent while in flight, refused {refusals}"
        )
    nulls = flood.peer.responses.get(b"null", [])
    assert len(nulls) == sum(flood.duplicates.values()), f"answers with id null: {nulls}"
    sent = {id_key(p.rid) for p in flood.tracker.prompts} | {b"null"}
    unexpected = [msgs for key, msgs in flood.peer.responses.items() if key not in sent]
    # The only other requests are initialize and session/new, answered with results.
    for msgs in unexpected:
        assert all("result" in m for m in msgs), f"unexpected answers {msgs}"


async def test_flood_of_cancels_prompts_duplicates_and_stray_responses(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    stderr_path = tmp_path / "stderr.txt"
    with stderr_path.open("wb") as stderr:
        async with bridge_subprocess(script, tmp_path / "state", stderr, keep=False) as spawned:
            flood = Flood(spawned)
            with anyio.fail_after(120):
                await flood.open_sessions()
                await flood.flood()
                same = await flood.same_prompt_five_times()
                await flood.duplicate_ids()
                after = await flood.prompt_idle_sessions()
                await flood.peer.initialize()  # still serving
    stderr_text = stderr_path.read_text(errors="replace")
    assert spawned.returncode == 0, f"exit status {spawned.returncode}; stderr:\n{stderr_text}"
    assert "Traceback" not in stderr_text, stderr_text[-4000:]
    assert not spawned.peer.bad_lines, spawned.peer.bad_lines[:5]
    assert not flood.tracker.violations, f"{flood.tracker.violations[:5]} (seed {SEED})"
    check_answers(flood)
    for prompt in same:
        assert prompt.stop_reason == "end_turn", f"a queued duplicate prompt: {prompt.response}"
        assert prompt.delivered() == ANSWER, f"{prompt.rid}: {prompt.delivered()!r}"
    for prompt in after:
        assert prompt.stop_reason == "end_turn", (
            f"an idle session that got cancels earlier did not end normally: {prompt.response}"
        )
    for session_id in flood.busy + flood.idle:
        check_session(flood, session_id)
    logs = sorted((tmp_path / "state" / "sessions").glob("*.jsonl"))
    assert len(logs) == 6, f"a rejected duplicate session/new created a session: {logs}"
