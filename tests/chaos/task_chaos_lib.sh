# Shared by the AgentTask chaos scripts (agent_tasks_chaos.sh, pool_chaos.sh), sourced after
# bench/lib.sh once $bench_tmp, $t0 and the sbxd_flags array are set. The helpers of a kill-round
# run checked against the emulator's records:
#   log MSG               "[seconds since t0] MSG"
#   fail MSG              prints MSG and the sbxd log tail, keeps $bench_tmp, exits 1
#   violation MSG         counts ($violations) and prints one broken guarantee; the run goes on
#   rand_between A B      a random decimal in [A, B]
#   oai_state / oai ARGS  the emulator's OpenAI state (admin API) / a call to its Agents API
#   start_sbxd, kill_sbxd start sbxd with "${sbxd_flags[@]}" and wait until it leads; SIGKILL it
#   wait_tasks_terminal N TIMEOUT   until N AgentTasks are in a final phase (fails after TIMEOUT s)
# shellcheck shell=bash
log() { echo "[$(since "$t0")s] $*"; }
fail() {
  echo "FAIL: $*" >&2
  echo "--- sbxd log tail ($sbxd_log)" >&2
  tail -n 40 "$sbxd_log" >&2 || true
  SBX_BENCH_KEEP=1
  echo "kept for inspection: $bench_tmp" >&2
  exit 1
}
violations=0
violation() {
  violations=$((violations + 1))
  echo "VIOLATION: $*" >&2
  SBX_BENCH_KEEP=1
}
rand_between() { awk -v a="$1" -v b="$2" -v r="$RANDOM" 'BEGIN { printf "%.2f", a + (b - a) * (r % 1000) / 999 }'; }
oai_state() { curl -sf "${openai_url%/v1}/_emulator/openai/state"; }
oai() { curl -sf -H "Authorization: Bearer sk-bench-app" -H "OpenAI-Beta: agents=v1" "$@"; }
start_sbxd() {
  bench_start_sbxd "${sbxd_flags[@]}"
  bench_wait_for 60 grep -q 'became leader' "$sbxd_log" || fail "sbxd never became leader"
}
kill_sbxd() {
  kill -9 "$sbxd_pid"
  wait "$sbxd_pid" 2>/dev/null || true
  sbxd_pid=""
}
wait_tasks_terminal() {
  local want=$1 timeout=$2 done_n last_report=0
  local deadline=$((SECONDS + timeout))
  while true; do
    done_n=$(sbxctl get agenttasks -o json 2>/dev/null |
      jq '[.items[] | select(.status.phase | IN("Succeeded","Failed","Cancelled","TimedOut"))] | length' ||
      echo 0)
    ((done_n == want)) && break
    ((SECONDS < deadline)) || fail "after ${timeout}s only $done_n/$want tasks terminal: $(sbxctl get agenttasks | grep -Ev 'Succeeded|Failed|Cancelled' | head)"
    if ((SECONDS - last_report >= 15)); then
      last_report=$SECONDS
      log "  … $done_n/$want tasks terminal"
    fi
    sleep 0.5
  done
  log "all $want tasks terminal"
}
