#!/usr/bin/env bash
# AgentTask throughput and cost (issue #13): W AgentWorkers (inline sandboxes, brought up first,
# not timed), then T AgentTasks spread round-robin over them, each one `$ echo` command, applied
# in one `sbxctl apply -f DIR`, against the emulator with a fixed latency on every endpoint
# (SBX_BENCH_LATENCY, default 20ms, /_emulator/latency) and the workspace rate limit
# (SBX_BENCH_RPS, default 20 req/s; the Workspace tells sbxd, as in bench/converge.sh).
# Reports per repeat (SBX_BENCH_REPEATS, default 3, the same workers and sbxd) and the median:
#   seconds_to_all_succeeded  apply → every task of the batch Succeeded (sbxctl get, 0.25 s polls)
#   floor_s                   the turns' own duration serialized per worker (max over workers of
#                             Σ turn.completed − turn.created, from the emulator's SSE stream of
#                             each session) + the minimum API calls ÷ rate (1 input POST per
#                             task ÷ SBX_BENCH_RPS). The emulator throttles only Databricks
#                             calls, so the rate term is conservative; turn_serial_s is reported
#                             on its own too.
#   ratio                     seconds_to_all_succeeded ÷ floor_s
#   per_task                  emulator counters ÷ T: input POSTs (openai.events.create), SSE
#                             subscriptions (openai.events.stream), GETs (turns, items,
#                             sessions, environments), Databricks calls
#   inputs                    the emulator's totals: accepted, deduped, turns started (== T)
#   sbxd_cpu_seconds          sbxd's CPU (utime+stime) during the batch; sbxd_peak_rss_kib VmHWM
# Then, at idle, SBX_BENCH_SAMPLES (default 10) single tasks one after another: the latency from
# the start of `sbxctl apply` to the emulator's agent.session.turn.created event on the session's
# SSE stream (p50, p95; target < 100 ms + the API latency).
# The SSE recorders (one curl per session) subscribe before the counters are reset: they are not
# counted. Works whether sbxd polls or streams.
#   bench/agent_tasks.sh                    # W=10 T=100
#   SBX_BENCH_BIN=build/asan/cli SBX_BENCH_REPEATS=1 bench/agent_tasks.sh 10 100
# Prints JSON lines. A benchmark, not a test: needs bash ≥ 5, curl, awk, jq.
source "$(dirname "$0")/lib.sh"

workers=${1:-10}
tasks=${2:-100}
latency=${SBX_BENCH_LATENCY:-20ms}
rps=${SBX_BENCH_RPS:-20}
repeats=${SBX_BENCH_REPEATS:-3}
samples=${SBX_BENCH_SAMPLES:-10}
timeout=${SBX_BENCH_TIMEOUT:-900}

bench_build
machine_line
bench_tmp=$(mktemp -d /tmp/sbx-bench-tasks.XXXXXX)
recorders=()
cleanup() {
  local p
  for p in "${recorders[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  bench_cleanup
}
trap cleanup EXIT

bench_start_emulator --openai-port 0 --pending-delay 1s --max-sandboxes 0 --rate-limit "$rps"
curl -sf -X POST "$emu_url/_emulator/latency" -d "{\"endpoint\":\"*\",\"latency\":\"$latency\"}" >/dev/null
# shellcheck disable=SC2086 # SBX_BENCH_SBXD_FLAGS: extra sbxd flags, word-split on purpose
bench_start_sbxd ${SBX_BENCH_SBXD_FLAGS:-}
oai_state() { curl -sf "${openai_url%/v1}/_emulator/openai/state"; }

mkdir -p "$bench_tmp/workers"
bench_workspace_yaml "$rps" >"$bench_tmp/workers/workspace.yaml"
for w in $(seq -w 1 "$workers"); do
  cat >"$bench_tmp/workers/aw-$w.yaml" <<EOF
apiVersion: sbx.dev/v1alpha1
kind: AgentWorker
metadata:
  name: aw-$w
spec:
  sandbox:
    inactivityTimeout: 1h
  workspaceDirectory: /home/sandbox-agent
  agent:
    model: gpt-5-codex
    instructions: benchmark worker $w
EOF
done
sbxctl apply -f "$bench_tmp/workers" >/dev/null
wait_ready agentworkers "$workers" "$timeout" >/dev/null || {
  echo "{\"error\":\"workers not Ready in time\"}"
  exit 1
}

# One SSE recorder per session: each agent.session.turn.* line with its arrival time.
subscribers() { oai_state | jq '[.sessions[].subscribers] | add // 0'; }
subs0=$(subscribers)
sbxctl get agentworkers -o json | jq -r '.items[] | "\(.metadata.name) \(.status.sessionId)"' >"$bench_tmp/sessions"
while read -r wname sid; do
  (curl -sN -H "Authorization: Bearer sk-bench-app" -H "OpenAI-Beta: agents=v1" \
    "$openai_url/agents/sessions/$sid/events" | while IFS= read -r line; do
    if [[ "$line" == *'"agent.session.turn.created"'* || "$line" == *'"agent.session.turn.completed"'* ||
      "$line" == *'"agent.session.turn.failed"'* || "$line" == *'"agent.session.turn.cancelled"'* ]]; then
      echo "$EPOCHREALTIME $line"
    fi
  done >"$bench_tmp/sse.$wname") &
  recorders+=($!)
done <"$bench_tmp/sessions"
until (($(subscribers) >= subs0 + workers)); do sleep 0.1; done

# turn_times FILE FROM — "turn_id created completed" (seconds) for turns created after FROM.
turn_times() {
  awk -v from="$2" '{
      t = $1
      if (!match($0, /"turn_id":"[^"]*"/)) next
      id = substr($0, RSTART + 11, RLENGTH - 12)
      if ($0 ~ /"type":"agent.session.turn.created"/) { if (t >= from) created[id] = t }
      else if (id in created) done[id] = t
    }
    END { for (id in done) printf "%s %.3f %.3f\n", id, created[id], done[id] }' "$1"
}
succeeded_count() {
  sbxctl get agenttasks -o json | jq --arg p "$1" '[.items[] | select((.metadata.name | startswith($p)) and .status.phase == "Succeeded")] | length'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

results=()
for r in $(seq 1 "$repeats"); do
  dir="$bench_tmp/tasks-$r"
  mkdir -p "$dir"
  for i in $(seq -w 1 "$tasks"); do
    w=$(printf '%0*d' "${#workers}" $(((10#$i - 1) % workers + 1)))
    cat >"$dir/r$r-t$i.yaml" <<EOF
apiVersion: sbx.dev/v1alpha1
kind: AgentTask
metadata:
  name: r$r-t$i
spec:
  workerRef: aw-$w
  input: "\$ echo task $i"
  timeout: 10m
EOF
  done
  reset_counters
  state0=$(oai_state)
  read -r cpu0 _ <<<"$(proc_stats "$sbxd_pid")"
  start=$(now)
  sbxctl apply -f "$dir" >/dev/null
  deadline=$((SECONDS + timeout))
  while (($(succeeded_count "r$r-" 2>/dev/null || echo 0) < tasks)); do
    if ((SECONDS >= deadline)); then
      echo "{\"repeat\":$r,\"error\":\"not all Succeeded in time\",\"tasks\":$(sbxctl get agenttasks -o json | jq -c '[.items[].status.phase] | group_by(.) | map({(.[0]): length}) | add')}"
      exit 1
    fi
    sleep 0.25
  done
  t=$(since "$start")
  calls=$(counters)
  state1=$(oai_state)
  read -r cpu1 rss <<<"$(proc_stats "$sbxd_pid")"
  # The turns' own time, serialized per worker: the floor's first term is the busiest worker's.
  serial=0
  while read -r wname _; do
    s=$(turn_times "$bench_tmp/sse.$wname" "$start" | awk '{ s += $3 - $2 } END { printf "%.3f", s }')
    serial=$(awk -v a="$serial" -v b="$s" 'BEGIN { print (b > a ? b : a) }')
  done <"$bench_tmp/sessions"
  per() { awk -v c="$(counters_sum "$calls" "$@")" -v n="$tasks" 'BEGIN { printf "%.2f", c / n }'; }
  posts=$(per openai.events.create)
  streams=$(per openai.events.stream)
  gets=$(per openai.turns openai.items.list openai.sessions.get openai.sessions.list openai.environments.get)
  dbx=$(per databricks.create databricks.get databricks.list databricks.update databricks.delete \
    databricks.start databricks.stop databricks.exec_sync databricks.list_commands)
  inputs=$(jq -c --argjson a "$state0" '.totals as $t | $a.totals as $b | {accepted: ($t.accepted_inputs - $b.accepted_inputs), deduped: ($t.deduped_inputs - $b.deduped_inputs), turns_started: ($t.turns_started - $b.turns_started)}' <<<"$state1")
  read -r floor ratio cpu <<<"$(awk -v s="$serial" -v n="$tasks" -v rps="$rps" -v t="$t" -v c0="$cpu0" -v c1="$cpu1" '
    BEGIN { f = s + n / rps; printf "%.3f %.2f %.2f\n", f, t / f, c1 - c0 }')"
  line="{\"repeat\":$r,\"workers\":$workers,\"tasks\":$tasks,\"latency\":\"$latency\",\"rate_limit_rps\":$rps,\"seconds_to_all_succeeded\":$t,\"turn_serial_s\":$serial,\"floor_s\":$floor,\"ratio\":$ratio,\"per_task\":{\"input_posts\":$posts,\"sse_subscriptions\":$streams,\"gets\":$gets,\"databricks\":$dbx},\"inputs\":$inputs,\"sbxd_cpu_seconds\":$cpu,\"sbxd_peak_rss_kib\":$rss,\"calls\":$calls}"
  echo "$line"
  results+=("$line")
done

# apply → turn.created at idle, one task at a time.
lat=()
for k in $(seq 1 "$samples"); do
  w=$(printf '%0*d' "${#workers}" $(((k - 1) % workers + 1)))
  f="$bench_tmp/idle-$k.yaml"
  printf 'apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: idle-%03d\nspec:\n  workerRef: aw-%s\n  input: "$ echo idle"\n' "$k" "$w" >"$f"
  start=$(now)
  sbxctl apply -f "$f" >/dev/null
  deadline=$((SECONDS + 120))
  created=""
  while [[ -z "$created" ]] && ((SECONDS < deadline)); do
    created=$(awk -v from="$start" '$1 >= from && /"agent.session.turn.created"/ { print $1; exit }' "$bench_tmp/sse.aw-$w")
    [[ -n "$created" ]] || sleep 0.02
  done
  [[ -n "$created" ]] || {
    echo "{\"sample\":$k,\"error\":\"no turn.created within 120 s\"}"
    exit 1
  }
  lat+=("$(awk -v a="$start" -v b="$created" 'BEGIN { printf "%.3f", b - a }')")
  bench_wait_for 60 bash -c "[[ \$('$bench_bin/sbxctl' get agenttask idle-$(printf '%03d' "$k") -o jsonpath='{.status.phase}') == Succeeded ]]"
done
read -r p50 p95 <<<"$(printf '%s\n' "${lat[@]}" | sort -g | awk '{ v[NR] = $1 } END {
  i50 = int((NR + 1) * 0.50); i95 = int(NR * 0.95 + 0.999); if (i50 < 1) i50 = 1; if (i95 > NR) i95 = NR
  printf "%s %s\n", v[i50], v[i95] }')"
echo "{\"idle_apply_to_turn_created_s\":{\"samples\":$samples,\"p50\":$p50,\"p95\":$p95,\"all\":[$(
  IFS=,
  echo "${lat[*]}"
)]},\"latency\":\"$latency\"}"

med() { printf '%s\n' "${results[@]}" | jq -r "$1" | median; }
echo "{\"median_of\":$repeats,\"seconds_to_all_succeeded\":$(med .seconds_to_all_succeeded),\"floor_s\":$(med .floor_s),\"ratio\":$(med .ratio),\"input_posts_per_task\":$(med .per_task.input_posts),\"sse_subscriptions_per_task\":$(med .per_task.sse_subscriptions),\"gets_per_task\":$(med .per_task.gets),\"sbxd_cpu_seconds\":$(med .sbxd_cpu_seconds),\"sbxd_peak_rss_kib\":$(printf '%s\n' "${results[@]}" | jq .sbxd_peak_rss_kib | sort -n | tail -n1),\"apply_to_turn_created_p50_s\":$p50,\"apply_to_turn_created_p95_s\":$p95}"
