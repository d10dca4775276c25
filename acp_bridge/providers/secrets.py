"""Keeping API keys out of everything the bridge writes.

Keys live only in the request headers.  Error text that comes back from a
provider (or from the HTTP stack) passes through `scrub` before it reaches an
error message, the event log or stderr: the configured key is replaced, and
so is anything that looks like a key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

__all__ = ["REDACTED", "scrub"]

REDACTED: Final = "[redacted]"

# Vendor key shapes (sk-..., sk-ant-..., sk-or-..., gsk_..., Bearer tokens) and
# long opaque tokens after "key"/"token" words.
_KEY_LIKE: Final = re.compile(
    r"(?:sk-[A-Za-z0-9_\-]{8,}|gsk_[A-Za-z0-9]{8,}|(?i:bearer)\s+[A-Za-z0-9._\-]{8,}"
    r"|(?i:(?:api[_-]?key|token|secret)[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9._\-]{12,})"
)


def scrub(text: str, keys: Iterable[str] = ()) -> str:
    """``text`` without the given keys and without anything shaped like a key."""
    for key in keys:
        if key and len(key) >= 4:
            text = text.replace(key, REDACTED)
    return _KEY_LIKE.sub(REDACTED, text)
