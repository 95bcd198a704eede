#!/usr/bin/env bash
# Reproduction (found by chaos.sh): a Sandbox with setup steps is stopped behind sbxd's back; sbxd
# starts it again (event Starting) but the first exec-sync after the start — the boot-marker probe
# — fails once (503). That failed reconcile still writes status.state=RUNNING, so the retry sees
# before().state == RUNNING with the same create_time and a non-empty bootId: maybe_rebooted is
# false (sandbox_reconciler.cc RunSetup), the probe is skipped, the old boot's setup results
# count as done. The Sandbox is Ready=True with the bootId of before the stop and setup never ran
# for the new boot (its /tmp file is missing). The same happens when sbxd is SIGKILLed between
# the start call and its status write (chaos.sh --backstage-kill9).
#   tests/chaos/repro_stale_boot.sh BIN_DIR    # exit 0 = fixed, 1 = reproduced
set -euo pipefail
export SBX_BENCH_BIN=$(cd "$1" && pwd)
source "$(dirname "$0")/../../bench/lib.sh"
trap bench_cleanup EXIT
bench_tmp=$(mktemp -d /tmp/sbx-repro-boot.XXXXXX)
bench_start_emulator --pending-delay 1s --stopping-delay 1s --max-sandboxes 0
cat >"$bench_tmp/sb.yaml" <<EOM
apiVersion: sbx.dev/v1alpha1
kind: Sandbox
metadata: {name: one}
spec:
  inactivityTimeout: 1h
  setup:
    - name: mark
      run: date +%s%N > /tmp/setup-ran
EOM
sbxctl apply -f "$bench_tmp/sb.yaml" >/dev/null
bench_start_sbxd --sweep-interval 1s --resync 30s
wait_ready sandboxes 1 60 >/dev/null
boot=$(sbxctl get sandbox one -o json | jq -r .status.bootId)
curl -sf -X POST "$emu_url/_emulator/faults" -d '{"endpoint":"databricks.exec_sync","status":503,"count":1}' >/dev/null
curl -sf -H "Authorization: Bearer dapi-bench" -X POST "$emu_url/api/2.0/sandboxes/default-one/stop" -d '{}' >/dev/null
bench_wait_for 60 bash -c "sqlite3 '$SBX_DB' \"select 1 from events where reason='Starting'\" | grep -q 1"
# Ready again and either a new boot, or 20 s of Ready with the old one.
bench_wait_for 60 bash -c "SBX_DB='$SBX_DB' '$SBX_BENCH_BIN/sbxctl' get sandbox one -o json | jq -e '.status.state == \"RUNNING\" and any(.status.conditions[]; .type == \"Ready\" and .status == \"True\")'"
bench_wait_for 20 bash -c "SBX_DB='$SBX_DB' '$SBX_BENCH_BIN/sbxctl' get sandbox one -o json | jq -e '.status.bootId != \"$boot\"'" || true
now_boot=$(sbxctl get sandbox one -o json | jq -r .status.bootId)
marker=$(curl -sf -H "Authorization: Bearer dapi-bench" -X POST \
  "$emu_url/api/2.0/sandbox-exec/sandboxes/default-one/exec-sync" \
  -d '{"cmd":"/bin/bash","args":["-c","cat /tmp/setup-ran 2>/dev/null || echo MISSING"]}' | jq -r .stdout)
echo "bootId before the stop $boot, now $now_boot; setup's /tmp file: $marker"
if [[ "$now_boot" == "$boot" || "$marker" == MISSING* ]]; then
  echo "REPRODUCED: Ready after a restart without noticing the new boot; setup not re-run"
  exit 1
fi
echo "not reproduced"
