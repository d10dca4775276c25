"""The protocol edge: what of the bridge is the wire shape of one ACP version.

A connection speaks one dialect, chosen at ``initialize`` from the version the
client asks for (`negotiate`).  The dialect answers the requests, serializes a
session's updates (`Dialect.session_frames`), puts a turn's end on the wire
(`Dialect.answer_turn`) and replays a stored session (`Dialect.replay_frames`).
The engine below it (turns, the log, tools, providers) never imports this
package: a session is handed its dialect's frames when it is made.

v1 (`acp_bridge.protocol.v1`) is every client's that does not ask for 2;
v2 (`acp_bridge.protocol.v2`), the Preview, is a client's that asks for it,
unless the server was started with ``--protocol 1``.
"""

from __future__ import annotations

from .dialect import Dialect
from .v1 import V1
from .v2 import V2

__all__ = ["V1", "V2", "Dialect", "negotiate"]


def negotiate(requested: int, latest: int = 2) -> Dialect:
    """The dialect of a connection whose client asked for protocol ``requested``:
    v2 when asked for exactly that and ``latest`` allows it, else v1 (the
    client then decides whether it can go on)."""
    return V2 if requested == 2 and latest >= 2 else V1
