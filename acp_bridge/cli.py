"""The ``acp-bridge`` command line.

    acp-bridge [serve]        serve ACP v1 on stdin/stdout (what an editor runs)
    acp-bridge demo           play an editor session in the terminal
    acp-bridge history ID     print the model history of a stored session

Options common to every subcommand may be given before or after its name.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import __version__
from .paths import ENV_STATE_DIR, resolve_state_dir

if TYPE_CHECKING:
    from .providers.base import Provider

PROVIDERS = ("fake",)


def _common(defaults: bool) -> argparse.ArgumentParser:
    # Subparsers get SUPPRESS defaults so an option given before the
    # subcommand name is not overwritten by the subparser's default.
    d: Any = (lambda v: v) if defaults else (lambda v: argparse.SUPPRESS)
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(
        "--state-dir",
        default=d(None),
        help=f"directory for session logs (default: ${ENV_STATE_DIR}, else "
        "$XDG_STATE_HOME/acp-bridge, else ~/.local/state/acp-bridge)",
    )
    p.add_argument(
        "--log-level",
        default=d("warning"),
        choices=["debug", "info", "warning", "error"],
        help="stderr log level (default: warning); stdout only ever carries ACP messages",
    )
    return p


def _serve_options(p: argparse.ArgumentParser, defaults: bool) -> None:
    d: Any = (lambda v: v) if defaults else (lambda v: argparse.SUPPRESS)
    p.add_argument(
        "--provider",
        default=d("fake"),
        choices=PROVIDERS,
        help="model provider; 'fake' is the keyless scripted provider (default: fake)",
    )
    p.add_argument(
        "--script",
        default=d(None),
        metavar="FILE",
        help="script for the fake provider (JSON, see schemas/script.schema.json); "
        "default: a built-in script that streams a short answer",
    )
    p.add_argument(
        "--cancel-deadline",
        type=_non_negative,
        default=d(5.0),
        metavar="SECONDS",
        help="after session/cancel, answer 'cancelled' within this time even if the "
        "provider does not stop; the log records the abort as forced (default: 5)",
    )
    p.add_argument(
        "--idle-timeout",
        type=_non_negative,
        default=d(300.0),
        metavar="SECONDS",
        help="fail a model request that sends no stream event for this long, recorded "
        "as timed_out (default: 300; 0 disables)",
    )
    p.add_argument(
        "--max-steps",
        type=_positive_int,
        default=d(25),
        metavar="N",
        help="model requests allowed in one turn before it ends with "
        "max_turn_requests (default: 25)",
    )


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-bridge",
        description="An Agent Client Protocol agent: an editor spawns it and talks JSON-RPC "
        "over stdio.  Stop keeps exactly what the user saw.",
        parents=[_common(True)],
    )
    parser.add_argument("--version", action="version", version=f"acp-bridge {__version__}")
    _serve_options(parser, True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = sub.add_parser(
        "serve", parents=[_common(False)], help="serve ACP on stdio (the default command)"
    )
    _serve_options(serve, False)
    demo = sub.add_parser(
        "demo",
        parents=[_common(False)],
        help="play an editor session in the terminal: a streamed answer, a Stop, a follow-up",
    )
    demo.add_argument(
        "--stop-after",
        type=_positive_int,
        default=12,
        metavar="N",
        help="press Stop after N streamed chunks (default: 12)",
    )
    history = sub.add_parser(
        "history",
        parents=[_common(False)],
        help="print the model history derived from a stored session, as JSON",
    )
    history.add_argument(
        "session_id", metavar="SESSION_ID", help="the id that session/new answered (sess_...)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        stream=sys.stderr,
        format="acp-bridge %(levelname)s %(name)s: %(message)s",
    )
    state_dir = resolve_state_dir(args.state_dir)
    command = args.command or "serve"
    if command == "history":
        from .history import print_history

        return print_history(state_dir, args.session_id)
    if command == "demo":
        from .demo import run_demo

        return run_demo(state_dir, stop_after=args.stop_after)
    return _serve(args, state_dir)


def _serve(args: argparse.Namespace, state_dir: str) -> int:
    import anyio

    from .loop.turn import TurnConfig
    from .server import ServeOptions, serve

    if sys.stdin.isatty():
        sys.stderr.write(
            "acp-bridge: serving ACP on stdin/stdout; an editor starts it this way. "
            "To see it work, run: acp-bridge demo\n"
        )
    script_path: str | None = args.script
    options = ServeOptions(
        state_dir=state_dir,
        load_provider=lambda: _load_fake_provider(script_path),
        turn=TurnConfig(
            max_steps=args.max_steps,
            cancel_deadline=args.cancel_deadline,
            idle_timeout=args.idle_timeout or None,
        ),
    )
    return anyio.run(serve, options)


def _load_fake_provider(script_path: str | None) -> Callable[[], Provider]:
    from .providers.script_format import ScriptError, load_script, parse_script
    from .providers.scripted import ScriptedProvider
    from .server import StartupError

    try:
        script = (
            load_script(script_path)
            if script_path
            else parse_script(BUILTIN_SCRIPT, source="<built-in>")
        )
    except ScriptError as exc:
        raise StartupError(str(exc)) from exc
    return lambda: ScriptedProvider(script)


BUILTIN_SCRIPT: dict[str, Any] = {
    "description": "built-in: a short streamed answer",
    "responses": [
        {
            "events": [
                {
                    "text": "Hello from acp-bridge (the keyless scripted provider). ",
                    "chunk_size": 6,
                },
                {"text": "Pass --script FILE to script the model.", "chunk_size": 6},
            ]
        }
    ],
    "when_exhausted": "repeat_last",
}
