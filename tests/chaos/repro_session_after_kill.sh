#!/usr/bin/env bash
# Reproduction (found by chaos.sh): sbxd SIGKILLed after it created a worker's session but before
# the worker's status (sessionId) was written. The create moved the inventory row from intent
# ("pending:<uid>") to live and deleted the intent, so the restarted sbxd finds neither a
# sessionId nor an intent, and creates a second session. The first stays live in the emulator and
# in the inventory under the same live owner, so GC never collects it: a duplicate create and a
# leaked session (until the worker is deleted). The launch exec-sync between the create and the
# status write is made slow (5 s latency) so the kill lands in the window every time.
#   tests/chaos/repro_session_after_kill.sh BIN_DIR    # exit 0 = fixed, 1 = reproduced
set -euo pipefail
export SBX_BENCH_BIN=$(cd "$1" && pwd)
source "$(dirname "$0")/../../bench/lib.sh"
trap bench_cleanup EXIT
bench_tmp=$(mktemp -d /tmp/sbx-repro-session.XXXXXX)
bench_start_emulator --openai-port 0 --pending-delay 1s --max-sandboxes 0
cat >"$bench_tmp/aw.yaml" <<EOM
apiVersion: sbx.dev/v1alpha1
kind: AgentWorker
metadata: {name: w}
spec:
  sandbox: {inactivityTimeout: 1h}
  agent: {model: gpt-5-codex}
  workspaceDirectory: /home/sandbox-agent
EOM
curl -sf -X POST "$emu_url/_emulator/latency" -d '{"endpoint":"databricks.exec_sync","latency":"5s"}' >/dev/null
sbxctl apply -f "$bench_tmp/aw.yaml" >/dev/null
bench_start_sbxd --sweep-interval 1s --lease-duration 2s
bench_wait_for 60 bash -c "sqlite3 '$SBX_DB' \"select 1 from events where reason='SessionCreated'\" | grep -q 1"
echo "status.sessionId at the kill: '$(sbxctl get aw w -o json | jq -r '.status.sessionId // ""')'"
kill -9 "$sbxd_pid"
wait "$sbxd_pid" 2>/dev/null || true
sbxd_pid=""
curl -sf -X DELETE "$emu_url/_emulator/faults" >/dev/null
bench_start_sbxd --sweep-interval 1s --lease-duration 2s
wait_ready agentworkers 1 60 >/dev/null
sessions=$(curl -sf "${openai_url%/v1}/_emulator/openai/state" | jq -r '[.sessions[].id] | join(" ")')
echo "worker's session: $(sbxctl get aw w -o json | jq -r .status.sessionId); live sessions: $sessions"
echo "inventory: $(sqlite3 "$SBX_DB" "select external_id || ':' || state from inventory where resource_type='session'" | tr '\n' ' ')"
if (($(wc -w <<<"$sessions") != 1)); then
  echo "REPRODUCED: $(wc -w <<<"$sessions") live sessions for one worker"
  exit 1
fi
echo "not reproduced: one session"
