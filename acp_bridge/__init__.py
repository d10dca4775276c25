"""acp-bridge: an Agent Client Protocol agent whose Stop keeps exactly what the user saw."""

__version__ = "0.1.0"

__all__ = ["__version__"]
