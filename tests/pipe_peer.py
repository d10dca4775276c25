"""The old name of `support.pipe_peer`, kept so that tests written against it still import.

New tests import from `support` (``tests/support/``).
"""

from support.pipe_peer import *  # noqa: F403
