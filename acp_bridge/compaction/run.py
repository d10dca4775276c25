"""Compaction inside a turn: the summary request, its records and what the editor is shown.

`compact` runs one compaction for a turn in state COMPACTING (see
`acp_bridge.loop.turn`): it plans it (`acp_bridge.compaction.plan`), logs
``compaction {status: in_progress}``, sends the summary request (its own
attempt id; never streamed to the editor; ``metadata.purpose`` is
``"compaction"``, so the scripted provider answers it from its script's
``compaction``), and logs the outcome:

* ``completed`` with the summary and what it kept: from the next request on,
  the model history is the summary and the kept messages
  (`acp_bridge.log.derive.compacted_records`); a ``usage_update`` gives the
  estimated size of the history after it;
* ``failed`` with the provider's error (the history is unchanged);
* ``cancelled``, written by the turn's ending when a Stop cancels the request
  (`acp_bridge.loop.ending.record_stop`): the history is unchanged.

The editor sees `acp_bridge.compaction.shown.compaction_updates` of each record
(`acp_bridge.compaction.shown.show`).
A provider error does not end the turn here: the caller decides.  What this
module needs of the turn is `CompactingTurn` (it never imports the turn).
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio

from ..context.estimate import estimate_json, estimate_request
from ..loop.lifecycle import TurnConfig
from ..loop.recorder import TurnRecorder, usage_record
from ..providers.base import (
    ModelRequest,
    ProviderError,
    Retrying,
    StreamIdleTimeout,
    TextDelta,
    Usage,
)
from .plan import KEEP_FRACTION, plan_compaction, summary_messages
from .shown import OpenCompaction, Shows, show

if TYPE_CHECKING:
    from ..context.windows import ModelInfo

__all__ = ["CompactingTurn", "compact"]

log = logging.getLogger("acp_bridge.turn")

PURPOSE: Final = "compaction"
EMPTY_SUMMARY: Final = "the model answered the summary request with no text"


class CompactingTurn(Shows, Protocol):
    """What a compaction uses of the turn it runs in."""

    open_compaction: OpenCompaction | None

    @property
    def number(self) -> int: ...

    @property
    def config(self) -> TurnConfig: ...

    @property
    def rec(self) -> TurnRecorder: ...

    @property
    def info(self) -> ModelInfo | None: ...

    @property
    def system(self) -> str | None: ...

    def show_context_usage(self, used: int, input_tokens: int, output_tokens: int) -> None: ...


@dataclass(frozen=True, slots=True)
class Outcome:
    """``completed``, ``failed`` (with ``error``) or ``nothing`` (nothing to compact)."""

    status: str
    error: ProviderError | None = None


async def compact(turn: CompactingTurn, trigger: str, instructions: str | None = None) -> Outcome:
    """Compact the session's history now (see the module docstring)."""
    session = turn.session
    assert turn.info is not None
    tools = session.tools.registry.specs()
    window = session.context.window(turn.info)
    # A quarter of the history stays verbatim, at most a quarter of the window
    # (estimates can be far off when the provider refused a request as too long).
    messages = list(session.history())
    history = estimate_json(messages)
    keep = 0 if trigger == "command" else int(min(window, history) * KEEP_FRACTION)
    projection = session.log.history
    plan = plan_compaction(
        projection.surface(),
        keep_tokens=keep,
        keep_prompt=trigger != "command",
        current=len(messages),
    )
    if plan is None:
        return Outcome("nothing")
    before = session.context.estimate.request_tokens(session.history(), turn.system, tools)
    opened = OpenCompaction("cmp_" + uuid.uuid4().hex[:16], "att_" + uuid.uuid4().hex[:16], trigger)
    fields: dict[str, Any] = {
        "compaction_id": opened.compaction_id,
        "attempt": opened.attempt,
        "trigger": trigger,
    }
    extra = {"instructions": instructions} if instructions else {}
    start = turn.rec.compaction(status="in_progress", tokens_before=before, **fields, **extra)
    turn.open_compaction = opened
    show(turn, start)
    request = ModelRequest(
        messages=summary_messages(plan.summarized, instructions),
        tools=tools,
        system=turn.system,
        metadata={"purpose": PURPOSE, "compaction_id": opened.compaction_id},
    )
    try:
        summary, usage = await _summarize(turn, request)
        if not summary.strip():
            raise ProviderError(EMPTY_SUMMARY, kind="empty_summary")
    except ProviderError as exc:
        turn.open_compaction = None
        log.info("turn %d: compaction %s failed: %s", turn.number, opened.compaction_id, exc.kind)
        show(turn, turn.rec.compaction(status="failed", error=exc.to_record(), **fields))
        return Outcome("failed", exc)
    kept_from = start.get("seq", 0) if plan.kept_from is None else plan.kept_from
    done_fields: dict[str, Any] = {
        "status": "completed",
        "summary": summary.strip(),
        "kept_from": kept_from,
        "pinned": list(plan.pinned),
        "replaced": plan.replaced,
        "tokens_before": before,
    }
    # The history the compaction will leave, before it is logged.
    record = {"type": "compaction", "turn": 0, "step": 0, **done_fields}
    after = estimate_request(projection.messages_after(record), turn.system, tools)
    turn.open_compaction = None
    done = turn.rec.compaction(
        **fields, **done_fields, tokens_after=after, usage=usage_record(usage)
    )
    show(turn, done)
    # The history's new size; the summary request's tokens count for the cost.
    spent = (usage.input_tokens, usage.output_tokens) if usage is not None else (0, 0)
    turn.show_context_usage(after, *spent)
    return Outcome("completed")


async def _summarize(turn: CompactingTurn, request: ModelRequest) -> tuple[str, Usage | None]:
    """Send the summary request; its text, and its usage if reported."""
    texts: list[str] = []
    usage: Usage | None = None
    limit = turn.config.idle_timeout
    async with turn.session.provider.stream(request) as events:
        iterator = events.__aiter__()
        while True:
            with _idle(limit):
                try:
                    event = await iterator.__anext__()
                except StopAsyncIteration:
                    break
            if type(event) is TextDelta:
                texts.append(event.text)
            elif type(event) is Usage:
                usage = event
            elif type(event) is Retrying:
                log.info("turn %d: the summary request is retried", turn.number)
    return "".join(texts), usage


@contextlib.contextmanager
def _idle(limit: float | None) -> Iterator[None]:
    """No event for ``limit`` seconds is a stalled summary request."""
    try:
        with anyio.fail_after(limit):
            yield
    except TimeoutError:
        raise StreamIdleTimeout(limit or 0.0) from None
