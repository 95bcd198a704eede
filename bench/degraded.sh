#!/usr/bin/env bash
# A degraded cloud (issue #25): how much slower does sbx converge when the cloud fails 10% of
# its calls with 503 + Retry-After: 1 s? Random server errors are not congestion, so the goal is
# the median of the faulty times ≤ 1.5× the median of the fault-free times.
# Setup (bench/converge.sh's): N AgentWorkers with inline sandboxes (default 100), default sbxd
# flags, emulator --pending-delay 1s --rate-limit 20, 20 ms latency on every endpoint, a Workspace
# with limits.requestsPerSecond: 20. Runs PAIRS (default 3) back-to-back pairs of a fault-free
# convergence and one with SBX_DEGRADED_FAULT (default {"status":503,"rate":0.1,
# "retry_after_seconds":1}) on each of the 14 endpoints tests/chaos/chaos.sh's fault_endpoints
# lists, then prints one JSON line per run and a summary line:
#   {"flow":"degraded","n":…,"clean_s":[…],"faulty_s":[…],"median_clean_s":…,
#    "median_faulty_s":…,"ratio":…,"target":1.5}
#   bench/degraded.sh [N] [PAIRS]
#   SBX_DEGRADED_FAULT='{"status":429,"rate":0.1,"retry_after_seconds":1}' bench/degraded.sh
# SBX_BENCH_BIN as for bench/converge.sh (else it builds build/bench-rel). A benchmark, not a test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
n=${1:-100}
pairs=${2:-3}
fault=${SBX_DEGRADED_FAULT:-'{"status":503,"rate":0.1,"retry_after_seconds":1}'}
export SBX_BENCH_IDLE=0 SBX_BENCH_IDEAL=0

run() {  # run FAULT → the sbxd line of one convergence
  SBX_BENCH_FAULT="$1" "$here/converge.sh" "$n" | grep '"flow":"sbxd"'
}
seconds() { grep -o '"seconds_to_all_ready":[0-9.]*' <<<"$1" | cut -d: -f2; }

clean=() faulty=()
for ((i = 1; i <= pairs; i++)); do
  line=$(run "")
  echo "$line" | sed 's/"timeline":.*/"pair":'"$i"'}/'
  clean+=("$(seconds "$line")")
  line=$(run "$fault")
  echo "$line" | sed 's/"timeline":.*/"pair":'"$i"'}/'
  faulty+=("$(seconds "$line")")
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
join() { local IFS=,; echo "$*"; }
mc=$(median "${clean[@]}")
mf=$(median "${faulty[@]}")
awk -v n="$n" -v c="$(join "${clean[@]}")" -v f="$(join "${faulty[@]}")" -v mc="$mc" -v mf="$mf" \
  -v fault="$fault" 'BEGIN {
  printf "{\"flow\":\"degraded\",\"n\":%d,\"fault\":%s,\"clean_s\":[%s],\"faulty_s\":[%s],\"median_clean_s\":%.2f,\"median_faulty_s\":%.2f,\"ratio\":%.2f,\"target\":1.5}\n", n, fault, c, f, mc, mf, mf / mc }'
