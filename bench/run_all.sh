#!/usr/bin/env bash
# The benchmark of issue #6 in one command: sbxd convergence at N = 10, 100, 1000 (each followed
# by 5 idle minutes), the sequential curl baseline at N = 10, 100, and the speed-up. Writes every
# JSON line to bench/out/run-<timestamp>.jsonl and prints a Markdown summary table.
#   bench/run_all.sh
#   SBX_BENCH_SIZES="10 100" SBX_BENCH_BASELINE_SIZES=10 SBX_BENCH_IDLE=60 bench/run_all.sh
# Takes about 35 minutes with the defaults (the idle windows are 15 of them). Needs curl, awk.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
sizes=${SBX_BENCH_SIZES:-10 100 1000}
baseline_sizes=${SBX_BENCH_BASELINE_SIZES:-10 100}
mkdir -p "$here/out"
out="$here/out/run-$(date -u +%Y%m%dT%H%M%SZ).jsonl"

# shellcheck disable=SC2086 # the size lists are word-split on purpose
"$here/converge.sh" $sizes | tee -a "$out"
# shellcheck disable=SC2086
SBX_BENCH_BIN="${SBX_BENCH_BIN:-$here/../build/bench-rel/cli}" "$here/baseline_script.sh" \
  $baseline_sizes | tee -a "$out"

# field NAME LINE — a number field of a flat JSON line.
field() { grep -o "\"$1\":[0-9.]*" <<<"$2" | head -n1 | cut -d: -f2; }
echo
echo "Results: $out"
echo
echo "| N | all Ready | Databricks calls (floor) | 429s | floor | ÷ floor | sbxd CPU | peak RSS | idle calls/min | LIST/sweep (⌈N/100⌉) | idle exec-syncs (bound) | baseline | speed-up |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
for n in $sizes; do
  conv=$(grep "\"n\":$n,\"flow\":\"sbxd\",\"latency\"" "$out" | tail -n1 || true)
  idle=$(grep "\"n\":$n,\"flow\":\"sbxd\",\"phase\":\"idle\"" "$out" | tail -n1 || true)
  base=$(grep "\"n\":$n,\"flow\":\"baseline_script\"" "$out" | tail -n1 || true)
  [[ -n "$conv" ]] || { echo "| $n | (no result) |||||||||||"; continue; }
  t=$(field seconds_to_all_ready "$conv")
  rss_mib=$(awk -v k="$(field sbxd_peak_rss_kib "$conv")" 'BEGIN { printf "%.1f MiB", k / 1024 }')
  idle_cols="– | – | –"
  if [[ -n "$idle" ]]; then
    idle_cols="$(field databricks_calls_per_minute "$idle") | $(field list_per_sweep "$idle") ($(field expected_list_per_sweep "$idle")) | $(field exec_sync "$idle") ($(field exec_sync_bound "$idle"))"
  fi
  base_cols="– | –"
  if [[ -n "$base" ]]; then
    b=$(field seconds_to_all_connected "$base")
    base_cols="$b s | **$(awk -v b="$b" -v t="$t" 'BEGIN { printf "%.1f×", b / t }')**"
  fi
  echo "| $n | $t s | $(field databricks_calls "$conv") ($(field floor_calls "$conv")) | $(field throttled_429 "$conv") | $(field floor_s "$conv") s | **$(field ratio "$conv")×** | $(field sbxd_cpu_seconds "$conv") s | $rss_mib | $idle_cols | $base_cols |"
done
