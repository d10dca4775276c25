"""``--record FILE``: what a real provider streamed, as a script for ``--provider fake``.

Every model request of the process becomes one response of the script, in
order, with the exact chunking of the stream (each delta is one scripted
event), its usage and its finish.  A stream that was stopped ends in a hang
(so replaying the same Stop gives the same transcript), a failed one in its
error, an idle one in a stall.  Retried attempts are not part of it: they
never reached the editor.  Reasoning signatures are not kept (the script
format has no place for them, and they are never shown).  The file is
rewritten after each response (each response encoded once, on a line of
its own), so it is complete whenever the bridge stops.
No request content and no key is written: only what the model sent, with
the process's secrets redacted (`acp_bridge.redact`).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from typing import Any

from ..redact import SECRETS
from .base import (
    BlockEnd,
    Finish,
    ProviderError,
    ReasoningDelta,
    StreamEvent,
    StreamIdleTimeout,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)

__all__ = ["Recorder"]


class Recorder:
    """Collects the responses of every session of the process into one script."""

    def __init__(self, path: str, provider: str) -> None:
        self.path = path
        self.provider = provider
        # Each response so far, encoded once (a JSON object on one line).
        self._encoded: list[str] = []
        self._lock = threading.Lock()

    def response(self) -> RecordedResponse:
        return RecordedResponse(self)

    def _add(self, response: dict[str, Any]) -> None:
        with self._lock:
            # What the model sent may quote a secret (a tool result it was given).
            self._encoded.append(json.dumps(SECRETS.json(response), ensure_ascii=False))
            head = json.dumps(
                {
                    "description": f"recorded from --provider {self.provider}",
                    "when_exhausted": "error",
                },
                ensure_ascii=False,
            )
            text = head[:-1] + ',\n "responses": [\n' + ",\n".join(self._encoded) + "\n]}\n"
            directory = os.path.dirname(os.path.abspath(self.path))
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".record-")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self.path)


class RecordedResponse:
    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self._events: list[dict[str, Any]] = []
        self._finish: str | None = None
        self._ended = False

    def event(self, ev: StreamEvent) -> None:
        out = self._events
        if type(ev) is TextDelta:
            out.append({"text": ev.text})
        elif type(ev) is ReasoningDelta:
            out.append({"reasoning": ev.text})
        elif type(ev) is ToolCallStart:
            out.append({"tool_call_start": {"id": ev.id, "name": ev.name}})
        elif type(ev) is ToolCallDelta:
            out.append({"tool_args": ev.args})
        elif type(ev) is Usage:
            usage: dict[str, Any] = {
                "input_tokens": ev.input_tokens,
                "output_tokens": ev.output_tokens,
            }
            if ev.context_window:
                usage["context_window"] = ev.context_window
            out.append({"usage": usage})
        elif type(ev) is Finish:
            self._finish = ev.reason
        elif type(ev) is BlockEnd:
            pass  # the script opens and closes blocks by kind

    def error(self, exc: ProviderError) -> None:
        if isinstance(exc, StreamIdleTimeout):
            # Silence until the replay's own idle timeout fires, as it did live.
            self._events.append({"stall_ms": int(exc.seconds * 1000) + 60_000})
            self._events.append({"hang": True})
        else:
            error: dict[str, Any] = {"message": exc.message, "kind": exc.kind}
            if exc.status is not None:
                error["status"] = exc.status
            if exc.retryable:
                error["retryable"] = True
            if exc.request_id:
                error["request_id"] = exc.request_id
            self._events.append({"error": error})
        self._close()

    def end(self, complete: bool) -> None:
        if self._ended:
            return
        if not complete:
            self._events.append({"hang": True})
        self._close()

    def _close(self) -> None:
        if self._ended:
            return
        self._ended = True
        response: dict[str, Any] = {"events": self._events}
        if self._finish is not None and not any(
            "hang" in e or "error" in e or "stall_ms" in e for e in self._events
        ):
            response["finish"] = self._finish
        self._recorder._add(response)
