"""The command line of a generated JSON Schema file: write it, or ``--check`` it.

`acp_bridge.log.schema_gen` (the event log) and
`acp_bridge.providers.script_schema` (the scripted provider's script) each
render their schema from the models; this writes the text to the file, or
exits 1 when the committed file differs from it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["schema_file_main"]


def schema_file_main(
    render: Callable[[], str],
    default: Path,
    *,
    module: str,
    description: str,
    argv: list[str] | None = None,
) -> int:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    parser.add_argument("--out", type=Path, default=default, help="the file to write")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            sys.stderr.write(f"{args.out} is stale: run python -m {module}\n")
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    return 0
