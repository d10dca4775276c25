"""The tests' helpers, in one package.

- `support.bridge`: the one way to start a bridge (`start_bridge`, in a subprocess
  or in this process; the ``bridge`` fixture of ``tests/conftest.py`` is built on
  it) and `barrier`, the wait a test uses instead of a sleep to see that
  something did not happen.
- `support.harness`: scenarios played through the real subprocess
  (`run_bridge`), scripted-provider helpers (`write_script`, `tool_call`),
  normalization for snapshots, and ways to stop a turn at a chosen point
  (`prompt_until`).
- `support.pipe_peer`: many prompts at once (`PromptTracker`) and the
  in-process bridge on raw pipes (`bridge_on_pipes`).
"""
