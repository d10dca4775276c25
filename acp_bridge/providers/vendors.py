"""The model vendors and servers acp-bridge speaks to, listed once.

``--provider`` takes one of `PROVIDERS`: ``fake`` (the keyless scripted
provider) or a vendor's name; a vendor's wire format is the module of that
name (`acp_bridge.providers.anthropic`, `acp_bridge.providers.openai`).  The
services and local servers named here speak the OpenAI-compatible API:
``acp-bridge setup`` names them as examples, offers the local servers at
their usual addresses and names a server it finds at one of them.

Plain tuples: the command line's options read them at start-up.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = ["ANTHROPIC", "FAKE", "LOCAL_SERVERS", "OPENAI", "PROVIDERS", "SERVICES", "VENDORS"]


class Vendor(NamedTuple):
    # ``--provider NAME``, and the module of its wire format.
    name: str
    # How the user is told of its own service ("Anthropic").
    title: str
    # What ``--provider``'s help says it speaks.
    speaks: str
    base_url: str
    # The variable that holds its API key.
    key_env: str
    # The variable that moves its base URL, as the vendor's own SDK allows.
    base_url_env: str
    # The model of a setup that names none.
    model: str


ANTHROPIC: Final = Vendor(
    "anthropic",
    "Anthropic",
    "Messages API",
    "https://api.anthropic.com",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "claude-sonnet-4-5",
)
OPENAI: Final = Vendor(
    "openai",
    "OpenAI",
    "any OpenAI-compatible Chat Completions server",
    "https://api.openai.com/v1",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "gpt-4o-mini",
)
# In the order a key in the environment is looked for.
VENDORS: Final = {vendor.name: vendor for vendor in (ANTHROPIC, OPENAI)}
FAKE: Final = "fake"
PROVIDERS: Final = (FAKE, *VENDORS)
# Hosted services that speak the OpenAI-compatible API (examples).
SERVICES: Final = ("DeepSeek", "OpenRouter", "Groq")
# Local servers that speak it, at their usual addresses (the first is the default).
LOCAL_SERVERS: Final = (
    ("Ollama", "http://127.0.0.1:11434/v1"),
    ("LM Studio", "http://127.0.0.1:1234/v1"),
    ("vLLM", "http://127.0.0.1:8000/v1"),
    ("llama.cpp", "http://127.0.0.1:8080/v1"),
)
