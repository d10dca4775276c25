"""A whole session as data a snapshot can hold: the wire both ways, normalized.

`transcript_snapshot(agent)` returns ``{"wire": [[direction, message], ...]}``
(``"send"``: the editor to the agent, ``"recv"``: the agent to the editor,
``"close"``: the editor closed the agent's stdin), with acp-bridge's ids, the
times of log records, ISO time stamps and the test's folders replaced by
stable placeholders (`acp_bridge.testing.normalize`), the agent's version
blanked, and the kit's barrier requests (`Agent.settle`) left out.  With
``logs=True`` it adds acp-bridge's event log of each session (stream deltas
coalesced), with ``history=True`` the model history derived from each log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .agent import Agent
from .normalize import TIME_KEYS, coalesce_deltas, normalize

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
    out: Json = normalize(data, paths=ordered, times=SNAPSHOT_TIME_KEYS, stamps=SNAPSHOT_STAMP_KEYS)
    for _, msg in out["wire"]:
        result = msg.get("result") if isinstance(msg, dict) else None
        info = result.get("agentInfo") if isinstance(result, dict) else None
        if isinstance(info, dict) and "version" in info:
            info["version"] = "<version>"
    return out


__all__ = ["SNAPSHOT_STAMP_KEYS", "SNAPSHOT_TIME_KEYS", "folders", "transcript_snapshot", "wire"]
