"""A stream's chunk prefix, cut from a template made once per session and
kind, equals the prefix built from `text_chunk` for that stream's id."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.loop.updates import UpdateFrames

KINDS = st.sampled_from(["agent_message_chunk", "agent_thought_chunk"])
# Ids and session ids with what JSON escapes, the id's stand-in itself among
# them (not the text's: no id is that, see `acp_bridge.loop.updates`).
IDS = st.one_of(st.just("\x01"), st.text(st.sampled_from('ab"\\\x00\x01é\n/'), max_size=6)).filter(
    lambda text: text != "\x00"
)


@given(session_id=IDS, streams=st.lists(st.tuples(KINDS, IDS), min_size=1, max_size=6))
def test_the_prefix_of_each_stream_equals_the_built_one(
    session_id: str, streams: list[tuple[str, str]]
) -> None:
    frames = UpdateFrames(session_id)
    for kind, message_id in streams:
        expected = frames.build_chunk_prefix(kind, message_id)
        assert frames.chunk_prefix(kind, message_id) == expected, (kind, message_id)
