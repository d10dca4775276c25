"""The ACP schema bundled for ``acp-bridge check``, and validation in both directions."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from acp_bridge.check.schema import BUNDLED_SCHEMA, bundled_schema

# SHA-256 of the upstream schema/v1/schema.json content (keys sorted, compact): the
# bundled file must hold exactly it, plus its "$comment".
UPSTREAM_CONTENT_SHA256 = "8a5ab031759589fedb08d44e76290c370b2b3ce2933a6e0048eadb258dc69b2c"
UPSTREAM_COMMIT = "b7f0005493b98de32fabee3e9540e2b64da68535"


def canonical_sha256(schema: dict[str, Any]) -> str:
    data = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(data.encode()).hexdigest()


def test_the_bundled_schema_is_the_upstream_one_and_says_where_it_comes_from() -> None:
    bundled = json.loads(BUNDLED_SCHEMA.read_text(encoding="utf-8"))
    comment = bundled.pop("$comment")
    assert UPSTREAM_COMMIT in comment
    assert "agentclientprotocol/agent-client-protocol" in comment
    assert "Apache License 2.0" in comment
    assert canonical_sha256(bundled) == UPSTREAM_CONTENT_SHA256


def test_client_frames_are_checked_too() -> None:
    """The mistakes of a checker that sends what no agent should accept are caught."""
    schema = bundled_schema()
    good_init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}},
    }
    good_prompt = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "session/prompt",
        "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]},
    }
    assert schema.sent_errors([("send", good_init), ("send", good_prompt)]) == []
    string_version = json.loads(json.dumps(good_init))
    string_version["params"]["protocolVersion"] = "2025-01-01"
    content_not_prompt = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "session/prompt",
        "params": {"sessionId": "s", "content": [{"type": "text", "text": "hi"}]},
    }
    assert schema.sent_errors([("send", string_version)])
    assert schema.sent_errors([("send", content_not_prompt)])
    # A client's answer to a permission request is checked against the request's method.
    ask = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "session/request_permission",
        "params": {"sessionId": "s", "toolCall": {"toolCallId": "c"}, "options": []},
    }
    cancelled = {"jsonrpc": "2.0", "id": 7, "result": {"outcome": {"outcome": "cancelled"}}}
    wrong = {"jsonrpc": "2.0", "id": 7, "result": {"outcome": "cancelled"}}
    assert schema.sent_errors([("recv", ask), ("send", cancelled)]) == []
    assert schema.sent_errors([("recv", ask), ("send", wrong)])
    # Raw bytes (a test's deliberate bad input) are not the client's frames.
    assert schema.sent_errors([("send-raw", {"bytes": "not json"})]) == []


def test_agent_frames_are_checked_with_the_bundled_schema() -> None:
    schema = bundled_schema()
    prompt = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {}}
    ok = {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "cancelled"}}
    bad = {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "stopped"}}
    assert schema.transcript_errors([("send", prompt), ("recv", ok)]) == []
    assert schema.transcript_errors([("send", prompt), ("recv", bad)])
