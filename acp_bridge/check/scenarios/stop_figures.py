"""The Stop measured: what each Stop of a run cost, and the report's ``"stop"`` object.

Each Stop the Stop scenarios make is one sample (`measure`): the time from the
``session/cancel`` to the prompt's response, the chunks the agent still sent
between them (what the editor had to render after the user pressed Stop) and
the conversation updates after the response (cancel leaks: ACP says there are
none).  A Stop whose prompt was answered before the cancel went out is not a
sample: nothing was stopped.  `summary` is the ``"stop"`` object of the report.
"""

from __future__ import annotations

from typing import Any

from ...testing.agent import Agent
from ..run import CheckRun
from .frames import CONVERSATION, index_of, is_chunk, ms_between, sent_index, updates_between

Json = dict[str, Any]


def measure(
    run: CheckRun,
    agent: Agent,
    session_id: str,
    stop_at: int,
    response: Json | None,
    scenario: str,
) -> None:
    """Record the Stop whose ``session/cancel`` was sent from transcript index
    ``stop_at`` on and whose prompt was answered ``response`` (None: never); call it
    after the barrier that follows the response.  A Stop whose cancel was not sent,
    or whose prompt was answered before it, stopped nothing: no sample."""
    cancel = sent_index(agent, "session/cancel", stop_at)
    if not cancel:
        return
    cancel_at = cancel[0]
    answered = index_of(agent, response or None)
    if not answered:
        sample: Json = {"scenario": scenario, "answered": False}
    elif answered[0] < cancel_at:
        return
    else:
        response_at = answered[0]
        between = updates_between(agent, session_id, cancel_at, response_at)
        late = updates_between(agent, session_id, response_at + 1, kinds=CONVERSATION)
        sample = {
            "scenario": scenario,
            "answered": True,
            "stop_to_response_ms": ms_between(agent, cancel_at, response_at),
            "chunks_after_cancel": sum(1 for i in between if is_chunk(agent, i)),
            "updates_after_response": len(late),
        }
    run.stop_samples.append(sample)


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values`` (not empty)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def summary(run: CheckRun) -> Json:
    """The report's ``"stop"`` object."""
    samples = run.stop_samples
    answered = [s for s in samples if s["answered"]]
    out: Json = {"stops": len(samples), "unanswered": len(samples) - len(answered)}
    if answered:
        ms = [float(s["stop_to_response_ms"]) for s in answered]
        chunks = [float(s["chunks_after_cancel"]) for s in answered]
        out["stop_to_response_ms"] = {
            "p50": percentile(ms, 50),
            "p90": percentile(ms, 90),
            "p99": percentile(ms, 99),
            "max": max(ms),
        }
        out["chunks_after_cancel"] = {"p50": percentile(chunks, 50), "p99": percentile(chunks, 99)}
    else:
        out["stop_to_response_ms"] = None
        out["chunks_after_cancel"] = None
    leaks = [int(s.get("updates_after_response", 0)) for s in samples]
    out["updates_after_response"] = {"total": sum(leaks), "per_stop": leaks}
    out["disconnect"] = run.disconnect or {"observed": "not exercised"}
    return out


__all__ = ["measure", "percentile", "summary"]
