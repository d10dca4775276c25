"""One depth bound for what is read and what is written (`acp_bridge.json_depth`).

orjson reads 1,024 levels and writes 254: a prompt whose ``_meta`` nested deeper
than the encoder writes used to fail its log record after the record's sequence
number was taken, leaving a gap that made the session unloadable.  Through the
real subprocess: a frame deeper than `MAX_DEPTH` is refused with -32602 naming
the field, one at the bound is answered and logged, and the session loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.bridge import BridgeStarter

from acp_bridge.json_depth import ENCODE_DEPTH, MAX_DEPTH, field_name, too_deep
from acp_bridge.jsonrpc.messages import Request, parse_frame
from acp_bridge.log.check import check_log
from acp_bridge.log.reader import read_records
from acp_bridge.log.writer import encode_record, new_record

pytestmark = pytest.mark.anyio

# A text block's _meta in a prompt frame sits at level 5: frame, params, prompt, block, _meta.
META_LEVEL = 5


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


def prompt_frame(meta_levels: int, *, resource: bool = False) -> bytes:
    # Built as text: orjson itself cannot write what is too deep.
    meta = '{"a":' * meta_levels + "1" + "}" * meta_levels
    if resource:
        block = '{"type":"resource","resource":{"uri":"file:///a","text":"t","_meta":' + meta + "}}"
    else:
        block = '{"type":"text","text":"hi","_meta":' + meta + "}"
    params = '{"sessionId":"s","prompt":[' + block + "]}"
    return ('{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":' + params + "}").encode()


def test_too_deep_names_the_path_and_needs_no_recursion() -> None:
    assert too_deep({"a": [1, {"b": 2}]}, 2) is None
    assert too_deep({"a": [1, {"b": {}}]}, 2) == ["a", 1, "b"]
    assert too_deep(nested(5000), 10) == ["a"] * 11
    assert field_name(["prompt", 0, "_meta", "a", "a"]) == "prompt[0]._meta.a…"


def test_whatever_the_parser_accepts_the_encoder_writes() -> None:
    assert MAX_DEPTH < ENCODE_DEPTH
    at_bound = parse_frame(prompt_frame(MAX_DEPTH - META_LEVEL + 1))
    assert isinstance(at_bound, Request)
    record = new_record(3, "user/message", 1, 0, {"prompt": at_bound.params["prompt"]})
    assert orjson.loads(encode_record(record))["prompt"] == at_bound.params["prompt"]
    over = parse_frame(prompt_frame(MAX_DEPTH - META_LEVEL + 2))
    assert not isinstance(over, Request)


async def test_a_deep_meta_is_refused_and_the_session_still_loads(
    tmp_path: Path, bridge: BridgeStarter
) -> None:
    state = tmp_path / "state"
    async with bridge() as client:
        await client.initialize()
        session_id = await client.new_session(str(tmp_path))
        for frame in (prompt_frame(300), prompt_frame(1000, resource=True)):
            [answer] = await client.exchange(frame.replace(b'"s"', f'"{session_id}"'.encode()))
            error = answer["error"]
            assert answer["id"] == 7
            assert error["code"] == -32602
            assert error["data"]["field"].startswith("prompt[0].")
            assert "_meta" in error["data"]["field"]
        # At the bound: answered, logged whole.
        deepest = orjson.loads(prompt_frame(MAX_DEPTH - META_LEVEL + 1))["params"]
        deepest["sessionId"] = session_id
        done = await client.request("session/prompt", deepest)
        assert done["result"] == {"stopReason": "end_turn"}
        assert await client.finish() == 0
    records = read_records(state / "sessions" / f"{session_id}.jsonl")
    check_log(records)
    assert [r["seq"] for r in records] == list(range(len(records)))
    [user] = [r for r in records if r["type"] == "user/message"]
    assert user["prompt"] == deepest["prompt"]
    async with bridge() as client:
        await client.initialize()
        loaded = await client.request(
            "session/load", {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
        )
        assert "result" in loaded, loaded
        again = await client.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "x"}]}
        )
        assert again["result"] == {"stopReason": "end_turn"}
        assert await client.finish() == 0
