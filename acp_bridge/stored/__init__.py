"""Stored sessions: titles and listings, forks, regenerate turns.

Pure functions of session logs (and the file reads that feed them); the ACP
methods that use them are in `acp_bridge.acp.stored`, the command-line views
in `acp_bridge.sessions_cli`.
"""
