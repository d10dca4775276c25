"""The ``acp-bridge`` command line.

    acp-bridge [serve]        serve ACP v1 on stdin/stdout (what an editor runs)
    acp-bridge setup          choose a model provider and store its key (interactive)
    acp-bridge logout         forget what setup stored
    acp-bridge demo           play an editor session in the terminal
    acp-bridge history ID     print the messages of its next model request
    acp-bridge sessions       list stored sessions
    acp-bridge show ID        print a stored session as a timeline
    acp-bridge permissions    list (or forget) the "always" answers kept per project
    acp-bridge check [-- CMD] run the ACP conformance suite against an agent (default: itself)

Options common to every subcommand may be given before or after its name.
The same program is installed as ``acp-bridge-agent`` (the package's name),
so that ``uvx acp-bridge-agent`` starts the agent.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from . import __version__
from .cli_values import (
    MAX_CANCEL_DEADLINE,
    MAX_CONTEXT_WINDOW,
    MAX_IDLE_TIMEOUT,
    MAX_STEPS,
    MAX_STOP_AFTER,
    MAX_TOOL_TIMEOUT,
    BadOption,
    OptionParser,
    common_options,
)
from .cli_values import base_url as _base_url
from .cli_values import count as _count
from .cli_values import fraction as _fraction
from .cli_values import positive_int as _positive_int
from .cli_values import retries as _retries
from .cli_values import seconds as _seconds
from .cli_values import variable_names as _variable_names
from .paths import resolve_state_dir
from .providers.vendors import ANTHROPIC, OPENAI, VENDORS
from .serve_cli import PROVIDERS, serve_command
from .stderr_log import install as install_stderr_logging

log = logging.getLogger("acp_bridge.cli")


def _serve_options(p: argparse.ArgumentParser, defaults: bool) -> None:
    d: Any = (lambda v: v) if defaults else (lambda v: argparse.SUPPRESS)
    p.add_argument(
        "--provider",
        default=d(None),
        choices=PROVIDERS,
        help="model provider: "
        + ", ".join(f"'{v.name}' ({v.speaks})" for v in VENDORS.values())
        + ", or 'fake', the keyless scripted provider (default: the "
        "config file's profile, else what `acp-bridge setup` stored, else the provider whose "
        "key is in the environment; --script alone means fake)",
    )
    _provider_options(p, d)
    p.add_argument(
        "--script",
        default=d(None),
        metavar="FILE",
        help="script for the fake provider (JSON, see schemas/script.schema.json); "
        "default: a built-in script that streams a short answer",
    )
    p.add_argument(
        "--cancel-deadline",
        type=_seconds(MAX_CANCEL_DEADLINE),
        default=d(5.0),
        metavar="SECONDS",
        help="after session/cancel, answer 'cancelled' within this time even if the "
        "provider does not stop; the log records the abort as forced "
        f"(default: 5, at most {MAX_CANCEL_DEADLINE:g})",
    )
    p.add_argument(
        "--idle-timeout",
        type=_seconds(MAX_IDLE_TIMEOUT),
        default=d(300.0),
        metavar="SECONDS",
        help="fail a model request that sends no stream event for this long, recorded "
        f"as timed_out (default: 300; 0 disables; at most {MAX_IDLE_TIMEOUT:g})",
    )
    p.add_argument(
        "--max-steps",
        type=_count(MAX_STEPS),
        default=d(25),
        metavar="N",
        help="model requests allowed in one turn before it ends with "
        f"max_turn_requests (default: 25, at most {MAX_STEPS})",
    )
    p.add_argument(
        "--tool-timeout",
        type=_seconds(MAX_TOOL_TIMEOUT, zero=False),
        default=d(300.0),
        metavar="SECONDS",
        help="stop a tool call that runs longer than this "
        f"(default: 300, at most {MAX_TOOL_TIMEOUT:g})",
    )
    p.add_argument(
        "--subagent-depth",
        type=_count(4, minimum=0),
        default=d(1),
        metavar="N",
        help="how deep subagent sessions (the model's task tool) may nest: 1, the parent's "
        "children only; 0 offers no task tool (default: 1, at most 4)",
    )
    p.add_argument(
        "--subagents-at-once",
        type=_count(64),
        default=d(4),
        metavar="N",
        help="subagent sessions running at the same time in this process; more wait for a "
        "free place (default: 4, at most 64)",
    )
    p.add_argument(
        "--protocol",
        type=int,
        choices=(1, 2),
        default=d(2),
        metavar="VERSION",
        help="the latest ACP version a client may ask for: 2 (default) speaks v2 to a "
        "client that asks for it; 1 speaks v1 to every client",
    )
    p.add_argument(
        "--mcp-start-timeout",
        type=_seconds(600.0),
        default=d(10.0),
        metavar="SECONDS",
        help="how long session/new (load, resume) waits for its MCP servers to start; "
        "a server still starting joins when it is ready (default: 10, at most 600)",
    )
    p.add_argument(
        "--pass-env",
        action="append",
        type=_variable_names,
        default=d(None),
        metavar="NAME",
        help="let the variable NAME through to run_command and leave its value in tool "
        "results, although it looks secret (repeatable, or names separated by commas; "
        "also $ACP_BRIDGE_PASS_ENV)",
    )
    _context_options(p, d)


def _context_options(p: argparse.ArgumentParser, d: Any) -> None:
    g = p.add_argument_group("the model's context (every provider)")
    g.add_argument(
        "--system-mode",
        default=d(None),
        choices=["append", "replace"],
        help="--system FILE extends the default system prompt (append, the default) or "
        "replaces it (replace); the project's AGENTS.md files are included either way",
    )
    g.add_argument(
        "--context-window",
        type=_count(MAX_CONTEXT_WINDOW),
        default=d(None),
        metavar="N",
        help="the model's context window in tokens (default: the config file's "
        "context_windows, what the server says, a known model's, else 32768)",
    )
    g.add_argument(
        "--compact-threshold",
        type=_fraction,
        default=d(None),
        metavar="F",
        help="compact the conversation before a request that would fill more than this "
        "fraction of the context window (default: 0.8, from 0.1 to 1)",
    )


def _provider_options(p: argparse.ArgumentParser, d: Any) -> None:
    g = p.add_argument_group(f"real providers (--provider {'|'.join(VENDORS)})")
    g.add_argument(
        "--model",
        action="append",
        default=d(None),
        metavar="NAME",
        help="model name; give it more than once to offer several to the editor "
        "(the first is the default)",
    )
    g.add_argument(
        "--base-url",
        type=_base_url,
        default=d(None),
        metavar="URL",
        help="API base URL (default: "
        + ", ".join(f"{v.base_url} for {v.name}" for v in VENDORS.values())
        + ")",
    )
    g.add_argument(
        "--api-key-env",
        default=d(None),
        metavar="NAME",
        help="environment variable holding the API key "
        f"(default: {' or '.join(v.key_env for v in VENDORS.values())})",
    )
    g.add_argument(
        "--max-tokens",
        type=_positive_int,
        default=d(None),
        metavar="N",
        help="most tokens the model may write per request (default: 4096)",
    )
    g.add_argument(
        "--system",
        default=d(None),
        metavar="FILE",
        help="file whose text extends (or, with --system-mode replace, replaces) "
        "the default system prompt; works with every provider",
    )
    g.add_argument(
        "--thinking-budget",
        type=_positive_int,
        default=d(None),
        metavar="N",
        help=f"{ANTHROPIC.name}: enable extended thinking with this token budget",
    )
    g.add_argument(
        "--reasoning-effort",
        default=d(None),
        metavar="LEVEL",
        help=f"{OPENAI.name}: reasoning effort to ask for (e.g. low, medium, high)",
    )
    g.add_argument(
        "--max-retries",
        type=_retries,
        default=d(None),
        metavar="N",
        help="retries of a failed request before any output (default: 3)",
    )
    g.add_argument(
        "--config",
        default=d(None),
        metavar="FILE",
        help="TOML file of named provider profiles ([profiles.NAME]); flags win "
        "(default: config.toml in $ACP_BRIDGE_CONFIG_DIR, else "
        "$XDG_CONFIG_HOME/acp-bridge, else ~/.config/acp-bridge, if it exists)",
    )
    g.add_argument(
        "--profile",
        default=d(None),
        metavar="NAME",
        help="profile of --config to use (default: 'default' if present)",
    )
    g.add_argument(
        "--record",
        default=d(None),
        metavar="FILE",
        help="write what the provider streams as a script for --provider fake",
    )


# The subcommands other than serve: a bad command line naming one is no agent's.
_NOT_SERVE = frozenset(
    ("setup", "logout", "demo", "history", "sessions", "show", "permissions", "check")
)


def _bad_command_line(argv: list[str], exc: BadOption) -> int:
    """Report a bad command line; for the agent an editor started, keep serving.

    The usage and the message go to stderr.  A person at a terminal, or any
    other subcommand, gets exit status 2 at once.  An editor that started the
    agent with a bad option gets ``initialize`` answered and every
    ``session/new`` refused with the message (as for a bad script), then the
    exit status 2 when it leaves: it shows the reason instead of a dead agent."""
    exc.parser.print_usage(sys.stderr)
    sys.stderr.write(f"{exc}\n")
    words = argv[: argv.index("--")] if "--" in argv else argv
    if sys.stdin.isatty() or _NOT_SERVE.intersection(words):
        return 2
    try:  # the state directory and the log level, if those at least are good
        common, _ = common_options(True).parse_known_args(argv)
    except BadOption:
        common = argparse.Namespace(state_dir=None, log_level="warning")
    install_stderr_logging(getattr(logging, common.log_level.upper()))
    from .serve_cli import serve_refusing

    return serve_refusing(resolve_state_dir(common.state_dir), f"bad command line: {exc}")


def build_parser() -> argparse.ArgumentParser:
    parser = OptionParser(
        prog="acp-bridge",
        description="An Agent Client Protocol agent: an editor spawns it and talks JSON-RPC "
        "over stdio.  Stop keeps exactly what the user saw.",
        parents=[common_options(True)],
    )
    parser.add_argument("--version", action="version", version=f"acp-bridge {__version__}")
    _serve_options(parser, True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = sub.add_parser(
        "serve", parents=[common_options(False)], help="serve ACP on stdio (the default command)"
    )
    _serve_options(serve, False)
    setup = sub.add_parser(
        "setup",
        parents=[common_options(False)],
        help="choose a model provider, enter its API key (not shown) or a local server's URL, "
        "test it with one tiny request and store it for the bare command",
    )
    setup.add_argument(
        "--store",
        choices=["auto", "keyring", "file"],
        default="auto",
        help="where the key goes: the system keyring if one is available, else a 0600 file "
        "in the config directory (default: auto)",
    )
    sub.add_parser(
        "logout",
        parents=[common_options(False)],
        help="forget the provider and key that `acp-bridge setup` stored",
    )
    demo = sub.add_parser(
        "demo",
        parents=[common_options(False)],
        help="play an editor session in the terminal: a streamed answer, a Stop, a follow-up",
    )
    demo.add_argument(
        "--stop-after",
        type=_count(MAX_STOP_AFTER),
        default=12,
        metavar="N",
        help="press Stop after N streamed chunks (default: 12)",
    )
    history = sub.add_parser(
        "history",
        parents=[common_options(False)],
        help="print the messages of the next model request of a stored session, as JSON",
    )
    history.add_argument(
        "session_id", metavar="SESSION_ID", help="the id that session/new answered (sess_...)"
    )
    sub.add_parser(
        "sessions",
        parents=[common_options(False)],
        help="list stored sessions: id, last update, turns, size, how the last turn ended, "
        "cwd, title",
    )
    show = sub.add_parser(
        "show",
        parents=[common_options(False)],
        help="print a stored session as a timeline: turns, steps, attempts, errors, "
        "interruptions, timings",
    )
    show.add_argument("session_id", metavar="SESSION_ID", help="the session's id (sess_...)")
    permissions = sub.add_parser(
        "permissions",
        parents=[common_options(False)],
        help='list the "always allow" / "always reject" answers kept per project',
    )
    permissions.add_argument("--forget", metavar="TOOL", help="forget the rules for TOOL")
    permissions.add_argument(
        "--project", metavar="DIR", help="only the project of DIR (a session's cwd)"
    )
    permissions.add_argument("--reset", action="store_true", help="forget every rule")
    # Parsed by acp_bridge.check.cli (main hands it everything after "check").
    sub.add_parser(
        "check",
        add_help=False,
        help="run the ACP conformance suite against an agent: acp-bridge check [options] "
        "[-- AGENT COMMAND...] (see acp-bridge check --help)",
    )
    return parser


COMMON_OPTIONS: tuple[str, ...] = ("--state-dir", "--log-level")


def check_argv(argv: Sequence[str]) -> list[str] | None:
    """check's own command line when the command is check, else None: check parses
    its options itself, so the common options given before its name move after it."""
    leading: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in COMMON_OPTIONS and i + 1 < len(argv):
            leading += argv[i : i + 2]
            i += 2
        elif argv[i].startswith(tuple(f"{o}=" for o in COMMON_OPTIONS)):
            leading.append(argv[i])
            i += 1
        else:
            break
    if argv[i : i + 1] != ["check"]:
        return None
    return [*leading, *argv[i + 1 :]]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    checking = check_argv(argv)
    if checking is not None:
        from .check.cli import main as check_main

        return check_main(checking)
    try:
        args = build_parser().parse_args(argv)
    except BadOption as exc:
        return _bad_command_line(argv, exc)
    # stderr never blocks the event loop: a bounded buffer written by its own
    # thread, and repeated warnings rate-limited (see acp_bridge.stderr_log).
    install_stderr_logging(getattr(logging, args.log_level.upper()))
    state_dir = resolve_state_dir(args.state_dir)
    command = args.command or "serve"
    if command == "history":
        from .history import print_history

        return print_history(state_dir, args.session_id)
    if command == "sessions":
        from .sessions_cli import print_sessions

        return print_sessions(state_dir)
    if command == "show":
        from .sessions_cli import print_show

        return print_show(state_dir, args.session_id)
    if command == "permissions":
        from .permissions_cli import run_permissions

        return run_permissions(
            state_dir, forget=args.forget, project=args.project, reset=args.reset
        )
    if command == "setup":
        from .setup_cli import run_setup

        return run_setup(store=args.store)
    if command == "logout":
        from .setup_cli import run_logout

        return run_logout()
    if command == "check":
        # Only reached with options other than the common ones before the name
        # (main hands "check ..." over first).
        sys.stderr.write(
            "acp-bridge: give check's options after its name: acp-bridge check "
            "[options] [-- AGENT COMMAND...]\n"
        )
        return 2
    if command == "demo":
        from .demo import run_demo

        return run_demo(state_dir, stop_after=args.stop_after)
    return serve_command(args, state_dir)
