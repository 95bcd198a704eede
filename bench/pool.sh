#!/usr/bin/env bash
# AgentPool from zero (issue #27): a pool with min 0, max M (default 20) and T tasks (default 200)
# of `$ sleep 1` naming it, applied in one `sbxctl apply -f DIR`, against the emulator with a
# fixed latency on every endpoint (SBX_BENCH_LATENCY, default 20ms) and the workspace rate limit
# (SBX_BENCH_RPS, default 20 req/s, which the Workspace tells sbxd). Reports one JSON line:
#   seconds_to_all_succeeded  apply → every task Succeeded (sbxctl get, 0.25 s polls)
#   floor_s                   the scale-up chain (the emulator's pending delay + 5 × latency:
#                             create, see RUNNING, session create, launch, see it connected)
#                             + T × 1 s ÷ M + the fewest Databricks calls ÷ rate; OpenAI calls
#                             are not rate-limited here. The fewest calls: PerTask, a create per
#                             replica and, per task, the launch of its executor and the stop
#                             that removes it (an exec-sync each); Shared, a create and a launch
#                             per replica
#   ratio                     seconds_to_all_succeeded ÷ floor_s (target ≤ 1.3)
#   running_s, running_ratio  sandbox RUNNING-seconds from apply to all Succeeded (sampled
#                             every 0.5 s from the emulator's admin GET /_emulator/sandboxes,
#                             which is not an API call: no counter, no rate budget; an API LIST
#                             here took ~1.5 of the 20 req/s) ÷ (M × that time); ≤ 1.2
#   scale_up_s                apply → M replicas Ready; first_turn_s apply → the first turn
#   per_task                  input POSTs, session creates and deletes, GETs ÷ T
#   reconcile_busy            the time sbxd's reconciles took from apply to all Succeeded
#                             (sbx_reconcile_duration_seconds, summed over kinds) ÷ that time:
#                             how many of its --workers threads were busy on average
#   sbxd                      from sbxd's /metrics over the same span: reconcile_s and
#                             reconciles by kind, pacing_wait_s by API (time calls waited for
#                             the rate limit inside their reconciles), call_s by endpoint (time
#                             of the exchanges themselves)
#   databricks_calls          all Databricks calls (and by endpoint), next to the fewest
#   scale_down_s              the last task's end → 0 sandboxes RUNNING (scaleDownAfter is
#                             SBX_BENCH_SCALE_DOWN, default 30s)
#   warm                      then a pool with warm: 5 and 5 tasks applied once its 5 replicas
#                             are Ready and idle: apply → each of the 5 turns started (target:
#                             all within 1 s)
#   bench/pool.sh               # M=20 T=200, session PerTask (the pool's default)
#   SBX_BENCH_BIN=build/release/cli bench/pool.sh 10 50
#   SBX_BENCH_SESSION=Shared bench/pool.sh   # one standing session per replica
# Under PerTask each task costs exactly 1 session create and 1 delete (per_task); under Shared, 0.
# Prints JSON lines. A benchmark, not a test: needs bash ≥ 5, curl, awk, jq.
source "$(dirname "$0")/lib.sh"

max=${1:-20}
tasks=${2:-200}
latency=${SBX_BENCH_LATENCY:-20ms}
rps=${SBX_BENCH_RPS:-20}
pending=${SBX_BENCH_PENDING:-1s}
scale_down=${SBX_BENCH_SCALE_DOWN:-30s}
timeout=${SBX_BENCH_TIMEOUT:-900}
session=${SBX_BENCH_SESSION:-PerTask}

bench_build
machine_line
bench_tmp=$(mktemp -d /tmp/sbx-bench-pool.XXXXXX)
sampler=""
cleanup() {
  [[ -z "$sampler" ]] || kill "$sampler" 2>/dev/null || true
  bench_cleanup
}
trap cleanup EXIT

bench_start_emulator --openai-port 0 --pending-delay "$pending" --max-sandboxes 0 --rate-limit "$rps"
curl -sf -X POST "$emu_url/_emulator/latency" -d "{\"endpoint\":\"*\",\"latency\":\"$latency\"}" >/dev/null
# shellcheck disable=SC2086 # SBX_BENCH_SBXD_FLAGS: extra sbxd flags, word-split on purpose
bench_start_sbxd ${SBX_BENCH_SBXD_FLAGS:-}
oai_state() { curl -sf "${openai_url%/v1}/_emulator/openai/state"; }
running_sandboxes() {  # the emulator's admin view: not an API call, so it costs sbxd no rate budget
  curl -sf "$emu_url/_emulator/sandboxes" |
    jq '[.sandboxes[] | select(.state == "SANDBOX_STATE_RUNNING")] | length'
}

pool_yaml() {  # pool_yaml NAME MAX WARM
  cat <<EOF
apiVersion: sbx.dev/v1alpha1
kind: AgentPool
metadata:
  name: $1
spec:
  template:
    spec:
      sandbox:
        inactivityTimeout: 1h
      workspaceDirectory: /home/sandbox-agent
      agent:
        model: gpt-5-codex
        instructions: pool benchmark
  replicas: {min: 0, max: $2}
  warm: $3
  scaleDownAfter: $scale_down
  session: $session
EOF
}
task_yaml() {  # task_yaml NAME POOL
  printf 'apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: %s\nspec:\n  poolRef: %s\n  input: "$ sleep 1"\n  timeout: 10m\n' "$1" "$2"
}
count_phase() {  # count_phase PREFIX PHASE
  sbxctl get agenttasks -o json | jq --arg p "$1" --arg ph "$2" '[.items[] | select((.metadata.name | startswith($p)) and .status.phase == $ph)] | length'
}
ready_replicas() {
  local n
  n=$(sbxctl get agentpool "$1" -o jsonpath='{.status.ready}' 2>/dev/null)
  echo "${n:-0}"
}

mkdir -p "$bench_tmp/run"
bench_workspace_yaml "$rps" >"$bench_tmp/run/workspace.yaml"
pool_yaml bench "$max" 0 >"$bench_tmp/run/pool.yaml"
for i in $(seq -w 1 "$tasks"); do
  task_yaml "t$i" bench >"$bench_tmp/run/t$i.yaml"
done

# RUNNING sandboxes, sampled every 0.5 s: "time count" lines.
(while true; do
  echo "$EPOCHREALTIME $(running_sandboxes 2>/dev/null || echo 0)"
  sleep 0.5
done >"$bench_tmp/running") &
sampler=$!

# metric_by METRIC LABEL — an sbxd metric's values summed by one label, as JSON: {"AgentTask":12.3}.
metric_by() {
  curl -sf "$metrics_url" | awk -v m="$1" -v l="$2" 'index($0, m "{") == 1 {
    match($0, l "=\"[^\"]*\""); k = substr($0, RSTART + length(l) + 2, RLENGTH - length(l) - 3)
    s[k] += $NF }
    END { printf "{"; n = 0; for (k in s) { printf "%s\"%s\":%.3f", (n++ ? "," : ""), k, s[k] } print "}" }'
}
# metrics_now — the sbxd figures the run reports as differences from apply to all Succeeded.
metrics_now() {
  jq -n --argjson s "$(metric_by sbx_reconcile_duration_seconds_sum kind)" \
    --argjson n "$(metric_by sbx_reconcile_duration_seconds_count kind)" \
    --argjson w "$(metric_by sbx_api_pacing_wait_seconds_total api)" \
    --argjson c "$(metric_by sbx_api_call_duration_seconds_sum endpoint)" \
    '{reconcile_s: $s, reconciles: $n, pacing_wait_s: $w, call_s: $c}'
}
# delta A B — B − A for each number of metrics_now, rounded to 2 decimals.
delta() {
  jq -c --argjson a "$1" 'with_entries(.key as $g | .value |= with_entries(
    .value = (((.value - ($a[$g][.key] // 0)) * 100 | round) / 100)))' <<<"$2"
}

reset_counters
metrics0=$(metrics_now)
start=$(now)
sbxctl apply -f "$bench_tmp/run" >/dev/null
scale_up="" first_turn=""
deadline=$((SECONDS + timeout))
while (($(count_phase t Succeeded 2>/dev/null || echo 0) < tasks)); do
  ((SECONDS < deadline)) || {
    echo "{\"error\":\"not all Succeeded in ${timeout}s\",\"tasks\":$(sbxctl get agenttasks -o json | jq -c '[.items[].status.phase] | group_by(.) | map({(.[0]): length}) | add')}"
    exit 1
  }
  [[ -n "$first_turn" ]] || { (($(oai_state | jq .totals.turns_started) > 0)) && first_turn=$(since "$start"); }
  [[ -n "$scale_up" ]] || { (($(ready_replicas bench) >= max)) && scale_up=$(since "$start"); }
  sleep 0.25
done
t=$(since "$start")
end=$(now)
sbxd_figures=$(delta "$metrics0" "$(metrics_now)")
reconcile_busy=$(jq -r --arg t "$t" '[.reconcile_s[]] | add // 0 | . / ($t | tonumber) * 100 | round / 100' <<<"$sbxd_figures")
calls=$(counters)
per() { awk -v c="$(counters_sum "$calls" "$@")" -v n="$tasks" 'BEGIN { printf "%.2f", c / n }'; }
posts=$(per openai.events.create)
creates=$(per openai.sessions.create)
deletes=$(per openai.sessions.delete)
gets=$(per openai.turns openai.items.list openai.sessions.get openai.sessions.list openai.environments.get)
dbx=$(counters_sum "$calls" databricks.create databricks.get databricks.list databricks.update \
  databricks.delete databricks.start databricks.stop databricks.exec_sync databricks.list_commands)
# The same by endpoint, those called at all: {"create":20,"exec_sync":…}.
dbx_by=$(jq -c '[to_entries[] | select((.key | startswith("databricks.")) and .value > 0)
  | {(.key | ltrimstr("databricks.")): .value}] | add // {}' <<<"$calls")
running_s=$(awk -v a="$start" -v b="$end" '$1 >= a && $1 <= b { if (p != "") s += ($1 - p) * c; p = $1; c = $2 } END { printf "%.1f", s }' "$bench_tmp/running")
fewest_dbx=$((2 * max))
[[ "$session" == Shared ]] || fewest_dbx=$((max + 2 * tasks))
read -r floor ratio running_ratio <<<"$(awk -v p="${pending%s}" -v l="${latency%ms}" -v n="$tasks" -v m="$max" -v c="$fewest_dbx" -v rps="$rps" -v t="$t" -v r="$running_s" '
  BEGIN { f = p + 5 * l / 1000 + n * 1 / m + c / rps; printf "%.2f %.2f %.2f\n", f, t / f, r / (m * t) }')"

# Scale-down: after scaleDownAfter idle, nothing RUNNING.
bench_wait_for "$timeout" bash -c "[[ \$(curl -sf '$emu_url/_emulator/sandboxes' | jq '[.sandboxes[] | select(.state == \"SANDBOX_STATE_RUNNING\")] | length') == 0 ]]"
scale_down_s=$(since "$end")

# warm: 5 — five idle Ready replicas ahead of demand; five tasks start at once.
mkdir -p "$bench_tmp/warm"
pool_yaml warm 5 5 >"$bench_tmp/warm/pool.yaml"
sbxctl apply -f "$bench_tmp/warm/pool.yaml" >/dev/null
bench_wait_for "$timeout" bash -c "(( \$('$bench_bin/sbxctl' get agentpool warm -o jsonpath='{.status.idle}' 2>/dev/null || echo 0) >= 5 ))" || {
  echo "{\"error\":\"the warm pool never had 5 idle replicas\"}"
  exit 1
}
for i in 1 2 3 4 5; do
  task_yaml "w$i" warm >"$bench_tmp/warm/w$i.yaml"
done
rm "$bench_tmp/warm/pool.yaml"
turns0=$(oai_state | jq .totals.turns_started)
wstart=$(now)
sbxctl apply -f "$bench_tmp/warm" >/dev/null
warm_s=""
wdeadline=$((SECONDS + 60))
while ((SECONDS < wdeadline)); do
  if (($(oai_state | jq .totals.turns_started) - turns0 >= 5)); then
    warm_s=$(since "$wstart")
    break
  fi
  sleep 0.05
done

echo "{\"flow\":\"pool\",\"session\":\"$session\",\"max\":$max,\"tasks\":$tasks,\"latency\":\"$latency\",\"rate_limit_rps\":$rps,\"pending_delay\":\"$pending\",\"seconds_to_all_succeeded\":$t,\"floor_s\":$floor,\"ratio\":$ratio,\"running_s\":$running_s,\"running_ratio\":$running_ratio,\"scale_up_s\":${scale_up:-null},\"first_turn_s\":${first_turn:-null},\"per_task\":{\"input_posts\":$posts,\"session_creates\":$creates,\"session_deletes\":$deletes,\"gets\":$gets},\"reconcile_busy\":$reconcile_busy,\"sbxd\":$sbxd_figures,\"databricks_calls\":$dbx,\"databricks_by_endpoint\":$dbx_by,\"fewest_databricks_calls\":$fewest_dbx,\"scale_down_s\":$scale_down_s,\"scale_down_after\":\"$scale_down\",\"warm5_all_started_s\":${warm_s:-null},\"targets\":{\"ratio\":1.3,\"running_ratio\":1.2,\"warm5_all_started_s\":1}}"
