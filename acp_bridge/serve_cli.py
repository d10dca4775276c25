"""``acp-bridge [serve]``: the agent an editor starts, from the parsed options.

The provider is chosen here (`acp_bridge.providers.choose`) and loaded off the
start-up path: `acp_bridge.server.serve` answers ``initialize`` before the
provider's modules are imported.  The options themselves are `acp_bridge.cli`'s.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .providers.base import Provider
    from .providers.choose import Choice
    from .providers.config import ProviderConfig
    from .server import ServeOptions

from .providers.vendors import FAKE, PROVIDERS

__all__ = ["BUILTIN_SCRIPT", "PROVIDERS", "serve_command", "serve_refusing", "setup_command"]

log = logging.getLogger("acp_bridge.cli")


def _pass_env(flags: Sequence[tuple[str, ...]] | None) -> tuple[str, ...]:
    """The names of --pass-env, then those of $ACP_BRIDGE_PASS_ENV (a bad one
    there is skipped with a warning: the editor's environment is no option line)."""
    from .tools.secret_env import ENV_PASS_ENV, parse_pass_env

    names = [name for names in flags or [] for name in names]
    for item in os.environ.get(ENV_PASS_ENV, "").replace(",", " ").split():
        try:
            names.extend(parse_pass_env([item]))
        except ValueError as exc:
            logging.getLogger("acp_bridge").warning("%s: %s; ignored", ENV_PASS_ENV, exc)
    return tuple(dict.fromkeys(names))


def serve_command(args: argparse.Namespace, state_dir: str) -> int:
    """Serve ACP on stdin/stdout with the options of ``acp-bridge [serve]``."""
    interactive = sys.stdin.isatty()
    if interactive:
        sys.stderr.write(
            "acp-bridge: serving ACP on stdin/stdout; an editor starts it this way. "
            "To see it work, run: acp-bridge demo; to choose its model: acp-bridge setup\n"
        )
    from .loop.turn import TurnConfig
    from .server import ServeOptions

    load: Callable[[], Callable[[], Provider]]
    if args.provider == FAKE or (args.provider is None and args.script):
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
            subagent_depth=args.subagent_depth,
            subagents_at_once=args.subagents_at_once,
        ),
        forget_credentials=_forget_credentials,
        setup_command=setup_command(),
        mcp_start_timeout=args.mcp_start_timeout,
        latest_protocol=args.protocol,
        mcp_config_file=_mcp_config_file(args),
    )
    return _run(options)


def serve_refusing(state_dir: str, reason: str) -> int:
    """Serve with every ``session/new`` refused with ``reason``: the command line
    was bad (`acp_bridge.cli`).  ``initialize`` is answered as usual, so the
    editor shows the reason rather than an agent that died at once, and the exit
    status is 2 when the editor leaves, as for a bad script."""
    from .server import ServeOptions, StartupError

    def refuse() -> Callable[[], Provider]:
        raise StartupError(reason)

    return _run(ServeOptions(state_dir=state_dir, load_provider=refuse))


def _run(options: ServeOptions) -> int:
    import anyio

    from .server import serve

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
    """The provider's loader: its choice and configuration, read at each load."""

    def load() -> Callable[[], Provider]:
        from .providers.config import ConfigError
        from .server import StartupError

        try:
            choice = _choose_provider(args)
            if choice.provider == FAKE:
                return _load_fake_provider(args.script, choice.settings, args)
            config = _http_config(args, choice)
            log.info(
                "provider %s, model %s at %s (chosen by %s)",
                config.provider,
                config.models[0],
                config.base_url,
                choice.source,
            )
            return _http_factory(args, choice, config)
        except ConfigError as exc:
            raise StartupError(str(exc)) from exc

    return load


def _http_config(args: argparse.Namespace, choice: Choice) -> ProviderConfig:
    """The checked configuration of the real provider ``choice`` names; `ConfigError`."""
    from .context.config import context_config
    from .providers.build import provider_config
    from .providers.config import ConfigError

    if choice.provider not in PROVIDERS or choice.provider == FAKE:
        raise ConfigError(f"unknown provider {choice.provider!r} (known: {', '.join(PROVIDERS)})")
    context = context_config(choice.settings, context_window=args.context_window)
    return provider_config(choice.settings, idle_timeout=args.idle_timeout or None, context=context)


def _http_factory(
    args: argparse.Namespace, choice: Choice, config: ProviderConfig
) -> Callable[[], Provider]:
    """The HTTP provider's factory; `StartupError` if its stack cannot be made."""
    from .providers.build import http_provider_factory
    from .providers.config import ConfigError
    from .server import StartupError

    try:
        return http_provider_factory(config, args.record, key=choice.key)
    except ConfigError:
        raise
    except Exception as exc:  # a session may have been answered: its prompts say why
        reason = f"cannot make the {config.provider} provider: {type(exc).__name__}: {exc}"
        raise StartupError(reason) from exc


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
    script_path: str | None,
    settings: dict[str, Any],
    args: argparse.Namespace,
) -> Callable[[], Provider]:
    from .config_error import ConfigError
    from .context.config import context_config
    from .providers.script_check import ScriptError, prepare_data, prepare_file
    from .providers.scripted import ScriptedProvider
    from .server import StartupError

    try:
        context = context_config(settings, context_window=getattr(args, "context_window", None))
        # A script the quick check passes has its models built at the first
        # model request (an invalid one is refused here, by the models).
        script = (
            prepare_file(script_path)
            if script_path
            else prepare_data(BUILTIN_SCRIPT, source="<built-in>")
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
