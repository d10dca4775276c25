"""The model's context: what it is told, how full it is, and compaction.

* `config`: the settings (``--system``, ``--system-mode``, ``--context-window``,
  ``--compact-threshold``, the config file's ``context_windows`` and ``prices``);
* `windows`: the context window of a model, and what the loop knows of it
  (`ModelInfo`);
* `system_prompt` and `instructions`: the default system prompt and the
  project's instruction files (``AGENTS.md``, ``CLAUDE.md``);
* `estimate`: token estimates before a request;
* `compaction`: the pure part of compacting a history (which records a
  summary replaces, and the request that asks for it).
"""
