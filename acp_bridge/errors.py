"""The errors a request of the editor can end with, in the bridge's own terms.

Code below the protocol edge raises these and knows nothing of JSON-RPC;
`acp_bridge.acp.edge.to_rpc_error` is the one place that turns each into its
error code, message and ``data`` on the wire.  The tree::

    BridgeError
     ├── NoProvider              no model provider can start
     │    ├── AuthNeeded         ... until the user sets one up (-32000)
     │    └── StartupFailed      ... because the configuration cannot work
     ├── SessionError            about one session
     │    ├── SessionBusy        a reply is streaming or a prompt is waiting
     │    ├── SessionLockedElsewhere  another process holds its log
     │    └── NothingToRegenerate
     ├── LogError                about one session's log file
     │    ├── LogNotCreated      a new session's log cannot be created
     │    ├── LogNotLocked       its lock cannot be taken (not held elsewhere)
     │    ├── LogDamaged         a line of it cannot be read
     │    └── LogNotWritable     its records cannot be written now
     └── TurnFailed             a turn ended by a failure (the model's or ours)
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AuthNeeded",
    "BridgeError",
    "LogDamaged",
    "LogError",
    "LogNotCreated",
    "LogNotLocked",
    "LogNotWritable",
    "NoProvider",
    "NothingToRegenerate",
    "SessionBusy",
    "SessionError",
    "SessionLockedElsewhere",
    "StartupFailed",
    "TurnFailed",
]


class BridgeError(Exception):
    """Ends the request it happens in; the editor is told why."""


class NoProvider(BridgeError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class AuthNeeded(NoProvider):
    """No key, profile or stored setup: ``reason`` says how to set one up."""


class StartupFailed(NoProvider):
    """The provider's configuration cannot work (a bad script, say)."""


class SessionError(BridgeError):
    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.session_id = session_id


class SessionBusy(SessionError):
    """The session cannot be ``what`` (loaded again, regenerated) right now."""

    def __init__(self, session_id: str, what: str) -> None:
        super().__init__(session_id)
        self.what = what


class SessionLockedElsewhere(SessionError):
    """Another acp-bridge process (pid ``holder``, "" if unknown) has the session open."""

    def __init__(self, session_id: str, holder: str) -> None:
        super().__init__(session_id)
        self.holder = holder


class NothingToRegenerate(SessionError):
    """The session has no message of the user's yet."""


class LogError(BridgeError):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class LogNotCreated(LogError):
    pass


class LogNotLocked(LogError):
    pass


class LogDamaged(LogError):
    """Line ``line`` of the log cannot be read; ``loading``: it was being opened."""

    def __init__(self, path: str, reason: str, line: int | None, *, loading: bool) -> None:
        super().__init__(path, reason)
        self.line = line
        self.loading = loading


class LogNotWritable(LogError):
    """The log cannot take the records of a new turn: ``lost`` when the file is
    gone for good, else for now (a full disk); ``pending`` bytes wait for it."""

    def __init__(self, path: str, reason: str, pending: int, *, lost: bool) -> None:
        super().__init__(path, reason)
        self.pending = pending
        self.lost = lost


class TurnFailed(BridgeError):
    """A turn ended by a failure: ``message`` for the editor, ``data`` the details
    (``kind`` ``internal`` for our own bug, else the provider error's fields)."""

    def __init__(self, message: str, data: dict[str, Any]) -> None:
        super().__init__(message)
        self.message = message
        self.data = data
