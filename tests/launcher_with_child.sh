#!/bin/sh
# A launcher as npm's .bin scripts and shell wrappers are: it starts a helper that
# ignores stdin's EOF and SIGTERM (its pid written to the file $LEFTOVER_PIDS), then
# becomes the agent given as arguments.
(trap '' TERM; exec sleep 600) </dev/null >/dev/null 2>&1 &
echo $! >>"$LEFTOVER_PIDS"
exec "$@"
