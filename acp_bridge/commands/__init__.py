"""Slash commands: what the editor offers after ``/``, and what each one does.

The catalog (`acp_bridge.commands.catalog`) is announced with
``available_commands_update`` right after ``session/new``, ``session/load``,
``session/resume`` and ``session/fork`` answer, and again whenever the set a
session offers changes.  A prompt that is one text block starting with a known
``/name`` runs that command instead of a model request; any other ``/word``
goes to the model as text.

``/regenerate`` and ``/compact`` have their own turns (`acp_bridge.sessions`);
the others (`acp_bridge.acp.command_turns`) are turns with a ``turn/start``
``{command, prompt}``, one ``command/answer {text}`` record holding what they
answered (shown as an ``agent_message_chunk``, replayed on load), and
``end_turn``.  ``/clear``'s ``turn/start`` is the boundary after which the
model history starts empty (`acp_bridge.log.derive`).
"""
