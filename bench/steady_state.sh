#!/usr/bin/env bash
# Steady-state API cost of sbxd against sbx-emulator (DESIGN §3: "a steady-state fleet of N
# sandboxes costs ⌈N/page⌉ calls per sweep, not N"). For each N: apply N Sandboxes, wait until
# all are Ready, then measure with the emulator's per-endpoint counters:
#   1. convergence: time to all Ready and API calls per endpoint;
#   2. idle (SBX_BENCH_IDLE s, default 60): LIST calls per sweep vs ⌈N/page⌉, writes and GETs;
#   3. no-op re-apply of every manifest: API writes (expected 0);
#   4. one mutation (one displayName): PATCH count (expected 1), time until it is Ready again
#      and every API call made meanwhile.
# Prints JSON lines on stdout. A benchmark, not a test: needs curl and awk (no python).
#   bench/steady_state.sh              # N = 50 250
#   bench/steady_state.sh 10           # one N
#   SBX_BENCH_BIN=build/dev/cli bench/steady_state.sh 10   # use existing binaries
source "$(dirname "$0")/lib.sh"

sizes=("$@")
((${#sizes[@]})) || sizes=(50 250)
idle=${SBX_BENCH_IDLE:-60}
page=100
sweep=10
writes=(databricks.create databricks.update databricks.delete databricks.start databricks.stop
  databricks.exec_sync)

bench_build
machine_line
trap bench_cleanup EXIT

for n in "${sizes[@]}"; do
  bench_tmp=$(mktemp -d /tmp/sbx-bench-steady.XXXXXX)
  bench_start_emulator --pending-delay 1s --max-sandboxes 0
  bench_start_sbxd --sweep-interval "${sweep}s" --page-size "$page"
  manifests="$bench_tmp/manifests"
  mkdir -p "$manifests"
  for i in $(seq -w 1 "$n"); do
    cat >"$manifests/sb-$i.yaml" <<EOF
apiVersion: sbx.dev/v1alpha1
kind: Sandbox
metadata:
  name: sb-$i
  labels:
    bench: steady
spec:
  displayName: bench sandbox $i
  inactivityTimeout: 1h
EOF
  done

  # 1. Convergence.
  reset_counters
  sbxctl apply -f "$manifests" >/dev/null
  t_ready=$(wait_ready sandboxes "$n" 600)
  conv=$(counters)
  echo "{\"n\":$n,\"phase\":\"converge\",\"seconds_to_all_ready\":$t_ready,\"calls\":$conv}"

  # 2. Idle. Let any straggling post-Ready reconcile finish before the window starts.
  sleep 2
  reset_counters
  sweeps0=$(metric sbx_sweeps_total)
  sleep "$idle"
  idle_counts=$(counters)
  sweeps1=$(metric sbx_sweeps_total)
  sweeps=$((sweeps1 - sweeps0))
  lists=$(counters_sum "$idle_counts" databricks.list)
  gets=$(counters_sum "$idle_counts" databricks.get)
  nwrites=$(counters_sum "$idle_counts" "${writes[@]}")
  expected=$(((n + page - 1) / page))
  per_sweep=$(awk -v l="$lists" -v s="$sweeps" 'BEGIN { printf "%.2f\n", l / (s > 0 ? s : 1) }')
  echo "{\"n\":$n,\"phase\":\"idle\",\"seconds\":$idle,\"sweeps\":$sweeps,\"list_calls\":$lists,\"list_per_sweep\":$per_sweep,\"expected_per_sweep\":$expected,\"gets\":$gets,\"writes\":$nwrites,\"calls\":$idle_counts}"

  # 3. No-op re-apply: the store keeps every object unchanged, so no API write may follow.
  reset_counters
  sbxctl apply -f "$manifests" >/dev/null
  sleep $((sweep + 2))
  noop=$(counters)
  nwrites=$(counters_sum "$noop" "${writes[@]}")
  echo "{\"n\":$n,\"phase\":\"noop_reapply\",\"window_seconds\":$((sweep + 2)),\"writes\":$nwrites,\"calls\":$noop}"

  # 4. One mutation.
  first=$(ls "$manifests" | head -n1)
  sed -i 's/displayName: bench sandbox \(.*\)/displayName: renamed sandbox \1/' "$manifests/$first"
  reset_counters
  start=$(now)
  sbxctl apply -f "$manifests" >/dev/null
  t_apply=$(since "$start")
  until (($(counter "$(counters)" databricks.update) >= 1)); do sleep 0.05; done
  t_patch=$(since "$start")
  wait_ready sandboxes 1 60 "${first%.yaml}" >/dev/null
  t_observed=$(since "$start")
  mut=$(counters)
  patches=$(counter "$mut" databricks.update)
  total=$(counters_sum "$mut")
  echo "{\"n\":$n,\"phase\":\"mutation\",\"patches\":$patches,\"seconds_apply\":$t_apply,\"seconds_to_patch\":$t_patch,\"seconds_to_ready_for_new_generation\":$t_observed,\"calls_until_observed\":$total,\"calls\":$mut}"
  read -r cpu rss <<<"$(proc_stats "$sbxd_pid")"
  echo "{\"n\":$n,\"phase\":\"sbxd\",\"cpu_seconds\":$cpu,\"peak_rss_kib\":$rss}"
  bench_cleanup
done
