"""The checker validates each frame structure once (`acp_bridge.check.schema.structure`):
the shortcut must give the verdict that validating the frame itself gives.  Compared with
full validation on random frames: valid ones with random text, and broken ones (a key
dropped or added, a value of another type, a discriminator changed)."""

from __future__ import annotations

import copy
import random
import string
from typing import Any

from acp_bridge.check.schema import bundled_schema, structure

SID = "sess_1"
SEEDS: list[tuple[dict[str, Any], str | None]] = [
    (
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": SID,
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": "tok "},
                },
            },
        },
        None,
    ),
    (
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": SID,
                "update": {
                    "sessionUpdate": "tool_call",
                    "toolCallId": "c1",
                    "title": "Read",
                    "kind": "read",
                    "status": "pending",
                },
            },
        },
        None,
    ),
    ({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "cancelled"}}, "session/prompt"),
    ({"jsonrpc": "2.0", "id": 2, "result": {"sessionId": SID}}, "session/new"),
    ({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "bad"}}, "session/prompt"),
]
VALUES: list[Any] = [
    None,
    True,
    0,
    1,
    1.5,
    -3,
    "",
    "cancelled",
    "end_turn",
    "text",
    "image",
    "agent_message_chunk",
    "user_message_chunk",
    "plan",
    "session/update",
    "_x/y",
    "2.0",
    "1.0",
    [],
    {},
    {"type": "text"},
]


def _random_text(rng: random.Random) -> str:
    return "".join(rng.choice(string.printable + "é✓") for _ in range(rng.randrange(0, 12)))


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*at, i))
    return out


def _mutate(msg: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    msg = copy.deepcopy(msg)
    for _ in range(rng.randrange(1, 4)):
        path = rng.choice(_paths(msg)[1:])
        parent: Any = msg
        for part in path[:-1]:
            parent = parent[part]
        last = path[-1]
        action = rng.random()
        if isinstance(parent[last], str) and action < 0.5:
            parent[last] = _random_text(rng)  # what the shortcut must see through
        elif action < 0.65 and isinstance(parent, dict):
            del parent[last]
        elif action < 0.8 and isinstance(parent[last], dict):
            parent[last][rng.choice(["extra", "_meta", "text", "type"])] = copy.deepcopy(
                rng.choice(VALUES)
            )
        else:
            parent[last] = copy.deepcopy(rng.choice(VALUES))
    return msg


def test_the_structure_shortcut_gives_the_verdict_of_full_validation() -> None:
    schema = bundled_schema()
    free = schema.free_text_keys
    rng = random.Random(31)
    verdicts: dict[tuple[Any, str | None], bool] = {}
    checked = disagreements = 0
    seen_valid = seen_invalid = 0
    for _ in range(6000):
        seed, answered = rng.choice(SEEDS)
        msg = _mutate(seed, rng)
        full = not schema.agent_message_errors(msg, answered)
        key = (structure(msg, free), answered)
        cached = verdicts.setdefault(key, full)
        checked += 1
        disagreements += cached != full
        seen_valid += full
        seen_invalid += not full
    assert disagreements == 0
    assert seen_valid > 500
    assert seen_invalid > 500
    assert len(verdicts) < checked, "frames that differ only in text share a structure"


def test_text_does_not_change_the_structure_and_a_discriminator_does() -> None:
    free = bundled_schema().free_text_keys
    chunk = copy.deepcopy(SEEDS[0][0])
    other = copy.deepcopy(chunk)
    other["params"]["update"]["content"]["text"] = "another text entirely"
    assert structure(chunk, free) == structure(other, free)
    other["params"]["update"]["sessionUpdate"] = "agent_thought_chunk"
    assert structure(chunk, free) != structure(other, free)
    other = copy.deepcopy(chunk)
    other["method"] = "session/updates"
    assert structure(chunk, free) != structure(other, free)
    assert structure({"a": True}, free) != structure({"a": 1}, free)
