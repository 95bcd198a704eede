#!/usr/bin/env bash
# The local quickstart: builds sbx if needed, starts sbx-emulator (a local Databricks Sandbox
# API and OpenAI Agents API, with a stand-in `codex` in every emulated sandbox) and sbxd in the
# background, applies manifests/examples/, waits until every Sandbox and AgentWorker is Ready
# and shows them. State (database, logs, emulated sandboxes) lives in .sbx-quickstart/.
#
#   scripts/quickstart.sh         # start (or restart) and converge the examples
#   scripts/quickstart.sh stop    # stop sbxd and the emulator (the emulator kills its sandboxes)
set -euo pipefail
cd "$(dirname "$0")/.."
state="$PWD/.sbx-quickstart"
bin="$PWD/build/dev/cli"

stop_all() {
  for name in sbxd emulator; do
    local pidfile="$state/$name.pid"
    if [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      kill -TERM "$(cat "$pidfile")"
      for _ in $(seq 1 100); do
        kill -0 "$(cat "$pidfile")" 2>/dev/null || break
        sleep 0.1
      done
    fi
    rm -f "$pidfile"
  done
}

# Polls `$@` until it succeeds or `timeout` seconds pass.
wait_for() {
  local timeout=$1
  shift
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      return 1
    fi
    sleep 0.2
  done
}

if [[ "${1:-}" == "stop" ]]; then
  stop_all
  echo "stopped sbxd and sbx-emulator (state kept in $state; rm -rf it to start afresh)"
  exit 0
fi

scripts/install-deps.sh
cmake --preset dev >/dev/null
cmake --build --preset dev --target sbxctl sbxd sbx-emulator

stop_all
mkdir -p "$state"
rm -f "$state/emulator.log"

"$bin/sbx-emulator" --databricks-port 0 --openai-port 0 --root "$state/emulator" \
  --pending-delay 1s --stopping-delay 1s --token dapi-quickstart \
  --openai-api-key sk-quickstart-app --openai-executor-key sk-quickstart-executor \
  >"$state/emulator.log" 2>&1 &
echo $! >"$state/emulator.pid"
if ! wait_for 30 grep -q '^openai: http' "$state/emulator.log"; then
  echo "sbx-emulator did not start; see $state/emulator.log" >&2
  exit 1
fi
databricks_url=$(sed -n 's/^databricks: //p' "$state/emulator.log" | head -n1)
openai_url=$(sed -n 's/^openai: //p' "$state/emulator.log" | head -n1)

# The Workspace "default" falls back to sbxd's environment, as the Databricks SDKs do.
export DATABRICKS_HOST="$databricks_url"
export DATABRICKS_TOKEN=dapi-quickstart
export OPENAI_BASE_URL="$openai_url"
export OPENAI_API_KEY=sk-quickstart-app
export OPENAI_EXECUTOR_API_KEY=sk-quickstart-executor
export SBX_DB="$state/sbx.db"

"$bin/sbxd" --metrics-addr 127.0.0.1:0 --sweep-interval 10s --resync 1m \
  >"$state/sbxd.log" 2>&1 &
echo $! >"$state/sbxd.pid"

"$bin/sbxctl" apply -f manifests/examples/
echo
echo "waiting for the sandboxes and agent workers to become Ready (sbxd log: $state/sbxd.log) …"
for name in $("$bin/sbxctl" get sandboxes -o name) $("$bin/sbxctl" get agentworkers -o name); do
  "$bin/sbxctl" wait "$name" --for=condition=Ready --timeout 3m
done
echo
"$bin/sbxctl" get sandboxes -o wide
echo
"$bin/sbxctl" get agentworkers -o wide
cat <<EOT

sbx is running against the local emulator ($databricks_url, $openai_url). Try:
  export SBX_DB=$state/sbx.db PATH=$bin:\$PATH
  sbxctl describe sandbox dev
  sbxctl exec sandbox/dev -- ls -la /home/sandbox-agent
  curl -s -X POST $databricks_url/_emulator/sandboxes/default-dev/stop   # stop it behind sbx's back
  sbxctl get sandboxes -w                                                 # … and watch it come back
  sbxctl describe agentworker fixer                                       # session, executor, conditions
Stop everything with: scripts/quickstart.sh stop
EOT
