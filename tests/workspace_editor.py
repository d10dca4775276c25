"""The test editor of tool sessions: files and terminals served from a temporary
workspace, scripted answers to permission requests.  It lives in the public
kit (`acp_bridge.testing.workspace`); this module keeps the tests' import path."""

from __future__ import annotations

from acp_bridge.testing.workspace import FULL_CAPABILITIES as FULL_CAPABILITIES
from acp_bridge.testing.workspace import NO_CAPABILITIES as NO_CAPABILITIES
from acp_bridge.testing.workspace import Raw as Raw
from acp_bridge.testing.workspace import Terminal as Terminal
from acp_bridge.testing.workspace import WorkspaceEditor as WorkspaceEditor
