"""Validating what the bridge writes against the official ACP JSON Schema.

The schema is not part of this repository.  ``load_acp_schema()`` reads the
first of:

1. ``tests.harness.ACP_SCHEMA`` (``shared/acp/schema.json`` beside the
   checkout), an override for working against an unreleased schema;
2. ``schema/v1/schema.json`` of the official TypeScript SDK package
   (``@agentclientprotocol/sdk``, pinned by ``tests/ts_client/package-lock.json``),
   installed with npm by the test run when it is not there yet.  The Python SDK
   (``agent-client-protocol``) ships generated models but no schema file.

When neither can be had (no Node, no registry), the test skips with the
reason, or fails when ``CI`` is true or ``ACP_BRIDGE_REQUIRE_TS_SDK`` is set:
CI never passes without the schema checks.

The schema's wrapper definitions are loose on purpose: ``AgentNotification``
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
from collections import defaultdict
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final, overload

from harness import ACP_SCHEMA
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import best_match
from referencing import Registry, Resource

__all__ = ["AcpSchema", "load_acp_schema", "load_acp_unstable_schema"]

_BASE: Final = "urn:acp:schema"
_ENVELOPE: Final = {
    "type": "object",
    "properties": {"jsonrpc": {"const": "2.0"}},
    "required": ["jsonrpc"],
}


class AcpSchema:
    """The official ACP schema, with one cached validator per definition."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self.defs: Mapping[str, Any] = schema["$defs"]
        self._registry: Registry[Any] = Registry().with_resource(
            _BASE, Resource.from_contents(dict(schema))
        )
        self._validators: dict[str, Draft202012Validator] = {}
        # Definitions by method, for the messages an agent writes.  ``x-side``
        # names the side that handles the method: the agent answers requests
        # it handles, and sends the notifications and requests the client handles.
        self.response_defs = self._by_method("Response", "agent")
        self.notification_defs = {
            **self._by_method("Notification", "client"),
            **self._by_method("Notification", "protocol"),
        }
        self.request_defs = self._by_method("Request", "client")

    def _by_method(self, suffix: str, side: str) -> dict[str, str]:
        return {
            d["x-method"]: name
            for name, d in self.defs.items()
            if name.endswith(suffix) and d.get("x-side") == side and "x-method" in d
        }

    # -- validation -------------------------------------------------------

    def validator(self, name: str) -> Draft202012Validator:
        """A validator for the definition ``$defs/<name>``."""
        found = self._validators.get(name)
        if found is None:
            if name not in self.defs:
                raise KeyError(f"the ACP schema has no definition {name!r}")
            found = Draft202012Validator(
                {"$ref": f"{_BASE}#/$defs/{name}"}, registry=self._registry
            )
            self._validators[name] = found
        return found

    def errors(self, name: str, instance: Any) -> list[str]:
        """Every way ``instance`` breaks ``$defs/<name>``, one line each."""
        out = []
        for error in self.validator(name).iter_errors(instance):
            where = "/".join(str(p) for p in error.absolute_path) or "(top)"
            out.append(f"{name} at {where}: {_explain(error)}")
        return out

    def agent_message_errors(self, msg: Any, request_method: str | None = None) -> list[str]:
        """Problems with one message written by an agent.

        ``request_method`` is the method of the client request a response
        answers (None if unknown: only the response's JSON-RPC shape is checked).
        """
        envelope = list(Draft202012Validator(_ENVELOPE).iter_errors(msg))
        if envelope:
            return [f"JSON-RPC envelope: {e.message}" for e in envelope]
        if "method" in msg:
            if "id" in msg:
                return self._typed(msg, "AgentRequest", self.request_defs, "request")
            return self._typed(msg, "AgentNotification", self.notification_defs, "notification")
        problems = self.errors("AgentResponse", msg)
        if problems and isinstance(msg, dict) and "error" in msg and "result" not in msg:
            # Say what is wrong with the error object, not that it is not a result.
            return self.errors("Error", msg["error"]) or problems
        if problems or "result" not in msg or request_method is None:
            return problems
        name = self.response_defs.get(request_method)
        if name is None:
            if request_method.startswith("_"):
                return []
            return [f"no response definition for method {request_method!r}"]
        return self.errors(name, msg["result"])

    def _typed(self, msg: Any, wrapper: str, defs: Mapping[str, str], what: str) -> list[str]:
        problems = self.errors(wrapper, msg)
        method = msg["method"]
        name = defs.get(method)
        if name is None:
            if not method.startswith("_"):
                problems.append(f"an agent does not send the {what} {method!r}")
            return problems
        return problems + self.errors(name, msg.get("params"))

    def transcript_errors(self, transcript: Iterable[tuple[str, Any]]) -> list[str]:
        """Problems with every message the agent wrote (direction ``"recv"``).

        Responses are matched by id with the requests the client sent
        (direction ``"send"``) to find the method they answer.
        """
        methods: dict[Any, str] = {}
        out = []
        for position, (direction, msg) in enumerate(transcript):
            if direction == "send" and isinstance(msg, dict) and "method" in msg and "id" in msg:
                methods[msg["id"]] = msg["method"]
            elif direction == "recv":
                method = methods.get(msg.get("id")) if isinstance(msg, dict) else None
                for problem in self.agent_message_errors(msg, method):
                    text = json.dumps(msg)
                    if len(text) > 300:
                        text = text[:300] + "..."
                    out.append(f"message {position} ({text}): {problem}")
        return out

    def check_transcript(self, transcript: Iterable[tuple[str, Any]]) -> None:
        """Raise AssertionError listing every problem `transcript_errors` finds."""
        problems = self.transcript_errors(transcript)
        assert not problems, "the agent wrote messages the ACP schema rejects:\n" + "\n".join(
            problems
        )


def _explain(error: ValidationError) -> str:
    """A readable reason for a failed ``anyOf``/``oneOf``: the reason of the one
    branch whose discriminator (a ``const`` or ``enum``) matched, if there is one."""
    if not error.context:
        return str(error.message)
    branches: dict[Any, list[ValidationError]] = defaultdict(list)
    for sub in error.context:
        branches[sub.relative_schema_path[0] if sub.relative_schema_path else None].append(sub)
    discriminated = ("const", "enum")
    matched = [
        errs for errs in branches.values() if not any(e.validator in discriminated for e in errs)
    ]
    if len(matched) == 1:
        return _explain(best_match(matched[0]))
    summary = str(error.message)
    if len(summary) > 120:
        summary = summary[:120] + "..."
    return f"{summary} (closest: {best_match(error.context).message})"


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


def official_schema_path() -> Path:
    """Where the official schema is, installing the SDK package if needed."""
    if ACP_SCHEMA.is_file():
        return ACP_SCHEMA
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
