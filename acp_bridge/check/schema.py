"""Validating ACP messages, both ways, against the official ACP JSON Schema.

`bundled_schema()` is the ACP v1 schema that ships inside this package,
``acp_bridge/schemas/acp-v1.schema.json``: the stable ``schema/v1/schema.json``
of the ACP specification repository (agentclientprotocol/agent-client-protocol)
at commit b7f0005493b98de32fabee3e9540e2b64da68535 (tag schema-v1.21.0 + 11
commits), Apache-2.0, with one ``$comment`` added that says so.
`bundled_schema(2)` is the ACP v2 schema that ships beside it,
``acp_bridge/schemas/acp-v2.schema.json``: ``schema/v2/schema.json`` of the npm
package ``@agentclientprotocol/sdk@2.4.0`` (the Preview of 2026-11-20), Apache-2.0,
with one ``$comment`` added.  Both have the same wrapper definitions and method
annotations, so one `AcpSchema` validates either.
`AcpSchema(any_schema)` validates against another copy (a newer release).

The schema's wrapper definitions are loose on purpose: ``AgentNotification``
accepts any params (through ``ExtNotification``) and ``AgentResponse`` any
result (through ``ExtResponse``).  So each message is validated twice: its
JSON-RPC shape against the wrapper (``AgentRequest``, ``AgentResponse``,
``AgentNotification`` for what an agent writes; ``ClientRequest``,
``ClientResponse``, ``ClientNotification`` for what a client writes), then its
params or result against the definition for its method, found through the
schema's ``x-method``/``x-side`` annotations (``session/update`` ->
``SessionNotification``, ``session/prompt`` -> ``PromptResponse``, ...).
Methods the schema does not know are errors, except extension methods (a
leading ``_``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final

from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import best_match
from referencing import Registry, Resource

from ..client import id_key

BUNDLED_SCHEMA: Final = Path(__file__).resolve().parent.parent / "schemas" / "acp-v1.schema.json"
BUNDLED_SOURCE: Final = (
    "ACP v1 JSON Schema, agentclientprotocol/agent-client-protocol@b7f0005 "
    "(schema-v1.21.0+11), bundled"
)
BUNDLED_V2_SCHEMA: Final = BUNDLED_SCHEMA.with_name("acp-v2.schema.json")
BUNDLED_V2_SOURCE: Final = (
    "ACP v2 JSON Schema (Preview), @agentclientprotocol/sdk@2.4.0 schema/v2/schema.json, bundled"
)

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
        self._free: frozenset[str] | None = None
        # Definitions by method.  ``x-side`` names the side that handles the
        # method: an agent answers the requests it handles and sends the
        # requests and notifications the client handles; a client the reverse.
        self.response_defs = self._by_method("Response", "agent")
        self.notification_defs = {
            **self._by_method("Notification", "client"),
            **self._by_method("Notification", "protocol"),
        }
        self.request_defs = self._by_method("Request", "client")
        self.client_response_defs = self._by_method("Response", "client")
        self.client_notification_defs = {
            **self._by_method("Notification", "agent"),
            **self._by_method("Notification", "protocol"),
        }
        self.client_request_defs = self._by_method("Request", "agent")

    @property
    def free_text_keys(self) -> frozenset[str]:
        """Property names whose string values the schema never constrains (no
        ``const``, ``enum``, ``pattern``, ``format`` or length, wherever the name
        appears, through ``$ref``): ``text``, ``title``, ``sessionId``...  What such
        a string says cannot change whether a message is valid (`structure`)."""
        if self._free is None:
            names: set[str] = set()
            constrained: set[str] = set()
            for node in _nodes(self.schema):
                for name, sub in (node.get("properties") or {}).items():
                    names.add(name)
                    if self._constrains_strings(sub, set()):
                        constrained.add(name)
            # The method routes a message to its definition (`_message_errors`).
            self._free = frozenset(names - constrained - {"method"})
        return self._free

    def _constrains_strings(self, node: Any, seen: set[str]) -> bool:
        if isinstance(node, list):
            return any(self._constrains_strings(n, seen) for n in node)
        if not isinstance(node, dict):
            return False
        if _STRING_CONSTRAINTS & node.keys():
            return True
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            if name not in seen:
                seen.add(name)
                if self._constrains_strings(self.defs.get(name), seen):
                    return True
        return any(
            self._constrains_strings(v, seen)
            for k, v in node.items()
            if k not in ("$ref", "description", "title", "examples", "default")
        )

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
        return self._message_errors(msg, request_method, "Agent")

    def client_message_errors(self, msg: Any, request_method: str | None = None) -> list[str]:
        """Problems with one message written by a client (``request_method``: the
        method of the agent request a response answers)."""
        return self._message_errors(msg, request_method, "Client")

    def _message_errors(self, msg: Any, request_method: str | None, side: str) -> list[str]:
        envelope = list(Draft202012Validator(_ENVELOPE).iter_errors(msg))
        if envelope:
            return [f"JSON-RPC envelope: {e.message}" for e in envelope]
        agent = side == "Agent"
        if "method" in msg:
            if "id" in msg:
                defs = self.request_defs if agent else self.client_request_defs
                return self._typed(msg, f"{side}Request", defs, "request", side)
            defs = self.notification_defs if agent else self.client_notification_defs
            return self._typed(msg, f"{side}Notification", defs, "notification", side)
        problems = self.errors(f"{side}Response", msg)
        if problems and isinstance(msg, dict) and "error" in msg and "result" not in msg:
            # Say what is wrong with the error object, not that it is not a result.
            return self.errors("Error", msg["error"]) or problems
        if problems or "result" not in msg or request_method is None:
            return problems
        name = (self.response_defs if agent else self.client_response_defs).get(request_method)
        if name is None:
            if request_method.startswith("_"):
                return []
            return [f"no response definition for method {request_method!r}"]
        return self.errors(name, msg["result"])

    def _typed(
        self, msg: Any, wrapper: str, defs: Mapping[str, str], what: str, side: str
    ) -> list[str]:
        problems = self.errors(wrapper, msg)
        method = msg["method"]
        if not isinstance(method, str):  # a hostile agent's; the wrapper said why
            return problems or [f"the method is not a string: {json.dumps(method)[:100]}"]
        name = defs.get(method)
        if name is None:
            if not method.startswith("_"):
                problems.append(
                    f"{'an agent' if side == 'Agent' else 'a client'} does not send "
                    f"the {what} {method!r}"
                )
            return problems
        return problems + self.errors(name, msg.get("params"))

    def transcript_errors(self, transcript: Iterable[tuple[str, Any]]) -> list[str]:
        """Problems with every message the agent wrote (direction ``"recv"``).

        Responses are matched by id with the requests the client sent
        (direction ``"send"``) to find the method they answer.
        """
        return self._transcript_errors(transcript, "recv")

    def sent_errors(self, transcript: Iterable[tuple[str, Any]]) -> list[str]:
        """Problems with every message the client wrote (direction ``"send"``;
        bytes sent as they are, ``"send-raw"``, are not checked)."""
        return self._transcript_errors(transcript, "send")

    def _transcript_errors(self, transcript: Iterable[tuple[str, Any]], mine: str) -> list[str]:
        theirs = "send" if mine == "recv" else "recv"
        check = self.agent_message_errors if mine == "recv" else self.client_message_errors
        methods: dict[bytes, str] = {}
        out = []
        for position, (direction, msg) in enumerate(transcript):
            if direction == theirs and isinstance(msg, dict) and "method" in msg and "id" in msg:
                methods[id_key(msg["id"])] = msg["method"]
            elif direction == mine:
                method = methods.get(id_key(msg.get("id"))) if isinstance(msg, dict) else None
                for problem in check(msg, method):
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


_STRING_CONSTRAINTS: Final = frozenset(
    {"const", "enum", "pattern", "format", "minLength", "maxLength"}
)


def _nodes(node: Any) -> Iterable[dict[str, Any]]:
    """Every object in a schema, depth first."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def structure(value: Any, free: frozenset[str], key: str | None = None) -> Any:
    """A hashable stand-in for a message with the same verdict under the schema: its
    keys, its value types and every value, except the strings under a key of
    ``free`` (`AcpSchema.free_text_keys`), which become a mere "a string".  An
    agent that streams a million chunks of different text has one structure."""
    if isinstance(value, dict):
        return tuple(sorted((k, structure(v, free, k)) for k, v in value.items()))
    if isinstance(value, list):
        return ("[", *(structure(v, free, key) for v in value))
    if isinstance(value, str) and key in free:
        return str
    return (type(value).__name__, value)  # keeps True apart from 1, 1.0 from 1


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


@cache
def bundled_schema(protocol: int = 1) -> AcpSchema:
    """The ACP schema of ``protocol`` (1 or 2) bundled with the package (see the
    module docstring)."""
    path = BUNDLED_V2_SCHEMA if protocol == 2 else BUNDLED_SCHEMA
    return AcpSchema(json.loads(path.read_text(encoding="utf-8")))


def bundled_source(protocol: int = 1) -> str:
    """What `bundled_schema` of ``protocol`` is, for a report."""
    return BUNDLED_V2_SOURCE if protocol == 2 else BUNDLED_SOURCE


__all__ = [
    "BUNDLED_SCHEMA",
    "BUNDLED_SOURCE",
    "BUNDLED_V2_SCHEMA",
    "BUNDLED_V2_SOURCE",
    "AcpSchema",
    "bundled_schema",
    "bundled_source",
    "structure",
]
