"""``acp-bridge demo``: an editor session, played in the terminal.

It spawns the bridge as a real subprocess, speaks ACP to it as an editor
would, and shows what a person would see: a streamed answer, a Stop
mid-stream, and a follow-up whose reply proves that the model received the
interrupted text.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import anyio
import orjson

from .client import CHUNK_KINDS, bridge_command, running
from .paths import make_private_dirs
from .providers.scripted import parse_report

THINKING = "The user wants a story. Keep it short and calm."
THINKING_CHUNK = 8
# A Stop after this many chunks or fewer comes before any answer text.
THINKING_CHUNKS = -(-len(THINKING) // THINKING_CHUNK)

DEMO_SCRIPT: dict[str, Any] = {
    "description": "acp-bridge demo: a story that is stopped mid-stream, then a report",
    "responses": [
        {
            "events": [
                {"reasoning": THINKING, "chunk_size": THINKING_CHUNK},
                {
                    "text": "Once upon a time, a lighthouse keeper named Ada counted ships "
                    "instead of sheep. Every night she wrote their names in a blue "
                    "notebook, and every morning the sea rubbed one name out.",
                    "chunk_size": 5,
                    "chunk_delay_ms": 40,
                },
                {"hang": True},
            ]
        },
        {
            "events": [
                {
                    "report": [
                        "message_count",
                        "last_assistant_interrupted",
                        "last_assistant_text",
                        "last_user_text",
                    ]
                }
            ]
        },
    ],
    "when_exhausted": "repeat_last",
}

BOLD, DIM, RED, GREEN, RESET = "\033[1m", "\033[2m", "\033[31m", "\033[32m", "\033[0m"


def _style(on: bool) -> tuple[str, str, str, str, str]:
    return (BOLD, DIM, RED, GREEN, RESET) if on else ("", "", "", "", "")


def _color_wanted() -> bool:
    # https://no-color.org: any non-empty NO_COLOR turns colour off.
    return (
        sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
    )


def run_demo(state_dir: str, *, stop_after: int = 12) -> int:
    make_private_dirs(state_dir)
    script_path = os.path.join(state_dir, "demo-script.json")
    with open(script_path, "wb") as f:
        f.write(orjson.dumps(DEMO_SCRIPT, option=orjson.OPT_INDENT_2))
    command = bridge_command(
        "--provider", "fake", "--script", script_path, "--state-dir", state_dir
    )
    try:
        return anyio.run(_demo, command, state_dir, stop_after)
    except KeyboardInterrupt:
        sys.stderr.write("acp-bridge demo: interrupted\n")
        return 130


async def _demo(command: list[str], state_dir: str, stop_after: int) -> int:
    b, dim, red, green, reset = _style(_color_wanted())
    out = sys.stdout

    def say(text: str = "") -> None:
        out.write(text + "\n")
        out.flush()

    say(f"{b}acp-bridge demo{reset}: an editor session, played in your terminal")
    say(f"{dim}editor spawns: {' '.join(command)}{reset}")
    async with running(command, stderr=subprocess.DEVNULL) as client:
        init = await client.initialize()
        info, version = init["result"]["agentInfo"], init["result"]["protocolVersion"]
        say(f"{dim}initialize -> {info['name']} {info['version']}, protocol {version}{reset}")
        session_id = await client.new_session(os.getcwd())
        say(f"{dim}session/new -> {session_id}{reset}")
        say()

        ask = "Tell me a story about a lighthouse keeper."
        say(f"{b}You:{reset} {ask}")
        streaming = {"kind": ""}

        def show(update: dict[str, Any]) -> None:
            kind = update.get("sessionUpdate")
            if kind not in CHUNK_KINDS:
                return
            if kind != streaming["kind"]:
                label = (
                    f"{dim}(thinking) "
                    if kind == "agent_thought_chunk"
                    else f"{reset}{b}Agent:{reset} "
                )
                out.write(("\n" if streaming["kind"] else "") + label)
                streaming["kind"] = kind
            out.write(update["content"]["text"])
            out.flush()

        # Stop after N chunks, or when the story has shown all it has.
        first = await client.prompt(
            session_id, ask, cancel_after=stop_after, on_update=show, cancel_when_quiet=1.0
        )
        chunks = sum(1 for u in first.updates if u.get("sessionUpdate") in CHUNK_KINDS)
        seen = first.text()
        say(f"{reset}")
        late = len(first.late)
        after = "nothing arrived after it" if not late else f"{late} UPDATES ARRIVED AFTER IT"
        say(
            f"{red}■ Stopped{reset}  {dim}({chunks} chunk{'' if chunks == 1 else 's'} shown; "
            f"the editor got stopReason {first.stop_reason!r}; {after}){reset}"
        )
        say()

        follow = "Go on from where you stopped."
        say(f"{b}You:{reset} {follow}")
        streaming["kind"] = ""
        second = await client.prompt(session_id, follow, on_update=show)
        say(f"{reset}")
        try:
            reported = parse_report(second.text())
        except ValueError:
            reported = {}
        saw = reported.get("last_assistant_text")
        if not seen:
            # Stopped while the model was only thinking: there is no answer
            # text to compare, and saying it matched would prove nothing.
            same = saw in (None, "")
            mark = f"{dim}–{reset}" if same else f"{red}✗{reset}"
            say(
                f"{mark} the Stop came while the model was still thinking: no answer text was "
                "shown, so there is no interrupted answer for the next request to hold"
                f"{'' if same else f' (yet it held {saw!r})'}; to see one, stop later "
                f"(--stop-after {THINKING_CHUNKS + 1} or more)"
            )
        else:
            same = saw == seen
            mark = f"{green}✓{reset}" if same else f"{red}✗{reset}"
            interrupted = orjson.dumps(reported.get("last_assistant_interrupted")).decode()
            say(
                f"{mark} the model's next request held the interrupted answer "
                f"({'exactly the text you saw' if same else 'NOT the text you saw'}; "
                f"interrupted: {interrupted})"
            )
        log_path = os.path.join(state_dir, "sessions", session_id + ".jsonl")
        records = (await anyio.Path(log_path).read_bytes()).count(b"\n")
        say()
        say(f"session log:  {log_path} ({records} records)")
        say(f"its history:  acp-bridge history --state-dir {state_dir} {session_id}")
        await client.finish()
    ok = same and first.stop_reason == "cancelled" and not first.late
    return 0 if ok else 1
