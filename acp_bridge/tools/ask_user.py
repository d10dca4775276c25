"""``ask_user``: the model asks the user a question mid-turn (ACP ``elicitation/create``).

Offered only to a session whose client advertised
``clientCapabilities.elicitation.form``: the question goes to the editor as a
form-mode elicitation tied to the session and the tool call (a choice among
``choices``, words of the user's own, or both).  Every way the user can leave
the form is an answer the model reads as the tool's result:

* accept: what the user chose or wrote;
* decline: the user chose not to answer; do not ask again;
* cancel (dismissed): the user closed the question without answering; do not
  ask again, continue with what is known.

A Stop while the question is open cancels the request (``$/cancel_request``)
and the call ends with a result saying the turn was stopped, like any tool.
The call is logged and replayed like every tool call.  It changes nothing, so
it runs in every mode without a permission prompt.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

from .base import LazyArgs, Tool, ToolContext, ToolOutput

if TYPE_CHECKING:
    from .arguments import AskArgs

__all__ = ["NAME", "AskUser", "answer_text", "requested_schema"]

log = logging.getLogger("acp_bridge.tools")

NAME: Final = "ask_user"

DECLINED: Final = (
    "The user declined to answer the question. Do not ask it again: continue with what you "
    "know, and say what you assumed."
)
DISMISSED: Final = (
    "The user dismissed the question without answering: do not ask again, continue with what "
    "you know, and say what you assumed."
)
STOPPED: Final = "The user stopped the turn while the question was open; it was not answered."


def requested_schema(args: AskArgs) -> dict[str, Any]:
    """The form's JSON Schema: a ``choice`` among the choices and/or a free ``answer``."""
    choices = [c for c in dict.fromkeys(args.choices or ()) if c.strip()]
    free = args.free_text or not choices
    properties: dict[str, Any] = {}
    if choices:
        properties["choice"] = {
            "type": "string",
            "title": "Choose one",
            "oneOf": [{"const": c, "title": c} for c in choices],
        }
    if free:
        properties["answer"] = {
            "type": "string",
            "title": "Or answer in your own words" if choices else "Your answer",
        }
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if len(properties) == 1:
        schema["required"] = list(properties)
    return schema


def answer_text(result: Any) -> str:
    """The tool's result for the editor's answer to ``elicitation/create``."""
    action = result.get("action") if isinstance(result, dict) else None
    if action == "decline":
        return DECLINED
    if action != "accept":
        if action != "cancel":
            log.warning("elicitation answer taken as a dismissal: action %r", action)
        return DISMISSED
    content = result.get("content")
    content = content if isinstance(content, dict) else {}
    parts = []
    choice, words = content.get("choice"), content.get("answer")
    if isinstance(choice, str) and choice.strip():
        parts.append(f"chose {choice.strip()!r}")
    if isinstance(words, str) and words.strip():
        parts.append(f"wrote: {words.strip()}")
    if not parts:
        return "The user accepted the question but gave no answer. " + DISMISSED.split(": ", 1)[1]
    return "The user answered: " + "; and ".join(parts)


class AskUser(Tool["AskArgs"]):
    name = NAME
    description = (
        "Ask the user a question and wait for the answer. Use it when you need a decision "
        "or a fact only the user has; give choices when there are a few. If the user declines "
        "or dismisses it, do not ask again."
    )
    kind = "other"
    args_model = LazyArgs["AskArgs"]("AskArgs")
    read_only = True

    def title(self, args: AskArgs) -> str:
        return f"Ask: {args.question}"

    async def run(self, args: AskArgs, ctx: ToolContext) -> ToolOutput:
        params = {
            "sessionId": ctx.session_id,
            "toolCallId": ctx.call_id,
            "mode": "form",
            "message": args.question,
            "requestedSchema": requested_schema(args),
        }
        # What the call says if the user presses Stop while the question is open.
        ctx.partial = ToolOutput(STOPPED, is_error=True)
        result = await ctx.request("elicitation/create", params)
        ctx.partial = None
        text = answer_text(result)
        return ToolOutput(
            text, raw_output={"action": result.get("action") if isinstance(result, dict) else None}
        )
