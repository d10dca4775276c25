"""What a crash leaves equals what a Stop leaves, but for the reason.

A turn cut anywhere (a random valid log, cut at a random record) is closed
twice: as crash recovery closes it when the log is reopened
(`acp_bridge.log.reopen.closing_records`), and as a user stop closes it
(`OpenTurn.close("cancelled")`, the one closing both share).  Both logs must
pass the log's rules, hold the same records but for the reason and the words
that name it, and give the model the same history but for the ``crashed``
mark of a recovered message.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_log_check import LogBuilder, random_turn

from acp_bridge.log.check import check_log
from acp_bridge.log.derive import derive_messages
from acp_bridge.log.open_turn import Closing
from acp_bridge.log.reopen import closing_records, last_turn

Record = dict[str, Any]

# The fields that say why a turn ended, or say it in words: everything else
# of a closing record must be the same after a crash as after a stop.
_REASON_FIELDS = frozenset({"reason", "recovered"})


def _appended(records: list[Record], closing: list[Closing]) -> list[Record]:
    out = list(records)
    for kind, turn, step, fields in closing:
        out.append(
            {"v": 1, "seq": len(out), "at": 0.0, "type": kind, "turn": turn, "step": step, **fields}
        )
    return out


def _but_for_the_reason(record: Record) -> Record:
    kept = {key: value for key, value in record.items() if key not in _REASON_FIELDS}
    if record["type"] == "assistant/attempt":
        kept.pop("outcome")  # "crashed" / "empty": why the stream left nothing
    if record["type"] in ("tool/update", "tool/result"):
        kept.pop("content", None)  # the words: "unknown outcome" / "stopped"
        if "update" in kept:
            kept["update"] = {k: v for k, v in kept["update"].items() if k != "content"}
    return kept


def _unmarked(messages: list[Record]) -> list[Record]:
    """The history without the ``crashed`` mark and the words of tool results."""
    return [
        {
            "role": m["role"],
            "interrupted": m["interrupted"],
            "content": [
                {k: v for k, v in block.items() if block["type"] != "tool_result" or k != "content"}
                for block in m["content"]
            ],
        }
        for m in messages
    ]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_crash_leaves_what_a_stop_leaves_but_for_the_reason(data: st.DataObject) -> None:
    b = LogBuilder()
    for _ in range(data.draw(st.integers(1, 2))):
        random_turn(b, data)
    cut = data.draw(st.integers(1, len(b.records)))
    prefix = b.records[:cut]

    crashed = _appended(prefix, closing_records(prefix))
    stopped = _appended(prefix, last_turn(prefix).close("cancelled"))

    check_log(crashed)
    check_log(stopped)
    assert len(crashed) == len(stopped)
    assert [_but_for_the_reason(r) for r in crashed] == [_but_for_the_reason(r) for r in stopped]
    if len(crashed) > len(prefix):
        assert stopped[-1]["reason"] == "cancelled"
        assert crashed[-1]["reason"] in ("crashed", "cancelled")
    assert _unmarked(derive_messages(crashed)) == _unmarked(derive_messages(stopped))
