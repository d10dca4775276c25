"""The model's context: what it is told and how full it is.

* `config`: the settings (``--system``, ``--system-mode``, ``--context-window``,
  ``--compact-threshold``, the config file's ``context_windows`` and ``prices``);
* `windows`: the context window of a model, and what the loop knows of it
  (`ModelInfo`);
* `system_prompt` and `instructions`: the default system prompt and the
  project's instruction files (``AGENTS.md``, ``CLAUDE.md``);
* `estimate`: token estimates before a request;
* `session`: a session's system prompt, window and cost (`Session.context`).

None of it is imported on the start-up path: `acp_bridge.server` loads it in
the worker thread that loads the provider; the turn (`acp_bridge.loop.turn`)
and compaction (`acp_bridge.compaction`) import it where used.
"""
