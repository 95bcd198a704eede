#!/bin/bash
# Reads one AgentTask collect path back from the sandbox (DESIGN §7.1), size-capped, as base64.
# Positional contract (exec-sync args after `bash -c <this> sbx-collect`):
#   $1  the worker's workspace directory (absolute)
#   $2  the collect path, relative to $1 (validated: no leading '/', no '..')
#   $3  the most bytes to read (maxBytes)
# Output: stdout = "<size of the whole file in bytes>\n<base64 of its first $3 bytes, one line>".
# Exit 3 when the path is not a regular file (stderr says why); other non-zero exits are errors.
set -u
cd "$1" || exit 4
if [ ! -f "$2" ]; then
  echo "no such file: $2" >&2
  exit 3
fi
size=$(stat -c %s -- "$2") || exit 5
echo "$size"
head -c "$3" -- "$2" | base64 -w0
echo
