"""The values of ``acp-bridge``'s options: their types, checked at parse time, and bounds;
the options every subcommand takes (`common_options`, `acp-bridge check` too), and the
parser whose errors `acp_bridge.cli.main` reports."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, NoReturn

from .paths import ENV_STATE_DIR

# Bounds of the numeric options: finite, and small enough that a typo
# (an extra zero, ``inf``) is refused rather than silently honoured.
MAX_CANCEL_DEADLINE = 3600.0
MAX_IDLE_TIMEOUT = 86400.0
MAX_TOOL_TIMEOUT = 86400.0
MAX_STEPS = 10_000
MAX_STOP_AFTER = 1_000_000
MAX_CONTEXT_WINDOW = 100_000_000


def seconds(maximum: float, *, zero: bool = True) -> Callable[[str], float]:
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


def count(maximum: int | None, minimum: int = 1) -> Callable[[str], int]:
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


def variable_names(text: str) -> tuple[str, ...]:
    from .tools.secret_env import parse_pass_env

    try:
        names = parse_pass_env([text])
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not names:
        raise argparse.ArgumentTypeError("expected a variable name, got nothing")
    return names


def base_url(text: str) -> str:
    """``--base-url``: an http(s) URL with a host, checked before anything starts."""
    from .providers.config import base_url_problem

    problem = base_url_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{problem}, got {text!r}")
    return text


# For options whose only natural bound is the type (token counts and the like).
positive_int = count(None)


def fraction(text: str) -> float:
    expected = "expected a fraction from 0.1 to 1"
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
    if not 0.1 <= value <= 1.0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{expected}, got {text!r}")
    return value


MAX_RETRIES = 20
retries = count(MAX_RETRIES, minimum=0)


class BadOption(Exception):
    """A command line argparse refuses; ``str()`` is what to tell the user."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(f"{parser.prog}: {message}")
        self.parser = parser


class OptionParser(argparse.ArgumentParser):
    """Errors say ``--option: what was wrong`` (argparse says ``argument --option: ...``)
    and raise `BadOption`, which `main` reports."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument "):
            message = message[len("argument ") :]
        raise BadOption(self, message)


def common_options(defaults: bool) -> OptionParser:
    """--state-dir and --log-level, which every subcommand takes (check too)."""
    # Subparsers get SUPPRESS defaults so an option given before the
    # subcommand name is not overwritten by the subparser's default.
    d: Any = (lambda v: v) if defaults else (lambda v: argparse.SUPPRESS)
    p = OptionParser(add_help=False)
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
