"""The system prompt an editor gives a session, kept in its log.

ACP's ``systemPrompt`` (on session/new, load, resume and fork) is validated by
`acp_bridge.acp.params.system_prompt`; `keep` writes it to the log as a
``session/system_prompt`` record, and `restore` finds the one in force when
the log is opened again: a load, resume or fork without ``systemPrompt``
keeps it, one with a new value replaces it from the next request on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ..context.system_prompt import CLIENT_PROMPT_MODES, ClientPrompt

if TYPE_CHECKING:
    from ..loop.session import Session

__all__ = ["CLIENT_PROMPT_TYPE", "keep", "record_fields", "restore"]

CLIENT_PROMPT_TYPE: Final = "session/system_prompt"


def record_fields(sent: Mapping[str, Any]) -> dict[str, Any]:
    """The record's fields for a ``systemPrompt`` the params check accepted."""
    return {"mode": sent["mode"], "content": [dict(block) for block in sent["content"]]}


def keep(session: Session, sent: Mapping[str, Any]) -> None:
    """Write what the editor sent to the session's log (in force from the next request)."""
    session.log.append(CLIENT_PROMPT_TYPE, 0, 0, **record_fields(sent))


def restore(records: Iterable[Mapping[str, Any]]) -> ClientPrompt | None:
    """The editor's system prompt in force after ``records``: the last one kept."""
    last: Mapping[str, Any] | None = None
    for record in records:
        if record.get("type") == CLIENT_PROMPT_TYPE:
            last = record
    if last is None or last.get("mode") not in CLIENT_PROMPT_MODES:
        return None
    texts = [b.get("text") for b in last.get("content") or () if isinstance(b, Mapping)]
    return ClientPrompt(str(last["mode"]), "\n\n".join(t for t in texts if isinstance(t, str)))
