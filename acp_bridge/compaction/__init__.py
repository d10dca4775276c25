"""Compaction: a summary in place of the older history, when the window fills or on ``/compact``.

* `plan`: the pure part (which records a summary replaces, and the request
  that asks for it);
* `run`: running one inside a turn (the summary request and its records);
* `shown`: what the editor is shown of one, live and on replay.

It sits beside the engine (`acp_bridge.loop`): the turn runs it, and it runs
on the turn's recorder.  This file imports nothing, so the replay
(`acp_bridge.log.replay`) and the turn's ending load `shown` alone.
"""
