#!/bin/bash
# Stops the AgentWorker's executor inside its sandbox (best effort, when the worker is deleted):
#   bash -c "$(cat stop_executor.sh)" sbx-stop DIR MARKER
#   $1 DIR     the worker's executor directory (see executor.sh)
#   $2 MARKER  the boot marker file
# The recorded pid is killed only if it was launched in the running boot (after a stop the pid
# may belong to another process); the pid file is removed. Always exits 0.
d=$1; marker=$2
pid=$(cat "$d/pid" 2>/dev/null)
if [ -n "$pid" ] && [ "$(cat "$d/boot" 2>/dev/null)" = "$(cat "$marker" 2>/dev/null)" ]; then
  kill "$pid" 2>/dev/null
fi
rm -f "$d/pid"
exit 0
