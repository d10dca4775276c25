"""A whole session as data a snapshot can hold: the wire both ways, normalized.

`transcript_snapshot(agent)` returns ``{"wire": [[direction, message], ...]}``
(``"send"``: the editor to the agent, ``"recv"``: the agent to the editor,
``"close"``: the editor closed the agent's stdin), with acp-bridge's ids, the
times of log records, ISO time stamps and the test's folders replaced by
stable placeholders (`acp_bridge.testing.normalize`; any agent's session
ids too, whatever their shape, see `session_ids`), the agent's version
blanked, and the kit's barrier requests (`Agent.settle`) left out.  With
``logs=True`` it adds acp-bridge's event log of each session (stream deltas
coalesced), with ``history=True`` the model history derived from each log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .agent import Agent
from .normalize import ID_PATTERNS, TIME_KEYS, coalesce_deltas, normalize

Json = dict[str, Any]

SNAPSHOT_TIME_KEYS: frozenset[str] = TIME_KEYS | {"duration_ms", "elapsed_ms", "latency_ms"}
"""Keys whose number is a time or a duration: 0 in a snapshot."""

SNAPSHOT_STAMP_KEYS: frozenset[str] = frozenset({"updatedAt"})
"""Keys whose string is a time stamp: ``"<time>"`` in a snapshot."""


def folders(agent: Agent) -> dict[str, str]:
    """The agent's folders and their placeholders: its state folder, the workspace
    and the test's temporary folder."""
    out: dict[str, str] = {}
    if agent.state_dir is not None:
        out[str(agent.state_dir)] = "<state>"
    out[str(agent.workspace)] = "<workspace>"
    if agent.tmp is not None:
        out[str(agent.tmp)] = "<tmp>"
    return out


def wire(agent: Agent) -> list[list[Any]]:
    """The transcript as ``[direction, message]`` pairs, barrier requests left out."""
    return [
        [direction, msg]
        for direction, msg in agent.transcript
        if not (isinstance(msg, dict) and msg.get("id") in agent.barrier_ids)
    ]


def session_ids(messages: Iterable[Any]) -> list[str]:
    """Every session id of the wire, in order of appearance: the ``sessionId`` of
    each message's params and result (``session/new``, ``load``, ``fork``, updates)
    and of each entry of a ``session/list`` answer."""
    ids: dict[str, None] = {}

    def add(holder: Any) -> None:
        if isinstance(holder, dict) and isinstance(holder.get("sessionId"), str):
            ids.setdefault(holder["sessionId"], None)

    for msg in messages:
        if not isinstance(msg, dict):
            continue
        for part in (msg.get("params"), msg.get("result")):
            add(part)
            listed = part.get("sessions") if isinstance(part, dict) else None
            for entry in listed if isinstance(listed, list) else ():
                add(entry)
    return list(ids)


def session_id_pattern(ids: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern for the session ids that acp-bridge's own pattern does not cover
    (an agent's UUIDs, say), longest first, matched only where no letter, digit,
    ``_`` or ``-`` touches them (so an id is not found inside a longer word)."""
    own = ID_PATTERNS[0][0]
    others = sorted((i for i in ids if i and not own.fullmatch(i)), key=len, reverse=True)
    if not others:
        return None
    alternatives = "|".join(re.escape(i) for i in others)
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])")


def transcript_snapshot(
    agent: Agent,
    *,
    logs: bool = False,
    history: bool = False,
    paths: Mapping[str, str] | None = None,
) -> Json:
    """The session as normalized data (see the module docstring).

    ``paths`` maps more strings to placeholders (a fixed cwd, a home folder);
    all of them and the agent's `folders` are replaced longest first.
    """
    data: Json = {"wire": wire(agent)}
    if logs or history:
        records = agent.logs()
        if logs:
            data["logs"] = [coalesce_deltas(r) for r in records.values()]
        if history:
            from ..log.derive import derive_messages

            data["history"] = [derive_messages(r) for r in records.values()]
    mapping = {**folders(agent), **(paths or {})}
    ordered = dict(sorted(mapping.items(), key=lambda item: -len(item[0])))
    ids = list(ID_PATTERNS)
    agents_ids = session_id_pattern(session_ids(msg for _, msg in data["wire"]))
    if agents_ids is not None:
        ids.insert(1, (agents_ids, "sess"))  # numbered with acp-bridge's own: <sess-N>
    out: Json = normalize(
        data, paths=ordered, ids=ids, times=SNAPSHOT_TIME_KEYS, stamps=SNAPSHOT_STAMP_KEYS
    )
    for _, msg in out["wire"]:
        result = msg.get("result") if isinstance(msg, dict) else None
        info = result.get("agentInfo") if isinstance(result, dict) else None
        if isinstance(info, dict) and "version" in info:
            info["version"] = "<version>"
    return out


__all__ = [
    "SNAPSHOT_STAMP_KEYS",
    "SNAPSHOT_TIME_KEYS",
    "folders",
    "session_id_pattern",
    "session_ids",
    "transcript_snapshot",
    "wire",
]
