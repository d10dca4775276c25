"""Validating what the bridge writes against the official ACP JSON Schema.

The tests check against a copy from outside the repository (the one bundled
in the package, for ``acp-bridge check``, is tested against it by
``tests/test_check_schema.py``).  ``load_acp_schema()`` reads the first of:

1. ``tests/support/harness.py``, ``ACP_SCHEMA`` (``shared/acp/schema.json`` beside the
   checkout), an override for working against an unreleased schema;
2. ``schema/v1/schema.json`` of the official TypeScript SDK package
   (``@agentclientprotocol/sdk``, pinned by ``tests/ts_client/package-lock.json``),
   installed with npm by the test run when it is not there yet.  The Python SDK
   (``agent-client-protocol``) ships generated models but no schema file.

When neither can be had (no Node, no registry), the test skips with the
reason, or fails when ``CI`` is true or ``ACP_BRIDGE_REQUIRE_TS_SDK`` is set:
CI never passes without the schema checks.

`AcpSchema` itself is the package's (`acp_bridge.check.schema`, which also
bundles a copy of the schema for ``acp-bridge check``).  The schema's wrapper
definitions are loose on purpose: ``AgentNotification``
accepts any params (through ``ExtNotification``) and ``AgentResponse`` any
result (through ``ExtResponse``).  So each message is validated twice: its
JSON-RPC shape against the wrapper (``AgentNotification``, ``AgentRequest``,
``AgentResponse``, whose error branch is the JSON-RPC ``Error`` object), then
its params or result against the definition for its method, found through the
schema's ``x-method``/``x-side`` annotations (``session/update`` ->
``SessionNotification``, ``session/prompt`` -> ``PromptResponse``, ...).
Methods the schema does not know are errors, except extension methods (a
leading ``_``).

Usage::

    schema = load_acp_schema()
    schema.check_transcript(run.client.transcript)   # AssertionError listing every problem
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any, overload

from support.harness import ACP_SCHEMA

from acp_bridge.check.schema import AcpSchema

__all__ = [
    "AcpSchema",
    "load_acp_schema",
    "load_acp_unstable_schema",
    "load_acp_v2_schema",
    "load_acp_v2_unstable_schema",
    "load_pinned_sdk_schema",
    "load_pinned_sdk_unstable_schema",
]


def load_acp_unstable_schema() -> AcpSchema:
    """The unstable schema beside the official one (methods such as ``session/fork``).

    Never None: the test skips (or, in CI, fails) saying why."""
    path = official_schema_path().parent / "schema.unstable.json"
    loaded = _load(path)
    if loaded is None:
        from test_ts_sdk_client import unavailable

        unavailable(f"the official ACP unstable schema is missing ({path.name})")
    return loaded


@overload
def load_acp_schema() -> AcpSchema: ...


@overload
def load_acp_schema(path: Path) -> AcpSchema | None: ...


def load_acp_schema(path: Path | None = None) -> AcpSchema | None:
    """The schema at ``path``, or None if there is no file there.

    Without ``path``: the override beside the checkout if present, else the
    schema of the pinned TypeScript SDK package (installed if needed); never
    None: the test skips (or, in CI, fails) saying why.
    """
    if path is not None:
        return _load(path)
    official = official_schema_path()
    schema = _load(official)
    assert schema is not None, f"{official} is gone"
    return schema


@cache
def _load(path: Path) -> AcpSchema | None:
    if not path.is_file():
        return None
    return AcpSchema(json.loads(path.read_text(encoding="utf-8")))


def load_pinned_sdk_schema() -> AcpSchema:
    """The schema of the pinned TypeScript SDK package (installed if needed), never
    the override: for the stable v1 parts newer than the override (``notice``,
    ``plan`` entries, elicitation, commands with input hints)."""
    schema = _load(pinned_sdk_schema_path())
    assert schema is not None
    return schema


def load_pinned_sdk_unstable_schema() -> AcpSchema:
    """The unstable schema of the pinned TypeScript SDK package (installed if
    needed): the features ACP stabilized in November 2026 (the editor's system
    prompt, plans by id, subagents) are defined there."""
    schema = _load(pinned_sdk_schema_path().parent / "schema.unstable.json")
    assert schema is not None
    return schema


def official_schema_path() -> Path:
    """Where the official schema is, installing the SDK package if needed."""
    if ACP_SCHEMA.is_file():
        return ACP_SCHEMA
    return pinned_sdk_schema_path()


def pinned_sdk_schema_path() -> Path:
    """The pinned TypeScript SDK package's schema, installing the package if needed."""
    # Imported here: that module imports this one.
    from test_ts_sdk_client import (
        SDK_SCHEMA,
        install_ts_client,
        installed_sdk_version,
        pinned_sdk_version,
        toolchain_problem,
        unavailable,
    )

    if not SDK_SCHEMA.is_file() or installed_sdk_version() != pinned_sdk_version():
        problem = toolchain_problem()
        if problem is not None:
            unavailable(f"the official ACP schema is not available: {problem}")
        install_ts_client()
    if not SDK_SCHEMA.is_file():
        unavailable(f"the installed TypeScript SDK has no {SDK_SCHEMA.name}")
    return SDK_SCHEMA


class V2Schema(AcpSchema):
    """v2's schema, strict about what it leaves open: its unions accept any
    other ``sessionUpdate`` (or ``state``) for forward compatibility, so a v1
    update sent by mistake (``tool_call``, ``plan``) would pass; here it is an
    error."""

    def transcript_errors(self, transcript: Iterable[tuple[str, Any]]) -> list[str]:
        transcript = list(transcript)
        problems = super().transcript_errors(transcript)
        kinds = _consts(self.defs["SessionUpdate"], "sessionUpdate")
        states = _consts(self.defs["StateUpdate"], "state")
        for position, (direction, msg) in enumerate(transcript):
            if direction != "recv" or not isinstance(msg, dict):
                continue
            if msg.get("method") != "session/update":
                continue
            update = msg.get("params", {}).get("update", {})
            if update.get("sessionUpdate") not in kinds:
                problems.append(
                    f"message {position}: not a v2 update: {update.get('sessionUpdate')}"
                )
            elif update["sessionUpdate"] == "state_update" and update.get("state") not in states:
                problems.append(f"message {position}: not a v2 state: {update.get('state')}")
        return problems


def _consts(union: dict[str, Any], key: str) -> frozenset[str]:
    """The ``const`` values of ``key`` in the branches of a discriminated union."""
    return frozenset(
        branch["properties"][key]["const"]
        for branch in union["anyOf"]
        if "const" in branch.get("properties", {}).get(key, {})
    )


@cache
def load_acp_v2_schema() -> V2Schema:
    """ACP v2's schema (the Preview), from the pinned TypeScript SDK package
    (installed if needed): ``schema/v2/schema.json`` beside v1's."""
    path = pinned_sdk_schema_path().parent.parent / "v2" / "schema.json"
    assert path.is_file(), "the pinned TypeScript SDK has no v2 schema"
    return V2Schema(json.loads(path.read_text(encoding="utf-8")))


@cache
def load_acp_v2_unstable_schema() -> V2Schema:
    """v2's unstable schema beside it (``schema/v2/schema.unstable.json``), as
    strict: where v2 defines plans as Markdown, ``plan_removed`` and subagent
    sessions (``subagent_update``, ``session_message``)."""
    path = pinned_sdk_schema_path().parent.parent / "v2" / "schema.unstable.json"
    assert path.is_file(), "the pinned TypeScript SDK has no v2 unstable schema"
    return V2Schema(json.loads(path.read_text(encoding="utf-8")))
