#!/usr/bin/env bash
# e2e (issue #11 item 7): sbxd's live /metrics passes `promtool check metrics` (Prometheus'
# own linter: exposition syntax, HELP and TYPE lines, counters named …_total, base units) without
# a single complaint, and the cumulative counts are exported as counters under their …_total
# names. And (issue #16) every metric that deploy/monitoring/'s alert rules and Grafana dashboard
# query is in that scrape: a rule or panel over a metric sbxd does not export never fires or
# stays empty, silently.
#
#   tests/e2e/metrics_promtool_e2e_test.sh BIN_DIR   # BIN_DIR holds sbxctl, sbxd and sbx-emulator
#
# Starts sbx-emulator and sbxd (fast sweeps, the webhook endpoint) into a temporary directory,
# applies the dev Sandbox example, runs one AgentTask on the reviewer worker example (the usage
# counters), waits until the Sandbox is Ready and at least one sweep has completed
# (so reconciles, API calls, pacing, sandboxes by state and the sweep and garbage-collection
# counters all have series), makes one LIST fail (sweep errors) and sends one unsigned webhook
# (deliveries), then lints one scrape. sbxd writes a family's HELP and TYPE only once it has a
# series, so the workload must produce every family the monitoring files use. promtool comes
# from Debian's `prometheus` package (scripts/install-deps.sh).
set -euo pipefail
bin=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sbx-metrics-e2e.XXXXXX")
pids=()
ok=0

cleanup() {
  for pid in "${pids[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if ((ok)); then
    rm -rf "$tmp"
  else
    echo "test directory kept for inspection: $tmp" >&2
  fi
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Polls `$@` until it succeeds or `timeout` seconds pass.
wait_for() {
  local timeout=$1
  shift
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      return 1
    fi
    sleep 0.2
  done
}

command -v promtool >/dev/null ||
  fail "promtool not found: install Debian's prometheus package (scripts/install-deps.sh)"
command -v curl >/dev/null || fail "curl not found (scripts/install-deps.sh)"

# The linter is live here: a counter without _total must be flagged, or a pass proves nothing.
if printf '# HELP sbx_sweeps Sweeps.\n# TYPE sbx_sweeps counter\nsbx_sweeps 1\n' |
  promtool check metrics >/dev/null 2>&1; then
  fail "promtool check metrics accepted a counter without _total; the check below would prove nothing"
fi

"$bin/sbx-emulator" --databricks-port 0 --openai-port 0 --root "$tmp/emulator" \
  --pending-delay 200ms --stopping-delay 200ms --token dapi-metrics-e2e \
  --openai-api-key sk-metrics-app --openai-executor-key sk-metrics-executor \
  >"$tmp/emulator.log" 2>&1 &
pids+=($!)
wait_for 30 grep -q '^openai: http' "$tmp/emulator.log" ||
  fail "sbx-emulator did not start: $(cat "$tmp/emulator.log")"

export SBX_DB="$tmp/sbx.db"
export DATABRICKS_HOST DATABRICKS_TOKEN=dapi-metrics-e2e OPENAI_BASE_URL
DATABRICKS_HOST=$(sed -n 's/^databricks: //p' "$tmp/emulator.log" | head -n1)
OPENAI_BASE_URL=$(sed -n 's/^openai: //p' "$tmp/emulator.log" | head -n1)
export OPENAI_API_KEY=sk-metrics-app OPENAI_EXECUTOR_API_KEY=sk-metrics-executor
OPENAI_WEBHOOK_SECRET="whsec_$(printf 'metrics-e2e-webhook-key-0123456' | base64)"
export OPENAI_WEBHOOK_SECRET

"$bin/sbxd" --metrics-addr 127.0.0.1:0 --sweep-interval 1s --gc-grace 2s --resync 30s \
  --webhook-addr 127.0.0.1:0 --git-allow-file-urls >"$tmp/sbxd.log" 2>&1 &
pids+=($!)
wait_for 30 grep -q 'serving health and metrics.*port=' "$tmp/sbxd.log" ||
  fail "sbxd did not serve metrics: $(cat "$tmp/sbxd.log")"
port=$(sed -n 's/.*serving health and metrics.*port=\([0-9]*\).*/\1/p' "$tmp/sbxd.log" | head -n1)
url="http://127.0.0.1:$port/metrics"
wait_for 30 grep -q 'serving webhooks.*port=' "$tmp/sbxd.log" ||
  fail "sbxd did not serve webhooks: $(cat "$tmp/sbxd.log")"
webhook_port=$(sed -n 's/.*serving webhooks.*port=\([0-9]*\).*/\1/p' "$tmp/sbxd.log" | head -n1)

"$bin/sbxctl" apply -f "$root/manifests/examples/sandbox-dev.yaml" >/dev/null
"$bin/sbxctl" wait sandbox/dev --for=condition=Ready --timeout 2m >/dev/null ||
  fail "sandbox/dev did not become Ready: $(tail -n 30 "$tmp/sbxd.log")"

# A GitSource that syncs once (a local bare repository over file://): its last-success gauge.
command -v git >/dev/null || fail "git not found (scripts/install-deps.sh)"
git init -q --bare "$tmp/repo.git"
git init -q "$tmp/work"
mkdir -p "$tmp/work/deploy"
printf 'apiVersion: sbx.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: from-git\n' \
  >"$tmp/work/deploy/workspace.yaml"
git -C "$tmp/work" add -A
git -C "$tmp/work" -c user.name=e2e -c user.email=e2e@example.invalid commit -q -m one
git -C "$tmp/work" push -q "$tmp/repo.git" HEAD:refs/heads/main
printf 'apiVersion: sbx.dev/v1alpha1\nkind: GitSource\nmetadata:\n  name: repo\nspec:\n  url: file://%s\n  ref:\n    branch: main\n  path: deploy\n  interval: 1m\n' \
  "$tmp/repo.git" >"$tmp/gitsource.yaml"
"$bin/sbxctl" apply -f "$tmp/gitsource.yaml" >/dev/null
"$bin/sbxctl" wait gitsource/repo --for=condition=Ready --timeout 1m >/dev/null ||
  fail "gitsource/repo did not become Ready: $("$bin/sbxctl" describe gitsource/repo)"

# An AgentTask run to its end: the usage ledger's counters (sbx_task_tokens_total,
# sbx_tasks_finished_total).
"$bin/sbxctl" apply -f "$root/manifests/examples/agentworker-ref.yaml" >/dev/null
"$bin/sbxctl" wait agentworker/reviewer --for=condition=Ready --timeout 2m >/dev/null ||
  fail "agentworker/reviewer did not become Ready: $("$bin/sbxctl" describe agentworker/reviewer)"
"$bin/sbxctl" run reviewer --input '$ echo metrics' --timeout 2m >"$tmp/run.out" 2>&1 ||
  fail "the task did not succeed: $(cat "$tmp/run.out")"

swept() {
  curl -sf "$url" | awk '$1 == "sbx_sweeps_total" && $2 >= 1 { found = 1 } END { exit !found }'
}
wait_for 60 swept || fail "no completed sweep in $url within 60 s: $(curl -sf "$url")"

# A delivery without the signature headers: refused (400 missing_header) and counted.
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
  -d '{"type":"agent.session.action_required"}' "http://127.0.0.1:$webhook_port/webhooks/openai")
[[ "$code" == 400 ]] || fail "an unsigned webhook delivery got HTTP $code, not 400"
# The next LISTs fail (400 is not retried by the client): a failed sweep of workspace
# default/default. Cleared once counted, so the sweeps recover.
curl -sf -X POST "$DATABRICKS_HOST/_emulator/faults" \
  -d '{"endpoint":"databricks.list","status":400,"count":2}' >/dev/null ||
  fail "cannot inject a LIST fault into the emulator"
sweep_failed() {
  curl -sf "$url" | awk '$1 ~ /^sbx_sweep_errors_total[{]/ && $2 >= 1 { found = 1 }
    END { exit !found }'
}
wait_for 60 sweep_failed || fail "no failed sweep in $url within 60 s: $(curl -sf "$url")"
curl -sf -X DELETE "$DATABRICKS_HOST/_emulator/faults" >/dev/null ||
  fail "cannot clear the emulator's faults"

curl -sf "$url" >"$tmp/metrics.txt" || fail "cannot scrape $url"
if ! promtool check metrics <"$tmp/metrics.txt" >"$tmp/promtool.out" 2>&1 ||
  [[ -s "$tmp/promtool.out" ]]; then
  fail "promtool check metrics complained about $url:"$'\n'"$(cat "$tmp/promtool.out")"
fi

for counter in sbx_sweeps_total sbx_sweep_aimed_looks_total sbx_gc_deleted_total \
  sbx_workqueue_retries_total sbx_reconciles_total sbx_api_calls_total; do
  grep -qx "# TYPE $counter counter" "$tmp/metrics.txt" ||
    fail "no '# TYPE $counter counter' in $url:"$'\n'"$(cat "$tmp/metrics.txt")"
done
for old in sbx_sweeps sbx_gc_deleted sbx_workqueue_retries; do
  if grep -q "^${old}[ {]" "$tmp/metrics.txt"; then
    fail "$old is still exported under its old name"
  fi
done

# Every sbx_ metric deploy/monitoring/ queries is exported (has a TYPE line in the scrape; a
# histogram's _bucket/_sum/_count name its family, which must then be a histogram).
monitoring=("$root/deploy/monitoring/sbx-alerts.yaml" "$root/deploy/monitoring/sbx-grafana-dashboard.json")
mapfile -t queried < <(grep -oh 'sbx_[a-z_]*[a-z]' "${monitoring[@]}" | sort -u)
((${#queried[@]} >= 10)) || fail "found only ${#queried[@]} sbx_ metric names in ${monitoring[*]}"
missing=()
for name in "${queried[@]}"; do
  family=$(sed -E 's/_(bucket|sum|count)$//' <<<"$name")
  type=$(awk -v f="$family" '$1 == "#" && $2 == "TYPE" && $3 == f { print $4 }' "$tmp/metrics.txt")
  if [[ -z "$type" ]]; then
    missing+=("$name")
  elif [[ "$family" != "$name" && "$type" != histogram ]]; then
    missing+=("$name ($family is a $type, not a histogram)")
  fi
done
if ((${#missing[@]} > 0)); then
  fail "deploy/monitoring/ queries metrics sbxd does not export:"$'\n'"$(printf '  %s\n' "${missing[@]}")"$'\n'"scrape: $tmp/metrics.txt"
fi

ok=1
echo "metrics e2e: promtool check metrics passed on $(grep -c '^# TYPE' "$tmp/metrics.txt") families;" \
  "all ${#queried[@]} metrics of deploy/monitoring/ exported"
