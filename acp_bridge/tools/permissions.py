"""Whether a tool call may run: the mode, remembered choices, and asking the user.

The decision for one call, in order:

1. read-only mode refuses every tool that is not ``read_only``;
2. a call touching a path outside the session's directories asks, every time
   (an "always" answer is not remembered for such a call);
3. a remembered "reject always" for the tool refuses it without asking; a
   remembered "allow always" runs it;
4. ``read_only`` tools run; in accept-edits mode, ``edit`` tools run;
5. anything else asks with ``session/request_permission``.

The user's answer: allow once / allow always / reject once / reject always.
"Always" answers are remembered per tool name for the session, in the
session log (``permission/rule`` records).  A rejection, a dismissal (the
editor answers ``cancelled`` or an error outside a Stop) becomes the call's
result: the user declined, do not retry the same call.  An answer that is
not one of the offered options (an ``allow_always`` where only allow once
was offered, an unknown id, a malformed outcome) is a dismissal, and stderr
says what was wrong with it.
"""

from __future__ import annotations

from typing import Any, Final

from ..log.errors import json_kind

ALLOW_ONCE: Final = "allow_once"
ALLOW_ALWAYS: Final = "allow_always"
REJECT_ONCE: Final = "reject_once"
REJECT_ALWAYS: Final = "reject_always"

OPTIONS: Final = [
    {"optionId": ALLOW_ONCE, "name": "Allow once", "kind": ALLOW_ONCE},
    {"optionId": ALLOW_ALWAYS, "name": "Always allow", "kind": ALLOW_ALWAYS},
    {"optionId": REJECT_ONCE, "name": "Reject", "kind": REJECT_ONCE},
    {"optionId": REJECT_ALWAYS, "name": "Always reject", "kind": REJECT_ALWAYS},
]
OUTSIDE_OPTIONS: Final = [OPTIONS[0], OPTIONS[2]]

RUN: Final = "run"
ASK: Final = "ask"
REFUSE_MODE: Final = "refuse_mode"
REFUSE_REMEMBERED: Final = "refuse_remembered"


def decide(*, mode: str, kind: str, read_only: bool, outside: bool, remembered: str | None) -> str:
    if mode == "read_only" and not read_only:
        return REFUSE_MODE
    if outside:
        return ASK
    if remembered == REJECT_ALWAYS:
        return REFUSE_REMEMBERED
    if remembered == ALLOW_ALWAYS or read_only:
        return RUN
    if mode == "accept_edits" and kind == "edit":
        return RUN
    return ASK


def chosen(result: Any, offered: list[dict[str, Any]]) -> tuple[str | None, str | None]:
    """The option the user chose, from a ``session/request_permission`` result,
    and what was wrong with the answer.  The option is None for a dismissal
    (``cancelled``) and for any answer that is not one of the ``offered``
    options: an unknown or unoffered ``optionId`` is never taken as allow."""
    if not isinstance(result, dict):
        return None, f"the result is {json_kind(result)}, not an object"
    if "outcome" not in result:
        return None, "the result has no 'outcome'"
    outcome = result["outcome"]
    if not isinstance(outcome, dict):
        return None, f"'outcome' is {json_kind(outcome)}, not an object"
    kind = outcome.get("outcome")
    if kind == "cancelled":
        return None, None
    if kind != "selected":
        return None, f"'outcome.outcome' is {_shown(kind)}, not 'selected' or 'cancelled'"
    option = outcome.get("optionId")
    if not isinstance(option, str):
        return None, f"'outcome.optionId' is {json_kind(option)}, not a string"
    ids = [o["optionId"] for o in offered]
    if option not in ids:
        return None, f"option {_shown(option)} was not offered (offered: {', '.join(ids)})"
    return option, None


def _shown(value: Any) -> str:
    """A value of the editor's answer, short enough for a log line."""
    text = repr(value) if isinstance(value, str) else json_kind(value)
    return text if len(text) <= 60 else text[:57] + "..."


def declined_text(name: str, why: str) -> str:
    return (
        f"The user declined this {name} call ({why}). It did not run. "
        "Do not retry the same call: consider why the user declined and adjust your approach, "
        "or ask the user."
    )


def read_only_text(name: str) -> str:
    return (
        f"{name} is not allowed: the session is in read-only mode, so nothing may be changed "
        "and no command may be run. It did not run. Do not retry it; tell the user what you "
        "would change, or ask them to switch the mode."
    )


def outside_text(paths: list[str]) -> str:
    return "outside the session's directories: " + ", ".join(paths)
