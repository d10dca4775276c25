"""Scripts that make an agent built on acp-bridge do what a check needs.

With ``--scripted`` (and when ``acp-bridge check`` checks acp-bridge itself)
each agent process gets ``--provider fake --script FILE --state-dir DIR``, the
script chosen by what the scenario needs: a stream that lasts until it is
stopped, or a tool call that asks for permission first.
"""

from __future__ import annotations

from typing import Any, Final

ENDLESS: Final[dict[str, Any]] = {"endless": {"text": "tok ", "delay_ms": 20}}

STREAM: Final[dict[str, Any]] = {
    "description": "acp-bridge check: every prompt streams until it is stopped",
    "when_exhausted": "repeat_last",
    "responses": [
        {"events": [{"text": "Streaming until you stop me. ", "chunk_size": 6}, ENDLESS]}
    ],
}

PERMISSION: Final[dict[str, Any]] = {
    "description": "acp-bridge check: a tool call that needs permission, then a stream",
    "when_exhausted": "repeat_last",
    "responses": [
        {
            "events": [
                {"text": "I will write a note first.", "chunk_size": 8},
                {
                    "tool_call": {
                        "id": "call_check_1",
                        "name": "write_file",
                        "arguments": {"path": "acp-check-note.txt", "content": "a note"},
                    }
                },
            ]
        },
        {"events": [ENDLESS]},
    ],
}

SCRIPTS: Final[dict[str, dict[str, Any]]] = {"stream": STREAM, "permission": PERMISSION}

SCRIPTED_STREAM_PROMPT: Final = "Stream until I stop you."
SCRIPTED_PERMISSION_PROMPT: Final = "Write a note."

__all__ = [
    "PERMISSION",
    "SCRIPTED_PERMISSION_PROMPT",
    "SCRIPTED_STREAM_PROMPT",
    "SCRIPTS",
    "STREAM",
]
