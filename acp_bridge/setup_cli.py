"""``acp-bridge setup`` and ``acp-bridge logout``: the provider for the bare command.

Setup is an interactive terminal flow (it is also what an editor's terminal
auth runs): choose a provider, enter its API key (read without echo) or the
base URL of a local server, test it with one tiny request, and store it
(`acp_bridge.credentials`).  An editor that starts ``acp-bridge`` (or
``acp-bridge-agent``) without ``--provider`` then serves it.  The key is
never printed, logged or put in an error message.
"""

from __future__ import annotations

import getpass
import os
import sys
import time
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from .credentials import Store, forget, load_stored, save, setup_file
from .paths import default_config_file
from .providers.config import ConfigError
from .providers.vendors import ANTHROPIC, LOCAL_SERVERS, OPENAI, SERVICES, VENDORS
from .redact import SECRETS

__all__ = ["run_logout", "run_setup"]


@dataclass(frozen=True, slots=True)
class Kind:
    label: str
    provider: str
    asks_base_url: bool
    needs_key: bool
    base_url: str | None = None


KINDS: Final = (
    Kind(f"{ANTHROPIC.title} (Claude models)", ANTHROPIC.name, False, True),
    Kind(OPENAI.title, OPENAI.name, False, True),
    Kind(
        f"Another OpenAI-compatible service ({', '.join(SERVICES)}, ...)", OPENAI.name, True, True
    ),
    Kind(
        "A local server: " + ", ".join(name for name, _ in LOCAL_SERVERS),
        OPENAI.name,
        True,
        False,
        LOCAL_SERVERS[0][1],
    ),
)
TEST_PROMPT: Final = "Reply with the single word: ok"
LOOPBACK: Final = ("127.0.0.1", "localhost", "::1")


def server_name(provider: str, base_url: str | None) -> str:
    """What setup calls the server: a local one by the usual port of its kind
    (Ollama, not the ``openai`` provider that speaks to it), else its vendor."""
    url = urlsplit(base_url or VENDORS[provider].base_url)
    if url.hostname in LOOPBACK:
        for name, usual in LOCAL_SERVERS:
            if url.port == urlsplit(usual).port:
                return name
        return "a local server"
    if provider == ANTHROPIC.name:
        return ANTHROPIC.title
    if url.hostname == urlsplit(OPENAI.base_url).hostname:
        return OPENAI.title
    return "an OpenAI-compatible service"


class Cancelled(Exception):
    pass


def say(text: str = "") -> None:
    sys.stdout.write(SECRETS.text(text) + "\n")
    sys.stdout.flush()


def ask(question: str, default: str | None = None, *, required: bool = True) -> str:
    shown = f"{question} [{default}]: " if default else f"{question}: "
    while True:
        try:
            answer = input(shown).strip()
        except EOFError:
            raise Cancelled from None
        if answer:
            return answer
        if default is not None:
            return default
        if not required:
            return ""
        say("  (an answer is needed; Ctrl-C leaves setup)")


def ask_secret(question: str, *, required: bool) -> str:
    while True:
        try:
            answer = getpass.getpass(f"{question}: ").strip()
        except EOFError:
            raise Cancelled from None
        if answer or not required:
            return answer
        say("  (an answer is needed; Ctrl-C leaves setup)")


def run_setup(*, store: Store = "auto") -> int:
    if not sys.stdin.isatty():
        sys.stderr.write(
            "acp-bridge setup asks questions: run it in a terminal. Without one, set "
            "ANTHROPIC_API_KEY or OPENAI_API_KEY in the agent's environment instead.\n"
        )
        return 2
    try:
        return _setup(store)
    except (Cancelled, KeyboardInterrupt):
        say("\nSetup cancelled; nothing was stored.")
        return 130


def _setup(store: Store) -> int:
    say("acp-bridge setup: the model an editor gets when it starts acp-bridge without --provider.")
    _show_current()
    say()
    for number, kind in enumerate(KINDS, 1):
        say(f"  {number}  {kind.label}")
    while True:
        picked = ask(f"Provider (1-{len(KINDS)})")
        if picked.isdigit() and 1 <= int(picked) <= len(KINDS):
            kind = KINDS[int(picked) - 1]
            break
        say(f"  (type a number from 1 to {len(KINDS)})")
    base_url = _ask_base_url(kind)
    key: str | None
    if kind.needs_key:
        key = ask_secret("API key (not shown as you type)", required=True)
    else:
        key = ask_secret("API key, if the server needs one (Enter for none)", required=False)
    key = key or None
    default_model = None if kind.asks_base_url else VENDORS[kind.provider].model
    model = ask("Model", default_model)
    url = base_url or VENDORS[kind.provider].base_url
    name = server_name(kind.provider, url)
    say(f"Testing with one tiny request to {model} on {name} at {url} ...")
    error = test_request(kind.provider, base_url, model, key)
    if error is None:
        say("  it answered.")
    else:
        say(f"  it failed: {error}")
        if ask("Store it anyway? (y/N)", "n").lower() not in ("y", "yes"):
            say("Nothing was stored; run `acp-bridge setup` again to retry.")
            return 1
    try:
        saved = save(kind.provider, base_url, model, key, store=store)
    except (ConfigError, OSError) as exc:
        say(f"Cannot store it: {exc}")
        return 1
    if saved.key_where is None:
        say(f"Stored in {saved.path} (no key).")
    elif saved.key_where == saved.path:
        say(
            f"Stored in {saved.path}, key included (the file is readable only by you; "
            "no system keyring was available)."
        )
    else:
        say(f"Stored in {saved.path}; the key is in {saved.key_where}.")
    config_file = default_config_file()
    if os.path.exists(config_file):
        say(f"Note: a profile of {config_file} that names a provider takes precedence over this.")
    say(
        "An editor that starts acp-bridge (or acp-bridge-agent) without --provider now uses it; "
        "`acp-bridge logout` forgets it."
    )
    return 0


def _show_current() -> None:
    try:
        stored = load_stored()
    except ConfigError as exc:
        say(f"Stored now: unusable ({exc}).")
        return
    if stored is None:
        return
    where = VENDORS[stored.provider].base_url if stored.base_url is None else stored.base_url
    name = server_name(stored.provider, where)
    say(
        f"Stored now: {name} at {where}, model {stored.model or 'default'} "
        f"(in {setup_file()}); this setup replaces it."
    )


def _ask_base_url(kind: Kind) -> str | None:
    if not kind.asks_base_url:
        return None
    if kind.base_url is not None:
        say("  Usual addresses: " + ", ".join(f"{name} {url}" for name, url in LOCAL_SERVERS))
    while True:
        url = ask("Base URL", kind.base_url).rstrip("/")
        if url.startswith(("http://", "https://")) and len(url) > len("https://"):
            return url
        say("  (a URL that starts with http:// or https://)")


def test_request(provider: str, base_url: str | None, model: str, key: str | None) -> str | None:
    """Send one tiny request; None if the provider answered, else why not (no key in it)."""
    import anyio

    from .providers.base import Finish, ModelRequest, ProviderError, TextDelta
    from .providers.build import http_provider_factory, provider_config

    settings = {"provider": provider, "model": model, "base_url": base_url, "max_retries": 0}
    if key is not None:
        settings["api_key_env"] = "your entry"
    config = provider_config(settings, idle_timeout=60.0)
    make = http_provider_factory(config, None, key=key or "")
    request = ModelRequest(
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": TEST_PROMPT}],
                "interrupted": False,
            }
        ],
        max_tokens=16,
    )

    async def run() -> None:
        provider_ = make()
        with anyio.fail_after(90):
            async with provider_.stream(request) as stream:
                async for event in stream:
                    if isinstance(event, TextDelta | Finish):
                        return

    started = time.monotonic()
    try:
        anyio.run(run)
    except ProviderError as exc:
        # Scrubbed of the key: the provider registered it (`acp_bridge.redact`).
        return exc.message
    except TimeoutError:
        return f"no answer within {time.monotonic() - started:.0f} s"
    return None


def run_logout() -> int:
    try:
        removed = forget()
    except OSError as exc:
        sys.stderr.write(f"acp-bridge logout: {exc.strerror or exc}\n")
        return 1
    if removed:
        say("Forgot " + " and ".join(removed) + ".")
    else:
        say(f"Nothing was stored ({setup_file()} does not exist).")
    return 0
