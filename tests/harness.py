"""The old name of `support.harness`, kept so that tests written against it still import.

New tests import from `support` (``tests/support/``).
"""

from support.harness import *  # noqa: F403
