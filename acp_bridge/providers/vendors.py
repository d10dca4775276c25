"""The model vendors and servers acp-bridge speaks to, listed once.

``--provider`` takes one of `PROVIDERS`: ``fake`` (the keyless scripted
provider) or a vendor's name, which is also its wire's module.  Named tuples:
the command line's options read them at start-up.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = ["ANTHROPIC", "FAKE", "LOCAL_SERVERS", "OPENAI", "PROVIDERS", "SERVICES", "VENDORS"]


class Vendor(NamedTuple):
    name: str  # ``--provider NAME``, and the module of its wire format
    title: str  # how the user is told of its own service
    speaks: str  # what ``--provider``'s help says of it
    base_url: str
    key_env: str  # the variable that holds its API key
    base_url_env: str  # the variable that moves its base URL, as its own SDK allows
    model: str  # the model of a setup that names none


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
