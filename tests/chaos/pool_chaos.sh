#!/usr/bin/env bash
# Chaos for AgentPool with retries (issue #27, DESIGN §8.1): T pool tasks with backoffLimit 2 on
# a pool that scales from zero (max M, session PerTask) while sbxd is SIGKILLed in rounds and
# restarted each time; afterwards every guarantee is checked against the EMULATOR's records:
#   tasks     t-NNN, each `$ echo t-NNN` (every third also `!sleep 1s`); every fifth also
#             `!flaky server_error …`: its first turn fails with an infrastructure code and a
#             retry (a new turn, Idempotency-Key <uid>-2) succeeds. The first 60% are applied
#             before the kill rounds, the rest while the second round's sbxd runs (the last
#             round's, or the final sbxd's, with fewer rounds).
#   rounds    once the first turn has started (the pool scaled up from zero), K × (start sbxd,
#             wait until it leads, SIGKILL it): odd rounds 0.2…W s after it led, even rounds the
#             moment the emulator accepts a new input (its turn not yet seen by sbxd).
#   checks    - every task Succeeded, its log shows its echo; a flaky task has ≥ 2 attempts, the
#               first Failed with server_error;
#             - the emulator started exactly Σ len(status.attempts) turns (T plus the retries
#               recorded) and accepted as many inputs (no attempt submitted twice);
#             - no replica ran two tasks at once, from the emulator's input records: under
#               PerTask no two sessions whose metadata names one worker (sbx.dev/worker) ever
#               had inputs open at once (peak_worker_open_inputs); under Shared no session ever
#               had two (peak_open_inputs);
#             - after scaleDownAfter the pool is back to 0 replicas, and the emulator holds no
#               sandbox and no session (nothing leaked).
# Usage:
#   tests/chaos/pool_chaos.sh BIN_DIR [--tasks T] [--max M] [--rounds K] [--kill-window W]
#       [--timeout SECONDS] [--session PerTask|Shared] [--inject-overlap]
# --inject-overlap proves the overlap check can fail: before the checks it runs two inputs at
# once on one live replica behind sbxd's back (PerTask: two sessions naming the replica, each
# with a stand-in executor of its own; Shared: two inputs on the replica's session), so the run
# must FAIL.
# BIN_DIR holds sbxd, sbxctl, sbx-emulator. Needs bash, curl, awk, jq. SBX_BENCH_KEEP=1 keeps the
# temp dir.
set -euo pipefail
export SBX_BENCH_BIN=$(cd "$1" && pwd)
shift
tasks=50 max=10 rounds=4 kill_window=3 timeout=300 inject_overlap="" session=PerTask
while (($#)); do
  case "$1" in
    --tasks) tasks=$2 && shift ;;
    --max) max=$2 && shift ;;
    --rounds) rounds=$2 && shift ;;
    --kill-window) kill_window=$2 && shift ;;
    --timeout) timeout=$2 && shift ;;
    --session) session=$2 && shift ;;
    --inject-overlap) inject_overlap=1 ;;
    *) echo "unknown argument $1" >&2 && exit 2 ;;
  esac
  shift
done
sbxd_flags=(--sweep-interval 2s --resync 30s --lease-duration 3s --executor-status-interval 2s
  --executor-probe-interval 10s)
source "$(dirname "$0")/../../bench/lib.sh"
trap bench_cleanup EXIT
bench_tmp=$(mktemp -d /tmp/sbx-pool-chaos.XXXXXX)
t0=$(now)
source "$(dirname "$0")/task_chaos_lib.sh"

task_name() { printf 't-%03d' "$1"; }
is_flaky() { (($1 % 5 == 0)); }
dbx_sandboxes() {
  curl -sf -H "Authorization: Bearer dapi-bench" "$emu_url/api/2.0/sandboxes?page_size=100" |
    jq '[.sandboxes[]?] | length'
}

# ---- manifests -------------------------------------------------------------------------------
mkdir -p "$bench_tmp/pool" "$bench_tmp/tasks-a" "$bench_tmp/tasks-b"
cat >"$bench_tmp/pool/pool.yaml" <<EOM
apiVersion: sbx.dev/v1alpha1
kind: AgentPool
metadata:
  name: chaos
spec:
  template:
    spec:
      sandbox:
        inactivityTimeout: 1h
        setup:
          - name: workspace
            run: mkdir -p /home/sandbox-agent/workspace
      agent:
        model: gpt-5-codex
        instructions: pool chaos replica
      workspaceDirectory: /home/sandbox-agent/workspace
  replicas: {min: 0, max: $max}
  scaleDownAfter: 15s
  session: $session
EOM
first_batch=$((tasks * 6 / 10))
for i in $(seq 1 "$tasks"); do
  n=$(task_name "$i")
  input="    \$ echo $n"
  ((i % 3 == 0)) && input+="\n    !sleep 1s"
  is_flaky "$i" && input+="\n    !flaky server_error $n loses its sandbox once"
  dir=tasks-a
  ((i <= first_batch)) || dir=tasks-b
  printf 'apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: %s\nspec:\n  poolRef: chaos\n  timeout: 20m\n  backoffLimit: 2\n  input: |\n%b\n' \
    "$n" "$input" >"$bench_tmp/$dir/$n.yaml"
done

bench_start_emulator --openai-port 0 --pending-delay 1s --stopping-delay 1s --max-sandboxes 0 \
  --disconnected-after 1s
[[ -n "$openai_url" ]] || fail "the emulator did not start its OpenAI half"
log "pool chaos: $tasks tasks (backoffLimit 2, every fifth flaky), max $max replicas, session $session; rounds=$rounds kill-window=${kill_window}s; load $(cut -d' ' -f1-3 /proc/loadavg)"
sbxctl apply -f "$bench_tmp/pool" >/dev/null
sbxctl apply -f "$bench_tmp/tasks-a" >/dev/null

# ---- kill rounds -----------------------------------------------------------------------------
# The pool scales up from zero first (sandboxes, sessions, executors): the kills are meant for
# while tasks run, so round 1 starts once the first turn has.
start_sbxd
bench_wait_for "$timeout" bash -c "(( \$(curl -sf '${openai_url%/v1}/_emulator/openai/state' | jq .totals.turns_started) > 0 ))" ||
  fail "no turn started within ${timeout}s"
log "first turn started; replicas=$(sbxctl get agentworkers -l sbx.dev/pool=chaos -o name | wc -l)"
kill_sbxd
b_round=$((rounds < 2 ? rounds : 2))  # the round whose sbxd sees the rest of the tasks applied
for round in $(seq 1 "$rounds"); do
  start_sbxd
  if ((round == b_round)); then
    sbxctl apply -f "$bench_tmp/tasks-b" >/dev/null
  fi
  if ((round % 2 == 1)); then
    delay=$(rand_between 0.2 "$kill_window")
    sleep "$delay"
    delay="${delay}s after it led"
  else
    # Right after the next input is accepted: the POST has arrived, sbxd has not seen the turn.
    before=$(oai_state | jq .totals.accepted_inputs)
    deadline=$((SECONDS + kill_window + 5))
    while (($(oai_state | jq .totals.accepted_inputs) == before)) && ((SECONDS < deadline)); do
      sleep 0.05
    done
    delay="right after input $(oai_state | jq .totals.accepted_inputs) was accepted"
  fi
  kill_sbxd
  state=$(oai_state)
  log "round $round: sbxd killed $delay; turns=$(jq .totals.turns_started <<<"$state") accepted=$(jq .totals.accepted_inputs <<<"$state") replicas=$(sbxctl get agentworkers -l sbx.dev/pool=chaos -o name | wc -l)"
done
start_sbxd
((b_round > 0)) || sbxctl apply -f "$bench_tmp/tasks-b" >/dev/null

wait_tasks_terminal "$tasks" "$timeout"

if [[ -n "$inject_overlap" && "$session" == Shared ]]; then
  s=$(sbxctl get agentworkers -l sbx.dev/pool=chaos -o json | jq -r '.items[0].status.sessionId')
  for k in 1 2; do
    oai -X POST -H "Idempotency-Key: chaos-injected-$k" "$openai_url/agents/sessions/$s/events" \
      -d '{"events":[{"type":"agent.session.input.message","input":"!sleep 2s"}]}' >/dev/null
  done
  sleep 1
elif [[ -n "$inject_overlap" ]]; then
  # Two sessions that name one live replica, each with a stand-in executor of its own (as a
  # task's would be), and an input in each at once; then both go (no leak to report).
  replica=$(sbxctl get agentworkers -l sbx.dev/pool=chaos -o name | head -1)
  injected=() executors=()
  for k in 1 2; do
    created=$(oai -X POST "$openai_url/agents/sessions" -d '{"agent":{"model":"gpt-5-codex"},
      "environment":{"type":"self_hosted","workspace_directory":"'"$bench_tmp"'"},
      "metadata":{"sbx.dev/worker":"default/'"${replica#*/}"'"}}')
    injected+=("$(jq -r .id <<<"$created")")
    CODEX_API_KEY=sk-bench-executor "$SBX_BENCH_BIN/sbx-emulator" executor \
      --remote "$(jq -r .environment.remote_url <<<"$created")" \
      --environment-id "$(jq -r .environment.id <<<"$created")" 2>>"$bench_tmp/injected.log" &
    executors+=("$!")
  done
  for s in "${injected[@]}"; do
    oai -X POST "$openai_url/agents/sessions/$s/events" \
      -d '{"events":[{"type":"agent.session.input.message","input":"!sleep 3s"}]}' >/dev/null
  done
  # Their turns end (a session whose turn ran may be deleted), then both go with their executors.
  for s in "${injected[@]}"; do
    bench_wait_for 30 bash -c "[[ \$(curl -sf -H 'Authorization: Bearer sk-bench-app' \
      -H 'OpenAI-Beta: agents=v1' '$openai_url/agents/sessions/$s' | jq -r .status) == idle ]]" || true
    oai -X DELETE "$openai_url/agents/sessions/$s" >/dev/null || true
  done
  kill "${executors[@]}" 2>/dev/null || true
  wait "${executors[@]}" 2>/dev/null || true
fi

# ---- the checks against the emulator ---------------------------------------------------------
state=$(oai_state)
task_json=$(sbxctl get agenttasks -o json)
echo "$state" >"$bench_tmp/state.json"
echo "$task_json" >"$bench_tmp/tasks.json"
turns=$(jq '.totals.turns_started' <<<"$state")
accepted=$(jq '.totals.accepted_inputs' <<<"$state")
peak=$(jq '.totals.peak_open_inputs' <<<"$state")
peak_worker=$(jq '.totals.peak_worker_open_inputs' <<<"$state")
attempts=$(jq '[.items[].status.attempts | length] | add' <<<"$task_json")
retries=$((attempts - tasks))
((turns == attempts)) || violation "the emulator started $turns turns for $attempts recorded attempts ($tasks tasks)"
((accepted == attempts)) || violation "the emulator accepted $accepted inputs for $attempts recorded attempts"
((peak <= 1)) || violation "a session had $peak inputs open at once: a replica ran two tasks at once"
((peak_worker <= 1)) ||
  violation "the sessions of one replica had $peak_worker inputs open at once: a replica ran two tasks at once"

logs_missing=""
for i in $(seq 1 "$tasks"); do
  n=$(task_name "$i")
  t=$(jq -c --arg n "$n" '.items[] | select(.metadata.name == $n)' <<<"$task_json")
  phase=$(jq -r '.status.phase' <<<"$t")
  [[ "$phase" == Succeeded ]] || violation "$n: phase $phase: $(jq -c .status <<<"$t" | head -c 600)"
  if is_flaky "$i"; then
    [[ "$(jq -r '[(.status.attempts | length >= 2), .status.attempts[0].error.code] | map(tostring) | join(" ")' <<<"$t")" == "true server_error" ]] ||
      violation "$n: flaky, but attempts are $(jq -c .status.attempts <<<"$t")"
  fi
  out=$(sbxctl logs "agenttask/$n" 2>&1 || true)
  grep -qx "$n" <<<"$out" || logs_missing+=" $n"
done
[[ -z "$logs_missing" ]] || violation "tasks whose log lacks their command's output:$logs_missing"

# Scale-down after scaleDownAfter (15 s): no replica, no sandbox, no session is left.
bench_wait_for 120 bash -c "[[ -z \$('$SBX_BENCH_BIN/sbxctl' get agentworkers -l sbx.dev/pool=chaos -o name) ]]" ||
  violation "the pool did not scale back to 0: $(sbxctl get agentworkers -l sbx.dev/pool=chaos -o name | tr '\n' ' ')"
bench_wait_for 60 bash -c "[[ \$(curl -sf '${openai_url%/v1}/_emulator/openai/state' | jq '.sessions | length') == 0 ]]" ||
  violation "sessions left after scale-down: $(oai_state | jq -c '[.sessions[].id]')"
bench_wait_for 60 bash -c "[[ \$(curl -sf -H 'Authorization: Bearer dapi-bench' '$emu_url/api/2.0/sandboxes?page_size=100' | jq '[.sandboxes[]?] | length') == 0 ]]" ||
  violation "sandboxes left after scale-down: $(dbx_sandboxes)"

if ((violations)); then
  fail "$violations violations (see VIOLATION lines); turns=$turns accepted=$accepted attempts=$attempts peak_open_inputs=$peak peak_worker_open_inputs=$peak_worker"
fi
echo "PASS: $tasks pool tasks (max $max replicas, session $session, backoffLimit 2), $rounds kill -9 rounds (sbxd started $sbxd_starts times): turns_started=$turns = accepted=$accepted = recorded attempts ($retries retries), no replica ever ran two inputs at once, all Succeeded, scaled back to 0 with no sandbox or session left ($(since "$t0")s in total)"
