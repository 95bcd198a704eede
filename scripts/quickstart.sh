#!/usr/bin/env bash
# The local quickstart: builds sbx if needed, starts sbx-emulator (a local Databricks Sandbox
# API and OpenAI Agents API, with a stand-in `codex` in every emulated sandbox) and sbxd in the
# background, applies manifests/examples/, waits until every Sandbox and AgentWorker is Ready
# and shows them. State (database, logs, emulated sandboxes) lives in .sbx-quickstart/, with
# `env` (mode 0600): the environment sbxd runs with, SBX_DB, SBX_CONFIG, PATH and the emulator's
# DATABRICKS_*/OPENAI_* values. sbxd also serves its API on a loopback port; the context
# "quickstart" of $state/config.yaml (SBX_CONFIG) reaches it with an admin token. Every "Try:" line it prints works in a new shell once that file is
# sourced (the first line does it): sbxctl exec and logs use the default Workspace's
# credentials, which are the controller's own DATABRICKS_HOST/DATABRICKS_TOKEN (SECURITY.md).
#
#   scripts/quickstart.sh         # start (or restart) and converge the examples
#   scripts/quickstart.sh stop    # stop sbxd and the emulator (the emulator kills its sandboxes)
#
# Environment (for tests): SBX_QUICKSTART_STATE=DIR keeps the state there instead;
# SBX_QUICKSTART_BIN=DIR uses the sbxctl, sbxd and sbx-emulator already built in DIR (no
# dependency check, no build).
set -euo pipefail
cd "$(dirname "$0")/.."
state="${SBX_QUICKSTART_STATE:-$PWD/.sbx-quickstart}"
bin="${SBX_QUICKSTART_BIN:-$PWD/build/dev/cli}"

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

if [[ -z "${SBX_QUICKSTART_BIN:-}" ]]; then
  scripts/install-deps.sh
  cmake --preset dev >/dev/null
  cmake --build --preset dev --target sbxctl sbxd sbx-emulator
fi

stop_all
mkdir -p "$state"
state=$(cd "$state" && pwd)  # absolute: the env file is sourced from anywhere
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

# The Workspace "default" falls back to sbxd's environment, as the Databricks SDKs do; sbxctl
# exec and logs resolve it the same way in the user's shell. One file for both, so they agree.
env_file="$state/env"
(
  umask 077
  {
    echo "# Written by scripts/quickstart.sh: the environment its sbxd runs with. Source it to use"
    echo "# sbxctl against the quickstart (exec and logs need DATABRICKS_HOST/DATABRICKS_TOKEN)."
    printf 'export SBX_DB=%q\n' "$state/sbx.db"
    # sbxctl's contexts (--context quickstart talks to sbxd's API instead of the file).
    printf 'export SBX_CONFIG=%q\n' "$state/config.yaml"
    # shellcheck disable=SC2016  # $PATH is expanded when the file is sourced
    printf 'export PATH=%q:"$PATH"\n' "$bin"
    printf 'export DATABRICKS_HOST=%q\n' "$databricks_url"
    echo "export DATABRICKS_TOKEN=dapi-quickstart"
    printf 'export OPENAI_BASE_URL=%q\n' "$openai_url"
    echo "export OPENAI_API_KEY=sk-quickstart-app"
    echo "export OPENAI_EXECUTOR_API_KEY=sk-quickstart-executor"
  } >"$env_file.tmp"
)
chmod 0600 "$env_file.tmp"  # umask does not narrow a file that already existed
mv -f "$env_file.tmp" "$env_file"
# shellcheck source=/dev/null
source "$env_file"

# The API (README "Team setup"): an admin token, stored hashed in tokens (0600); sbxctl's
# context "quickstart" holds the token itself, in config.yaml (0600).
token=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
(
  umask 077
  printf '%s\n' "$token" | "$bin/sbxd" hash-token quickstart admin >"$state/tokens"
)
rm -f "$state/sbxd.log"
"$bin/sbxd" --metrics-addr 127.0.0.1:0 --sweep-interval 10s --resync 1m \
  --listen 127.0.0.1:0 --tokens-file "$state/tokens" \
  >"$state/sbxd.log" 2>&1 &
echo $! >"$state/sbxd.pid"
if ! wait_for 30 grep -q 'serving the API' "$state/sbxd.log"; then
  echo "sbxd did not start its API; see $state/sbxd.log" >&2
  exit 1
fi
api_port=$(sed -n 's/.*serving the API.*port=\([0-9]*\).*/\1/p' "$state/sbxd.log" | head -n1)
"$bin/sbxctl" config set-context quickstart --server "http://127.0.0.1:$api_port" \
  --token "$token" >/dev/null
unset token

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
stop_command="$(printf %q "$PWD/scripts/quickstart.sh") stop"
if [[ -n "${SBX_QUICKSTART_STATE:-}" ]]; then
  stop_command="SBX_QUICKSTART_STATE=$(printf %q "$state") $stop_command"
fi
cat <<EOT

sbx is running against the local emulator ($databricks_url, $openai_url). Try:
  source $(printf %q "$env_file")   # SBX_DB, PATH and the emulator's credentials
  sbxctl describe sandbox dev
  sbxctl --context quickstart get sandboxes                                # the same, through sbxd's API
  sbxctl --context quickstart exec sandbox/dev -- hostname                 # sbxd runs it: no cloud credentials here
  sbxctl exec sandbox/dev -- ls -la /home/sandbox-agent
  sbxctl logs agentworker/fixer --tail 20                                 # the executor's log (quiet when healthy)
  curl -s -X POST $databricks_url/_emulator/sandboxes/default-dev/stop   # stop it behind sbx's back
  sbxctl get sandboxes -w                                                 # … and watch it come back
  sbxctl describe agentworker fixer                                       # session, executor, conditions
  sbxctl run --pool fixers --input '$ echo hello from a pool'            # pool fixers: a replica comes up for it
Stop everything with: $stop_command
EOT
