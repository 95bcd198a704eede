#!/usr/bin/env bash
# Chaos for AgentTask (issue #13, DESIGN §7.1 "exactly once"): W AgentWorkers (inline sandboxes)
# run T AgentTasks while sbxd is SIGKILLed in rounds and restarted each time; afterwards every
# guarantee is checked against the EMULATOR's records, not against what sbxd says:
#   tasks     t-NNN, spread round-robin over the workers aw-NN (task i → worker (i-1)%W+1), each
#             `$ echo task-NNN` (every third also `!sleep 1s`); every tenth (i%10 == 7) ends in
#             `!fail chaos_fail …`; the last one is `!sleep 10m` and is cancelled with
#             `sbxctl cancel` once it runs. The first 60% are applied before the kill rounds, the
#             rest while the second round's sbxd runs (so kills land during submission too).
#   rounds    K × (start sbxd, wait until it leads, SIGKILL it): odd rounds at a random moment
#             0.2…W s after it led; even rounds the moment the emulator counts a newly accepted
#             input (the POST has arrived, sbxd has not yet seen the turn: the crash window the
#             Idempotency-Key exists for). Before each round one random session holds its next
#             input for 1.5 s (admin hold_inputs), so some POST is in flight when sbxd dies.
#   checks    (from GET /_emulator/openai/state and the sessions' turn lists)
#             - totals.turns_started == T and totals.accepted_inputs == T (one turn per task, no
#               duplicate input accepted; replays show up in deduped_inputs only);
#             - per session: turns_started == accepted_inputs == the tasks of its worker, and
#               GET …/turns lists exactly that many root turns, each the turnId of one task;
#             - every task terminal with the right phase: Succeeded (its log shows its echo),
#               Failed with error.code chaos_fail, Cancelled for the cancelled one; its
#               sessionId is its worker's session.
# Usage:
#   tests/chaos/agent_tasks_chaos.sh BIN_DIR [--workers W] [--tasks T] [--rounds K]
#       [--kill-window S] [--timeout SECONDS] [--inject-duplicate]
# --inject-duplicate proves the checks can fail: before the checks it POSTs one task's input
# again with a new Idempotency-Key behind sbxd's back (a second turn), so the run must FAIL.
# BIN_DIR holds sbxd, sbxctl, sbx-emulator. Needs bash, curl, awk, jq. SBX_BENCH_KEEP=1 keeps
# the temp dir; SBX_CHAOS_SBXD_FLAGS overrides sbxd's timing flags.
set -euo pipefail
export SBX_BENCH_BIN=$(cd "$1" && pwd)
shift
workers=10 tasks=50 rounds=4 kill_window=3 timeout=240 inject_duplicate=""
while (($#)); do
  case "$1" in
    --workers) workers=$2 && shift ;;
    --tasks) tasks=$2 && shift ;;
    --rounds) rounds=$2 && shift ;;
    --kill-window) kill_window=$2 && shift ;;
    --timeout) timeout=$2 && shift ;;
    --inject-duplicate) inject_duplicate=1 ;;
    *) echo "unknown argument $1" >&2 && exit 2 ;;
  esac
  shift
done
((tasks >= workers)) || { echo "--tasks must be ≥ --workers" >&2 && exit 2; }
read -r -a sbxd_flags <<<"${SBX_CHAOS_SBXD_FLAGS:---sweep-interval 2s --resync 30s --lease-duration 3s --executor-status-interval 2s --executor-probe-interval 10s}"
source "$(dirname "$0")/../../bench/lib.sh"
trap bench_cleanup EXIT
bench_tmp=$(mktemp -d /tmp/sbx-task-chaos.XXXXXX)
t0=$(now)
source "$(dirname "$0")/task_chaos_lib.sh"

worker_of() { printf 'aw-%02d' $((($1 - 1) % workers + 1)); }
task_name() { printf 't-%03d' "$1"; }
is_fail() { (($1 % 10 == 7 && $1 != tasks)); }

total() { oai_state | jq ".totals.$1"; }

# ---- manifests -------------------------------------------------------------------------------
mkdir -p "$bench_tmp/workers" "$bench_tmp/tasks-a" "$bench_tmp/tasks-b"
for w in $(seq 1 "$workers"); do
  cat >"$bench_tmp/workers/$(printf 'aw-%02d' "$w").yaml" <<EOM
apiVersion: sbx.dev/v1alpha1
kind: AgentWorker
metadata:
  name: $(printf 'aw-%02d' "$w")
spec:
  sandbox:
    inactivityTimeout: 1h
    setup:
      - name: workspace
        run: mkdir -p /home/sandbox-agent/workspace
  agent:
    model: gpt-5-codex
    instructions: task chaos worker
  workspaceDirectory: /home/sandbox-agent/workspace
EOM
done
first_batch=$((tasks * 6 / 10))
for i in $(seq 1 "$tasks"); do
  n=$(task_name "$i")
  if ((i == tasks)); then
    input="    \$ echo $n\n    !sleep 10m"
  elif is_fail "$i"; then
    input="    \$ echo $n\n    !fail chaos_fail task $n fails on purpose"
  elif ((i % 3 == 0)); then
    input="    \$ echo $n\n    !sleep 1s"
  else
    input="    \$ echo $n"
  fi
  dir=tasks-a
  ((i <= first_batch)) || dir=tasks-b
  printf 'apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: %s\nspec:\n  workerRef: %s\n  timeout: 20m\n  input: |\n%b\n' \
    "$n" "$(worker_of "$i")" "$input" >"$bench_tmp/$dir/$n.yaml"
done

# ---- workers first (their own chaos is tests/chaos/chaos.sh) ---------------------------------
bench_start_emulator --openai-port 0 --pending-delay 1s --stopping-delay 1s --max-sandboxes 0 \
  --disconnected-after 1s
[[ -n "$openai_url" ]] || fail "the emulator did not start its OpenAI half"
log "objects: $workers AgentWorkers, $tasks AgentTasks; rounds=$rounds kill-window=${kill_window}s; load $(cut -d' ' -f1-3 /proc/loadavg)"
sbxctl apply -f "$bench_tmp/workers" >/dev/null
start_sbxd
wait_ready agentworkers "$workers" "$timeout" >/dev/null || fail "workers not Ready within ${timeout}s"
sessions=$(sbxctl get agentworkers -o json | jq -c '[.items[] | {(.metadata.name): .status.sessionId}] | add')
log "workers Ready: $(jq -c . <<<"$sessions" | head -c 300)…"
kill_sbxd

# ---- kill rounds -----------------------------------------------------------------------------
sbxctl apply -f "$bench_tmp/tasks-a" >/dev/null
for round in $(seq 1 "$rounds"); do
  # One random session holds its next input 1.5 s: a POST in flight when the kill comes.
  held=$(jq -r --arg w "$(printf 'aw-%02d' $((RANDOM % workers + 1)))" '.[$w]' <<<"$sessions")
  curl -sf -X POST "${openai_url%/v1}/_emulator/openai/sessions/$held/hold_inputs" \
    -d '{"count":1,"release_after_ms":1500}' >/dev/null
  start_sbxd
  if ((round == 2)); then
    sbxctl apply -f "$bench_tmp/tasks-b" >/dev/null
  fi
  if ((round % 2 == 1)); then
    delay=$(rand_between 0.2 "$kill_window")
    sleep "$delay"
    how="${delay}s after it led"
  else
    # Kill at the first input accepted after this start (or after the kill window).
    before=$(total accepted_inputs)
    deadline=$(awk -v n="$(date +%s.%N)" -v w="$kill_window" 'BEGIN { printf "%.0f", n + w + 5 }')
    while (($(total accepted_inputs) == before)) && (($(date +%s) < deadline)); do
      sleep 0.05
    done
    how="right after input $(total accepted_inputs) was accepted"
  fi
  kill_sbxd
  log "round $round: sbxd killed $how; accepted=$(total accepted_inputs) deduped=$(total deduped_inputs) turns=$(total turns_started)"
done
start_sbxd

# The long task is cancelled once it runs (its turn has started: it counts as a turn).
last=$(task_name "$tasks")
bench_wait_for "$timeout" bash -c "[[ \$('$SBX_BENCH_BIN/sbxctl' get agenttask $last -o jsonpath='{.status.phase}') == Running ]]" ||
  fail "$last never Running: $(sbxctl get agenttask "$last" -o json | jq -c .status)"
sbxctl cancel "agenttask/$last" >/dev/null
log "cancel requested for $last"

wait_tasks_terminal "$tasks" "$timeout"
# One more status period: a late duplicate turn would show up now.
sleep 3

if [[ -n "$inject_duplicate" ]]; then
  s=$(jq -r '.["aw-01"]' <<<"$sessions")
  oai -X POST -H "Idempotency-Key: chaos-injected" "$openai_url/agents/sessions/$s/events" \
    -d '{"events":[{"type":"agent.session.input.message","input":"$ echo t-001"}]}' >/dev/null
  sleep 1
fi

# ---- the checks against the emulator ---------------------------------------------------------
state=$(oai_state)
task_json=$(sbxctl get agenttasks -o json)
echo "$state" >"$bench_tmp/state.json"
echo "$task_json" >"$bench_tmp/tasks.json"
turns=$(jq '.totals.turns_started' <<<"$state")
accepted=$(jq '.totals.accepted_inputs' <<<"$state")
deduped=$(jq '.totals.deduped_inputs' <<<"$state")
((turns == tasks)) || violation "the emulator started $turns turns for $tasks tasks"
((accepted == tasks)) || violation "the emulator accepted $accepted inputs for $tasks tasks"

for w in $(seq 1 "$workers"); do
  wn=$(printf 'aw-%02d' "$w")
  sid=$(jq -r --arg w "$wn" '.[$w]' <<<"$sessions")
  expected=$(jq --arg w "$wn" '[.items[] | select(.spec.workerRef == $w)] | length' <<<"$task_json")
  read -r st acc <<<"$(jq -r --arg s "$sid" '.sessions[] | select(.id == $s) | "\(.turns_started) \(.accepted_inputs)"' <<<"$state")"
  [[ "$st" == "$expected" && "$acc" == "$expected" ]] ||
    violation "session $sid of $wn: turns_started=$st accepted_inputs=$acc for $expected tasks"
  listed=$(oai "$openai_url/agents/sessions/$sid/turns?limit=100" | jq -r '.data[].id' | sort)
  ours=$(jq -r --arg w "$wn" '.items[] | select(.spec.workerRef == $w) | .status.turnId // "none"' <<<"$task_json" | sort)
  [[ "$listed" == "$ours" ]] ||
    violation "$wn: the session's turns ≠ its tasks' turnIds: $(diff <(echo "$ours") <(echo "$listed") | head -n 6 | tr '\n' ' ')"
done

logs_missing=""
for i in $(seq 1 "$tasks"); do
  n=$(task_name "$i")
  t=$(jq -c --arg n "$n" '.items[] | select(.metadata.name == $n)' <<<"$task_json")
  phase=$(jq -r '.status.phase' <<<"$t")
  code=$(jq -r '.status.result.error.code // ""' <<<"$t")
  want=Succeeded
  if ((i == tasks)); then
    want=Cancelled
  elif is_fail "$i"; then
    want=Failed
  fi
  [[ "$phase" == "$want" ]] || violation "$n: phase $phase, want $want: $(jq -c .status <<<"$t" | head -c 600)"
  if [[ "$want" == Failed && "$code" != chaos_fail ]]; then
    violation "$n: error code '$code', want chaos_fail"
  fi
  sid=$(jq -r --arg w "$(worker_of "$i")" '.[$w]' <<<"$sessions")
  [[ "$(jq -r '.status.sessionId' <<<"$t")" == "$sid" ]] ||
    violation "$n: sessionId $(jq -r '.status.sessionId' <<<"$t") is not its worker's $sid"
  if [[ "$want" == Succeeded ]]; then
    out=$(sbxctl logs "agenttask/$n" 2>&1 || true)
    grep -qx "$n" <<<"$out" || logs_missing+=" $n"
  fi
done
[[ -z "$logs_missing" ]] || violation "tasks whose log lacks their command's output:$logs_missing"

if ((violations)); then
  fail "$violations violations (see VIOLATION lines); turns=$turns accepted=$accepted deduped=$deduped for $tasks tasks"
fi
echo "PASS: $tasks AgentTasks on $workers AgentWorkers, $rounds kill -9 rounds (sbxd started $sbxd_starts times): turns_started=$turns accepted=$accepted (deduped replays $deduped), phases as expected, each worker's turns = its tasks' turnIds ($(since "$t0")s in total)"
