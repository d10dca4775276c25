"""``acp-bridge check [options] [-- AGENT COMMAND...]``: the conformance suite on any agent.

Without an agent command it checks acp-bridge itself, on its scripted
provider.  The exit status is 0 when the agent is conformant (no mandatory or
capability check failed, no mandatory check left unexercised), 1 when it is
not, 2 for bad options.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from ..cli_values import common_options, count, seconds
from ..client import bridge_command
from ..stderr_log import install as install_stderr_logging
from .requirements import REQUIREMENTS
from .requirements_v2 import V2_REQUIREMENTS, requirements_for
from .runner import DEFAULT_STREAM_PROMPT, CheckOptions, run_check_sync

USAGE = "acp-bridge check [options] [-- AGENT COMMAND...]"


# Bounds of check's numbers: any timeout up to an hour, any count up to 10,000.
_seconds = seconds(3600.0)
_count = count(10_000)


def _env(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def _check_id(text: str) -> str:
    # Of either protocol here; main() refuses one the chosen protocol does not have.
    if text not in REQUIREMENTS and text not in V2_REQUIREMENTS:
        known = ", ".join(dict.fromkeys([*REQUIREMENTS, *V2_REQUIREMENTS]))
        raise argparse.ArgumentTypeError(f"unknown check {text!r} (known: {known})")
    return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="acp-bridge check",
        # --state-dir and --log-level, as every subcommand takes: the checker's
        # agents keep their sessions in temporary folders of the run, never in
        # the state directory, so a check leaves the stored sessions alone.
        parents=[common_options(True)],
        usage=USAGE,
        description="Run an ACP conformance suite (v1, or with --protocol 2 the Stop checks "
        "of v2) against an agent over stdio and print "
        "a report: every check with its tier (mandatory, capability, advisory), the "
        "requirement, the spec sentence behind it, and for a failure the wire frames at "
        "fault.  Without an agent command, acp-bridge itself is checked.",
        epilog="Exit status: 0 conformant, 1 not conformant, 2 bad options.  "
        "See docs/testing.md for the checks.",
    )
    p.add_argument(
        "--protocol",
        type=int,
        choices=(1, 2),
        default=1,
        help="the ACP version to check: 1 (default: the whole suite) or 2 (the Stop checks "
        "in v2 terms: idle(cancelled), ordering, next turn, race, resume with replay; every "
        "frame validated against the v2 schema)",
    )
    p.add_argument(
        "--json",
        metavar="FILE",
        help="also write the report, with every wire transcript whole, as JSON to FILE",
    )
    p.add_argument(
        "--stream-prompt",
        metavar="TEXT",
        default=DEFAULT_STREAM_PROMPT,
        help="a prompt that makes the agent stream for at least a few seconds (default: a "
        "count to two thousand in words); agents on acp-bridge's scripted provider stream "
        "whatever the prompt",
    )
    p.add_argument(
        "--permission-prompt",
        metavar="TEXT",
        help="a prompt that makes the agent ask for permission (a tool call), for the Stop "
        "during a permission request; without it that check is skipped (unless --scripted)",
    )
    p.add_argument(
        "--scripted",
        action="store_true",
        help="the agent is built on acp-bridge: give each process --provider fake --script "
        "FILE --state-dir DIR with a script for its scenario (the default with no command)",
    )
    p.add_argument(
        "--agent-env",
        type=_env,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for the agent (repeatable)",
    )
    p.add_argument("--agent-cwd", metavar="DIR", help="the agent's working directory")
    p.add_argument(
        "--logout",
        action="store_true",
        help="send logout to an agent that advertises it (it may forget the credentials the "
        "agent keeps for you; without it that check is skipped, unless --scripted)",
    )
    p.add_argument(
        "--session-cwd",
        metavar="DIR",
        help="the cwd of the sessions the checker opens (default: a new temporary folder)",
    )
    p.add_argument(
        "--stop-after",
        type=_count,
        default=3,
        metavar="N",
        help="chunks to wait for before pressing Stop (default: 3)",
    )
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="for the answer of a request that needs no model (default: 10)",
    )
    p.add_argument(
        "--stream-timeout",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="for the first chunks of a prompt or a permission request (default: 30)",
    )
    p.add_argument(
        "--stop-timeout",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="for the response of a prompt after session/cancel (default: 10)",
    )
    p.add_argument(
        "--watch",
        type=_seconds,
        default=1.0,
        metavar="SECONDS",
        help="how long to watch for updates after a response (default: 1)",
    )
    p.add_argument(
        "--exit-timeout",
        type=_seconds,
        default=5.0,
        metavar="SECONDS",
        help="for the agent to exit once its stdin closes (default: 5)",
    )
    p.add_argument(
        "--stops",
        type=_count,
        default=20,
        metavar="N",
        help="Stops to make over the Stop scenarios, for the figures of the report's "
        '"stop" (default: 20)',
    )
    p.add_argument(
        "--only",
        type=_check_id,
        action="append",
        default=[],
        metavar="CHECK",
        help="run only the scenarios of this check (repeatable), e.g. stop.cancelled",
    )
    return p


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The checker's options and the agent's command line (after ``--``)."""
    args = list(argv)
    if "--" in args:
        at = args.index("--")
        return args[:at], args[at + 1 :]
    return args, []


def main(argv: Sequence[str] | None = None) -> int:
    options_argv, command = split_command(sys.argv[2:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(options_argv)
    install_stderr_logging(getattr(logging, args.log_level.upper()))
    checks = requirements_for(args.protocol)
    for check_id in args.only:
        if check_id not in checks:
            parser.error(
                f"--only {check_id}: not a check of --protocol {args.protocol} "
                f"(its checks: {', '.join(checks)})"
            )
    scripted = args.scripted or not command
    if command and shutil.which(command[0]) is None:
        parser.error(f"cannot run {command[0]!r}: no such program")
    options = CheckOptions(
        command=command or bridge_command(),
        scripted=scripted,
        env=dict(args.agent_env),
        cwd=args.agent_cwd,
        session_cwd=args.session_cwd,
        stream_prompt=args.stream_prompt,
        permission_prompt=args.permission_prompt,
        stop_after=args.stop_after,
        timeout=args.timeout,
        stream_timeout=args.stream_timeout,
        stop_timeout=args.stop_timeout,
        watch=args.watch,
        exit_timeout=args.exit_timeout,
        only=frozenset(args.only),
        stops=args.stops,
        progress=sys.stderr,
        logout=args.logout,
        protocol=args.protocol,
    )
    from .report import render_text, write_json

    report = run_check_sync(options)
    try:
        sys.stdout.write(render_text(report))
        if args.json:
            with Path(args.json).open("w", encoding="utf-8") as out:
                write_json(report, out)
    finally:
        report.close()
    return report.exit_code


__all__ = ["build_parser", "main", "split_command"]
