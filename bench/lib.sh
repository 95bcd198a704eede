#!/usr/bin/env bash
# Shared helpers for the end-to-end benchmark scripts (bench/steady_state.sh, bench/converge.sh,
# bench/baseline_script.sh): build the release binaries, start/stop sbx-emulator and sbxd as
# real processes in a temp dir, read the emulator's per-endpoint counters, wait for readiness.
# Sourced, not run. Needs only bash, curl, awk and sed (no python: see now()).
set -euo pipefail

bench_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# SBX_BENCH_BIN: use binaries from this dir instead of building build/bench-rel.
bench_bin="${SBX_BENCH_BIN:-$bench_root/build/bench-rel/cli}"
bench_tmp=""
emu_pid=""
sbxd_pid=""
emu_url=""
openai_url=""
metrics_url=""

bench_build() {
  if [[ -n "${SBX_BENCH_BIN:-}" ]]; then
    return
  fi
  cmake -S "$bench_root" -B "$bench_root/build/bench-rel" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
  cmake --build "$bench_root/build/bench-rel" --target sbxd sbxctl sbx-emulator ideal_client \
    -j2 >/dev/null
}

bench_cleanup() {
  [[ -n "$sbxd_pid" ]] && kill -TERM "$sbxd_pid" 2>/dev/null && wait "$sbxd_pid" 2>/dev/null || true
  [[ -n "$emu_pid" ]] && kill -TERM "$emu_pid" 2>/dev/null && wait "$emu_pid" 2>/dev/null || true
  sbxd_pid=""
  emu_pid=""
  if [[ -n "$bench_tmp" && -z "${SBX_BENCH_KEEP:-}" ]]; then
    rm -rf "$bench_tmp"
  fi
}

# Polls `$@` until it succeeds or `timeout` seconds pass.
bench_wait_for() {
  local timeout=$1
  shift
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS >= deadline)) && return 1
    sleep 0.2
  done
}

# bench_start_emulator ARGS… — starts sbx-emulator in $bench_tmp with extra flags.
bench_start_emulator() {
  "$bench_bin/sbx-emulator" --databricks-port 0 --root "$bench_tmp/emulator" --token dapi-bench \
    --openai-api-key sk-bench-app --openai-executor-key sk-bench-executor "$@" \
    >"$bench_tmp/emulator.log" 2>&1 &
  emu_pid=$!
  bench_wait_for 30 grep -q '^databricks: http' "$bench_tmp/emulator.log" || {
    echo "emulator did not start" >&2
    cat "$bench_tmp/emulator.log" >&2
    return 1
  }
  emu_url=$(sed -n 's/^databricks: //p' "$bench_tmp/emulator.log" | head -n1)
  openai_url=$(sed -n 's/^openai: //p' "$bench_tmp/emulator.log" | head -n1)
  export DATABRICKS_HOST="$emu_url" DATABRICKS_TOKEN=dapi-bench
  if [[ -n "$openai_url" ]]; then
    export OPENAI_BASE_URL="$openai_url" OPENAI_API_KEY=sk-bench-app
    export OPENAI_EXECUTOR_API_KEY=sk-bench-executor
  fi
  # SBX_BENCH_DB: the store sbxd and sbxctl use instead of a new SQLite file in $bench_tmp, e.g.
  # an empty PostgreSQL database (bench/store_backends.sh); one run (one size) per database.
  export SBX_DB="${SBX_BENCH_DB:-$bench_tmp/sbx.db}"
}

# bench_workspace_yaml RPS — the Workspace "default" against the emulator (bench_start_emulator's
# URLs, so sbxd's own DATABRICKS_TOKEN and OPENAI_API_KEY are used), telling sbxd the workspace's
# rate limit (limits.requestsPerSecond).
bench_workspace_yaml() {
  cat <<EOF
apiVersion: sbx.dev/v1alpha1
kind: Workspace
metadata:
  name: default
spec:
  databricks:
    host: $emu_url
  openai:
    baseUrl: $openai_url
  limits:
    requestsPerSecond: $1
EOF
}

# bench_start_sbxd ARGS… — starts sbxd against the emulator (env from bench_start_emulator).
# Each start logs to its own file (sbxd.<n>.log); $sbxd_log is the current one.
sbxd_starts=0
sbxd_log=""
bench_start_sbxd() {
  sbxd_starts=$((sbxd_starts + 1))
  sbxd_log="$bench_tmp/sbxd.$sbxd_starts.log"
  "$bench_bin/sbxd" --metrics-addr 127.0.0.1:0 "$@" >"$sbxd_log" 2>&1 &
  sbxd_pid=$!
  bench_wait_for 30 grep -q 'serving health and metrics' "$sbxd_log" || {
    echo "sbxd did not start" >&2
    cat "$sbxd_log" >&2
    return 1
  }
  local port
  # port=N in text logs, "port":"N" in JSON ones.
  port=$(grep 'serving health and metrics' "$sbxd_log" | tail -n1 | sed 's/.*port[=":]*\([0-9][0-9]*\).*/\1/')
  metrics_url="http://127.0.0.1:$port/metrics"
}

sbxctl() { "$bench_bin/sbxctl" "$@"; }

counters() { curl -sf "$emu_url/_emulator/counters"; }
reset_counters() { curl -sf -X DELETE "$emu_url/_emulator/counters" >/dev/null; }

# metric NAME — the value of an unlabelled sbxd metric.
metric() { curl -sf "$metrics_url" | awk -v n="$1" '$1 == n { print $2 }'; }

# now — wall clock in seconds with nanoseconds. since T — seconds since T (two decimals).
# (No python in the measuring loops: on a loaded 2-core machine its start-up alone took seconds.)
now() { date +%s.%N; }
since() { awk -v t="$1" -v n="$(date +%s.%N)" 'BEGIN { printf "%.2f\n", n - t }'; }

# ready_count KIND [NAME] — objects of KIND with condition Ready=True for their generation.
# Reads `sbxctl get -o json` (pretty, keys sorted: a condition's "type" is its last key).
ready_count() {
  sbxctl get "$@" -o json | awk '
    /"generation":/ { gsub(/[^0-9]/, "", $2); gen = $2 + 0 }
    /\{/ { og = -1; st = "" }
    /"observedGeneration":/ { v = $2; gsub(/[^0-9]/, "", v); og = v + 0 }
    /"status": "/ { st = $2 }
    /"type": "Ready"/ { if (st ~ /True/ && og >= gen) n++ }
    END { print n + 0 }'
}

# wait_ready KIND N TIMEOUT [NAME] — polls until N objects are Ready; prints seconds taken.
wait_ready() {
  local kind=$1 n=$2 timeout=$3
  shift 3
  local start
  start=$(now)
  local deadline=$((SECONDS + timeout))
  while true; do
    local r
    r=$(ready_count "$kind" "$@" 2>/dev/null || echo 0)
    if ((r >= n)); then
      break
    fi
    if ((SECONDS >= deadline)); then
      echo "timeout: $r/$n $kind Ready" >&2
      return 1
    fi
    sleep 0.25
  done
  since "$start"
}

# counters_sum JSON KEYS… — sum of the named counters in a flat counters JSON object.
counters_sum() {
  local json=$1
  shift
  local keys=" $* "
  tr -d '{}"' <<<"$json" | tr ',' '\n' | awk -F: -v keys="$keys" \
    'index(keys, " " $1 " ") || keys == "  " { s += $2 } END { print s + 0 }'
}

# counter JSON KEY — one counter (0 if absent).
counter() { counters_sum "$1" "$2"; }

# proc_stats PID — "cpu_seconds peak_rss_kib" from /proc (utime+stime, VmHWM).
proc_stats() {
  local pid=$1
  local tck
  tck=$(getconf CLK_TCK)
  awk -v tck="$tck" '{ printf "%.2f ", ($14 + $15) / tck }' "/proc/$pid/stat"
  awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status"
}

machine_line() {
  echo "{\"machine\":{\"cores\":$(nproc),\"mem_gib\":$(awk '/MemTotal/ {printf "%.0f", $2/1048576}' /proc/meminfo),\"loadavg\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"compiler\":\"$(g++ --version | head -n1)\"}}"
}
