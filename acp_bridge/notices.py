"""Notices: short messages for the user about the session, not the conversation.

`notify` is the one way to tell the user that something went wrong or is being
worked around (a retry, a failed compaction, a log that cannot be written, an
MCP server that failed).  A client that advertised
``clientCapabilities.session.notices`` gets ACP's ``notice`` update
(``severity``, ``title``, ``description``); any other client gets an
``agent_thought_chunk`` marked ``_meta.acpBridge.notice`` (never reasoning: it
does not enter the model's history), unless the caller says there is no
fallback.  Notices are live only: ``session/load`` does not replay them (the
thought-chunk fallbacks of retries and compactions are replayed for clients
without notices, as they were shown).

The caller picks the moment: inside a turn, before its answer (invariant I1);
outside a turn, whenever the session is open.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from .redact import SECRETS
from .update_builders import notice_update, text_chunk

if TYPE_CHECKING:
    from .loop.session_core import SessionCore as Session

__all__ = ["notify", "wants_notices"]

Severity = Literal["info", "warning", "error"]


def wants_notices(client_capabilities: object) -> bool:
    """Whether ``initialize``'s client capabilities advertise ``session.notices``."""
    if not isinstance(client_capabilities, Mapping):
        return False
    session = client_capabilities.get("session")
    return isinstance(session, Mapping) and isinstance(session.get("notices"), Mapping)


def fallback_update(title: str, description: str | None = None) -> dict[str, Any]:
    """What a client without notices is shown: a thought chunk marked as a notice."""
    return text_chunk("agent_thought_chunk", description or title, meta={"notice": True})


def notify(
    session: Session,
    severity: Severity,
    title: str,
    description: str | None = None,
    *,
    fallback: bool = True,
) -> None:
    """Tell the user of ``session``: a ``notice`` when its client opted in, else
    (with ``fallback``) a thought chunk holding ``description`` (or ``title``)."""
    # What a notice says may quote a provider's or a server's text.
    title = SECRETS.text(title)
    description = None if description is None else SECRETS.text(description)
    if session.context.notices:
        update = notice_update(severity, title.strip() or "Notice", description)
    elif fallback:
        update = fallback_update(title, description)
    else:
        return
    session.outbox.send(session.frames.update(update))
