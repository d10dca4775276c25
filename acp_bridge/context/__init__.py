"""The model's context: what it is told, how full it is, and compaction.

* `config`: the settings (``--system``, ``--system-mode``, ``--context-window``,
  ``--compact-threshold``, the config file's ``context_windows`` and ``prices``);
* `windows`: the context window of a model, and what the loop knows of it
  (`ModelInfo`);
* `system_prompt` and `instructions`: the default system prompt and the
  project's instruction files (``AGENTS.md``, ``CLAUDE.md``);
* `estimate`: token estimates before a request;
* `compaction`: the pure part of compacting a history (which records a
  summary replaces, and the request that asks for it);
* `session`: a session's system prompt, window and cost (`Session.context`).

None of it is imported on the start-up path: `acp_bridge.server` loads it in
the worker thread that loads the provider; the turn (`acp_bridge.loop.turn`)
and the compaction it runs (`acp_bridge.loop.compact`) import it where used.
"""
