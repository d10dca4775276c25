"""acp-bridge: an Agent Client Protocol agent whose Stop keeps exactly what the user saw.

The names below are the library surface for building an agent on the bridge:
serve ACP on stdio with your own provider (`serve`, `ServeOptions`,
`Provider` and its stream events), and read what a session recorded
(`read_records`, `derive_messages`, `check_history`, `check_log`).  They are
imported on first use, so the command line starts without loading them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "serve": "acp_bridge.server",
    "ServeOptions": "acp_bridge.server",
    "StartupError": "acp_bridge.server",
    "TurnConfig": "acp_bridge.loop.turn",
    "Provider": "acp_bridge.providers.base",
    "ModelRequest": "acp_bridge.providers.base",
    "ProviderError": "acp_bridge.providers.base",
    "TextDelta": "acp_bridge.providers.base",
    "ReasoningDelta": "acp_bridge.providers.base",
    "ToolCallStart": "acp_bridge.providers.base",
    "ToolCallDelta": "acp_bridge.providers.base",
    "BlockEnd": "acp_bridge.providers.base",
    "Usage": "acp_bridge.providers.base",
    "Finish": "acp_bridge.providers.base",
    "ScriptedProvider": "acp_bridge.providers.scripted",
    "load_script": "acp_bridge.providers.script_format",
    "read_records": "acp_bridge.log.reader",
    "derive_messages": "acp_bridge.log.derive",
    "check_history": "acp_bridge.log.check",
    "check_log": "acp_bridge.log.check",
}

__all__ = [
    "BlockEnd",
    "Finish",
    "ModelRequest",
    "Provider",
    "ProviderError",
    "ReasoningDelta",
    "ScriptedProvider",
    "ServeOptions",
    "StartupError",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallStart",
    "TurnConfig",
    "Usage",
    "__version__",
    "check_history",
    "check_log",
    "derive_messages",
    "load_script",
    "read_records",
    "serve",
]

if TYPE_CHECKING:
    from .log.check import check_history, check_log
    from .log.derive import derive_messages
    from .log.reader import read_records
    from .loop.turn import TurnConfig
    from .providers.base import (
        BlockEnd,
        Finish,
        ModelRequest,
        Provider,
        ProviderError,
        ReasoningDelta,
        TextDelta,
        ToolCallDelta,
        ToolCallStart,
        Usage,
    )
    from .providers.script_format import load_script
    from .providers.scripted import ScriptedProvider
    from .server import ServeOptions, StartupError, serve


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'acp_bridge' has no attribute {name!r}")
    return getattr(import_module(module), name)
