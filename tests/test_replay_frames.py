"""`replay_frames` writes exactly the frames of `replay_updates` (what ``session/load`` sends).

The replay's text chunks are serialized from per-message templates rather than
built as updates; these tests hold the bytes to the reference, the frame of
each update of `replay_updates`, on every session log of the snapshots, on a
long synthetic log, and on random logs that mix stopped, abandoned, crashed
and regenerated replies, notices, and ids that look like the template's cut.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from acp_bridge.log import replay
from acp_bridge.log.replay import replay_frames, replay_updates, without_deltas
from acp_bridge.protocol.frames import UpdateFrames

Record = dict[str, Any]
SNAPSHOTS = Path(__file__).resolve().parent.parent / "snapshots"


def reference(records: list[Record], frames: UpdateFrames, **flags: bool) -> bytes:
    return b"".join(frames.update(item["update"]) for item in replay_updates(records, **flags))


def assert_same_frames(records: list[Record], session_id: str = "sess_x") -> None:
    frames = UpdateFrames(session_id)
    for compaction in (False, True):
        for notices in (False, True):
            expected = reference(records, frames, compaction=compaction, notices=notices)
            got = replay_frames(records, frames.update, compaction=compaction, notices=notices)
            assert got == expected, (compaction, notices)


def snapshot_logs() -> list[tuple[str, list[Record]]]:
    found = []
    for path in sorted(SNAPSHOTS.rglob("*.json")):
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            continue
        for i, log in enumerate(data.get("logs") or []):
            if isinstance(log, list) and log:
                found.append((f"{path.relative_to(SNAPSHOTS)}[{i}]", log))
    return found


SNAPSHOT_LOGS = snapshot_logs()


def test_the_snapshots_hold_logs_with_text() -> None:
    kinds = {record.get("type") for _, log in SNAPSHOT_LOGS for record in log}
    assert {"stream/delta", "assistant/message", "tool/announce"} <= kinds


@pytest.mark.parametrize(("name", "records"), SNAPSHOT_LOGS, ids=[n for n, _ in SNAPSHOT_LOGS])
def test_every_snapshot_log_replays_to_the_same_bytes(name: str, records: list[Record]) -> None:
    assert_same_frames(records)


def test_a_long_log_replays_to_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(SNAPSHOTS.parent))
    from bench.load_bench import synthetic_log

    records = synthetic_log("sess_long", 3000)
    frames = UpdateFrames("sess_long")
    data = replay_frames(records, frames.update)
    assert data == reference(records, frames)
    # A message's batches replay as one chunk: one per reply here.
    replies = {r["attempt"] for r in records if r["type"] == "stream/delta"}
    assert data.count(b'"agent_message_chunk"') == len(replies)
    assert data.count(b'"interrupted":true') > 20
    # Pieces of at most 16 characters: many chunks per message, cut from one template.
    monkeypatch.setattr(replay, "REPLAY_CHUNK_CHARS", 16)
    data = replay_frames(records, frames.update)
    assert data == reference(records, frames)
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


@settings(max_examples=300, deadline=None)
@given(random_log(), st.sampled_from(["sess_r", "sess_\x00"]), st.sampled_from([None, 3]))
def test_random_logs_replay_to_the_same_bytes(
    records: list[Record], session_id: str, piece: int | None
) -> None:
    """(``piece``: a message's chunks joined in pieces of that many characters,
    so that one message replays as several chunks from one template.)"""
    with pytest.MonkeyPatch.context() as patch:
        if piece is not None:
            patch.setattr(replay, "REPLAY_CHUNK_CHARS", piece)
        assert_same_frames(records, session_id)


@settings(max_examples=200, deadline=None)
@given(random_log(), st.booleans(), st.booleans())
def test_random_logs_replay_alike_with_the_types_of_their_records(
    records: list[Record], compaction: bool, notices: bool
) -> None:
    """A load gives the replay the types its read had (`acp_bridge.log.by_type`):
    the readers of the other records then see only theirs; the bytes are the same."""
    frames = UpdateFrames("sess_r")
    others = without_deltas(records)
    kinds = [record["type"] for record in others]
    flags = {"compaction": compaction, "notices": notices}
    expected = reference(records, frames, **flags)
    assert replay_frames(records, frames.update, others=others, kinds=kinds, **flags) == expected


tricky = st.lists(
    st.one_of(
        st.text(alphabet=st.sampled_from(['"', ",", "\\", "\x00", "u", "0", "a", "\n", "\x01"])),
        st.text(),
    ),
    max_size=8,
)


@settings(max_examples=500, deadline=None)
@given(tricky)
@example(["\\u0000", "x"])  # reads like the NUL that joins the texts
@example(["a\\", "\x00b"])
@example(['",', "x"])
def test_a_run_of_chunks_is_each_chunk_serialized(texts: list[str]) -> None:
    """The run's texts serialized at once equal each serialized alone, whatever
    quotes, commas, backslashes, NULs and escapes-lookalikes they hold."""
    import orjson

    from acp_bridge.log.replay import _run_frames

    head, tail = b'{"a":', b"}\n"
    expected = b"".join(head + orjson.dumps(text) + tail for text in texts)
    assert _run_frames(head, tail, texts) == expected


def test_texts_that_are_not_strings_are_serialized_one_by_one() -> None:
    import orjson

    from acp_bridge.log.replay import _run_frames

    texts: list[Any] = ["a", 5, None, {"k": "v", "w": ","}]
    head, tail = b"[", b"]"
    assert _run_frames(head, tail, texts) == b"".join(
        head + orjson.dumps(text) + tail for text in texts
    )
