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
#  * RUNNING-seconds: a poller LISTs the emulator every 200 ms and adds up, per sandbox, the time
#    it is RUNNING (PENDING is not billed here) from the first task's slot to the end of the
#    window (the 30 compressed minutes plus SBX_BENCH_TAIL, default 15 s, for the last tasks to
#    finish and the sandboxes to go back to sleep). Ratio saved = 1 − OnDemand / Running.
#  * wake latency: task applied → its root turn started (the emulator's per-session
#    turns_started, polled every 200 ms: ±0.2 s), p50 and p95, and its floor: PENDING delay +
#    3 × latency + launch&connect, where launch&connect is the smallest time observed from the
#    sandbox RUNNING to the turn started (an upper bound: it includes sbx's own detection).
#  * API calls while asleep: after the run, with every sandbox asleep, the emulator's counters
#    over SBX_BENCH_QUIET seconds (default 30), per endpoint; the poller is stopped by then.
#    Target: no Databricks call but LIST.
#   bench/on_demand.sh                     # both modes, defaults
#   SBX_BENCH_BIN=build/asan/cli bench/on_demand.sh
# Prints JSON lines. A benchmark, not a test: needs curl and awk.
source "$(dirname "$0")/lib.sh"

n=${SBX_BENCH_N:-10}
k=${SBX_BENCH_TASKS:-3}
compress=${SBX_BENCH_COMPRESS:-30}
idle_stop=${SBX_BENCH_IDLE_STOP:-2s}
latency=${SBX_BENCH_LATENCY:-20ms}
tail_s=${SBX_BENCH_TAIL:-15}
quiet=${SBX_BENCH_QUIET:-30}
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

# poll OUT STOPFILE — every 200 ms: "t sandbox state" for every sandbox and "t session turns"
# for every session, until STOPFILE exists. Counts its own LISTs in OUT.lists.
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
    curl -sf -H "Authorization: Bearer sk-bench-app" "$openai_url/../_emulator/openai/state" |
      grep -o '"id":"sess_[^"]*"\|"turns_started":[0-9]*' |
      awk -v t="$t" -F'[":]+' '$2 == "id" { id = $3 } $2 == "turns_started" && id != "" {
        print t, "sess", id, $3; id = "" }' >>"$out"
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
  bench_start_emulator --openai-port 0 --pending-delay 1s --max-sandboxes 0
  curl -sf -X POST "$emu_url/_emulator/latency" -d "{\"endpoint\":\"*\",\"latency\":\"$latency\"}" >/dev/null
  bench_start_sbxd
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
    printf 'apiVersion: sbx.dev/v1alpha1\nkind: AgentTask\nmetadata:\n  name: %s\nspec:\n  workerRef: %s\n  input: "$ echo %s"\n  timeout: 5m\n' \
      "$task" "$worker" "$task" | sbxctl apply -f - >/dev/null
    echo "$(now) $worker $task" >>"$bench_tmp/applied"
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

  # Wake latency: the k-th turn of a worker's session against its k-th applied task.
  local latencies="$bench_tmp/latencies"
  awk -v sessions="$bench_tmp/sessions" -v applied="$bench_tmp/applied" '
    BEGIN {
      while ((getline line < sessions) > 0) { split(line, f, " "); worker_of[f[2]] = f[1] }
      while ((getline line < applied) > 0) {
        split(line, f, " "); cnt[f[2]]++; at[f[2], cnt[f[2]]] = f[1]
      }
    }
    $2 == "sb" { if ($4 ~ /RUNNING/ && !(up[$3])) { up[$3] = 1; running_at[$3] = $1 }
                 if ($4 !~ /RUNNING/) up[$3] = 0 }
    $2 == "sess" {
      w = worker_of[$3]
      if (w == "") next
      if (!($3 in seen)) { seen[$3] = $4; next }
      while (seen[$3] < $4) {
        seen[$3]++
        a = at[w, seen[$3]]
        sb = "default-" w
        r = (running_at[sb] > a) ? $1 - running_at[sb] : -1
        if (a != "") print $1 - a, r
      }
    }' "$samples" | sort -n >"$latencies"
  local count p50 p95 after_running
  count=$(wc -l <"$latencies")
  p50=$(awk -v c="$count" 'NR == int((c + 1) * 0.5) { printf "%.2f", $1 }' "$latencies")
  p95=$(awk -v c="$count" 'NR == int(c * 0.95 + 0.999) { printf "%.2f", $1 }' "$latencies")
  after_running=$(awk '$2 >= 0 && (m == "" || $2 < m) { m = $2 } END { printf "%.2f", m + 0 }' "$latencies")
  local floor
  floor=$(awk -v l="$latency" -v a="$after_running" 'BEGIN { sub(/ms/, "", l); printf "%.2f", 1 + 3 * l / 1000 + a }')

  local quiet_json="null"
  if [[ "$mode" == OnDemand ]]; then
    bench_wait_for 120 all_asleep || true
    reset_counters
    sleep "$quiet"
    quiet_json=$(counters)
  fi
  local turns
  turns=$(curl -sf "$openai_url/../_emulator/openai/state" | grep -o '"totals":{[^}]*}' | grep -o '"turns_started":[0-9]*' | cut -d: -f2)
  echo "{\"mode\":\"$mode\",\"workers\":$n,\"tasks\":$((n * k)),\"phases\":{$phases},\"turns_started\":${turns:-0},\"compress\":$compress,\"idle_stop\":\"$idle_stop\",\"window_s\":$(awk -v t0="$t0" -v e="$end" 'BEGIN { printf "%.1f", e - t0 }'),\"running_seconds\":$running_s,\"wake_latency_s\":{\"n\":$count,\"p50\":${p50:-null},\"p95\":${p95:-null},\"floor\":$floor,\"min_running_to_turn\":$after_running},\"asleep_at_end\":$((1 - finished_late)),\"quiet_s\":$quiet,\"calls_while_asleep\":$quiet_json}"
  echo "$running_s" >"/tmp/sbx-bench-ondemand.$mode.running"
  bench_cleanup
}

run_mode Running
run_mode OnDemand
awk -v r="$(cat /tmp/sbx-bench-ondemand.Running.running)" -v o="$(cat /tmp/sbx-bench-ondemand.OnDemand.running)" \
  'BEGIN { printf "{\"running_seconds\":{\"Running\":%s,\"OnDemand\":%s,\"saved\":%.2f}}\n", r, o, (r > 0 ? 1 - o / r : 0) }'
rm -f /tmp/sbx-bench-ondemand.*.running
