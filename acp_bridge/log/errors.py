"""The error a log file that cannot be read raises, shared by every reader, and the
name of a JSON value's kind that error messages use (here and in the JSON-RPC
parser and the permission answers)."""

from __future__ import annotations

import os

__all__ = ["LogCorrupt", "json_kind"]


class LogCorrupt(Exception):
    """A line of a log file, other than a torn final line, is not a valid record.

    ``field`` is the path of the bad field inside the record (``parts[0][1]``),
    or ``None`` when the line as a whole is bad.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        line_no: int,
        reason: str,
        field: str | None = None,
    ) -> None:
        where = f"{os.fspath(path)}:{line_no}"
        super().__init__(f"{where}: {field}: {reason}" if field else f"{where}: {reason}")
        self.path = os.fspath(path)
        self.line_no = line_no
        self.reason = reason
        self.field = field


def json_kind(value: object) -> str:
    """What kind of JSON value ``value`` is, for an error message."""
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return "a number"
    return f"a {type(value).__name__}"
