"""The benchmark client's view of an agent's stdout: lines counted and checked.

`LineStats` classifies what an agent wrote during one phase (typically one prompt turn):
chunks, responses, late updates (leaks), malformed lines.  Blocks made only of update lines
of the current session take a fast path (substring counts in C, first and last line parsed
and checked), so the client keeps up with the fastest agent.  See bench/README.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import orjson

Message = dict[str, Any]
MAX_PROBLEMS = 8
TOKEN = b"tok "  # the text of every streamed chunk (examples/endless.json)
_UNPARSABLE: Final = object()  # what `LineStats._parse` returns for a line that is not JSON


class LineStats:
    """Counts what the agent wrote during one phase (typically one prompt turn).

    ``feed`` takes blocks of complete lines.  A block made only of well-framed
    ``session/update`` lines of this session, before the prompt response, takes the fast
    path (substring counts, one line parsed and checked); anything else is parsed line by
    line, in order, so a response and whatever follows it are classified exactly.
    """

    def __init__(
        self,
        session_id: str | None = None,
        prompt_id: int | None = None,
        others: Sequence[str] = (),
    ) -> None:
        self.sid = session_id
        self.sid_b = session_id.encode() if session_id else b""
        self.prompt_id = prompt_id
        self.others_b = [o.encode() for o in others]
        self.sid_per_line = 0  # occurrences of the session id in one update line (learned)
        self.lines = 0
        self.bytes = 0
        self.updates = 0
        self.chunks = 0
        # Text tokens ("tok ", what every agent streams) in those chunks: an
        # agent may send several in one chunk when the client reads slowly.
        self.tokens = 0
        self.foreign = 0  # session/update for another session or outside any turn
        self.leaks = 0  # session/update for this session after the prompt response
        self.malformed = 0
        self.sampled = 0
        self.bad_samples = 0
        self.problems: list[str] = []
        self.responses: dict[Any, Message] = {}
        self.response_time: dict[Any, float] = {}
        self.agent_requests: list[Message] = []
        self.t_first_chunk: float | None = None
        self.t_last_chunk: float | None = None
        self.t_last_read = 0.0
        self.reads = 0
        self.full_reads = 0  # reads that found the pipe (nearly) full: the agent may wait on us

    @property
    def prompt_done(self) -> bool:
        return self.prompt_id is not None and self.prompt_id in self.responses

    def problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)

    def feed(self, block: bytes, t: float) -> None:
        n = block.count(b"\n")
        self.lines += n
        self.bytes += len(block)
        if (
            self.sid_per_line
            and not self.prompt_done
            and block.count(b"session/update") == n
            and block.count(self.sid_b) == n * self.sid_per_line
            and not any(other in block for other in self.others_b)
        ):
            # Fast path: n update lines of this session, one per line, nothing else.
            chunks = block.count(b"agent_message_chunk")
            self.updates += n
            self.chunks += chunks
            if chunks:
                self.tokens += block.count(TOKEN)
                self._chunk_read(t)
            first_end = block.index(b"\n")
            self._sample(block[:first_end])
            if n > 1:
                self._sample(block[block.rindex(b"\n", 0, len(block) - 1) + 1 : -1])
            return
        for line in block.split(b"\n")[:-1]:
            self._line(line, t)

    def _chunk_read(self, t: float) -> None:
        self.t_last_chunk = t
        if self.t_first_chunk is None:
            self.t_first_chunk = t

    def _malformed(self, text: str) -> None:
        self.malformed += 1
        self.problem(text)

    def _parse(self, line: bytes) -> Any:
        """The line's JSON value, or `_UNPARSABLE` (counted as malformed)."""
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError:
            self._malformed(f"unparsable line: {line[:120]!r}")
            return _UNPARSABLE

    def _sample(self, line: bytes) -> None:
        msg = self._parse(line)
        if msg is not _UNPARSABLE:
            self._check_update(msg)

    def _check_update(self, msg: Any) -> None:
        self.sampled += 1
        error = check_update(msg, self.sid)
        if error:
            self.bad_samples += 1
            self.problem(error)

    def _line(self, line: bytes, t: float) -> None:
        if not line.strip():
            self.problem("blank line on stdout")
            return
        msg = self._parse(line)
        if msg is _UNPARSABLE:
            return
        if not isinstance(msg, dict):
            self._malformed(f"not a JSON object: {line[:120]!r}")
            return
        method = msg.get("method")
        if method == "session/update":
            params = msg.get("params")
            update = params.get("update") if isinstance(params, dict) else None
            kind = update.get("sessionUpdate") if isinstance(update, dict) else None
            if kind == "available_commands_update":
                return  # about a session, sent as it opens: not a prompt's update
            if not isinstance(params, dict) or params.get("sessionId") != self.sid or not self.sid:
                self.foreign += 1
                return
            if self.prompt_done:
                self.leaks += 1
                self.problem("session/update after the prompt response")
                return
            self.updates += 1
            if not self.sid_per_line:
                self.sid_per_line = line.count(self.sid_b)
            update = params.get("update")
            if isinstance(update, dict) and update.get("sessionUpdate") == "agent_message_chunk":
                self.chunks += 1
                self.tokens += line.count(TOKEN)
                self._chunk_read(t)
            self._check_update(msg)
        elif isinstance(method, str):
            if "id" in msg:
                self.agent_requests.append(msg)
        elif "id" in msg and ("result" in msg or "error" in msg):
            self.responses[msg["id"]] = msg
            self.response_time[msg["id"]] = t
        else:
            self._malformed(f"neither request, notification nor response: {line[:120]!r}")


def check_update(msg: Any, session_id: str | None) -> str | None:
    """Return what is wrong with a ``session/update`` notification, or None."""
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        return "update without jsonrpc 2.0"
    if msg.get("method") != "session/update" or "id" in msg:
        return f"expected a session/update notification, got {str(msg)[:120]}"
    params = msg.get("params")
    if not isinstance(params, dict) or params.get("sessionId") != session_id:
        return "session/update with a wrong sessionId"
    update = params.get("update")
    if not isinstance(update, dict) or not isinstance(update.get("sessionUpdate"), str):
        return "session/update without update.sessionUpdate"
    if update["sessionUpdate"] == "agent_message_chunk":
        content = update.get("content")
        if not isinstance(content, dict) or content.get("type") != "text":
            return "agent_message_chunk without text content"
        if not isinstance(content.get("text"), str):
            return "agent_message_chunk text is not a string"
    return None
