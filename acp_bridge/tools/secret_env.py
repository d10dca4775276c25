"""The secrets of the bridge's environment, kept from commands and from tool results.

A variable of the bridge's environment is a secret when its name matches one
of `SECRET_NAME_PATTERNS` (case-insensitively) or its value is a URL with
userinfo (``postgres://user:password@host/db``).  The provider's key
variable (``--api-key-env``), ``ANTHROPIC_API_KEY`` and ``OPENAI_API_KEY``
are secrets whatever their names.

Two defences use this:

- ``run_command`` sets every secret variable empty in the command's
  environment (`EnvPolicy.hidden`); ACP's ``terminal/create`` can only set
  variables, not remove them;
- every tool result passes through the process's redactor
  (`acp_bridge.redact.SECRETS`) before it is logged, shown to the editor or
  given to the model: the values of the secret variables (at least
  `MIN_SECRET_LENGTH` characters, so that ``1`` or ``true`` survive), their
  parts, and the provider's key are replaced by ``[redacted]``.

A variable named with ``--pass-env NAME`` (repeatable) or in
``ACP_BRIDGE_PASS_ENV`` (names separated by commas or spaces) is let
through: commands see it and its value is not redacted.  The provider's own
key is redacted even then.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from ..redact import MIN_KEY_LENGTH

__all__ = [
    "ALWAYS_HIDDEN",
    "ENV_PASS_ENV",
    "MIN_SECRET_LENGTH",
    "SECRET_NAME_PATTERNS",
    "EnvPolicy",
    "env_policy",
    "is_secret",
    "parse_pass_env",
]

ENV_PASS_ENV: Final = "ACP_BRIDGE_PASS_ENV"
ALWAYS_HIDDEN: Final = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
MIN_SECRET_LENGTH: Final = 8

# What a secret variable's name looks like, as documented (matched without case).
SECRET_NAME_PATTERNS: Final = (
    "*KEY* with SECRET, ACCESS, API or PRIVATE in the name (AWS_SECRET_ACCESS_KEY, OPENAI_API_KEY)",
    "*TOKEN*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*CREDENTIAL*",
    "*_AUTH",
    "*_PASS",
    "*_PWD",
)
_SECRET_NAME: Final = re.compile(
    r"^(?=.*KEY)(?=.*(?:SECRET|ACCESS|API|PRIVATE))"
    r"|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|_AUTH$|_PASS$|_PWD$",
    re.IGNORECASE,
)
# scheme://userinfo@host: the userinfo is a user name and usually a password or token.
_USERINFO_URL: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://(?P<userinfo>[^/?#@\s]+)@")
_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_secret(name: str, value: str) -> bool:
    """Whether the variable ``name=value`` is a secret by its name or its value."""
    return bool(_SECRET_NAME.search(name) or _USERINFO_URL.match(value))


def parse_pass_env(values: Iterable[str]) -> tuple[str, ...]:
    """Variable names from ``--pass-env`` values or ``ACP_BRIDGE_PASS_ENV``
    (each may hold several, separated by commas or spaces); ValueError names
    one that is not a variable name."""
    names: list[str] = []
    for value in values:
        for name in re.split(r"[,\s]+", value.strip()):
            if not name:
                continue
            if not _NAME.match(name):
                raise ValueError(f"{name!r} is not an environment variable name")
            if name not in names:
                names.append(name)
    return tuple(names)


@dataclass(frozen=True)
class EnvPolicy:
    # Variables set empty in a command's environment.
    hidden: tuple[str, ...] = ()
    # The secret values, registered with the process's redactor (`acp_bridge.redact`).
    values: tuple[str, ...] = ()


def env_policy(
    environ: Mapping[str, str], *, key_env: str | None = None, passed: Iterable[str] = ()
) -> EnvPolicy:
    """What to hide from commands and redact from tool results, given the
    bridge's environment, the provider's key variable and the names let through."""
    let_through = set(passed)
    hidden = {*ALWAYS_HIDDEN, *([key_env] if key_env else [])}
    hidden.update(name for name, value in environ.items() if is_secret(name, value))
    hidden -= let_through
    values: set[str] = set()
    for name in hidden:
        value = environ.get(name, "")
        if len(value) >= MIN_SECRET_LENGTH:
            values.add(value)
        url = _USERINFO_URL.match(value)
        if url is not None:
            # The userinfo, and its password alone (a user name is no secret).
            userinfo = url.group("userinfo")
            password = userinfo.partition(":")[2]
            values.update(p for p in (userinfo, password) if len(p) >= MIN_SECRET_LENGTH)
    key = environ.get(key_env, "") if key_env else ""
    if len(key) >= MIN_KEY_LENGTH:
        values.add(key)
    return EnvPolicy(hidden=tuple(sorted(hidden)), values=tuple(sorted(values)))
