"""A keyring backend for the tests: a JSON file named by ``ACP_BRIDGE_TEST_KEYRING``.

Selected in a child process with ``PYTHON_KEYRING_BACKEND=json_keyring.JsonKeyring``
and this folder on ``PYTHONPATH``, so no test touches the real system keyring.
"""

from __future__ import annotations

import json
import os

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError


class JsonKeyring(KeyringBackend):
    priority = 1

    def _path(self) -> str:
        return os.environ["ACP_BRIDGE_TEST_KEYRING"]

    def _load(self) -> dict[str, str]:
        try:
            with open(self._path(), encoding="utf-8") as f:
                data: dict[str, str] = json.load(f)
                return data
        except FileNotFoundError:
            return {}

    def _save(self, data: dict[str, str]) -> None:
        with open(self._path(), "w", encoding="utf-8") as f:
            json.dump(data, f)

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._load()
        data[f"{service}/{username}"] = password
        self._save(data)

    def delete_password(self, service: str, username: str) -> None:
        data = self._load()
        if data.pop(f"{service}/{username}", None) is None:
            raise PasswordDeleteError("no such password")
        self._save(data)
