"""A stream's chunk prefix, made of its kind's constant parts around the session
id and the message id, equals the prefix built from `text_chunk` for them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from acp_bridge.protocol.frames import UpdateFrames

KINDS = st.sampled_from(["agent_message_chunk", "agent_thought_chunk"])
# Ids and session ids with what JSON escapes, the ids' stand-ins themselves
# among them; never the text's stand-in (no id holds it, see
# `acp_bridge.protocol.frames`: the reference itself cuts there).
IDS = st.one_of(
    st.just("\x01"), st.just("\x02"), st.text(st.sampled_from('ab"\\\x01\x02é\n/'), max_size=6)
)


@given(session_id=IDS, streams=st.lists(st.tuples(KINDS, IDS), min_size=1, max_size=6))
def test_the_prefix_of_each_stream_equals_the_built_one(
    session_id: str, streams: list[tuple[str, str]]
) -> None:
    frames = UpdateFrames(session_id)
    for kind, message_id in streams:
        expected = frames.build_chunk_prefix(kind, message_id)
        assert frames.chunk_prefix(kind, message_id) == expected, (kind, message_id)
