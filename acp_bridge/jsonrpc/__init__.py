"""JSON-RPC 2.0 over newline-delimited JSON: framing, messages, errors, a connection.

Each is imported from its module: the messages, the framing and the errors
need no event loop.
"""
