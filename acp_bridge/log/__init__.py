"""The durable event log: its record vocabulary, reader, projection and checkers.

`records` defines the vocabulary; `reader` reads a session file back
(through `upcast.load_log`, the one reader); `derive` projects the records
onto the model history and `projection` keeps that history up to date as a
log grows; `open_turn` is what an open turn looks like and how it closes
(shared by the live recorder, `reopen` and the checker); `check` states the
rules a log must satisfy and `history_rules` those of a history (used by
tests after every turn).
"""
