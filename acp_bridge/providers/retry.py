"""When and how long to wait before retrying a failed model request (invariant I5).

Only failures before any output was yielded are retried (the HTTP stream
decides that); this module only answers "how long": the server's
``retry-after-ms`` / ``retry-after`` when given (capped), else exponential
backoff with jitter.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from time import time

__all__ = ["RetryPolicy", "retry_after_seconds"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 30.0
    jitter: float = 0.25  # +- this fraction of the backoff

    def delay(self, retry: int, headers: Mapping[str, str] | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        hinted = retry_after_seconds(headers) if headers is not None else None
        if hinted is not None:
            return min(max(hinted, 0.0), self.max_delay)
        backoff: float = min(self.base_delay * 2.0 ** (retry - 1), self.max_delay)
        return backoff * (1 + self.jitter * (2 * random.random() - 1))


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The server's requested wait: ``retry-after-ms``, else ``retry-after``
    (seconds or an HTTP date); None when absent or unreadable."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime  # an HTTP date: rare, and not at start-up

    try:
        return float(parsedate_to_datetime(value).timestamp() - time())
    except (TypeError, ValueError):
        return None
