"""The syrupy extension for whole sessions: one readable JSON file per test.

Use it with the data of `acp_bridge.testing.transcript_snapshot` (the
``acp_snapshot`` fixture is ``snapshot.use_extension(TranscriptSnapshot)``)::

    assert transcript_snapshot(agent) == acp_snapshot

The file is ``__snapshots__/<test file>/<test name>.json`` beside the test:
indented JSON with sorted keys, one message per block in wire order, so a
change shows in a review (and in pytest's failure output) as the lines of
the messages that changed.  To keep the files elsewhere, subclass it and
override ``dirname``.  ``pytest --snapshot-update`` writes them.
"""

from __future__ import annotations

from syrupy.extensions.json import JSONSnapshotExtension


class TranscriptSnapshot(JSONSnapshotExtension):
    """A whole session per file, as indented JSON with sorted keys."""


__all__ = ["TranscriptSnapshot"]
