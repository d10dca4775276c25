"""``acp-bridge sessions`` and ``acp-bridge show SESSION_ID``: stored sessions, readable.

Both read the logs only (they never take a session's lock, never write).
"""

from __future__ import annotations

import datetime
import difflib
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from .log.reader import LOG_SUFFIX, LogCorrupt, iter_session_files, session_path
from .log.upcast import load_log
from .stored.info import title_of

Record = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Summary:
    session_id: str
    title: str | None
    cwd: str
    updated: float
    turns: int
    size: int
    last_ending: str | None
    # A subagent's parent session (`session/start` ``owner``), else None.
    owner: str | None = None


def summarize(path: str) -> Summary:
    """One row of ``acp-bridge sessions``; raises `LogCorrupt` or `OSError`."""
    records = load_log(path).records
    start = records[0] if records else {}
    ends = [r for r in records if r.get("type") == "turn/end"]
    starts = [r for r in records if r.get("type") == "turn/start"]
    last: str | None = None
    if starts:
        last = ends[-1].get("reason") if ends and ends[-1]["turn"] == starts[-1]["turn"] else "open"
    stat = os.stat(path)
    return Summary(
        session_id=os.path.basename(path)[: -len(LOG_SUFFIX)],
        title=title_of(records),
        cwd=str(start.get("cwd", "")),
        updated=stat.st_mtime,
        turns=len(starts),
        size=stat.st_size,
        last_ending=last,
        owner=_owner(start),
    )


def _owner(start: Record) -> str | None:
    owner = start.get("owner")
    return str(owner.get("session_id")) if isinstance(owner, Mapping) else None


def _children(records: Iterable[Record]) -> list[str]:
    """The subagent sessions a log's ``task`` calls started, in order (each once)."""
    found: dict[str, None] = {}
    for record in records:
        if record.get("type") != "tool/update":
            continue
        raw = (record.get("update") or {}).get("rawOutput")
        if isinstance(raw, Mapping) and isinstance(raw.get("subagentSessionId"), str):
            found[raw["subagentSessionId"]] = None
    return list(found)


def _under_parents(rows: list[Summary]) -> list[tuple[Summary, int]]:
    """``rows`` (newest first) with each subagent right under its parent: (row, depth)."""
    ids = {row.session_id for row in rows}
    kids: dict[str, list[Summary]] = {}
    for row in rows:
        if row.owner in ids:
            kids.setdefault(str(row.owner), []).append(row)
    out: list[tuple[Summary, int]] = []

    def add(row: Summary, depth: int) -> None:
        out.append((row, depth))
        for kid in reversed(kids.get(row.session_id, [])):  # oldest first
            add(kid, depth + 1)

    for row in rows:
        if row.owner not in ids:
            add(row, 0)
    return out


def print_sessions(state_dir: str, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    rows: list[Summary] = []
    for path in iter_session_files(state_dir):
        try:
            rows.append(summarize(path))
        except (LogCorrupt, OSError) as exc:
            sys.stderr.write(f"acp-bridge: skipping {path}: {exc}\n")
    rows.sort(key=lambda row: row.updated, reverse=True)
    if not rows:
        out.write(f"no sessions in {state_dir}\n")
        return 0
    header = ("SESSION", "UPDATED", "TURNS", "SIZE", "LAST TURN", "CWD", "TITLE")
    table = [header] + [
        (
            "  " * depth + ("└ " if depth else "") + row.session_id,
            _local_time(row.updated),
            str(row.turns),
            _size(row.size),
            row.last_ending or "-",
            row.cwd,
            row.title or "",
        )
        for row, depth in _under_parents(rows)
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header) - 1)]
    for line in table:
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        out.write("  ".join([*cells, line[-1]]).rstrip() + "\n")
    return 0


def print_show(state_dir: str, session_id: str, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    path = resolve(state_dir, session_id)
    if isinstance(path, int):
        return path
    try:
        records = load_log(path).records
    except LogCorrupt as exc:
        sys.stderr.write(f"acp-bridge: {exc}\n")
        return 1
    for line in timeline(records):
        out.write(line + "\n")
    _show_children(state_dir, records, out, "    ")
    return 0


def _show_children(state_dir: str, records: Iterable[Record], out: TextIO, indent: str) -> None:
    """The timelines of the subagents the log started, indented under it (the tree)."""
    for child in _children(records):
        try:
            kept = load_log(session_path(state_dir, child)).records
        except (ValueError, LogCorrupt, OSError) as exc:
            out.write(f"{indent}subagent {child}: not readable ({exc})\n")
            continue
        for line in timeline(kept):
            out.write(indent + line + "\n")
        _show_children(state_dir, kept, out, indent + "    ")


def resolve(state_dir: str, session_id: str) -> str | int:
    """The log of ``session_id``; else an exit status, once stderr says why
    (2: not a valid id; 1: no such session, and the nearest stored ids)."""
    try:
        path = session_path(state_dir, session_id)
    except ValueError as exc:
        sys.stderr.write(f"acp-bridge: {exc}\n")
        return 2
    if os.path.isfile(path):
        return path
    sys.stderr.write(f"acp-bridge: no session {session_id!r} in {state_dir}\n")
    near = nearest(state_dir, session_id)
    if near:
        sys.stderr.write("did you mean:\n" + "".join(f"  {sid}\n" for sid in near))
    return 1


def nearest(state_dir: str, session_id: str, limit: int = 5) -> list[str]:
    """Stored session ids that start with ``session_id``, else the most similar."""
    ids = [os.path.basename(p)[: -len(LOG_SUFFIX)] for p in iter_session_files(state_dir)]
    prefixed = [sid for sid in ids if sid.startswith(session_id)]
    if prefixed:
        return prefixed[:limit]
    return difflib.get_close_matches(session_id, ids, n=limit, cutoff=0.5)


# -- the timeline ---------------------------------------------------------------------


def timeline(records: Iterable[Record]) -> list[str]:
    """A readable account of a log: turns, steps, attempts, errors, interruptions, timings."""
    lines: list[str] = []
    turn_at = step_at = 0.0
    texts: dict[str, dict[str, int]] = {}
    for record in records:
        kind = record.get("type")
        at = float(record.get("at") or 0.0)
        if kind == "session/start":
            lines += _start_lines(record, at)
        elif kind == "turn/start":
            turn_at = at
            lines.append(f"turn {record.get('turn')}  {_local_time(at)}{_turn_kind(record)}")
        elif kind == "user/message":
            lines.append(
                f"  user: {_quote(_blocks_text(record.get('prompt') or record.get('content')))}"
            )
        elif kind == "step/start":
            step_at = at
            lines.append(f"  step {record.get('step')}")
        elif kind == "stream/start":
            texts[str(record.get("attempt"))] = {}
        elif kind == "stream/delta":
            counts = texts.setdefault(str(record.get("attempt")), {})
            for _, part_kind, text in record.get("parts", ()):
                counts[part_kind] = counts.get(part_kind, 0) + len(text)
        elif kind == "assistant/message":
            lines.append("    " + _message_line(record))
        elif kind == "assistant/attempt":
            counts = texts.get(str(record.get("attempt")), {})
            shown = ", ".join(f"{n} {k} chars" for k, n in counts.items()) or "nothing"
            lines.append(
                f"    attempt {record.get('attempt')}: {record.get('outcome')} ({shown} shown)"
            )
        elif kind in _DETAILS:
            lines.append("    " + _DETAILS[kind](record))
        elif kind == "step/end":
            lines.append(f"    step ends: {record.get('reason')} after {at - step_at:.2f}s")
        elif kind == "turn/end":
            forced = " (forced)" if record.get("forced") else ""
            lines.append(f"  turn ends: {record.get('reason')}{forced} after {at - turn_at:.2f}s")
    return lines


def _start_lines(record: Record, at: float) -> list[str]:
    lines = [
        f"session {record.get('session_id')}  ({_local_time(at)})",
        f"  cwd {record.get('cwd')}  provider {record.get('provider')}",
    ]
    parent = record.get("parent")
    if isinstance(parent, Mapping):
        lines.append(f"  forked from {parent.get('session_id')} at turn {parent.get('turn')}")
    owner = record.get("owner")
    if isinstance(owner, Mapping):
        lines.append(
            f"  subagent of {owner.get('session_id')} (tool call {owner.get('tool_call')})"
        )
    return lines


def _turn_kind(record: Record) -> str:
    again = record.get("regenerates")
    if again is not None:
        return f"  (regenerates turn {again})"
    if record.get("command"):
        return f"  (/{record['command']})"
    return ""


def _request_error(record: Record) -> str:
    error = record.get("error") or {}
    retry = ""
    if record.get("retrying"):
        delay = record.get("retry_delay")
        wait = f"{delay:.2f}s" if isinstance(delay, int | float) else "?"
        retry = f", retry {record.get('retry_attempt')} in {wait}"
    status = f" {error['status']}" if error.get("status") else ""
    return f"request error: {error.get('kind')}{status} {_quote(str(error.get('message')))}{retry}"


def _internal_error(record: Record) -> str:
    error = record.get("error") or {}
    return f"internal error: {error.get('exception')}: {error.get('message')}"


def _tool_call(record: Record) -> str:
    return f"tool {record.get('tool_call_id')} {record.get('name')}: {record.get('status')}"


def _tool_result(record: Record) -> str:
    state = "error" if record.get("is_error") else "ok"
    text = _quote(_blocks_text(record.get("content")))
    return f"result {record.get('tool_call_id')}: {state} {text}"


def _compaction(record: Record) -> str:
    status = record.get("status")
    head = f"compaction {record.get('compaction_id')} ({record.get('trigger')}): {status}"
    if status == "in_progress":
        return f"{head}, about {record.get('tokens_before')} tokens"
    if status == "completed":
        return (
            f"{head}: {record.get('replaced')} message(s) summarized, about "
            f"{record.get('tokens_after')} tokens now; verbatim from record "
            f"{record.get('kept_from')}, pinned {record.get('pinned')}; summary "
            f"{_quote(str(record.get('summary')))}"
        )
    if status == "failed":
        error = record.get("error") or {}
        return f"{head}: {error.get('kind')} {_quote(str(error.get('message')))}"
    return head


def _client_prompt(record: Record) -> str:
    text = _quote(_blocks_text(record.get("content")))
    return f"the editor's system prompt ({record.get('mode')}): {text}"


_DETAILS: dict[str, Callable[[Record], str]] = {
    "session/system_prompt": _client_prompt,
    "agent/request-error": _request_error,
    "compaction": _compaction,
    "agent/internal-error": _internal_error,
    "tool/call": _tool_call,
    "tool/result": _tool_result,
}


def _message_line(record: Record) -> str:
    parts = []
    for block in record.get("content") or ():
        if block.get("type") in ("text", "reasoning"):
            parts.append(f"{block['type']} {_quote(block.get('text', ''))}")
        elif block.get("type") == "tool_call":
            parts.append(f"tool call {block.get('id')} {block.get('name')}")
    if record.get("recovered"):
        label = f"message, interrupted: the agent {record['recovered']}"
    elif record.get("interrupted"):
        label = "message, interrupted by Stop"
    else:
        label = f"message ({record.get('finish')})"
    return f"{label}: " + "; ".join(parts)


def _blocks_text(blocks: object) -> str:
    if not isinstance(blocks, list):
        return ""
    out = []
    for block in blocks:
        if isinstance(block, Mapping):
            out.append(
                str(
                    block.get("text")
                    or block.get("uri")
                    or block.get("name")
                    or f"[{block.get('type')}]"
                )
            )
    return " ".join(out)


def _quote(text: str, limit: int = 72) -> str:
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return f'"{flat}"'


def _local_time(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M:%S")


def _size(size: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if size < 1024 or unit == "MiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    return f"{size} B"
