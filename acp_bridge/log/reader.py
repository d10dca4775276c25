"""Reading a session's event log back from disk.

A log file is append-only JSONL (see `acp_bridge.log.records`).  A crash in
the middle of an append can leave a *torn* final line: bytes with no trailing
newline, or a last line that does not parse.  That line never completed, so
it is ignored.  Any other bad line means the file was damaged or written by
something else, and reading it raises `LogCorrupt`: silently skipping a
record in the middle would change the history the model sees.

`read_records` checks what every record must have (a version it can upcast
to today's, a contiguous ``seq``, a string ``type``); that is what the writer
needs.  It reads through the one reader, `acp_bridge.log.upcast.load_log`, so a
log of an older format version comes back upcast; unlike `load_log` it keeps
records of types this version does not know.  A
reader that goes on to *use* the fields (``acp-bridge history``) calls
`read_valid_records`, which also checks each known record's fields against
its open model (`acp_bridge.log.records.read`, derived from the closed
models the schema is generated from) and reports the first bad one as
``file:line: field: reason``.  A record of a type it does not know is skipped
with a warning, so a log written by a newer version stays readable.

This module is imported at process start, so it depends on orjson only; the
pydantic models are imported when `read_valid_records` is first called.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final

from .errors import LogCorrupt, json_kind
from .upcast import load_log

__all__ = [
    "LogCorrupt",
    "iter_session_files",
    "read_records",
    "read_valid_records",
    "session_path",
    "validate_records",
    "validate_session_id",
]

log = logging.getLogger("acp_bridge.log")

SESSIONS_DIR: Final = "sessions"
LOG_SUFFIX: Final = ".jsonl"

# Letters, digits, ``_``, ``-`` and ``.``; not starting with a dot, so ``.``,
# ``..`` and hidden files are excluded; short enough that the file name stays
# well under the usual 255-byte limit.
_SESSION_ID: Final = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}")


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a log file, in order, without a torn final line.

    Records of an older format version are upcast to today's.  Raises
    `LogCorrupt` for any other bad line, a ``seq`` that is not contiguous
    from 0, or a format version ``v`` that cannot be upcast; raises `OSError`
    (e.g. `FileNotFoundError`) if the file cannot be read.
    """
    return load_log(path, keep_unknown=True).records


def read_valid_records(
    path: str | os.PathLike[str], *, warn: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """`read_records`, then `validate_records`: the records a history can be derived from."""
    return validate_records(read_records(path), path, warn=warn)


def validate_records(
    records: Sequence[dict[str, Any]],
    path: str | os.PathLike[str] = "<records>",
    *,
    warn: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """Check each record's fields against its model; return the records of known types.

    ``records`` are as `read_records` or `load_log` return them (a record's
    line in ``path`` is its ``seq`` + 1: records of unknown types that
    `load_log` left out still took their lines).  Raises `LogCorrupt` naming
    the line and the field
    of the first bad record.  Records of a type with no model are left out of
    the result and reported once per type through ``warn`` (by default a
    warning on the ``acp_bridge.log`` logger).  The records themselves are
    returned unchanged (the same dicts, extra fields included).
    """
    from pydantic import ValidationError

    from .records.read import model_for

    kept: list[dict[str, Any]] = []
    unknown: dict[str, int] = {}
    for index, record in enumerate(records):
        record_type = record.get("type")
        model = model_for(record_type) if isinstance(record_type, str) else None
        if model is None:
            unknown[str(record_type)] = unknown.get(str(record_type), 0) + 1
            continue
        try:
            model.model_validate(record)
        except ValidationError as exc:
            field, reason = _first_error(exc)
            seq = record.get("seq")
            line_no = seq + 1 if type(seq) is int else index + 1
            raise LogCorrupt(
                path, line_no, f"{reason} (record type {record_type})", field
            ) from None
        kept.append(record)
    for record_type, count in unknown.items():
        message = (
            f"{os.fspath(path)}: skipped {count} record(s) of unknown type {record_type!r} "
            "(written by a newer acp-bridge?)"
        )
        (warn or log.warning)(message)
    return kept


def _first_error(exc: Any) -> tuple[str, str]:
    """The field path and a short reason of a pydantic `ValidationError`."""
    error = exc.errors(include_url=False)[0]
    field = ""
    for part in error["loc"]:
        if isinstance(part, int):
            field += f"[{part}]"
        else:
            field += f".{part}" if field else str(part)
    if error["type"] == "missing":
        return field, "missing"
    got = json_kind(error.get("input"))
    return field, f"{error['msg'][0].lower()}{error['msg'][1:]}, got {got}"


# -- where sessions live ------------------------------------------------------


def validate_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is safe as a file name; raise `ValueError` if not.

    A valid id is 1 to 128 characters from ``[A-Za-z0-9_.-]`` and does not
    start with a dot, so it can never name another directory.
    """
    if not isinstance(session_id, str) or _SESSION_ID.fullmatch(session_id) is None:
        raise ValueError(f"invalid session id: {session_id!r}")
    return session_id


def session_path(state_dir: str | os.PathLike[str], session_id: str) -> str:
    """The log file of a session: ``<state_dir>/sessions/<session_id>.jsonl``.

    Raises `ValueError` for an unsafe session id (see `validate_session_id`).
    """
    name = validate_session_id(session_id) + LOG_SUFFIX
    return os.path.join(os.fspath(state_dir), SESSIONS_DIR, name)


def iter_session_files(state_dir: str | os.PathLike[str]) -> Iterator[str]:
    """The session log files under ``state_dir``, sorted by name.

    Files whose name is not ``<valid session id>.jsonl`` are skipped; a
    missing ``sessions`` directory yields nothing.  The session id of a path
    is its base name without the ``.jsonl`` suffix.
    """
    directory = os.path.join(os.fspath(state_dir), SESSIONS_DIR)
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except FileNotFoundError:
        return
    for entry in entries:
        stem, suffix = entry.name[: -len(LOG_SUFFIX)], entry.name[-len(LOG_SUFFIX) :]
        if suffix == LOG_SUFFIX and _SESSION_ID.fullmatch(stem) and entry.is_file():
            yield entry.path
