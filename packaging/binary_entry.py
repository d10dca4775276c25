"""The entry point of the single-file executable (see packaging/build_binary.py)."""

from acp_bridge.cli import main

raise SystemExit(main())
