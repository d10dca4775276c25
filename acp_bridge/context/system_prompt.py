"""The system prompt every model request of a session carries.

`system_prompt` puts together, for one session:

1. the default prompt (`default_prompt`): what the agent is (a coding agent
   in the user's editor), its tools and how permissions work, what a Stop
   does and what the note after one means, and the session's environment:
   working directory, additional directories, operating system, shell and
   today's date;
2. ``--system FILE`` (or the config file's ``system``): with ``--system-mode
   append`` (the default) its text follows the default prompt; with
   ``replace`` it is the prompt instead of the default;
3. the editor's system prompt (ACP's ``systemPrompt`` on session/new, load,
   resume or fork: a `ClientPrompt`): ``append`` adds its text after the
   above; ``override`` replaces the bridge's own instructions (the default
   prompt and ``--system``) with it, and the session's environment (working
   directory, directories, system, shell, date) stays, as the schema allows;
4. the instruction files (`acp_bridge.context.instructions`), each under its
   path, whatever the mode (they are the project's, not the bridge's).

It is a pure function of a `PromptEnvironment`; `environment` gathers the
facts of this machine.  The prompt is built when a session is created or
loaded and stays the same for all its requests (providers can cache it).
"""

from __future__ import annotations

import datetime
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from ..providers.notes import INTERRUPTED_NOTE
from .config import ContextConfig
from .instructions import Instructions

__all__ = [
    "CLIENT_PROMPT_MODES",
    "ClientPrompt",
    "PromptEnvironment",
    "environment",
    "system_prompt",
]

# The modes of the editor's system prompt the bridge takes.
CLIENT_PROMPT_MODES: Final = ("append", "override")


@dataclass(frozen=True, slots=True)
class ClientPrompt:
    """The system prompt an editor gave a session: its mode and its text (the
    text blocks joined by blank lines)."""

    mode: str
    text: str


@dataclass(frozen=True, slots=True)
class PromptEnvironment:
    cwd: str
    additional_directories: Sequence[str] = ()
    os_name: str = ""
    shell: str = ""
    today: str = ""
    # (name, description) of each tool the model is offered.
    tools: Sequence[tuple[str, str]] = ()
    instructions: Sequence[Instructions] = field(default_factory=tuple)


def environment(
    cwd: str,
    additional_directories: Sequence[str],
    tools: Sequence[tuple[str, str]],
    instructions: Sequence[Instructions],
) -> PromptEnvironment:
    """The environment of a session on this machine, today."""
    system = platform.system() or os.name
    release = platform.release()
    return PromptEnvironment(
        cwd=cwd,
        additional_directories=tuple(additional_directories),
        os_name=f"{system} {release}".strip(),
        shell=os.environ.get("SHELL") or ("cmd.exe" if os.name == "nt" else "/bin/sh"),
        today=datetime.date.today().isoformat(),
        tools=tuple(tools),
        instructions=tuple(instructions),
    )


def system_prompt(
    config: ContextConfig, env: PromptEnvironment, client: ClientPrompt | None = None
) -> str:
    """The whole system prompt of a session (see the module docstring)."""
    if client is not None and client.mode == "override":
        parts = [client.text.strip(), _environment(env)]
    else:
        if config.system is not None and config.system_mode == "replace":
            parts = [config.system.strip()]
        else:
            parts = [default_prompt(env)]
            if config.system is not None and config.system.strip():
                parts.append(config.system.strip())
        if client is not None:
            parts.append(client.text.strip())
    instructions = _instructions(env.instructions)
    if instructions:
        parts.append(instructions)
    return "\n\n".join(part for part in parts if part)


def default_prompt(env: PromptEnvironment) -> str:
    sections = [_INTRO, _tools(env.tools), _working(env.tools), _STOP, _environment(env)]
    return "\n\n".join(section for section in sections if section)


_INTRO = """\
You are acp-bridge, a coding agent. You work inside the user's code editor, which talks to you \
through the Agent Client Protocol: the user writes to you in the editor's agent panel, and your \
replies, your reasoning and your tool calls are shown there as you produce them. Help with the \
user's project: read and change its code, run its commands, explain what you find. Be direct and \
concrete, say what you did and what you found, and ask when a request is ambiguous rather than \
guessing at something costly to undo."""

_STOP = f"""\
# When the user presses Stop
The user can stop you at any moment. Your reply then ends where it was cut: the user saw it only \
up to that point, and a tool call you had begun is dropped without running. The user's next \
message then starts with this note:
{INTERRUPTED_NOTE}
Do not repeat the cut reply or assume it was read to the end; take the note and the new message \
as your guide, and ask if it is unclear how to go on."""


def _tools(tools: Sequence[tuple[str, str]]) -> str:
    if not tools:
        return "# Tools\nYou have no tools in this session: answer from the conversation alone."
    lines = ["# Tools", "You can act on the user's machine with these tools:"]
    lines += [f"- {name}: {_first_sentence(about)}" for name, about in tools]
    lines.append(
        "Relative paths are resolved against the working directory. Tools reach only the "
        "session's directories unless the user allows a path outside them. The editor applies "
        "your edits and runs your commands, and the user decides what you may do: depending on "
        "the session's mode, the user is asked for permission before an edit or a command (and "
        "may decline), edits are accepted without asking, or (read-only mode) edits and commands "
        "are refused. A declined or refused call comes back as an error result: do not repeat it "
        "unchanged; adapt, or ask the user. Tool results can be long; read what you need."
    )
    return "\n".join(lines)


def _working(tools: Sequence[tuple[str, str]]) -> str:
    """How to use the plan and the questions, when the session offers them."""
    names = {name for name, _ in tools}
    lines = []
    if "update_plan" in names:
        lines.append(
            "For a task of several steps, call update_plan first with the whole plan (every "
            "step pending, the first in_progress), then again with the whole list each time a "
            "step starts or is done; the editor shows it to the user as a plan. Skip it for a "
            "question or a one-step change."
        )
    if "ask_user" in names:
        lines.append(
            "When you need a decision or a fact only the user has, call ask_user with one clear "
            "question (and choices, if there are a few); it waits for the answer. If the user "
            "declines or dismisses it, do not ask again: go on with what you know and say what "
            "you assumed."
        )
    return "# Working with the user\n" + "\n".join(lines) if lines else ""


def _environment(env: PromptEnvironment) -> str:
    lines = ["# Environment", f"- Working directory: {env.cwd}"]
    if env.additional_directories:
        lines.append("- Additional directories: " + ", ".join(env.additional_directories))
    if env.os_name:
        lines.append(f"- Operating system: {env.os_name}")
    if env.shell:
        lines.append(f"- Shell: {env.shell}")
    if env.today:
        lines.append(f"- Today's date: {env.today}")
    return "\n".join(lines)


def _instructions(found: Sequence[Instructions]) -> str:
    if not found:
        return ""
    parts = [
        "# Instructions from the user and the project\n"
        "Follow these instructions. Where they conflict, the later (more specific) ones win."
    ]
    for item in found:
        whose = "the user's own instructions" if item.user else "the project's instructions"
        text = item.text.rstrip()
        if item.cut_from is not None:
            size = len(item.text.encode("utf-8"))
            text += (
                f"\n[... cut here: the file has {item.cut_from:,} bytes and only the first "
                f"{size:,} are included]"
            )
        parts.append(f"## {item.path} ({whose})\n{text}")
    return "\n\n".join(parts)


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    end = flat.find(". ")
    return flat if end < 0 else flat[: end + 1]
