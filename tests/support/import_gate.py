"""``python -c`` code that runs ``acp-bridge`` with some imports held or refused.

`gated_bridge_code(held=..., hold_until=...)` is the bridge with the modules
``held`` (by full name) waiting in their loader, in whichever thread imports
them, until the file ``hold_until`` exists; the modules ``refused`` (by full
name or package) raise ImportError until ``refuse_until`` exists.  Held in the
loader, not the finder: a finder runs under the interpreter's global import
lock, which every other import needs too.  A test opens a gate by creating
its file, so it decides exactly when a slow import may finish.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["gated_bridge_code"]

_CODE = """
import importlib.machinery, os, sys, time

HELD, REFUSED = {held!r}, {refused!r}


class Held:
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        while not os.path.exists({hold_until!r}):
            time.sleep(0.01)
        self.loader.exec_module(module)


class Gate:
    def find_spec(self, name, path=None, target=None):
        if (name in REFUSED or name.split(".")[0] in REFUSED) and not os.path.exists(
            {refuse_until!r}
        ):
            raise ImportError(name + ": refused until the test opens its gate")
        if name not in HELD:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = Held(spec.loader)
        return spec


sys.meta_path.insert(0, Gate())
from acp_bridge.cli import main
raise SystemExit(main())
"""


def gated_bridge_code(
    *,
    held: Iterable[str],
    hold_until: str,
    refused: Iterable[str] = (),
    refuse_until: str = "",
) -> str:
    """The code (see the module docstring); ``refuse_until`` is needed with ``refused``."""
    refused = tuple(refused)
    if refused and not refuse_until:
        raise ValueError("refused modules need a refuse_until file")
    return _CODE.format(
        held=tuple(held), refused=refused, hold_until=hold_until, refuse_until=refuse_until
    )
