#!/usr/bin/env bash
# Chaos for replicas (issue #17, DESIGN §7.4): N sbxd replicas share one PostgreSQL store and
# split W workspaces of S Sandboxes each (--work-split workspace). In K rounds a random replica
# is SIGKILLed at a random moment and started again (a new identity, as a new process would
# have); in the middle round PostgreSQL itself crashes (immediate shutdown: every connection
# cut) and starts again. With --workers A, each workspace also runs A AgentWorkers with an inline
# sandbox (an executor in it, a session at the OpenAI emulator). With --pauses P, P of the rounds also freeze another replica (SIGSTOP)
# for longer than the lease and then let it go on (SIGCONT): its workspaces move meanwhile, and
# when it wakes it must act on none of them (what fencing is for; kill -9 alone never tests it). Afterwards, checked against the emulator's records, not sbxd's word:
#   creates    the create counter == W × (S + A) and no DELETE was ever sent (nothing created
#              twice); the sessions.create counter == W × A;
#   leaks      the Databricks LIST holds exactly the W × (S + A) expected ids, all RUNNING;
#   ready      every Sandbox Ready=True in the store, every AgentWorker Ready with its executor
#              connected;
#   one at a time  every request a replica sent for a workspace, to the Sandbox API or the Agents
#              API, carries its lease's fencing token (X-Sbx-Fence; /_emulator/replica_log); per
#              workspace, in arrival order, the tokens never go back and each token was used by
#              one replica only: one tenure ends before the next begins, and no replica acts
#              outside its own. The one exception is what fencing in a client cannot prevent (the
#              clouds check no token; controller/cloud/fenced_transport.h): a request a frozen
#              replica had checked (X-Sbx-Checked-At) before its SIGSTOP and that arrived after
#              its SIGCONT is a late arrival, counted and shown, not a failure. A request checked
#              after the freeze, or late without one, fails;
#   split      afterwards the live replicas hold all W workspaces, each at least one (when
#              N ≤ W): the work is divided, not taken by one.
# Usage:
#   tests/chaos/replicas_chaos.sh BIN_DIR [--replicas N] [--workspaces W] [--sandboxes S]
#       [--workers A] [--rounds K] [--kill-window SECONDS] [--pauses P] [--timeout SECONDS]
#       [--inject-overlap]
# --inject-overlap proves the one-at-a-time check can fail: before the checks it sends the
# emulator one request for a workspace under an old token from a replica that never held it.
# BIN_DIR holds sbxd, sbxctl, sbx-emulator. Needs bash, curl, jq and PostgreSQL 15's server
# binaries (tests/support/postgres-fixture.sh). SBX_BENCH_KEEP=1 keeps the temp dir.
set -euo pipefail
SBX_BENCH_BIN=$(cd "$1" && pwd)
export SBX_BENCH_BIN
shift
replicas=3 workspaces=5 per_workspace=20 workers=0 rounds=4 kill_window=4 pauses=0 timeout=240
inject_overlap=""
while (($#)); do
  case "$1" in
    --replicas) replicas=$2 && shift ;;
    --workspaces) workspaces=$2 && shift ;;
    --sandboxes) per_workspace=$2 && shift ;;
    --workers) workers=$2 && shift ;;
    --rounds) rounds=$2 && shift ;;
    --kill-window) kill_window=$2 && shift ;;
    --pauses) pauses=$2 && shift ;;
    --timeout) timeout=$2 && shift ;;
    --inject-overlap) inject_overlap=1 ;;
    *) echo "unknown argument $1" >&2 && exit 2 ;;
  esac
  shift
done
read -r -a sbxd_flags <<<"${SBX_CHAOS_SBXD_FLAGS:---sweep-interval 2s --resync 30s --lease-duration 3s}"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh disable=SC2154  # emu_url, bench_bin: set by lib.sh
source "$here/../../bench/lib.sh"
bench_tmp=$(mktemp -d /tmp/sbx-replicas-chaos.XXXXXX)
pg_state="$bench_tmp/postgres.state"
# A crash of the server must lose no acknowledged commit, as in production.
export SBX_PG_SYNCHRONOUS_COMMIT=on
declare -a pids=() logs=() ports=() idents=()
pauses_json='[]'  # every freeze: {replica, stop, cont} (unix ms)
starts=0
cleanup() {
  local p
  for p in "${pids[@]}"; do
    if [[ -n "$p" ]] && kill -TERM "$p" 2>/dev/null; then
      wait "$p" 2>/dev/null || true
    fi
  done
  "$here/../support/postgres-fixture.sh" stop "$pg_state" || true
  bench_cleanup
}
trap cleanup EXIT
total=$((workspaces * (per_workspace + workers)))
total_workers=$((workspaces * workers))
t0=$(now)
auth=(-H "Authorization: Bearer dapi-bench")
log() { echo "[$(since "$t0")s] $*"; }
fail() {
  echo "FAIL: $*" >&2
  local i
  for i in "${!logs[@]}"; do
    echo "--- replica $i log tail (${logs[$i]})" >&2
    tail -n 15 "${logs[$i]}" >&2 || true
  done
  export SBX_BENCH_KEEP=1
  echo "kept for inspection: $bench_tmp" >&2
  exit 1
}
rand_between() { awk -v a="$1" -v b="$2" -v r="$RANDOM" 'BEGIN { printf "%.2f", a + (b - a) * (r % 1000) / 999 }'; }

# ---- PostgreSQL, the emulator, the replicas ---------------------------------------------------
"$here/../support/postgres-fixture.sh" start "$pg_state" || fail "PostgreSQL did not start"
# One emulator serves every workspace (each Workspace names its host); no quota.
bench_start_emulator --openai-port 0 --pending-delay 1s --stopping-delay 1s --max-sandboxes 0 \
  --disconnected-after 1s
[[ -n "$openai_url" ]] || fail "the emulator did not start its OpenAI half"
SBX_DB="$(sed -n 1p "$pg_state")/postgres"
export SBX_DB

# start_replica I — (re)starts replica I under a new identity.
start_replica() {
  local i=$1
  starts=$((starts + 1))
  logs[i]="$bench_tmp/replica-$i.$starts.log"
  idents[i]="r$i.$starts"
  "$bench_bin/sbxd" --db "$SBX_DB" --identity "${idents[$i]}" --metrics-addr 127.0.0.1:0 \
    --work-split workspace "${sbxd_flags[@]}" >"${logs[$i]}" 2>&1 &
  pids[i]=$!
  bench_wait_for 30 grep -q 'serving health and metrics' "${logs[$i]}" || fail "replica $i did not start"
  ports[i]=$(grep 'serving health and metrics' "${logs[$i]}" | tail -n1 | sed 's/.*port[=":]*\([0-9][0-9]*\).*/\1/')
}
kill_replica() {
  kill -9 "${pids[$1]}"
  wait "${pids[$1]}" 2>/dev/null || true
  pids[$1]=""
}
held() { curl -sf "http://127.0.0.1:${ports[$1]}/metrics" | awk '$1 == "sbx_workspace_leases_held" { print $2 + 0 }'; }

# ---- manifests -------------------------------------------------------------------------------
mkdir -p "$bench_tmp/manifests"
expected_ids() {
  local w i
  for w in $(seq 1 "$workspaces"); do
    for i in $(seq 1 "$per_workspace"); do printf 'default-w%d-sb-%03d\n' "$w" "$i"; done
    for i in $(seq 1 "$workers"); do printf 'default-w%d-aw-%03d\n' "$w" "$i"; done
  done
}
for w in $(seq 1 "$workspaces"); do
  {
    cat <<EOM
apiVersion: sbx.dev/v1alpha1
kind: Workspace
metadata:
  name: w$w
spec:
  databricks:
    host: $emu_url
EOM
    for i in $(seq 1 "$per_workspace"); do
      cat <<EOM
---
apiVersion: sbx.dev/v1alpha1
kind: Sandbox
metadata:
  name: $(printf 'w%d-sb-%03d' "$w" "$i")
spec:
  workspaceRef: w$w
  inactivityTimeout: 1h
EOM
    done
    for i in $(seq 1 "$workers"); do
      cat <<EOM
---
apiVersion: sbx.dev/v1alpha1
kind: AgentWorker
metadata:
  name: $(printf 'w%d-aw-%03d' "$w" "$i")
spec:
  sandbox:
    workspaceRef: w$w
    inactivityTimeout: 1h
    setup:
      - name: workspace
        run: mkdir -p /home/sandbox-agent/workspace
  agent:
    model: gpt-5-codex
    instructions: replicas chaos worker
  workspaceDirectory: /home/sandbox-agent/workspace
EOM
    done
  } >"$bench_tmp/manifests/w$w.yaml"
done

for i in $(seq 1 "$replicas"); do start_replica "$i"; done
log "$replicas replicas on PostgreSQL; applying $workspaces workspaces × $per_workspace Sandboxes"
sbxctl apply -f "$bench_tmp/manifests" >/dev/null || fail "apply failed"
converge_start=$(now)

# ---- kill rounds -----------------------------------------------------------------------------
pg_round=$(((rounds + 1) / 2))
# The lease the replicas run with (--lease-duration Ns in sbxd_flags), and a pause past it.
lease_seconds=$(sed -n 's/.*--lease-duration \([0-9][0-9]*\)s.*/\1/p' <<<"${sbxd_flags[*]}")
pause_seconds=$((${lease_seconds:-15} + 2))
for r in $(seq 1 "$rounds"); do
  sleep "$(rand_between 0.5 "$kill_window")"
  victim=$((1 + RANDOM % replicas))
  kill_replica "$victim"
  log "round $r: kill -9 replica $victim"
  if ((r == pg_round)); then
    "$here/../support/postgres-fixture.sh" restart "$pg_state" || fail "PostgreSQL did not restart"
    log "round $r: PostgreSQL crashed (immediate shutdown) and started again"
  fi
  start_replica "$victim"
  if ((r <= pauses && replicas > 1)); then
    frozen=$((1 + (victim + RANDOM % (replicas - 1)) % replicas))  # another one
    kill -STOP "${pids[$frozen]}"
    stop_ms=$(date +%s%3N)  # after: every check the replica made came before
    log "round $r: SIGSTOP replica $frozen for ${pause_seconds}s (lease ${lease_seconds}s)"
    sleep "$pause_seconds"
    cont_ms=$(date +%s%3N)  # before: every request it sends from here arrives after
    kill -CONT "${pids[$frozen]}"
    pauses_json=$(jq -c --arg r "${idents[$frozen]}" --argjson s "$stop_ms" --argjson c "$cont_ms" \
      '. + [{replica: $r, stop: $s, cont: $c}]' <<<"$pauses_json")
  fi
done

ready_sandboxes() {
  sbxctl get sandboxes -o json | jq '[.items[] | select(any(.status.conditions[]?;
      .type == "Ready" and .status == "True") and .status.state == "RUNNING")] | length'
}
ready_workers() {
  sbxctl get agentworkers -o json | jq '[.items[] | select(
      any(.status.conditions[]?; .type == "Ready" and .status == "True") and
      any(.status.conditions[]?; .type == "ExecutorConnected" and .status == "True"))] | length'
}
converged() {
  [[ "$(ready_sandboxes 2>/dev/null || echo 0)" == "$total" &&
    "$(ready_workers 2>/dev/null || echo 0)" == "$total_workers" ]]
}
# The objects still short of Ready, with their state and Ready condition: what a timeout names.
not_ready() {
  sbxctl get sandboxes -o json | jq -r '.items[] | select((any(.status.conditions[]?;
      .type == "Ready" and .status == "True") and .status.state == "RUNNING") | not) |
      "Sandbox \(.metadata.name): state=\(.status.state // "-") name=\(.status.sandboxName // "-") \(
      [.status.conditions[]? | "\(.type)=\(.status)/\(.reason)"] | join(" ")) \(
      [.status.conditions[]? | select(.type == "Ready") | .message] | join(""))"'
  sbxctl get agentworkers -o json | jq -r '.items[] | select((any(.status.conditions[]?;
      .type == "Ready" and .status == "True") and any(.status.conditions[]?;
      .type == "ExecutorConnected" and .status == "True")) | not) | "AgentWorker \(.metadata.name): \(
      [.status.conditions[]? | "\(.type)=\(.status)/\(.reason)"] | join(" "))"'
}
deadline=$((SECONDS + timeout))
last_report=$SECONDS
until converged; do
  if ((SECONDS >= deadline)); then
    not_ready 2>&1 | head -n 20 >&2 || true
    fail "timeout: $(ready_sandboxes 2>/dev/null || echo '?')/$total Sandboxes and $(ready_workers 2>/dev/null || echo '?')/$total_workers AgentWorkers Ready"
  fi
  if ((SECONDS - last_report >= 15)); then
    last_report=$SECONDS
    log "… $(ready_sandboxes 2>/dev/null || echo '?')/$total Sandboxes, $(ready_workers 2>/dev/null || echo '?')/$total_workers AgentWorkers Ready"
  fi
  sleep 0.5
done
log "converged: $total Sandboxes and $total_workers AgentWorkers Ready $(since "$converge_start")s after apply (load $(cut -d' ' -f1-3 /proc/loadavg))"

# ---- the division of the work afterwards -------------------------------------------------------
split_ok() {
  local i h sum=0
  for i in $(seq 1 "$replicas"); do
    h=$(held "$i") || return 1
    ((replicas > workspaces || h >= 1)) || return 1
    sum=$((sum + h))
  done
  ((sum == workspaces))
}
bench_wait_for 30 split_ok || fail "the live replicas do not split the $workspaces workspaces: $(for i in $(seq 1 "$replicas"); do echo -n "r$i=$(held "$i") "; done)"
log "split: $(for i in $(seq 1 "$replicas"); do echo -n "replica $i holds $(held "$i"); "; done)"

# ---- the checks against the emulator ---------------------------------------------------------
if [[ -n "$inject_overlap" ]]; then
  curl -sf "${auth[@]}" -H "X-Sbx-Replica: intruder" -H "X-Sbx-Workspace: default/w1" \
    -H "X-Sbx-Fence: 1" "$emu_url/api/2.0/sandboxes?page_size=1" >/dev/null
  log "injected: one request for default/w1 under token 1 from a replica that never held it"
fi
c=$(counters)
creates=$(counter "$c" databricks.create)
deletes=$(counter "$c" databricks.delete)
((creates == total)) || fail "duplicate creates: $creates create calls for $total sandboxes"
((deletes == 0)) || fail "$deletes DELETE calls (nothing was to be deleted)"
sessions=$(counter "$c" openai.sessions.create)
((sessions == total_workers)) || fail "duplicate sessions: $sessions session creates for $total_workers AgentWorkers"
listed=$(curl -sf "${auth[@]}" "$emu_url/api/2.0/sandboxes?page_size=1000" |
  jq -r '.sandboxes[]? | select(.status.state == "SANDBOX_STATE_RUNNING") | .name | sub("^sandboxes/"; "")' | sort)
[[ "$listed" == "$(expected_ids | sort)" ]] ||
  fail "the cloud does not hold exactly the $total expected RUNNING sandboxes (leak or loss): $(comm -3 <(echo "$listed") <(expected_ids | sort) | head -n 5 | tr '\n' ' ')"

# Per workspace, in arrival order: every request fenced, tokens never going back (but for late
# arrivals from a frozen replica, see the top), one replica per token.
curl -sf "$emu_url/_emulator/replica_log" >"$bench_tmp/replica_log.json" ||
  fail "the emulator did not give its replica log"
report=$(jq -c --argjson pauses "$pauses_json" '
  def late($q): $q.checked_at != "" and any($pauses[]; .replica == $q.replica and
                  ($q.checked_at | tonumber) <= .stop and $q.at_ms >= .cont);
  .dropped as $dropped | .requests | sort_by(.seq) | group_by(.workspace) | map(
    . as $r
    | (reduce $r[] as $q ({top: null, first_at: {}, back: [], late: []};
         if $q.fence == "" then .
         elif .top != null and ($q.fence | tonumber) < .top then
           {q: $q, after: {fence: .top, first_at: .first_at[.top | tostring]}} as $b
           | if late($q) then .late += [$b] else .back += [$b] end
         else .top = ([.top // 0, ($q.fence | tonumber)] | max)
              | .first_at[$q.fence] //= $q.at_ms end)) as $o
    | {
      workspace: $r[0].workspace,
      requests: ($r | length),
      unfenced: ($r | map(select(.fence == "")) | length),
      backwards: ($o.back | length),
      late: ($o.late | length),
      late_ms: [$o.late[] | .q.at_ms - (.q.checked_at | tonumber)],
      offenders: $o.back[:5],
      shared_tokens: ($r | group_by(.fence) | map(select((map(.replica) | unique | length) > 1))
                      | length),
      tenures: ($r | map(.fence) | unique | length),
      replicas: ($r | map(.replica) | unique | length)
    }) | {dropped: $dropped, workspaces: .}' "$bench_tmp/replica_log.json")
echo "$report" | jq -r '.workspaces[] | "  \(.workspace): \(.requests) requests, \(.tenures) tenures, \(.replicas) replicas; unfenced \(.unfenced), backwards \(.backwards), shared tokens \(.shared_tokens), late arrivals \(.late)\(if .late > 0 then " (checked \(.late_ms | map(tostring + " ms") | join(", ")) before arriving)" else "" end)"'
echo "$report" | jq -r '.workspaces[] | .workspace as $w | .offenders[] |
  "  backwards in \($w): #\(.q.seq) \(.q.endpoint) \(.q.id) from \(.q.replica) under token \(.q.fence), checked at \(.q.checked_at), arrived \(.q.at_ms), after token \(.after.fence) first arrived \(.after.first_at)"'
[[ "$pauses_json" == "[]" ]] || log "freezes: $pauses_json"
[[ "$(jq '.dropped' <<<"$report")" == 0 ]] || fail "the emulator's replica log overflowed"
[[ "$(jq '.workspaces | length' <<<"$report")" == "$workspaces" ]] ||
  fail "expected requests for $workspaces workspaces: $report"
bad=$(jq '[.workspaces[] | select(.unfenced + .backwards + .shared_tokens > 0)] | length' <<<"$report")
((bad == 0)) || fail "$bad workspace(s) served by more than one replica at a time (see above)"
served_by=$(jq '[.requests[].replica] | unique | length' "$bench_tmp/replica_log.json")
openai_requests=$(jq '[.requests[] | select(.endpoint | startswith("openai."))] | length' \
  "$bench_tmp/replica_log.json")
# The window fencing in a client leaves (see the top): from the last check to the arrival.
log "from the last check to the arrival: $(jq -r '[.requests[] | select(.checked_at != "")
  | .at_ms - (.checked_at | tonumber)] | sort | length as $n | if $n == 0 then "no requests"
  else "p50 \(.[($n * 0.5 | floor)]) ms, p99 \(.[($n * 0.99 | floor)]) ms, max \(.[-1]) ms over \($n) requests" end' \
  "$bench_tmp/replica_log.json")"
log "the replica log holds $openai_requests Agents API requests besides the Sandbox API's"
log "PASS: $creates creates, 0 deletes, $total RUNNING, each workspace served by one replica at a time ($served_by replica identities over the run)"
