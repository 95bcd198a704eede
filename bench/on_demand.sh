#!/usr/bin/env bash
# Power OnDemand against Running (DESIGN §7.2, issue #15): the compute bill and the price paid
# for it in wake latency. One workload, run once with `power: Running` and once with
# `power: OnDemand`, against the emulator with PENDING→RUNNING 1 s and 20 ms latency on every
# Databricks endpoint: N workers (default 10), each with its own inline sandbox, and over 30
# simulated minutes each receives K tasks (default 3) at random times (same seed, same times in
# both modes). A task's input is one command (`$ echo …`), so a turn takes milliseconds.
#
# Time compression (say so with the numbers): the 30 simulated minutes run in 1800/C real
# seconds (SBX_BENCH_COMPRESS=C, default 30 → 60 s), and idleStop is SBX_BENCH_IDLE_STOP
# (default 2s, i.e. 1 simulated minute). PENDING, latency, launch and connect are NOT compressed:
# they are real, so the wake latency is the real one, and the RUNNING-seconds below are real
# seconds of this compressed run (the saving ratio is what carries over).
#
# Measured:
#  * RUNNING-seconds: a poller LISTs the emulator about every 0.25 s (200 ms sleep + its calls)
#    and adds up, per sandbox, the time it is RUNNING (PENDING and STOPPING are not counted)
#    from the start of the window to its end (the 30 compressed minutes plus SBX_BENCH_TAIL,
#    default 15 s, for the last tasks to finish and the sandboxes to go back to sleep).
#    Ratio saved = 1 − OnDemand / Running.
#  * task → turn latency: from the start of the task's `sbxctl apply` (an upper bound of its
#    creation: it includes sbxctl's own start, 0.2–0.9 s for an ASan build on a loaded box) to
#    its root turn started (the emulator's per-session turns_started, polled: up to 0.25 s late),
#    p50 and p95, for all tasks and split by what the task found at apply: its sandbox asleep
#    (STOPPED or STOPPING: a wake) or not (RUNNING or PENDING: warm, or arriving during a wake).
#  * the wake's stages (p50 over the wakes), from the poller and sbxd's milestones (sbxd runs with
#    --log-level debug --log-format json): apply → RUNNING (poll) → running_observed (sbxd) →
#    launch_sent → launch_answered → connection (the emulator's environment has a live executor
#    connection, poll) → connected_seen (sbxd) → turn started (poll). The floor is PENDING
#    delay + launch (launch_sent → launch_answered) + connect (launch_answered → connection) +
#    3 × latency (start, launch, input), with the p50 launch and connect.
#  * API calls while asleep: after the run, with every sandbox asleep, the emulator's counters
#    over SBX_BENCH_QUIET seconds (default 70: at least one of sbxd's 60 s ±10% sweeps), per
#    endpoint; the poller is stopped by then. Target: no Databricks call but LIST.
# SBX_BENCH_SBXD_FLAGS: extra sbxd flags (word-split); SBX_BENCH_MODES: default "Running OnDemand";
# SBX_BENCH_KEEP=1 keeps the temp dirs (applied, samples, tasks, wakes, sbxd.N.log) for a
# timeline of one worker.
#   bench/on_demand.sh                     # both modes, defaults
#   SBX_BENCH_BIN=build/asan/cli bench/on_demand.sh
# Prints JSON lines. A benchmark, not a test: needs curl, awk and jq.
source "$(dirname "$0")/lib.sh"

n=${SBX_BENCH_N:-10}
k=${SBX_BENCH_TASKS:-3}
compress=${SBX_BENCH_COMPRESS:-30}
idle_stop=${SBX_BENCH_IDLE_STOP:-2s}
latency=${SBX_BENCH_LATENCY:-20ms}
pending_s=1
tail_s=${SBX_BENCH_TAIL:-15}
quiet=${SBX_BENCH_QUIET:-70}
seed=${SBX_BENCH_SEED:-15}
window=$(awk -v c="$compress" 'BEGIN { printf "%.2f", 1800 / c }')

bench_build
machine_line
trap bench_cleanup EXIT

# "offset worker task" lines, sorted by offset: the same in both modes.
schedule=$(awk -v n="$n" -v k="$k" -v w="$window" -v s="$seed" 'BEGIN {
  srand(s)
  for (i = 0; i < n; i++) for (j = 0; j < k; j++) printf "%.2f w%d t%d-%d\n", rand() * w, i, i, j
}' | sort -n)

# poll OUT STOPFILE — every 200 ms, until STOPFILE exists: "t sb SANDBOX STATE" for every
# sandbox, "t sess SESSION TURNS_STARTED" for every session and "t env SESSION STATUS
# CONNECTIONS" for every live environment (CONNECTIONS: the executor's open connections; STATUS
# lags: the emulator says connected until 20 s after the executor dropped). Counts its own
# LISTs in OUT.lists.
poll() {
  local out=$1 stop=$2 lists=0
  while [[ ! -e "$stop" ]]; do
    local t
    t=$(now)
    curl -sf -H "Authorization: Bearer dapi-bench" "$emu_url/api/2.0/sandboxes?page_size=100" |
      grep -o '"name":"sandboxes/[^"]*"\|"state":"[^"]*"' |
      awk -v t="$t" -F'"' '$2 == "name" { id = substr($4, 11) } $2 == "state" { st = $4 }
        id != "" && st != "" { print t, "sb", id, st; id = ""; st = "" }' >>"$out"
    lists=$((lists + 1))
    curl -sf "${openai_url%/v1}/_emulator/openai/state" |
      jq -r --arg t "$t" '(.sessions[] | "\($t) sess \(.id) \(.turns_started)"),
        (.environments[] | select(.deleted | not) | "\($t) env \(.session_id) \(.status) \(.connections)")' >>"$out"
    sleep 0.2
  done
  echo "$lists" >"$out.lists"
}

all_asleep() {
  local running
  running=$(curl -sf -H "Authorization: Bearer dapi-bench" "$emu_url/api/2.0/sandboxes?page_size=100" |
    grep -o '"state":"[^"]*"' | grep -vc 'STOPPED' || true)
  [[ "$running" == 0 ]]
}

tasks_done() {
  local done_count
  done_count=$(sbxctl get at -o custom-columns=P:.status.phase --no-headers 2>/dev/null |
    grep -c 'Succeeded\|Failed\|Cancelled\|TimedOut' || true)
  ((done_count >= n * k))
}

run_mode() {
  local mode=$1
  bench_tmp=$(mktemp -d /tmp/sbx-bench-ondemand.XXXXXX)
  bench_start_emulator --openai-port 0 --pending-delay "${pending_s}s" --max-sandboxes 0
  curl -sf -X POST "$emu_url/_emulator/latency" -d "{\"endpoint\":\"*\",\"latency\":\"$latency\"}" >/dev/null
  # shellcheck disable=SC2086 # SBX_BENCH_SBXD_FLAGS: extra sbxd flags, word-split on purpose
  # (debug JSON log: the milestones of each wake, for its stages below)
  bench_start_sbxd --log-level debug --log-format json ${SBX_BENCH_SBXD_FLAGS:-}
  local power_lines="    power: $mode"
  [[ "$mode" == OnDemand ]] && power_lines+=$'\n'"    idleStop: $idle_stop"
  : >"$bench_tmp/workers.yaml"
  for ((i = 0; i < n; i++)); do
    cat >>"$bench_tmp/workers.yaml" <<EOF
---
apiVersion: sbx.dev/v1alpha1
kind: AgentWorker
metadata:
  name: w$i
spec:
  sandbox:
$power_lines
  agent:
    model: gpt-5-codex
EOF
  done
  sbxctl apply -f "$bench_tmp/workers.yaml" >/dev/null
  wait_ready agentworker "$n" 300 >/dev/null
  if [[ "$mode" == OnDemand ]]; then
    bench_wait_for 300 all_asleep
  fi
  # Session → worker.
  sbxctl get aw -o custom-columns=N:.metadata.name,S:.status.sessionId --no-headers >"$bench_tmp/sessions"

  local stop="$bench_tmp/poll.stop" samples="$bench_tmp/samples"
  poll "$samples" "$stop" &
  local poller=$!
  local t0
  t0=$(now)
  : >"$bench_tmp/applied"
  while read -r offset worker task; do
    local wait_s
    wait_s=$(awk -v t0="$t0" -v o="$offset" -v n="$(now)" 'BEGIN { d = t0 + o - n; print (d > 0 ? d : 0) }')
    sleep "$wait_s"
    local applying
    applying=$(now)
    printf 'apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: %s\nspec:\n  workerRef: %s\n  input: "$ echo %s"\n  timeout: 5m\n' \
      "$task" "$worker" "$task" | sbxctl apply -f - >/dev/null
    echo "$applying $worker $task $(now)" >>"$bench_tmp/applied"
  done <<<"$schedule"
  local end
  end=$(awk -v t0="$t0" -v w="$window" -v tl="$tail_s" 'BEGIN { printf "%.2f", t0 + w + tl }')
  bench_wait_for 600 tasks_done || echo "not all tasks finished" >&2
  while awk -v e="$end" -v n="$(now)" 'BEGIN { exit !(n < e) }'; do sleep 0.5; done
  touch "$stop"
  wait "$poller"
  local finished_late=0
  [[ "$mode" == OnDemand ]] && ! all_asleep && finished_late=1
  local phases
  phases=$(sbxctl get at -o custom-columns=P:.status.phase --no-headers | sort | uniq -c | awk '{ printf "%s\"%s\":%s", (NR > 1 ? "," : ""), $2, $1 }')

  # RUNNING-seconds between t0 and end, per sample interval.
  local running_s
  running_s=$(awk -v t0="$t0" -v e="$end" '$2 == "sb" && $1 >= t0 && $1 <= e {
      if (last[$3] != "" && prev[$3] ~ /RUNNING/) s += $1 - last[$3]
      last[$3] = $1; prev[$3] = $4 }
    END { printf "%.1f", s }' "$samples")

  # Per task and per wake, from one time-ordered stream: the applies, the poller's samples
  # and sbxd's milestones (its JSON debug log; "ts" is UTC to the millisecond).
  local day0
  day0=$(awk -v t="$t0" 'BEGIN { printf "%d", int(t / 86400) * 86400 }')
  {
    awk '{ print $1, "apply", $2, $3 }' "$bench_tmp/applied"
    awk -v s="$bench_tmp/sessions" 'BEGIN { while ((getline l < s) > 0) { split(l, f, " "); w[f[2]] = f[1] } }
      $2 == "sb" { sub(/^default-/, "", $3); print; next }
      ($2 == "sess" || $2 == "env") && ($3 in w) { $3 = w[$3]; print }' "$samples"
    awk -v d0="$day0" -v t0="$t0" '/"event":"timeline"/ {
        ts = $0; sub(/.*"ts":"[^T]*T/, "", ts); ts = substr(ts, 1, 12)
        e = d0 + substr(ts, 1, 2) * 3600 + substr(ts, 4, 2) * 60 + substr(ts, 7)
        if (e < t0 - 43200) e += 86400
        o = $0; sub(/.*"object":"[^"]*\//, "", o); sub(/".*/, "", o)
        st = $0; sub(/.*"step":"/, "", st); sub(/".*/, "", st)
        printf "%.3f ms %s %s\n", e, o, st }' "$sbxd_log"
  } | sort -s -k1,1n | awk -v tasks="$bench_tmp/tasks" -v wakes="$bench_tmp/wakes" '
    # tasks: "task worker state_at_apply latency"; wakes: "task" and one "stage seconds" pair
    # per stage, for the tasks that found their sandbox STOPPED or STOPPING.
    function stamp(task, key, t) { if (!((task, key) in at)) at[task, key] = t }
    $2 == "apply" {
      w = $3; task = $4; applied[task] = $1
      q[w, ++qn[w]] = task
      state[task] = (w in sb) ? sb[w] : "SANDBOX_STATE_STOPPED"
      if ((state[task] ~ /STOPPED|STOPPING/) && !(w in waking)) waking[w] = task
      next
    }
    $2 == "sb" {
      if ($4 ~ /RUNNING/ && sb[$3] !~ /RUNNING/ && ($3 in waking)) stamp(waking[$3], "running", $1)
      sb[$3] = $4; next
    }
    $2 == "ms" { if ($3 in waking) stamp(waking[$3], $4, $1); next }
    $2 == "env" {
      if (($3 in waking) && $5 > 0 && ((waking[$3], "launch_sent") in at)) stamp(waking[$3], "connection", $1)
      next
    }
    $2 == "sess" {
      w = $3
      if (!(w in turns)) { turns[w] = $4; next }
      while (turns[w] < $4) {
        turns[w]++
        task = q[w, ++done[w]]
        if (task == "") continue
        print task, w, state[task], $1 - applied[task] > tasks
        if (waking[w] == task) {
          line = task
          n = split("apply running running_observed launch_sent launch_answered connection connected_seen", st, " ")
          at[task, "apply"] = applied[task]
          for (i = 2; i <= n; i++)
            line = line " " st[i - 1] "_to_" st[i] " " ((task, st[i]) in at && (task, st[i - 1]) in at ? at[task, st[i]] - at[task, st[i - 1]] : "null")
          line = line " " st[n] "_to_turn " ((task, st[n]) in at ? $1 - at[task, st[n]] : "null")
          print line > wakes
          delete waking[w]
        }
      }
    }'
  # pct Q FILE COL [REGEX] — nearest-rank percentile Q of column COL over the lines whose
  # third column matches REGEX; "null" if none.
  pct() {
    awk -v c="$3" -v re="${4:-.}" '$3 ~ re && $c != "null" { print $c }' "$2" | sort -g |
      awk -v q="$1" '{ v[NR] = $1 } END { if (NR == 0) { print "null"; exit }
        i = int(q * NR); if (i < q * NR) i++; if (i < 1) i = 1; printf "%.2f\n", v[i] }'
  }
  local tasks="$bench_tmp/tasks" wakes="$bench_tmp/wakes"
  touch "$tasks" "$wakes"
  local lat_json
  lat_json="\"all\":{\"n\":$(wc -l <"$tasks"),\"p50\":$(pct 0.5 "$tasks" 4),\"p95\":$(pct 0.95 "$tasks" 4)}"
  lat_json+=",\"sandbox_running\":{\"n\":$(awk '$3 ~ /RUNNING|PENDING/' "$tasks" | wc -l),\"p50\":$(pct 0.5 "$tasks" 4 'RUNNING|PENDING'),\"p95\":$(pct 0.95 "$tasks" 4 'RUNNING|PENDING')}"
  lat_json+=",\"sandbox_asleep\":{\"n\":$(awk '$3 ~ /STOPPED|STOPPING/' "$tasks" | wc -l),\"p50\":$(pct 0.5 "$tasks" 4 'STOPPED|STOPPING'),\"p95\":$(pct 0.95 "$tasks" 4 'STOPPED|STOPPING')}"
  # The wake's stages, p50 over the wakes (column pairs "stage seconds" of $wakes).
  local stages_json="" col name
  for col in 3 5 7 9 11 13 15; do
    name=$(awk -v c="$((col - 1))" 'NR == 1 { print $c }' "$wakes")
    [[ -n "$name" ]] || continue
    stages_json+="${stages_json:+,}\"$name\":$(pct 0.5 "$wakes" "$col")"
  done
  # Floor: PENDING delay + launch + connect (p50 of the measured stages) + 3 × latency.
  local launch connect floor="null"
  launch=$(pct 0.5 "$wakes" 9)
  connect=$(pct 0.5 "$wakes" 11)
  if [[ "$launch" != null && "$connect" != null ]]; then
    floor=$(awk -v l="$latency" -v a="$launch" -v c="$connect" -v p="$pending_s" 'BEGIN { sub(/ms/, "", l); printf "%.2f", p + a + c + 3 * l / 1000 }')
  fi

  local quiet_json="null"
  if [[ "$mode" == OnDemand ]]; then
    bench_wait_for 120 all_asleep || true
    reset_counters
    sleep "$quiet"
    quiet_json=$(counters)
  fi
  local turns
  turns=$(curl -sf "${openai_url%/v1}/_emulator/openai/state" | jq .totals.turns_started)
  local asleep_at_end=null quiet_dbx=null
  if [[ "$mode" == OnDemand ]]; then
    asleep_at_end=$((1 - finished_late))
    # Databricks calls other than LIST, per sleeping sandbox.
    quiet_dbx=$(tr -d '{}"' <<<"$quiet_json" | tr ',' '\n' |
      awk -F: -v n="$n" '$1 ~ /^databricks\./ && $1 != "databricks.list" { s += $2 } END { printf "%.2f", s / n }')
  fi
  echo "{\"mode\":\"$mode\",\"workers\":$n,\"tasks\":$((n * k)),\"phases\":{$phases},\"turns_started\":${turns:-0},\"compress\":$compress,\"idle_stop\":\"$idle_stop\",\"sbxd_flags\":\"${SBX_BENCH_SBXD_FLAGS:-}\",\"window_s\":$(awk -v t0="$t0" -v e="$end" 'BEGIN { printf "%.1f", e - t0 }'),\"running_seconds\":$running_s,\"task_to_turn_s\":{$lat_json},\"wake\":{\"floor_s\":$floor,\"stages_p50_s\":{$stages_json}},\"asleep_at_end\":$asleep_at_end,\"quiet_s\":$quiet,\"calls_while_asleep\":$quiet_json,\"databricks_non_list_calls_per_sleeping_sandbox\":$quiet_dbx}"
  running_seconds[$mode]=$running_s
  bench_cleanup
}

declare -A running_seconds
for mode in ${SBX_BENCH_MODES:-Running OnDemand}; do
  run_mode "$mode"
done
if [[ -n "${running_seconds[Running]:-}" && -n "${running_seconds[OnDemand]:-}" ]]; then
  awk -v r="${running_seconds[Running]}" -v o="${running_seconds[OnDemand]}" \
    'BEGIN { printf "{\"running_seconds\":{\"Running\":%s,\"OnDemand\":%s,\"saved\":%.2f}}\n", r, o, (r > 0 ? 1 - o / r : 0) }'
fi
