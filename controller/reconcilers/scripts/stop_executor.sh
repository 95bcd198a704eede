#!/bin/bash
# Stops an executor inside its sandbox (best effort: when its AgentWorker is deleted, or when the
# task of a PerTask worker is done):
#   bash -c "$(cat stop_executor.sh)" sbx-stop DIR MARKER [REMOVE...]
#   $1 DIR     the executor directory (see executor.sh)
#   $2 MARKER  the boot marker file
#   $3…        directories to remove once the executor is gone (a task's executor directory and
#              workspace); only paths under HOME/.sbx/tasks/ and HOME/tasks/ are removed, HOME
#              being where DIR's .sbx is (/home/sandbox-agent), anything else is left alone
# The recorded pid is killed only if it was launched in the running boot (after a stop the pid
# may belong to another process), and waited for (up to 2 s, looking every 20 ms, then SIGKILL)
# when something is to be removed; the pid file is removed. Always exits 0. (A PerTask task's
# close runs this once per task inside a reconcile: 200 ms steps cost each task about 0.2 s of a
# worker thread, measured in bench/pool.sh.)
d=$1; marker=$2; shift 2
# Alive and not a zombie (a detached executor may have no one to reap it), as in executor.sh.
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  local stat=; read -r stat < "/proc/$1/stat" 2>/dev/null
  [[ "${stat##*) }" != Z* ]]
}
pid=$(cat "$d/pid" 2>/dev/null)
if [ -n "$pid" ] && [ "$(cat "$d/boot" 2>/dev/null)" = "$(cat "$marker" 2>/dev/null)" ]; then
  kill "$pid" 2>/dev/null
  if [ $# -gt 0 ]; then
    i=0; while [ $i -lt 100 ] && alive "$pid"; do sleep 0.02; i=$((i + 1)); done
    if alive "$pid"; then kill -9 "$pid" 2>/dev/null; fi
  fi
fi
rm -f "$d/pid"
home=${d%/.sbx/*}
for p in "$@"; do
  case "$p" in
    */../* | */..) ;;
    "$home"/.sbx/tasks/?* | "$home"/tasks/?*) rm -rf -- "$p" ;;
  esac
done
exit 0
