"""The session's model as an ACP config option (category ``model``).

Offered in ``session/new``'s ``configOptions`` when the provider has a list
of models (the real providers: every ``--model`` given, the first selected);
``session/set_config_option`` changes the session's provider model, which
applies from the next model request.  Also the prompt check for images.
"""

from __future__ import annotations

from typing import Any

from ..jsonrpc.errors import RpcError
from ..providers.base import Provider

__all__ = ["MODEL_OPTION", "check_prompt", "offer", "set_option"]

MODEL_OPTION = "model"


def offer(provider: Provider) -> list[dict[str, Any]] | None:
    """The config options for a session of ``provider`` (None: it has none):
    the model option, its models to choose from, the current one selected."""
    if not provider.models:
        return None
    return [
        {
            "id": MODEL_OPTION,
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": provider.model,
            "options": [{"value": m, "name": m} for m in provider.models],
        }
    ]


def set_option(provider: Provider, params: dict[str, Any]) -> None:
    """Apply ``session/set_config_option`` to the provider (the model option)."""
    options = offer(provider)
    config_id = params.get("configId")
    if not isinstance(config_id, str):
        raise RpcError.invalid_params("configId", "is required")
    if options is None or config_id != MODEL_OPTION:
        raise RpcError.invalid_params("configId", f"no config option {config_id!r}")
    value = params.get("value")
    allowed = [o["value"] for o in options[0]["options"]]
    if not isinstance(value, str) or value not in allowed:
        raise RpcError.invalid_params("value", f"must be one of {', '.join(allowed)}")
    provider.model = value


def check_prompt(provider: Provider, blocks: list[dict[str, Any]]) -> None:
    """Refuse an image the provider's model cannot take, naming the block."""
    if provider.images:
        return
    for i, block in enumerate(blocks):
        if block["type"] == "image":
            raise RpcError.invalid_params(
                f"prompt[{i}]",
                f"model {provider.model} does not take images here "
                "(the profile sets images = false); remove the image or choose another setup",
            )
