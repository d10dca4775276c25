"""What the editor saw, as a pure function of the log (invariant I4).

`replay_updates` turns a session's records into the ``session/update``
notification params (``{"sessionId", "update"}``) that ``session/load`` sends
to rebuild the conversation in the editor.  It equals what was sent live,
except that text arrives in fewer, larger chunks (the consecutive chunks of a
message joined, in pieces of at most `REPLAY_CHUNK_CHARS` characters):

* ``user/message``  one ``user_message_chunk`` per prompt block, exactly as the
  editor sent it (the record's ``prompt``; ``content`` for older records);
* ``stream/delta``  ``agent_message_chunk`` (text) and ``agent_thought_chunk``
  (reasoning) with the ``messageId`` of the attempt's ``stream/start``; tool
  call arguments were never shown and are not replayed;
* ``tool/announce`` / ``tool/update``  the ``tool_call`` / ``tool_call_update``
  as sent, so every tool call ends with its final status and content, except
  content that only the process that sent it could honour: an embedded
  terminal (its id names a terminal of the editor's that is gone after a
  restart) is left out, its command's output and exit status being the text
  of the call's final update (`LIVE_ONLY_CONTENT`);
* ``usage/update``  ``usage_update`` with ``used``, ``size`` and ``cost``;
* ``agent/request-error`` with ``retrying: true``  the notice shown while the
  provider retried (`retry_notice`);
* ``compaction`` (its outcome)  what the editor was shown of it
  (`acp_bridge.compaction.shown.compaction_updates`: a ``compaction_update``
  when ``compaction`` is true, the client having advertised
  ``session.compaction``, else a notice), and for a ``/compact`` turn its
  answer; such a turn without a compaction answered that there was nothing
  to compact.

Markers in ``_meta.acpBridge`` of the replayed chunks (not sent live, where
the editor saw the stop happen):

* ``{"interrupted": true}`` on every chunk of a message the user stopped
  (its ``assistant/message`` has ``interrupted: true``);
* ``{"abandoned": outcome}`` on every chunk of an attempt that left no
  message (``assistant/attempt``: ``empty``, ``provider_error``,
  ``timed_out``, ``disconnected``, ``internal``, ``crashed``); that text was
  shown but is not in the model's history;
* ``{"interrupted": true, "crashed": true}`` on every chunk of a message
  recovered after the agent process died mid-stream (`acp_bridge.log.reopen`);
* ``"replaced": true`` added on every chunk of a reply a later regenerate
  replaced (still shown, no longer in the model's history).

After the user message of the session's first turn comes the update the
agent sent live when that turn started: ``session_info_update`` with the
session's title (the start of that first prompt,
`acp_bridge.stored.info.title_from_prompt` rules), when it has one.  The
slash commands are not part of the replay: they are announced after the
load's answer (`acp_bridge.commands.catalog`).

A slash command's turn (``turn/start`` with ``command``) replays its blocks
as the user's message and its ``command/answer`` as the agent's message.

The plans the model showed come last (`acp_bridge.tools.plan.plans_of`: its
``update_plan`` calls that succeeded): for a client that keeps plans by id
(``plans``: ``clientCapabilities.plan``) one ``plan_update`` per plan, in its
items or Markdown form, else one ``plan`` update of the entries of them all
(a session with one plan: its latest entries, as before plans had ids).

A regenerate turn started by the ``/regenerate`` command keeps the command
the editor sent in its ``turn/start`` (``prompt``), replayed as the user's
message of that turn.

A log read for a replay (`acp_bridge.log.replay_read.read_for_replay`) has
its runs of one-part deltas folded into `DeltaRun` items: each replays as the
deltas it holds would have, one chunk per text.

`replay_frames` is what ``session/load`` writes: the frame of each update of
`replay_updates`.

Why this module is over 400 lines: one walk over the records makes every
update a replay shows, each record type in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

from ..update_builders import (
    session_info_update,
    text_chunk,
    tool_call,
    tool_call_update,
    usage_update,
    user_message_chunk,
)
from .derive import replaced_turns
from .replay_read import DeltaRun

__all__ = [
    "CHUNK_UPDATES",
    "REPLAY_CHUNK_CHARS",
    "command_answer",
    "merged_texts",
    "replay_frames",
    "replay_updates",
    "retry_notice",
    "title_update",
    "without_deltas",
]

Record = Mapping[str, Any]
R = TypeVar("R", bound=Mapping[str, Any])

# stream/delta part kind -> the session update that showed it.
CHUNK_UPDATES: Final = {"text": "agent_message_chunk", "reasoning": "agent_thought_chunk"}

# Consecutive text chunks of one message, kind and marker replay as one chunk
# of up to this many characters (a text longer than that stays whole): the
# live stream sent them as its batches came, and an editor joins them anyway,
# so a long session's replay is a few frames per message, not one per batch.
REPLAY_CHUNK_CHARS: Final = 8192

TITLE_LENGTH: Final = 60


def title_update(title: str) -> dict[str, Any]:
    return session_info_update(title)


def title_from_prompt(blocks: Iterable[Mapping[str, Any]]) -> str | None:
    """A session's title: the start of its first prompt's text, on one line.

    Falls back to the name (or URI) of the first resource; None when the
    prompt has neither.
    """
    fallback: str | None = None
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            text = " ".join(block["text"].split())
            if text:
                if len(text) > TITLE_LENGTH:
                    text = text[: TITLE_LENGTH - 1].rstrip() + "\u2026"
                return text
        elif fallback is None:
            for key in ("name", "uri"):
                if isinstance(block.get(key), str) and block[key]:
                    fallback = block[key]
                    break
            else:
                resource = block.get("resource")
                if isinstance(resource, Mapping) and isinstance(resource.get("uri"), str):
                    fallback = resource["uri"]
    return fallback


def replay_updates(
    records: Iterable[Record | DeltaRun],
    *,
    others: Sequence[Record] | None = None,
    compaction: bool = False,
    notices: bool = False,
    plans: bool = False,
    user_ids: Callable[[int], str] | None = None,
) -> list[dict[str, Any]]:
    """The ``session/update`` params that replay a session (see the module docstring).

    ``user_ids``: the user's chunks carry ``messageId`` ``user_ids(seq)`` of
    their record (ACP v2's, `acp_bridge.protocol.v2.user_message_id`).

    ``notices``: the client takes ACP notices, which are live only, so the
    thought chunks marked ``_meta.acpBridge.notice`` are left out.  ``plans``:
    the client keeps plans by id (``clientCapabilities.plan``).  ``others``:
    `without_deltas` of ``records``, if the caller has it already.
    """
    # Not copied if a list: a copy touches every item, cold in the cache.
    records = records if isinstance(records, list) else list(records)
    session_id = _session_id(records)
    updates: list[dict[str, Any]] = []
    append = updates.append
    # The texts of the chunks of one message, kind and marker seen last (merged).
    texts: list[Any] = []
    spec: tuple[str, str | None, Meta, bool] = ("", None, None, False)
    key: tuple[str, Any, int, bool] | None = None

    def flush() -> None:
        if not texts:
            return
        kind, message_id, meta, replaced = spec
        for text in merged_texts(texts):
            item = text_chunk(kind, text, message_id=message_id, meta=meta)
            if replaced:
                item.setdefault("_meta", {"acpBridge": {}})["acpBridge"]["replaced"] = True
            append({"sessionId": session_id, "update": item})
        texts.clear()

    def update(item: dict[str, Any]) -> None:
        flush()
        append({"sessionId": session_id, "update": item})

    def chunk(kind: str, text: Any, message_id: str | None, meta: Meta, replaced: bool) -> None:
        nonlocal key, spec
        now = (kind, message_id, id(meta), replaced)
        if now != key:
            flush()
            key, spec = now, (kind, message_id, meta, replaced)
        texts.append(text)

    _walk(
        records,
        update,
        chunk,
        others,
        compaction=compaction,
        notices=notices,
        plans=plans,
        user_ids=user_ids,
    )
    flush()
    return updates


def merged_texts(texts: list[Any]) -> list[Any]:
    """Consecutive string ``texts`` joined into pieces of at most
    `REPLAY_CHUNK_CHARS` characters (a longer text is a piece of its own);
    anything else (an odd log's non-string text) stays as it is, in order."""
    try:
        joined = "".join(texts)
    except TypeError:
        pass  # not all strings
    else:
        if len(joined) <= REPLAY_CHUNK_CHARS:
            return [joined]  # the common case: a message's batches
    out: list[Any] = []
    piece: list[str] = []
    size = 0
    for text in texts:
        if type(text) is not str:
            if piece:
                out.append("".join(piece))
                piece, size = [], 0
            out.append(text)
            continue
        if piece and size + len(text) > REPLAY_CHUNK_CHARS:
            out.append("".join(piece))
            piece, size = [], 0
        piece.append(text)
        size += len(text)
    if piece:
        out.append("".join(piece))
    return out


def replay_frames(
    records: Iterable[Record | DeltaRun],
    frame: Callable[[dict[str, Any]], bytes],
    *,
    others: Sequence[Record] | None = None,
    compaction: bool = False,
    notices: bool = False,
    plans: bool = False,
) -> list[bytes]:
    """What ``session/load`` writes: ``frame(update)`` of each update of
    `replay_updates` (``frame`` adds the session id)."""
    updates = replay_updates(
        records, others=others, compaction=compaction, notices=notices, plans=plans
    )
    return [frame(params["update"]) for params in updates]


Meta = Mapping[str, Any] | None
UpdateSink = Callable[[dict[str, Any]], None]
ChunkSink = Callable[[str, Any, "str | None", Meta, bool], None]


def _walk(
    records: list[Record | DeltaRun],
    update: UpdateSink,
    chunk: ChunkSink,
    others: Sequence[Record] | None,
    *,
    compaction: bool,
    notices: bool,
    plans: bool = False,
    user_ids: Callable[[int], str] | None = None,
) -> None:
    """The one walk of a replay: each update to ``update``, except the text
    chunks of ``stream/delta`` records, which go to ``chunk`` as (update kind,
    text, message id, marker, replaced), to be merged; those of a `DeltaRun`
    go to ``chunk`` one by one.  ``others`` must be given
    when ``records`` holds runs (`without_deltas` of the records they stand
    for)."""
    from ..tools.plan import plans_of

    # What the walk looks up ahead and the plan come from the other records:
    # a pass over these is a quarter of one over a long log.
    if others is None:
        others = without_deltas(_dicts(records))
    markers = _markers(others)
    replaced = replaced_turns(others)
    shown = _Shown(markers, compaction)
    shown.user_ids = user_ids
    chunk_updates = CHUNK_UPDATES
    # What the last delta's attempt and turn came to (consecutive deltas share
    # them; any other record, a stream/start among them, starts over).
    last: tuple[Any, Any] | None = None
    message_id: str | None = None
    marker: Meta = None
    was_replaced = False
    for record in records:
        if isinstance(record, DeltaRun):
            last = None  # the next delta record looks its attempt up again
            _run_chunks(record, shown.message_ids, markers, replaced, chunk)
            continue
        kind = record.get("type")
        if kind != "stream/delta":
            last = None
            if type(kind) is not str or kind not in SHOWN_TYPES:
                continue  # shows nothing, changes nothing the walk keeps
            for item in shown.updates(record):
                if notices and _is_notice(item):
                    continue
                update(item)
            continue
        # The hot path: most records of a long session are deltas.
        attempt, turn = record.get("attempt"), record.get("turn")
        if last is None or last[0] != attempt or last[1] != turn:
            last = (attempt, turn)
            if isinstance(attempt, str):
                message_id, marker = shown.message_ids.get(attempt), markers.get(attempt)
            else:
                message_id = marker = None
            was_replaced = turn in replaced
        for _, part_kind, text in record.get("parts", ()):
            update_kind = chunk_updates.get(part_kind)
            if update_kind is not None:
                chunk(update_kind, text, message_id, marker, was_replaced)
    for item in plans_of(others).shown(by_id=plans):
        update(item)


def _run_chunks(
    run: DeltaRun,
    message_ids: Mapping[str, str],
    markers: Mapping[str, dict[str, Any]],
    replaced: Container[Any],
    chunk: ChunkSink,
) -> None:
    """The chunks of a `DeltaRun`, as its delta records would give them."""
    update_kind = CHUNK_UPDATES.get(run.kind)
    if update_kind is None:
        return
    message_id, marker = message_ids.get(run.attempt), markers.get(run.attempt)
    was_replaced = run.turn in replaced
    for text in run.texts:
        chunk(update_kind, text, message_id, marker, was_replaced)


# The types of the records `_Shown.updates` shows something of or keeps
# something from; the walk skips the others (a test holds that they show
# nothing).
SHOWN_TYPES: Final = frozenset(
    {
        "user/message",
        "turn/start",
        "turn/end",
        "stream/start",
        "tool/announce",
        "tool/update",
        "usage/update",
        "agent/request-error",
        "command/answer",
        "compaction",
    }
)


class _Shown:
    """The updates of the records other than ``stream/delta``, in log order."""

    __slots__ = (
        "compact_turn",
        "compaction",
        "compaction_updates",
        "first_turn",
        "markers",
        "message_ids",
        "nothing_to_compact",
        "user_ids",
    )

    def __init__(self, markers: dict[str, dict[str, Any]], compaction: bool) -> None:
        from ..compaction.shown import compaction_updates, nothing_to_compact_update

        self.compaction_updates = compaction_updates
        self.nothing_to_compact = nothing_to_compact_update
        self.markers = markers
        self.compaction = compaction
        # attempt id -> the message id of its stream/start.
        self.message_ids: dict[str, str] = {}
        # A /compact turn that has not (yet) shown a compaction.
        self.compact_turn: object = None
        self.first_turn = True
        self.user_ids: Callable[[int], str] | None = None

    def updates(self, record: Record) -> list[dict[str, Any]]:
        kind = record.get("type")
        produced = _updates_of(record, self.message_ids, self.markers)
        if (
            self.user_ids is not None
            and produced
            and produced[0]["sessionUpdate"] == ("user_message_chunk")
        ):
            message_id = self.user_ids(record["seq"])
            for update in produced:
                update["messageId"] = message_id
        if kind == "turn/start" and record.get("command") == "compact":
            self.compact_turn = record.get("turn")
        elif kind == "compaction" and record.get("status") != "in_progress":
            produced = self.compaction_updates(record, opted=self.compaction, live=False)
            self.compact_turn = None
        elif kind == "turn/end" and self.compact_turn is not None:
            if record.get("turn") == self.compact_turn and record.get("reason") == "end_turn":
                produced.append(self.nothing_to_compact())
            self.compact_turn = None
        if self.first_turn and kind == "user/message":
            self.first_turn = False
            title = title_from_prompt(record.get("prompt", record.get("content")) or ())
            if title is not None:
                produced.append(title_update(title))
        return produced


def without_deltas(records: Iterable[R]) -> list[R]:
    """The records that are not ``stream/delta``: all that any reader of a log
    but the replay of its text needs (most records of a long log are deltas)."""
    return [record for record in records if record.get("type") != "stream/delta"]


def command_answer(text: str) -> dict[str, Any]:
    """How a slash command's answer is shown (live and replayed)."""
    return text_chunk("agent_message_chunk", text, meta={"command": True})


def retry_notice(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The thought chunk that tells the user a failed request is being retried.

    ``fields`` are those of an ``agent/request-error`` record with
    ``retrying: true``.  It is marked ``_meta.acpBridge.notice`` and is never
    recorded as reasoning: it does not enter the model's history.
    """
    error = fields.get("error") or {}
    delay = fields.get("retry_delay") or 0
    text = (
        f"The model request failed ({error.get('message', 'error')}); "
        f"retrying in {delay:g}s (retry {fields.get('retry_attempt')})."
    )
    return text_chunk("agent_thought_chunk", text, meta={"notice": True})


def _is_notice(update: Mapping[str, Any]) -> bool:
    meta = update.get("_meta")
    marks = meta.get("acpBridge") if isinstance(meta, Mapping) else None
    return (
        update.get("sessionUpdate") == "agent_thought_chunk"
        and isinstance(marks, Mapping)
        and marks.get("notice") is True
    )


def _dicts(records: list[Record | DeltaRun]) -> list[Record]:
    """The records that are dicts (not `DeltaRun` s)."""
    return [record for record in records if not isinstance(record, DeltaRun)]


def _session_id(records: list[Record | DeltaRun]) -> str | None:
    for record in records:  # the first record, in any log but an odd one
        if isinstance(record, DeltaRun):
            continue
        if record.get("type") == "session/start":
            session_id = record.get("session_id")
            return session_id if isinstance(session_id, str) else None
    return None


def _markers(records: Iterable[Record]) -> dict[str, dict[str, Any]]:
    """attempt id -> the ``_meta.acpBridge`` marker of its chunks, if any."""
    markers: dict[str, dict[str, Any]] = {}
    for record in records:
        kind = record.get("type")
        attempt = record.get("attempt")
        if not isinstance(attempt, str):
            continue
        if kind == "assistant/message" and record.get("interrupted") is True:
            markers[attempt] = {"interrupted": True}
            if record.get("recovered") == "crashed":
                markers[attempt]["crashed"] = True
        elif kind == "assistant/attempt":
            markers[attempt] = {"abandoned": record.get("outcome")}
    return markers


def _updates_of(
    record: Record, message_ids: dict[str, str], markers: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    kind = record.get("type")
    if kind == "user/message" or (kind == "turn/start" and "prompt" in record):
        blocks = record.get("prompt", record.get("content"))
        return [
            user_message_chunk(block)
            for block in (blocks if isinstance(blocks, list) else [])
            if isinstance(block, Mapping)
        ]
    if kind == "stream/start":
        attempt, message_id = record.get("attempt"), record.get("message_id")
        if isinstance(attempt, str) and isinstance(message_id, str):
            message_ids[attempt] = message_id
        return []
    if kind == "tool/announce":
        return _outliving(tool_call(record["update"]))
    if kind == "tool/update":
        return _outliving(tool_call_update(record["update"]))
    if kind == "usage/update":
        cost = record.get("cost")
        extra = {"cost": dict(cost)} if isinstance(cost, Mapping) else None
        return [usage_update(record["used"], record["size"], extra)]
    if kind == "agent/request-error" and record.get("retrying") is True:
        return [retry_notice(record)]
    if kind == "command/answer" and isinstance(record.get("text"), str):
        return [command_answer(record["text"])]
    return []


# Tool call content that names something of the process that showed it (an
# embedded terminal of the editor's, by id): gone after a restart.
LIVE_ONLY_CONTENT: Final = frozenset({"terminal"})


def _outliving(update: dict[str, Any]) -> list[dict[str, Any]]:
    """``update`` without its live-only content (`LIVE_ONLY_CONTENT`).

    A command's terminal is replayed as what its final update holds anyway:
    the captured output and the exit status, as text.  An update that held
    only a terminal (the embed sent when the command started) is left out.
    """
    content = update.get("content")
    if not isinstance(content, list):
        return [update]
    kept = [
        item
        for item in content
        if not (isinstance(item, Mapping) and item.get("type") in LIVE_ONLY_CONTENT)
    ]
    if len(kept) == len(content):
        return [update]
    rest = {key: value for key, value in update.items() if key != "content"}
    if kept:
        return [{**rest, "content": kept}]
    if set(rest) <= {"sessionUpdate", "toolCallId"}:
        return []  # nothing left to show
    return [rest]
