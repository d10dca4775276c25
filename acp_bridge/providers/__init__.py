"""Model providers: the keyless scripted one and the HTTP ones (`acp_bridge.providers.base`)."""

import sys

# The httpx package imports its command-line client whenever the libraries
# that client needs (rich, click, pygments) are installed, as they often are
# for other packages: two thirds of httpx's import time, paid before the
# first session of an HTTP provider.  The bridge never runs that client; with
# this entry httpx defines its stub ``main`` instead (the ``httpx`` command,
# a process of its own, is not affected).
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
