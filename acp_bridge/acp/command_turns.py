"""Running ``/model``, ``/mode``, ``/status``, ``/clear`` and ``/help``.

Each is a turn of its own, queued like a prompt
(`acp_bridge.acp.prompt_turns.run_turn`) and built by `command_kind`: its
``turn/start`` is ``{command, prompt}`` (no user message, no step), and its
answer (run by the turn in place of a model request) does the command's
work, logs what it says as ``command/answer {text}``, shows it as an
``agent_message_chunk`` and ends the turn with ``end_turn``.  A command that
cannot do what it was asked (an unknown model) says why in its answer.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Final

from ..commands.catalog import COMMANDS
from ..log.records import StopReason
from ..log.replay import command_answer
from ..loop.session import Session
from ..loop.turn import Turn, TurnKind
from ..update_builders import config_option_update

__all__ = ["command_kind"]

ANSWER_RECORD: Final = "command/answer"


def command_kind(
    session: Session, name: str, argument: str, command: list[dict[str, Any]]
) -> TurnKind:
    """The turn of ``/name argument``, made just before it starts (under the
    session's prompt lock): a ``/clear`` counts now the messages it clears."""
    cleared = len(session.log.history.messages()) if name == "clear" else 0
    return TurnKind.command(name, command, partial(_answer, name, argument, cleared))


async def _answer(name: str, argument: str, cleared: int, turn: Turn) -> StopReason:
    """Do the turn's command and show what it did; the stop reason."""
    session = turn.session
    assert isinstance(session, Session)  # the agent's sessions have tools and a provider
    if name == "model":
        text = _model(session, argument or None)
    elif name == "mode":
        text = _mode(session, argument or None)
    elif name == "status":
        text = await _status(turn)
    elif name == "clear":
        text = _clear(cleared)
    else:
        text = _help()
    if not turn.rec.closed:
        turn.rec.log.append(ANSWER_RECORD, turn.number, 0, text=text)
    turn.emit(command_answer(text))
    return "end_turn"


# -- the commands ---------------------------------------------------------------


def _model(session: Session, wanted: str | None) -> str:
    from . import config_options
    from .tool_setup import config_options_of

    provider = session.provider
    current = provider.model or provider.name
    offered = config_options.offer(provider)
    models = [str(o["value"]) for o in offered[0]["options"]] if offered else []
    if wanted is None:
        if len(models) > 1:
            others = ", ".join(m for m in models if m != current)
            return f"Model: {current}. Also available: {others} (`/model NAME` switches)."
        return f"Model: {current} (this setup offers no other model)."
    if wanted == current:
        return f"Already using {current}."
    if wanted not in models:
        choices = ", ".join(models) if models else current
        return f"No model {wanted!r} in this setup; the models it offers: {choices}."
    config_options.set_option(provider, {"configId": config_options.MODEL_OPTION, "value": wanted})
    session.outbox.send(session.frames.update(config_option_update(config_options_of(session))))
    return f"Switched the model from {current} to {wanted}: it answers from your next message."


def _mode(session: Session, wanted: str | None) -> str:
    from ..tools.modes import MODES
    from .tool_setup import set_mode_option

    tools = session.tools
    listing = "".join(f"\n- {mode}: {about}" for mode, (_, about) in MODES.items())
    if wanted is None:
        name, about = MODES[tools.mode]
        return f"Mode: {tools.mode} ({name}). {about}\nModes (`/mode ID` switches):{listing}"
    if wanted not in MODES:
        return f"No mode {wanted!r}. Modes:{listing}"
    if wanted == tools.mode:
        return f"Already in {wanted} mode."
    set_mode_option(session, {"value": wanted})  # a mode of MODES: accepted
    name, about = MODES[wanted]
    return f"Switched to {wanted} mode ({name}). {about}"


async def _status(turn: Turn) -> str:
    from ..context.estimate import next_request_tokens

    session = turn.session
    provider = session.provider
    info = await provider.model_info()
    window = session.context.window(info)
    tools = session.tools.registry.specs()
    used = next_request_tokens(session.log.records, session.history(), turn.system, tools)
    share = f" ({100 * used / window:.0f}%)" if window else ""
    lines = [
        f"Model: {provider.model or provider.name} ({provider.name})",
        f"Mode: {session.tools.mode}",
        f"Context: about {used:,} of {window:,} tokens{share}, {len(session.history())} messages",
        f"Session: {session.id}",
        f"Log: {session.log.path}",
    ]
    return "\n".join(lines)


def _clear(cleared: int) -> str:
    if not cleared:
        return "Started a new conversation (there was nothing to clear)."
    return (
        f"Started a new conversation: the model no longer sees the {cleared} earlier "
        "messages. They stay in the session's log (`acp-bridge show` lists them)."
    )


def _help() -> str:
    lines = ["Commands:"]
    for command in COMMANDS:
        usage = f"/{command.name}" + (f" [{command.hint}]" if command.hint else "")
        lines.append(f"{usage}: {command.description}")
    lines.append("Any other text starting with / goes to the model as it is.")
    return "\n".join(lines)
