"""`replay_frames`, what ``session/load`` sends: the frame of each update of `replay_updates`.

A message's batches replay joined (`merged_texts`), and a load that gives the
replay the records it has without deltas replays alike.
`random_log` makes logs that mix stopped, abandoned, crashed and regenerated
replies and notices (`tests/test_replay_read.py` uses it too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_bridge.log import replay
from acp_bridge.log.replay import replay_frames, replay_updates, without_deltas
from acp_bridge.protocol.frames import UpdateFrames

Record = dict[str, Any]
SNAPSHOTS = Path(__file__).resolve().parent.parent / "snapshots"


def test_a_long_log_replays_a_message_s_batches_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(SNAPSHOTS.parent))
    from bench.load_bench import synthetic_log

    records = synthetic_log("sess_long", 3000)
    frames = UpdateFrames("sess_long")
    data = b"".join(replay_frames(records, frames.update))
    # A message's batches replay as one chunk: one per reply here.
    replies = {r["attempt"] for r in records if r["type"] == "stream/delta"}
    assert data.count(b'"agent_message_chunk"') == len(replies)
    assert data.count(b'"interrupted":true') > 20
    # Pieces of at most 16 characters: many chunks per message.
    monkeypatch.setattr(replay, "REPLAY_CHUNK_CHARS", 16)
    data = b"".join(replay_frames(records, frames.update))
    assert data.count(b'"agent_message_chunk"') > 1000
    assert data.count(b'"interrupted":true') > 100


def test_a_message_s_chunks_replay_joined_in_pieces_of_a_bounded_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    texts = ["ab", "cde", "", "f", "ghijk", "l" * 12, "m"]
    assert replay.merged_texts(texts) == ["abcdefghijk" + "l" * 12 + "m"]
    monkeypatch.setattr(replay, "REPLAY_CHUNK_CHARS", 6)
    pieces = replay.merged_texts(texts)
    assert pieces == ["abcdef", "ghijk", "l" * 12, "m"]  # a longer text stays whole
    assert "".join(pieces) == "".join(texts)
    assert replay.merged_texts(["a", 7, "b", "c"]) == ["a", 7, "bc"]  # odd texts stay as they are


def test_without_deltas_keeps_every_other_record_in_order() -> None:
    records: list[Record] = [
        {"type": "turn/start", "seq": 0},
        {"type": "stream/delta", "seq": 1},
        {"type": "assistant/message", "seq": 2},
        {"type": "stream/delta", "seq": 3},
        {"seq": 4},
    ]
    assert [r["seq"] for r in without_deltas(records)] == [0, 2, 4]


# -- random logs -------------------------------------------------------------------

ids = st.sampled_from(["att_a", "att_b", "att_c", "att_\x00", 7, None])
message_ids = st.sampled_from(["msg_1", "msg_2", "msg\x00", None])
texts = st.text(max_size=6)
part_kinds = st.sampled_from(["text", "reasoning", "tool_args", "other"])


@st.composite
def random_log(draw: st.DrawFn) -> list[Record]:
    records: list[Record] = [{"type": "session/start", "session_id": "sess_r", "turn": 0}]
    for turn in range(1, draw(st.integers(1, 5)) + 1):
        start: Record = {"type": "turn/start", "turn": turn}
        if turn > 1 and draw(st.booleans()):
            start["regenerates"] = draw(st.integers(1, turn - 1))
        records.append(start)
        if "regenerates" not in start:
            blocks = [{"type": "text", "text": draw(texts)}]
            records.append({"type": "user/message", "turn": turn, "content": blocks})
        for _ in range(draw(st.integers(0, 3))):
            attempt = draw(ids)
            records.append(
                {
                    "type": "stream/start",
                    "turn": turn,
                    "attempt": attempt,
                    "message_id": draw(message_ids),
                }
            )
            for _ in range(draw(st.integers(0, 4))):
                parts = draw(st.lists(st.tuples(st.integers(0, 2), part_kinds, texts), max_size=3))
                records.append(
                    {
                        "type": "stream/delta",
                        "turn": turn,
                        "attempt": attempt,
                        "parts": [list(p) for p in parts],
                    }
                )
            ending = draw(st.sampled_from(["message", "stopped", "crashed", "attempt"]))
            if ending == "attempt":
                records.append(
                    {
                        "type": "assistant/attempt",
                        "turn": turn,
                        "attempt": attempt,
                        "outcome": "empty",
                    }
                )
            else:
                message: Record = {"type": "assistant/message", "turn": turn, "attempt": attempt}
                message["interrupted"] = ending != "message"
                if ending == "crashed":
                    message["recovered"] = "crashed"
                records.append(message)
        if draw(st.booleans()):
            records.append(
                {
                    "type": "agent/request-error",
                    "turn": turn,
                    "retrying": True,
                    "error": {"message": "x"},
                }
            )
        records.append({"type": "turn/end", "turn": turn, "reason": "end_turn"})
    return records


@settings(max_examples=200, deadline=None)
@given(random_log(), st.booleans(), st.booleans())
def test_random_logs_replay_alike_given_their_records_without_deltas(
    records: list[Record], compaction: bool, notices: bool
) -> None:
    """A load gives the replay the records that are not deltas, which it has
    already (``others``): the updates are the same."""
    others = without_deltas(records)
    expected = replay_updates(records, compaction=compaction, notices=notices)
    got = replay_updates(records, others=others, compaction=compaction, notices=notices)
    assert got == expected
