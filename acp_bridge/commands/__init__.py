"""Slash commands: what the editor offers after ``/``, and what each one does.

The catalog (`acp_bridge.commands.catalog`) is announced with
``available_commands_update`` right after ``session/new``, ``session/load``,
``session/resume`` and ``session/fork`` answer.  A prompt that is one text
block starting with a known ``/name`` runs that command instead of a model
request; any other ``/word`` goes to the model as text.

Each command is a turn of its own, of the kind
(`acp_bridge.loop.lifecycle.TurnKind`) `acp_bridge.commands.catalog.parse`
finds:

* ``/regenerate``: a new reply to the last user turn
  (`acp_bridge.stored.regenerate`);
* ``/compact [instructions]``: its ``turn/start`` keeps the command
  (``command: "compact"``, and its blocks in ``prompt``, which a replay shows
  as the user's message); it has no user message and no model request but
  the summary's, and it answers ``end_turn`` with what was summarized and
  the tokens before and after, or that there was nothing to compact (see
  `acp_bridge.compaction.run` and `acp_bridge.compaction.shown`).  Words after
  the command tell the summary what to keep;
* the others (`acp_bridge.acp.command_turns`) are turns with a ``turn/start``
  ``{command, prompt}``, one ``command/answer {text}`` record holding what
  they answered (shown as an ``agent_message_chunk``, replayed on load), and
  ``end_turn``.  ``/clear``'s ``turn/start`` is the boundary after which the
  model history starts empty (`acp_bridge.log.derive`).
"""
