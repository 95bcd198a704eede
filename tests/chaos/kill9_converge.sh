#!/usr/bin/env bash
# Chaos: sbxd is SIGKILLed at a random moment while converging M Sandboxes, K rounds, restarted
# each time; afterwards everything must converge with no duplicate create and nothing leaked:
#   - the emulator's create counter == M (a crash between the API call and the inventory
#     update must be settled by GET/adopt, never by a second create),
#   - the emulator's LIST holds exactly the M expected sandbox ids,
#   - all M Sandboxes Ready.
# With --faults, the emulator also answers 10% of calls with 503 and bursts of 429 (Retry-After).
#   tests/chaos/kill9_converge.sh BIN_DIR [M] [ROUNDS] [--faults]
# BIN_DIR holds sbxd, sbxctl, sbx-emulator (not under /tmp: sandboxes get a private /tmp).
set -euo pipefail
export SBX_BENCH_BIN=$(cd "$1" && pwd)
m=${2:-30}
rounds=${3:-2}
faults=${4:-}
source "$(dirname "$0")/../../bench/lib.sh"
trap bench_cleanup EXIT
bench_tmp=$(mktemp -d /tmp/sbx-chaos.XXXXXX)

fail() {
  echo "FAIL: $*" >&2
  echo "--- sbxd log tail" >&2
  tail -n 30 "$sbxd_log" >&2
  exit 1
}

bench_start_emulator --pending-delay 1s --max-sandboxes 0
if [[ "$faults" == --faults ]]; then
  for ep in '*' databricks.create databricks.get databricks.list databricks.exec_sync; do
    curl -sf -X POST "$emu_url/_emulator/faults" -d "{\"endpoint\":\"$ep\",\"status\":503,\"rate\":0.1}" >/dev/null
  done
  curl -sf -X POST "$emu_url/_emulator/faults" \
    -d '{"endpoint":"databricks.create","status":429,"count":5,"retry_after_seconds":1}' >/dev/null
fi
mkdir -p "$bench_tmp/manifests"
for i in $(seq -w 1 "$m"); do
  cat >"$bench_tmp/manifests/sb-$i.yaml" <<EOM
apiVersion: sbx.dev/v1alpha1
kind: Sandbox
metadata:
  name: sb-$i
spec:
  displayName: chaos $i
EOM
done
reset_counters
sbxctl apply -f "$bench_tmp/manifests" >/dev/null

for round in $(seq 1 "$rounds"); do
  bench_start_sbxd --sweep-interval 2s --resync 5s
  # A random moment in the first 0.2–3 s of work (creates are in flight then).
  sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.2f", 0.2 + (r % 280) / 100 }')"
  kill -9 "$sbxd_pid"
  wait "$sbxd_pid" 2>/dev/null || true
  sbxd_pid=""
  echo "round $round: sbxd killed; creates so far $(counter "$(counters)" databricks.create)"
done

bench_start_sbxd --sweep-interval 2s --resync 5s
wait_ready sandboxes "$m" 240 >/dev/null || fail "not all $m Sandboxes Ready"
# One more sweep period so a late duplicate would show up; then no more faults, so that the
# checks below read the emulator reliably.
sleep 3
curl -sf -X DELETE "$emu_url/_emulator/faults" >/dev/null
c=$(counters)
creates=$(counter "$c" databricks.create)
echo "calls: $c"
listed=$(curl -sf -H "Authorization: Bearer dapi-bench" "$emu_url/api/2.0/sandboxes?page_size=1000" |
  grep -o '"name":"sandboxes/[^"]*"' | sed 's/.*sandboxes\/\(.*\)"/\1/' | sort)
expected=$(for i in $(seq -w 1 "$m"); do echo "default-sb-$i"; done | sort)
[[ "$listed" == "$expected" ]] || fail "emulator LIST differs from the $m expected ids: $(diff <(echo "$expected") <(echo "$listed") | head)"
# Without faults every create call must have been a real, first create. With faults the counter
# also holds the injected 429/503 answers (rejected before taking effect); there the LIST check
# above is the proof: an id is created at most once (a second create of it answers 409).
if [[ "$faults" != --faults ]]; then
  ((creates == m)) || fail "emulator saw $creates creates for $m sandboxes (duplicate creates)"
fi
echo "PASS: $m sandboxes, $rounds kill -9 rounds${faults:+, faults}: creates=$creates, LIST = the $m ids, all Ready"
