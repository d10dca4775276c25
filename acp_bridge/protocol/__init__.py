"""The protocol edge: what of the bridge is the wire shape of one ACP version.

A connection speaks one dialect, chosen at ``initialize`` from the version the
client asks for (`negotiate`).  The dialect answers the requests, serializes a
session's updates (`Dialect.session_frames`), puts a turn's end on the wire
(`Dialect.answer_turn`) and replays a stored session (`Dialect.replay_frames`).
The engine below it (turns, the log, tools, providers) never imports this
package: a session is handed its dialect's frames when it is made.

v1 (`acp_bridge.protocol.v1`) is the only dialect so far.
"""

from __future__ import annotations

from .dialect import Dialect
from .v1 import V1

__all__ = ["V1", "Dialect", "negotiate"]


def negotiate(requested: int) -> Dialect:
    """The dialect of a connection whose client asked for protocol ``requested``:
    that version if we speak it, else our latest (the client then decides
    whether it can go on).  Only v1 so far."""
    del requested
    return V1
