"""Keeping secrets out of everything the bridge writes.

The process knows its secrets by value and registers them with `SECRETS`, its
one `Redactor`: the provider's API key (`acp_bridge.providers.http`), the
secret variables of its environment (`acp_bridge.tools.secret_env`), and what
the editor or the config file gives an MCP server in ``env`` or ``headers``
(`acp_bridge.mcp.hub`).  Text that leaves the process passes through it: a
JSON-RPC error (`RpcError.to_wire`), a stderr line (`StderrHandler`), a
provider error (`ProviderError`, which the event log, the editor and
recordings carry), a recording, a notice, an MCP server's status record, a tool
result (the runner, and `cut`, which every tool's output limit goes through),
and ``acp-bridge setup``'s answer.

A value is replaced whole, and so is each part of it a vendor could echo on
its own: the pieces between ``+``, ``/``, ``=``, ``\\``, quotes and whitespace
(a CR included) of at least `MIN_PART` characters; shorter pieces are left,
being too likely to be ordinary text.  Provider error text is also scrubbed of
anything shaped like a key (`scrub`).

A text is redacted before it is cut, and a cut text that ends with the start
of a secret (`MIN_PREFIX` characters or more) has that start replaced too, so
a secret straddling the cut shows nothing of itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

__all__ = [
    "MIN_KEY_LENGTH",
    "MIN_PART",
    "MIN_PREFIX",
    "REDACTED",
    "SECRETS",
    "Redactor",
    "scrub",
]

REDACTED: Final = "[redacted]"
# The shortest provider key redacted (a key is never trivial).
MIN_KEY_LENGTH: Final = 4
# The shortest part of a secret redacted on its own.
MIN_PART: Final = 8
# The shortest start of a secret redacted at the end of a cut text.
MIN_PREFIX: Final = 4
_SEPARATORS: Final = re.compile(r"[+/=\\\"'\s]+")

# Vendor key shapes (sk-..., sk-ant-..., sk-or-..., gsk_..., Bearer tokens) and
# long opaque tokens after "key"/"token" words.
_KEY_LIKE: Final = re.compile(
    r"(?:sk-[A-Za-z0-9_\-]{8,}|gsk_[A-Za-z0-9]{8,}|(?i:bearer)\s+[A-Za-z0-9._\-]{8,}"
    r"|(?i:(?:api[_-]?key|token|secret)[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9._\-]{12,})"
)


class _Needles:
    """What one set of secrets is searched with (replaced whole when one is added)."""

    __slots__ = ("pattern", "strings")

    def __init__(self, strings: tuple[str, ...]) -> None:
        self.strings = strings
        self.pattern = re.compile("|".join(map(re.escape, strings))) if strings else None


class Redactor:
    """Replaces known secret values, and their parts, in text and in JSON-like values."""

    def __init__(self, values: Iterable[str] = (), *, parts: bool = True) -> None:
        # Each secret, and whether its parts are secrets too.
        self._secrets: dict[str, bool] = {}
        self._needles = _Needles(())
        self.add(values, min_length=1, parts=parts)

    @property
    def values(self) -> tuple[str, ...]:
        """The registered secrets, longest first."""
        return tuple(sorted(self._secrets, key=lambda v: (-len(v), v)))

    def add(self, values: Iterable[str], *, min_length: int = 8, parts: bool = True) -> None:
        """Register ``values`` (those of at least ``min_length`` characters);
        with ``parts``, each of their parts of `MIN_PART` characters or more too."""
        changed = False
        for value in values:
            known = self._secrets.get(value)
            if len(value) >= min_length and (known is None or (parts and not known)):
                self._secrets[value] = parts
                changed = True
        if not changed:
            return
        strings = set(self._secrets)
        for value, split in self._secrets.items():
            if split:
                strings.update(p for p in _SEPARATORS.split(value) if len(p) >= MIN_PART)
        # Longest first, so that a value containing another is replaced whole;
        # swapped in one assignment, for the threads that read it.
        self._needles = _Needles(tuple(sorted(strings, key=lambda v: (-len(v), v))))

    def text(self, text: str) -> str:
        needles = self._needles
        if needles.pattern is None or not any(s in text for s in needles.strings):
            return text
        return needles.pattern.sub(REDACTED, text)

    def json(self, value: Any) -> Any:
        """``value`` with every string in it redacted (dict keys included)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                self.text(k) if isinstance(k, str) else k: self.json(v) for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.json(v) for v in value]
        return value

    def cut(self, text: str, limit: int) -> str:
        """``text`` redacted, then its first ``limit`` characters, without the
        start of a secret at the end (`MIN_PREFIX` characters or more)."""
        text = self.text(text)
        if len(text) <= limit:
            return text
        head = text[:limit]
        longest = 0
        for secret in self._needles.strings:
            for size in range(min(len(secret) - 1, len(head)), MIN_PREFIX - 1, -1):
                if size > longest and head.endswith(secret[:size]):
                    longest = size
                    break
        return head[: len(head) - longest] + REDACTED if longest else head


# The process's secrets: every exit redacts with this one.
SECRETS: Final = Redactor()


def scrub(text: str) -> str:
    """Provider error ``text`` without the process's secrets and without
    anything shaped like a key."""
    return _KEY_LIKE.sub(REDACTED, SECRETS.text(text))
