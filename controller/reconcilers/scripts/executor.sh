#!/bin/bash
# The AgentWorker's executor, looked at or launched inside its sandbox by one exec-sync:
#   bash -c "$(cat executor.sh)" VERB DIR WORKSPACE MARKER COMMAND [ARG...]
#   $0 VERB       sbx-probe (look only) or sbx-launch (launch unless ours already runs)
#   $1 DIR        the worker's executor directory (pid, env, boot, log, lock, codex-home)
#   $2 WORKSPACE  spec.workspaceDirectory
#   $3 MARKER     the boot marker file (internal/boot_marker.h); written when missing
#   $4 COMMAND    spec.executor.command; $5… spec.executor.args (launch only)
# Environment (launch only; secrets travel only here, never in any argv):
#   CODEX_API_KEY       the executor's key, inherited by the executor
#   SBX_REMOTE_URL      the session's environment remote URL
#   SBX_ENVIRONMENT_ID  the session's environment id
#   SBX_RELAUNCH        non-empty: stop ours even if it runs for this environment (spec changed)
#   plus spec.executor.env, passed through to the executor
# Output, always exit 0 once the arguments are read (ParseExecutorReport reads it):
#   action=probed|running|launched|missing   what this run did (missing: workspace or command)
#   pid=  alive=0|1                          the recorded pid and whether it lives (not a zombie)
#   env=  boot=                              environment id and boot id of the last launch
#   current_boot=                            the running boot's id (the marker)
#   workspace=0|1  command=0|1               a writable WORKSPACE, COMMAND on PATH
#   ---log---                                then the executor log's tail (probed, missing)
# The launch is idempotent (flock keeps a racing second launch out), so no probe comes first.
verb=$0; d=$1; ws=$2; m=$3; cmd=$4; shift 4

get() { v=; read -r v < "$1"; } 2>/dev/null
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  local stat=; read -r stat < "/proc/$1/stat" 2>/dev/null
  [[ "${stat##*) }" != Z* ]]
}
report() {
  get "$d/pid"; pid=$v; a=0
  if [ -n "$pid" ] && alive "$pid"; then a=1; fi
  echo "action=$1"
  echo "pid=$pid"
  echo "alive=$a"
  get "$d/env"; echo "env=$v"
  get "$d/boot"; echo "boot=$v"
  get "$m"; echo "current_boot=$v"
  if [ -d "$ws" ] && [ -w "$ws" ]; then echo "workspace=1"; else echo "workspace=0"; fi
  if command -v "$cmd" >/dev/null 2>&1; then echo "command=1"; else echo "command=0"; fi
  echo "---log---"
  if [ "$1" != launched ] && [ "$1" != running ]; then tail -c 4000 "$d/log" 2>/dev/null; fi
  exit 0
}

if [ "$verb" = sbx-probe ]; then report probed; fi

# The boot marker: the first writer wins, so two racing scripts agree on the id; an empty file
# (a write cut short) is replaced.
if [ ! -s "$m" ]; then
  { read -r u < /proc/sys/kernel/random/uuid || u=$(date +%s%N); } 2>/dev/null
  printf '%s\n' "$u" > "$m.$$" &&
    { ln "$m.$$" "$m" 2>/dev/null || [ -s "$m" ] || mv -f "$m.$$" "$m"; }
  rm -f "$m.$$"
fi

[ -d "$d" ] || mkdir -p "$d" || exit 2
get "$m"; boot=$v
get "$d/pid"; pid=$v
get "$d/boot"
# A live executor of this boot: ours for this environment is left running; one for another
# environment (an old session), or any when SBX_RELAUNCH is set, is stopped first.
if [ -n "$pid" ] && [ "$v" = "$boot" ] && alive "$pid"; then
  get "$d/env"
  if [ "$v" = "$SBX_ENVIRONMENT_ID" ] && [ -z "$SBX_RELAUNCH" ]; then report running; fi
  kill "$pid" 2>/dev/null
  i=0; while [ $i -lt 100 ] && alive "$pid"; do sleep 0.02; i=$((i + 1)); done
fi
# sbx knows the workspace directory: it creates it where the sandbox's home is (the only place
# that survives a stop; the home is where DIR's .sbx is, /home/sandbox-agent), and insists on a
# directory it can write.
home=${d%/.sbx/*}
case "$ws" in "$home"/*) [ -d "$ws" ] || mkdir -p "$ws" 2>/dev/null ;; esac
if [ ! -d "$ws" ] || [ ! -w "$ws" ] || ! command -v "$cmd" >/dev/null 2>&1; then report missing; fi
if [ -f "$d/log" ]; then mv -f "$d/log" "$d/log.1"; fi
if [ -e "$d/pid" ]; then rm -f "$d/pid"; fi
# codex keeps its state in CODEX_HOME (the seed uses a fresh directory): one per worker, under the
# home that survives a stop.
export CODEX_HOME="$d/codex-home"
mkdir -p "$CODEX_HOME" || exit 2
printf '%s\n' "$SBX_ENVIRONMENT_ID" > "$d/env"
printf '%s\n' "$boot" > "$d/boot"
cd "$ws" || report missing
setsid nohup /bin/bash -c 'exec 9>"$0/lock"; flock -n 9 || exit 0; echo $$ > "$0/pid"; exec "$@"' \
  "$d" "$cmd" exec-server --remote "$SBX_REMOTE_URL" --environment-id "$SBX_ENVIRONMENT_ID" "$@" \
  >> "$d/log" 2>&1 < /dev/null &
# "launched" means the pid is on disk: a probe right after must not take the gap for an exit.
# (Checked every 20 ms for up to 3 s: the detached shell usually writes it within milliseconds.)
i=0; while [ ! -s "$d/pid" ] && [ $i -lt 150 ]; do sleep 0.02; i=$((i + 1)); done
report launched
