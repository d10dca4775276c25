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
import functools
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from . import __version__
from .paths import ENV_STATE_DIR, resolve_state_dir
from .stderr_log import install as install_stderr_logging

if TYPE_CHECKING:
    from .providers.base import Provider
    from .providers.choose import Choice

log = logging.getLogger("acp_bridge.cli")

PROVIDERS = ("fake", "anthropic", "openai")


def _common(defaults: bool) -> _Parser:
    # Subparsers get SUPPRESS defaults so an option given before the
    # subcommand name is not overwritten by the subparser's default.
    d: Any = (lambda v: v) if defaults else (lambda v: argparse.SUPPRESS)
    p = _Parser(add_help=False)
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
        default=d(None),
        choices=PROVIDERS,
        help="model provider: 'anthropic' (Messages API), 'openai' (any OpenAI-compatible "
        "Chat Completions server), or 'fake', the keyless scripted provider (default: the "
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


# Bounds of the numeric options: finite, and small enough that a typo
# (an extra zero, ``inf``) is refused rather than silently honoured.
MAX_CANCEL_DEADLINE = 3600.0
MAX_IDLE_TIMEOUT = 86400.0
MAX_TOOL_TIMEOUT = 86400.0
MAX_STEPS = 10_000
MAX_STOP_AFTER = 1_000_000
MAX_CONTEXT_WINDOW = 100_000_000


def _provider_options(p: argparse.ArgumentParser, d: Any) -> None:
    g = p.add_argument_group("real providers (--provider anthropic|openai)")
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
        help="API base URL (default: https://api.anthropic.com for anthropic, "
        "https://api.openai.com/v1 for openai)",
    )
    g.add_argument(
        "--api-key-env",
        default=d(None),
        metavar="NAME",
        help="environment variable holding the API key "
        "(default: ANTHROPIC_API_KEY or OPENAI_API_KEY)",
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
        help="anthropic: enable extended thinking with this token budget",
    )
    g.add_argument(
        "--reasoning-effort",
        default=d(None),
        metavar="LEVEL",
        help="openai: reasoning effort to ask for (e.g. low, medium, high)",
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


def _seconds(maximum: float, *, zero: bool = True) -> Callable[[str], float]:
    """An option that is a number of seconds up to ``maximum``, from 0 (or above
    0 when ``zero`` is False: where 0 could only be a mistake)."""
    lowest = "from 0" if zero else "above 0"
    expected = f"expected a number of seconds {lowest} to {maximum:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
        above_lowest = value >= 0 if zero else value > 0
        if not (above_lowest and value <= maximum):  # also refuses nan and inf
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")
        return value

    return parse


def _count(maximum: int | None, minimum: int = 1) -> Callable[[str], int]:
    """An option that is a whole number from ``minimum`` to ``maximum`` (no upper bound if None)."""
    expected = (
        f"expected a whole number from {minimum} to {maximum}"
        if maximum is not None
        else f"expected a whole number of at least {minimum}"
    )

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")
        return value

    return parse


def _variable_names(text: str) -> tuple[str, ...]:
    from .tools.secret_env import parse_pass_env

    try:
        names = parse_pass_env([text])
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not names:
        raise argparse.ArgumentTypeError("expected a variable name, got nothing")
    return names


def _pass_env(flags: Sequence[tuple[str, ...]] | None) -> tuple[str, ...]:
    """The names of --pass-env, then those of $ACP_BRIDGE_PASS_ENV (a bad one
    there is skipped with a warning: the editor's environment is no option line)."""
    import os

    from .tools.secret_env import ENV_PASS_ENV, parse_pass_env

    names = [name for names in flags or [] for name in names]
    for item in os.environ.get(ENV_PASS_ENV, "").replace(",", " ").split():
        try:
            names.extend(parse_pass_env([item]))
        except ValueError as exc:
            logging.getLogger("acp_bridge").warning("%s: %s; ignored", ENV_PASS_ENV, exc)
    return tuple(dict.fromkeys(names))


def _base_url(text: str) -> str:
    """``--base-url``: an http(s) URL with a host, checked before anything starts."""
    from .providers.config import base_url_problem

    problem = base_url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{problem}, got {text!r}")
    return text


# For options whose only natural bound is the type (token counts and the like).
_positive_int = _count(None)


def _fraction(text: str) -> float:
    expected = "expected a fraction from 0.1 to 1"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
    if not 0.1 <= value <= 1.0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")
    return value


MAX_RETRIES = 20
_retries = _count(MAX_RETRIES, minimum=0)


class _Parser(argparse.ArgumentParser):
    """Errors say ``--option: what was wrong`` (argparse says ``argument --option: ...``)."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument "):
            message = message[len("argument ") :]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
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
    setup = sub.add_parser(
        "setup",
        parents=[_common(False)],
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
        parents=[_common(False)],
        help="forget the provider and key that `acp-bridge setup` stored",
    )
    demo = sub.add_parser(
        "demo",
        parents=[_common(False)],
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
        parents=[_common(False)],
        help="print the messages of the next model request of a stored session, as JSON",
    )
    history.add_argument(
        "session_id", metavar="SESSION_ID", help="the id that session/new answered (sess_...)"
    )
    sub.add_parser(
        "sessions",
        parents=[_common(False)],
        help="list stored sessions: id, last update, turns, size, how the last turn ended, "
        "cwd, title",
    )
    show = sub.add_parser(
        "show",
        parents=[_common(False)],
        help="print a stored session as a timeline: turns, steps, attempts, errors, "
        "interruptions, timings",
    )
    show.add_argument("session_id", metavar="SESSION_ID", help="the session's id (sess_...)")
    permissions = sub.add_parser(
        "permissions",
        parents=[_common(False)],
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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["check"]:
        from .check.cli import main as check_main

        return check_main(argv[1:])
    args = build_parser().parse_args(argv)
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
        # Only reached with options before the name (main hands "check ..." over first).
        sys.stderr.write(
            "acp-bridge: give check's options after its name: acp-bridge check "
            "[options] [-- AGENT COMMAND...]\n"
        )
        return 2
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
            "To see it work, run: acp-bridge demo; to choose its model: acp-bridge setup\n"
        )
    load: Callable[[], Callable[[], Provider]]
    if args.provider == "fake" or (args.provider is None and args.script):
        load = functools.partial(_load_fake_provider, args.script, _flags(args), args)
    else:
        load = _http_loader(args)
    options = ServeOptions(
        state_dir=state_dir,
        load_provider=load,
        turn=TurnConfig(
            max_steps=args.max_steps,
            cancel_deadline=args.cancel_deadline,
            idle_timeout=args.idle_timeout or None,
            tool_timeout=args.tool_timeout,
            pass_env=_pass_env(args.pass_env),
        ),
        forget_credentials=_forget_credentials,
        setup_command=setup_command(),
        mcp_start_timeout=args.mcp_start_timeout,
        mcp_config_file=_mcp_config_file(args),
    )
    return anyio.run(serve, options)


def _mcp_config_file(args: argparse.Namespace) -> str:
    """The config file whose ``[[mcp_servers]]`` every session gets (read when one starts)."""
    from .paths import default_config_file

    return os.path.expanduser(args.config) if args.config else default_config_file()


def setup_command() -> tuple[str, ...]:
    """How this very program runs ``acp-bridge setup`` (for a client's terminal)."""
    if getattr(sys, "frozen", False):  # a single-file build: the executable itself
        return (sys.executable, "setup")
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(script) in ("acp-bridge", "acp-bridge-agent") and os.access(
        script, os.X_OK
    ):
        return (script, "setup")
    return (sys.executable, "-m", "acp_bridge", "setup")


def _forget_credentials() -> list[str]:
    from .credentials import forget

    return forget()


def _http_loader(args: argparse.Namespace) -> Callable[[], Callable[[], Provider]]:
    def load() -> Callable[[], Provider]:
        from .context.config import context_config
        from .providers.build import http_provider_factory, provider_config
        from .providers.config import ConfigError
        from .server import StartupError

        try:
            choice = _choose_provider(args)
            if choice.provider == "fake":
                return _load_fake_provider(args.script, choice.settings, args)
            if choice.provider not in PROVIDERS:
                raise ConfigError(
                    f"unknown provider {choice.provider!r} (known: {', '.join(PROVIDERS)})"
                )
            context = context_config(choice.settings, context_window=args.context_window)
            config = provider_config(
                choice.settings, idle_timeout=args.idle_timeout or None, context=context
            )
            log.info(
                "provider %s, model %s at %s (chosen by %s)",
                config.provider,
                config.models[0],
                config.base_url,
                choice.source,
            )
            return http_provider_factory(config, args.record, key=choice.key)
        except ConfigError as exc:
            raise StartupError(str(exc)) from exc

    return load


def _choose_provider(args: argparse.Namespace) -> Choice:
    """The provider to serve, from the flags, the config file, setup and the
    environment (see `acp_bridge.providers.choose`); raises AuthRequired."""
    from .credentials import load_stored
    from .paths import default_config_file
    from .providers.choose import choose
    from .providers.config import FLAG_KEYS, ConfigError, load_profile

    config_file = args.config or default_config_file()
    profile: dict[str, Any] = {}
    if args.config or os.path.exists(config_file):
        profile = load_profile(config_file, args.profile)
    elif args.profile:
        raise ConfigError(f"--profile {args.profile}: there is no config file {config_file}")
    name = args.profile or "default"
    return choose(
        flags={key: getattr(args, key, None) for key in FLAG_KEYS},
        profile=profile,
        profile_source=f"the profile {name!r} of {config_file}",
        stored=load_stored,
        env=os.environ,
        config_file=config_file,
    )


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    """The context settings given as flags (for a provider without a config file)."""
    from .context.config import CONTEXT_FLAG_KEYS

    return {
        name: getattr(args, name)
        for name in CONTEXT_FLAG_KEYS
        if getattr(args, name, None) is not None
    }


def _load_fake_provider(
    script_path: str | None, settings: dict[str, Any], args: argparse.Namespace
) -> Callable[[], Provider]:
    from .context.config import context_config
    from .providers.config import ConfigError
    from .providers.script_format import ScriptError, load_script, parse_script
    from .providers.scripted import ScriptedProvider
    from .server import StartupError

    try:
        context = context_config(settings, context_window=getattr(args, "context_window", None))
        script = (
            load_script(script_path)
            if script_path
            else parse_script(BUILTIN_SCRIPT, source="<built-in>")
        )
    except (ScriptError, ConfigError) as exc:
        raise StartupError(str(exc)) from exc
    return lambda: ScriptedProvider(script, context)


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
