#!/usr/bin/env bash
# Convergence of N AgentWorkers, each with its own inline Sandbox (so N sandboxes + N workers),
# from an empty emulator to all Ready (sandbox RUNNING, session created, executor launched and
# connected), under a realistic API: fixed latency on every endpoint (SBX_BENCH_LATENCY, default
# 20ms, via /_emulator/latency), PENDING→RUNNING 1 s, workspace rate limit SBX_BENCH_RPS (default
# 20 req/s → 429 + Retry-After). The Workspace tells sbxd that limit (limits.requestsPerSecond),
# as a user who knows their workspace's limit would. The work per worker is the baseline's
# (bench/baseline_script.sh): create a session and a sandbox, wait for RUNNING, launch the
# executor in /home/sandbox-agent, wait until it is connected; no setup steps.
# Reports time to all Ready, API calls per endpoint, 429s seen by sbxd, sbxd CPU seconds and peak
# RSS, and the floor:
#   calls floor = N creates + N exec-sync launches + ⌈N/100⌉ LISTs (the minimum a controller
#   needs to create, see RUNNING and launch), rate floor = calls floor / rps,
#   latency chain = create + PENDING delay + exec-sync + session create ≈ 1 s + 3 × latency,
#   floor = max(rate floor, latency chain); ratio = measured / floor.
# The model floor that counts every paced API (floor_all_s): the larger of the Databricks rate
# floor, the OpenAI calls sbxd made ÷ the most its OpenAI pacing may reach (its
# --openai-max-requests-per-second, default 100, or the emulator's SBX_BENCH_OPENAI_RPS if
# lower) and the latency chain.
# The measured floor: in the same run, against a fresh emulator with the same settings,
# bench/ideal_client (the same calls for N workers, no controller logic, perfect concurrency up to
# the rate limits); ratio_ideal = sbxd ÷ ideal. SBX_BENCH_IDEAL=0 skips it.
# Where the time goes: sbxd runs with --log-level debug --log-format json and bench/timeline.awk
# turns its milestone lines into per-step medians (create → RUNNING observed → launch sent →
# launch answered → connected seen → Ready), next to the ideal client's own timeline.
# Then, with everything Ready, SBX_BENCH_IDLE seconds (default 300) of idle: API calls per minute
# per endpoint, LISTs per sweep against ⌈N/page⌉, exec-sync probes against the probe cadence
# (one per worker per 5 min).
# Compare with bench/baseline_script.sh (sequential curl flow) for the speed-up.
#   bench/converge.sh 10 100 1000
#   SBX_BENCH_IDLE=0 bench/converge.sh 100       # convergence only
#   SBX_BENCH_DB=postgres://…/empty_db bench/converge.sh 1000   # sbxd and sbxctl on that store
#   SBX_BENCH_FAULT='{"status":503,"rate":0.1,"retry_after_seconds":1}' bench/converge.sh 100
#     # a degraded cloud: that fault on each endpoint sbxd calls (tests/chaos/chaos.sh's
#     # fault_endpoints), armed before the apply (bench/degraded.sh runs the pairs)
#   (one size per empty database; bench/store_backends.sh compares the backends)
# Prints JSON lines. A benchmark, not a test: needs curl and awk.
source "$(dirname "$0")/lib.sh"

sizes=("$@")
((${#sizes[@]})) || sizes=(10 100)
latency=${SBX_BENCH_LATENCY:-20ms}
rps=${SBX_BENCH_RPS:-20}
sweep=${SBX_BENCH_SWEEP:-60s}
workers=${SBX_BENCH_WORKERS:-4}
idle=${SBX_BENCH_IDLE:-300}
openai_rps=${SBX_BENCH_OPENAI_RPS:-0}  # the emulator's OpenAI limit; 0 = none
ideal=${SBX_BENCH_IDEAL:-1}
fault=${SBX_BENCH_FAULT:-}
# The endpoints sbxd calls: tests/chaos/chaos.sh's fault_endpoints (not the executor's own).
fault_endpoints=(databricks.create databricks.get databricks.list databricks.update
  databricks.delete databricks.start databricks.stop databricks.exec_sync databricks.list_commands
  openai.sessions.create openai.sessions.get openai.sessions.list openai.sessions.delete
  openai.environments.get)
# SBX_BENCH_FAULT_ENDPOINTS="databricks.exec_sync …": only these (e.g. one endpoint's 429s).
if [[ -n "${SBX_BENCH_FAULT_ENDPOINTS:-}" ]]; then
  read -r -a fault_endpoints <<<"$SBX_BENCH_FAULT_ENDPOINTS"
fi

bench_build
machine_line
trap bench_cleanup EXIT

for n in "${sizes[@]}"; do
  bench_tmp=$(mktemp -d /tmp/sbx-bench-converge.XXXXXX)
  bench_start_emulator --openai-port 0 --pending-delay 1s --max-sandboxes 0 --rate-limit "$rps" \
    --openai-rate-limit "$openai_rps"
  curl -sf -X POST "$emu_url/_emulator/latency" -d "{\"endpoint\":\"*\",\"latency\":\"$latency\"}" >/dev/null
  # shellcheck disable=SC2086 # SBX_BENCH_SBXD_FLAGS: extra sbxd flags, word-split on purpose
  bench_start_sbxd --sweep-interval "$sweep" --workers "$workers" --log-level debug \
    --log-format json ${SBX_BENCH_SBXD_FLAGS:-}
  manifests="$bench_tmp/manifests"
  mkdir -p "$manifests"
  bench_workspace_yaml "$rps" >"$manifests/workspace.yaml"
  for i in $(seq -w 1 "$n"); do
    cat >"$manifests/aw-$i.yaml" <<EOF
apiVersion: sbx.dev/v1alpha1
kind: AgentWorker
metadata:
  name: aw-$i
spec:
  sandbox:
    inactivityTimeout: 1h
  workspaceDirectory: /home/sandbox-agent
  agent:
    model: gpt-5-codex
    instructions: benchmark worker $i
EOF
  done

  if [[ -n "$fault" ]]; then
    for ep in "${fault_endpoints[@]}"; do
      curl -sf -X POST "$emu_url/_emulator/faults" -d "{\"endpoint\":\"$ep\",${fault#\{}" >/dev/null
    done
  fi
  reset_counters
  start=$(now)
  start_sod=$(awk -v t="$start" 'BEGIN { printf "%.3f", t - int(t / 86400) * 86400 }')
  sbxctl apply -f "$manifests" >/dev/null
  if ! wait_ready agentworkers "$n" "${SBX_BENCH_TIMEOUT:-900}" >/dev/null; then
    echo "{\"n\":$n,\"error\":\"not all Ready in time\",\"ready\":$(ready_count agentworkers),\"calls\":$(counters)}"
    bench_cleanup
    continue
  fi
  t=$(since "$start")
  calls=$(counters)
  read -r cpu rss <<<"$(proc_stats "$sbxd_pid")"
  throttled=$(curl -sf "$metrics_url" | awk '/^sbx_api_calls_total/ && /code="429"/ { s += $2 } END { print s + 0 }')
  # Where sbxd's time went: reconciles by kind (count, total seconds) from its histogram.
  reconciles=$(curl -sf "$metrics_url" | awk '
    /^sbx_reconcile_duration_seconds_(sum|count)/ {
      match($0, /kind="[^"]*"/); k = substr($0, RSTART + 6, RLENGTH - 7)
      if ($1 ~ /_sum/) sum[k] += $2; else cnt[k] += $2 }
    END { sep = ""; printf "{"; for (k in cnt) { printf "%s\"%s\":{\"count\":%d,\"seconds\":%.2f}", sep, k, cnt[k], sum[k]; sep = "," } printf "}" }')
  dbx=$(counters_sum "$calls" databricks.create databricks.get databricks.list databricks.update \
    databricks.delete databricks.start databricks.stop databricks.exec_sync databricks.list_commands)
  floor_calls=$((2 * n + (n + 99) / 100))
  lat_ms=$(awk -v l="$latency" 'BEGIN { v = l + 0; if (l ~ /ms$/) print v; else print v * 1000 }')
  read -r rate_floor chain floor ratio <<<"$(awk -v c="$floor_calls" -v r="$rps" -v l="$lat_ms" -v t="$t" '
    BEGIN { rf = c / r; ch = 1 + 3 * l / 1000; f = rf > ch ? rf : ch; printf "%.2f %.2f %.2f %.2f\n", rf, ch, f, t / f }')"
  # Every paced API: OpenAI calls ÷ the most sbxd's OpenAI pacing may reach.
  oai=$(counters_sum "$calls" openai.sessions.create openai.sessions.get openai.sessions.list \
    openai.sessions.update openai.sessions.delete openai.environments.get openai.events.create)
  oai_max=$(sed -n 's/.*--openai-max-requests-per-second[ =]\([0-9.]*\).*/\1/p' <<<"${SBX_BENCH_SBXD_FLAGS:-}")
  read -r floor_all ratio_all <<<"$(awk -v f="$floor" -v c="$oai" -v m="${oai_max:-100}" -v e="$openai_rps" -v t="$t" '
    BEGIN { if (e > 0 && e < m) m = e; o = c / m; fa = f > o ? f : o; printf "%.2f %.2f\n", fa, t / fa }')"
  pacing=$(curl -sf "$metrics_url" | awk '/^sbx_api_pacing_requests_per_second/ {
      match($0, /api="[^"]*"/); printf "%s\"%s\":%s", sep, substr($0, RSTART + 5, RLENGTH - 6), $2; sep = "," }
    END { }' | sed 's/^/{/; s/$/}/')
  pacing=${pacing:-"{}"}
  timeline=$(awk -v start="$start_sod" -f "$bench_root/bench/timeline.awk" "$sbxd_log")
  line="{\"n\":$n,\"flow\":\"sbxd\",\"fault\":${fault:-null},\"latency\":\"$latency\",\"rate_limit_rps\":$rps,\"openai_rate_limit_rps\":$openai_rps,\"sweep\":\"$sweep\",\"workers\":$workers,\"seconds_to_all_ready\":$t,\"databricks_calls\":$dbx,\"openai_calls\":$oai,\"throttled_429\":$throttled,\"floor_calls\":$floor_calls,\"rate_floor_s\":$rate_floor,\"latency_chain_s\":$chain,\"floor_s\":$floor,\"ratio\":$ratio,\"floor_all_s\":$floor_all,\"ratio_all\":$ratio_all,\"pacing_end_rps\":$pacing,\"sbxd_cpu_seconds\":$cpu,\"sbxd_peak_rss_kib\":$rss,\"reconciles\":$reconciles,\"calls\":$calls,\"timeline\":$timeline}"
  echo "$line"

  if ((idle > 0)); then
    # Idle: nothing changes; count what sbxd still calls. (A measuring window, not a wait.)
    sweeps_before=$(metric sbx_sweeps_total)
    reset_counters
    sleep "$idle"
    ic=$(counters)
    sweeps=$(($(metric sbx_sweeps_total) - sweeps_before))
    lists=$(counter "$ic" databricks.list)
    execs=$(counter "$ic" databricks.exec_sync)
    idle_dbx=$(counters_sum "$ic" databricks.create databricks.get databricks.list databricks.update \
      databricks.delete databricks.start databricks.stop databricks.exec_sync databricks.list_commands)
    writes=$(counters_sum "$ic" databricks.create databricks.update databricks.delete \
      databricks.start databricks.stop)
    pages=$(((n + 99) / 100))
    # The probe runs once per worker per 5 min (sbxd's --executor-probe-interval default).
    exec_bound=$((n * (idle / 300 + 1)))
    read -r per_min list_per_sweep <<<"$(awk -v c="$idle_dbx" -v s="$idle" -v l="$lists" -v w="$sweeps" '
      BEGIN { printf "%.1f %.2f\n", c * 60 / s, (w > 0 ? l / w : 0) }')"
    echo "{\"n\":$n,\"flow\":\"sbxd\",\"phase\":\"idle\",\"seconds\":$idle,\"databricks_calls_per_minute\":$per_min,\"writes\":$writes,\"sweeps\":$sweeps,\"list_calls\":$lists,\"list_per_sweep\":$list_per_sweep,\"expected_list_per_sweep\":$pages,\"exec_sync\":$execs,\"exec_sync_bound\":$exec_bound,\"calls\":$ic}"
  fi
  bench_cleanup

  if ((ideal)); then
    # The measured floor, same settings, fresh emulator.
    bench_tmp=$(mktemp -d /tmp/sbx-bench-ideal.XXXXXX)
    bench_start_emulator --openai-port 0 --pending-delay 1s --max-sandboxes 0 --rate-limit "$rps" \
      --openai-rate-limit "$openai_rps"
    curl -sf -X POST "$emu_url/_emulator/latency" -d "{\"endpoint\":\"*\",\"latency\":\"$latency\"}" >/dev/null
    reset_counters
    ideal_line=$("${SBX_BENCH_IDEAL_BIN:-$bench_bin/../bench/ideal_client}" --databricks "$emu_url" --openai "$openai_url" \
      -n "$n" --databricks-rps "$rps" --openai-rps "$openai_rps")
    ideal_t=$(grep -o '"seconds_to_all_connected":[0-9.]*' <<<"$ideal_line" | cut -d: -f2)
    echo "$ideal_line"
    awk -v n="$n" -v s="$t" -v i="$ideal_t" -v f="$floor_all" 'BEGIN {
      printf "{\"n\":%d,\"flow\":\"compare\",\"sbxd_s\":%.2f,\"ideal_s\":%.2f,\"ratio_ideal\":%.2f,\"floor_all_s\":%.2f,\"ratio_all\":%.2f}\n", n, s, i, s / i, f, s / f }'
    bench_cleanup
  fi
done
