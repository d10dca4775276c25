"""What a session is, from its log: title, cwd, last activity, turns, endings."""

from __future__ import annotations

import base64
import binascii
import datetime
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from ..log.reader import LOG_SUFFIX, iter_session_files
from ..log.replay import title_from_prompt

__all__ = [
    "ListPage",
    "SessionHead",
    "children_of",
    "iso_time",
    "list_sessions",
    "read_head",
    "title_of",
]

PAGE_SIZE: Final = 50


def title_of(records: Iterable[Mapping[str, Any]]) -> str | None:
    """The title of a session: from its first user message (None before one)."""
    for record in records:
        if record.get("type") == "user/message":
            blocks = record.get("prompt", record.get("content"))
            return title_from_prompt(blocks) if isinstance(blocks, list) else None
    return None


def iso_time(seconds: float) -> str:
    """ISO 8601 in UTC with milliseconds, e.g. ``2026-11-30T18:00:00.000Z``."""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class SessionHead:
    """What `session/list` shows of a session, read from the start of its log."""

    session_id: str
    cwd: str
    title: str | None
    updated_ns: int
    additional_directories: list[str] | None
    parent: dict[str, Any] | None
    # A subagent's parent session (``session/start.owner``): not listed itself.
    owner: str | None = None

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sessionId": self.session_id, "cwd": self.cwd}
        if self.additional_directories:
            out["additionalDirectories"] = self.additional_directories
        out["title"] = self.title
        out["updatedAt"] = iso_time(self.updated_ns / 1e9)
        if self.parent is not None:
            out["_meta"] = {"acpBridge": {"parent": self.parent}}
        return out


def read_head(path: str) -> SessionHead | None:
    """The session/start record and the first user message of a log; None if unreadable.

    Reads lines only up to the first user message, so listing many long
    sessions stays cheap.
    """
    try:
        stat = os.stat(path)
        with open(path, "rb") as file:
            first = file.readline()
            start = orjson.loads(first)
            if not isinstance(start, dict) or start.get("type") != "session/start":
                return None
            title = start.get("title") if isinstance(start.get("title"), str) else None
            if title is None:
                for line in file:
                    if b'"user/message"' not in line:
                        continue
                    try:
                        record = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        break  # a torn last line
                    if record.get("type") == "user/message":
                        title = title_of([record])
                        break
    except (OSError, orjson.JSONDecodeError):
        return None
    session_id = os.path.basename(path)[: -len(LOG_SUFFIX)]
    cwd = start.get("cwd")
    dirs = start.get("additional_directories")
    parent = start.get("parent")
    owner = start.get("owner")
    return SessionHead(
        session_id=session_id,
        cwd=cwd if isinstance(cwd, str) else "",
        title=title,
        updated_ns=stat.st_mtime_ns,
        additional_directories=dirs if isinstance(dirs, list) else None,
        parent=parent if isinstance(parent, dict) else None,
        owner=str(owner.get("session_id")) if isinstance(owner, dict) else None,
    )


def children_of(state_dir: str, session_id: str) -> list[str]:
    """The subagent sessions of ``session_id`` (``session/start.owner``), and
    theirs, deepest first: the order to delete them in."""
    owners: dict[str, list[str]] = {}
    for head in map(read_head, iter_session_files(state_dir)):
        if head is not None and head.owner is not None:
            owners.setdefault(head.owner, []).append(head.session_id)
    found: list[str] = []

    def add(owner: str) -> None:
        for child in sorted(owners.pop(owner, ())):  # popped: a loop in the links ends
            if child != session_id:  # a loop back to it: it is no child of its own
                add(child)
                found.append(child)

    add(session_id)
    return found


@dataclass(frozen=True, slots=True)
class ListPage:
    sessions: list[SessionHead]
    next_cursor: str | None


class BadCursor(ValueError):
    pass


def _encode_cursor(head: SessionHead) -> str:
    raw = orjson.dumps([head.updated_ns, head.session_id])
    return base64.urlsafe_b64encode(raw).decode()


def _decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        value = orjson.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (binascii.Error, ValueError, orjson.JSONDecodeError):
        raise BadCursor("not a cursor this agent returned") from None
    if (
        not isinstance(value, list)
        or len(value) != 2
        or type(value[0]) is not int
        or not isinstance(value[1], str)
    ):
        raise BadCursor("not a cursor this agent returned")
    return value[0], value[1]


def _order(head: SessionHead) -> tuple[int, str]:
    # Most recently updated first; ties by id, so the order is total.
    return (-head.updated_ns, head.session_id)


def list_sessions(
    state_dir: str,
    *,
    cwd: str | None = None,
    cursor: str | None = None,
    page_size: int = PAGE_SIZE,
) -> ListPage:
    """One page of stored sessions, newest first, optionally only those of ``cwd``.

    The cursor names the last session of the previous page (its time and
    id), so a session updated while the editor pages moves to the front
    instead of shifting every later page.  Raises `BadCursor`.
    """
    # A subagent's session is its parent's part, reached through it (the
    # parent's load announces it): the editor's list holds the parents.
    heads = [
        head
        for head in map(read_head, iter_session_files(state_dir))
        if head is not None and head.owner is None
    ]
    if cwd is not None:
        heads = [head for head in heads if head.cwd == cwd]
    heads.sort(key=_order)
    if cursor is not None:
        updated_ns, session_id = _decode_cursor(cursor)
        after = (-updated_ns, session_id)
        heads = [head for head in heads if _order(head) > after]
    page = heads[:page_size]
    more = len(heads) > page_size
    return ListPage(page, _encode_cursor(page[-1]) if more and page else None)
