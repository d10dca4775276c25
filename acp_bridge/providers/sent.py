"""The model history as a request carries it, for every real provider.

`derive_messages` is what the model remembers (invariant I2: an interrupted
message keeps the reasoning the user saw).  `sent_messages` is what a model
request holds, before a vendor's format is applied, and the one place that
decides it: both wire formats (`convert_anthropic`, `convert_openai`) start
from it, and so does ``acp-bridge history``, so the command prints exactly
the messages, in the order and with the words, that the model receives.

* An interrupted assistant message keeps its text only: its reasoning was
  cut before the provider could sign it, and no vendor takes it back.
* An assistant message left with neither text nor a tool call (a Stop during
  reasoning only, or a reply of reasoning alone) is not sent; the user
  messages around it become one, in order.
* After an interrupted message, sent or not, the next user message starts
  (after its tool results) with the note that says who cut the reply
  (`notes.stop_note`): the user's Stop, or the agent stopping unexpectedly.

Vendor rules stay with the vendors: which reasoning of a finished reply is
sent back (a signed thinking block for Anthropic, the current tool loop's
reasoning for DeepSeek), and how each block is spelled.  The input is never
mutated; the output shares blocks with it (read them, do not change them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from .notes import stop_note

__all__ = ["sent_messages"]

Message = dict[str, Any]
# An assistant message is sent only with one of these.
_SENT_ASSISTANT: Final = frozenset({"text", "tool_call"})


def sent_messages(history: Sequence[Message]) -> list[Message]:
    """The messages of a model request for ``history`` (see the module docstring)."""
    out: list[Message] = []
    note: str | None = None
    for message in history:
        if message["role"] == "assistant":
            content = message["content"]
            if message.get("interrupted") is True:
                content = [block for block in content if block["type"] != "reasoning"]
            note = stop_note(message)
            if any(block["type"] in _SENT_ASSISTANT for block in content):
                out.append({**message, "content": content})
            continue
        content = list(message["content"])
        if note is not None:
            results = [block for block in content if block["type"] == "tool_result"]
            rest = [block for block in content if block["type"] != "tool_result"]
            content = [*results, {"type": "text", "text": note}, *rest]
            note = None
        if out and out[-1]["role"] == "user":
            # The assistant message between them was not sent.
            out[-1] = {**out[-1], "content": [*out[-1]["content"], *content]}
        else:
            out.append({**message, "content": content})
    return out
