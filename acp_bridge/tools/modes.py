"""Session modes: how much the agent may do without asking.

* ``ask`` (default): reads and searches run; edits and commands ask first;
* ``accept_edits``: edits run without asking; commands still ask;
* ``read_only``: reads and searches run; edits and commands are refused.

Offered as ACP session modes (``modes`` in ``session/new``,
``session/set_mode``) and as a ``select`` config option with category
``mode``; both stay in step, every switch is announced with
``current_mode_update`` and ``config_option_update`` and logged as a
``session/mode`` record.
"""

from __future__ import annotations

from typing import Any, Final

MODE_OPTION: Final = "mode"
DEFAULT_MODE: Final = "ask"

MODES: Final[dict[str, tuple[str, str]]] = {
    "ask": ("Ask every time", "Reads run; edits and commands ask for permission first."),
    "accept_edits": ("Accept edits", "Reads and edits run without asking; commands ask first."),
    "read_only": ("Read-only", "Reads and searches only; edits and commands are refused."),
}


def mode_state(current: str) -> dict[str, Any]:
    """The ``modes`` field of ``session/new``."""
    return {
        "currentModeId": current,
        "availableModes": [
            {"id": mode, "name": name, "description": about}
            for mode, (name, about) in MODES.items()
        ],
    }


def config_option(current: str) -> dict[str, Any]:
    """The mode as a ``select`` config option (category ``mode``)."""
    return {
        "id": MODE_OPTION,
        "name": "Mode",
        "category": "mode",
        "type": "select",
        "currentValue": current,
        "options": [
            {"value": mode, "name": name, "description": about}
            for mode, (name, about) in MODES.items()
        ],
    }
