#!/usr/bin/env bash
# e2e (issue #16): what deploy/monitoring/ ships is sound.
#  * The Prometheus alert rules are valid (`promtool check rules`), behave as their unit tests
#    say (`promtool test rules`), and every alert has such a test: at least one evaluation where
#    it fires and one where it does not.
#  * The Grafana dashboard is valid JSON of schemaVersion 39 whose every panel and query uses
#    the ${DS_PROMETHEUS} datasource variable, with unique panel ids and panels that neither
#    overlap nor leave the 24-column grid, and every query is PromQL Prometheus accepts (checked
#    by promtool as recording rules, Grafana's $variables replaced).
#
#   tests/e2e/monitoring_rules_test.sh
#
# That the metrics the rules (and the Grafana dashboard) query are really exported is checked
# against a live sbxd by tests/e2e/metrics_promtool_e2e_test.sh. promtool comes from Debian's
# `prometheus` package (scripts/install-deps.sh).
set -euo pipefail
dir=$(cd "$(dirname "$0")/../../deploy/monitoring" && pwd)
rules=$dir/sbx-alerts.yaml
tests=$dir/sbx-alerts.test.yaml
dashboard=$dir/sbx-grafana-dashboard.json
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sbx-monitoring.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

command -v promtool >/dev/null ||
  fail "promtool not found: install Debian's prometheus package (scripts/install-deps.sh)"
command -v jq >/dev/null || fail "jq not found (scripts/install-deps.sh)"

promtool check rules "$rules" || fail "promtool check rules rejected $rules"

# Every alert is tested both ways. The test file's convention (its header says so): a case where
# nothing fires is one line `{eval_time: …, alertname: NAME, exp_alerts: []}`, a firing case is
# `alertname: NAME` followed by a line `exp_alerts:` and its list.
mapfile -t alerts < <(sed -n 's/^ *- alert: *\([A-Za-z0-9_]*\) *$/\1/p' "$rules")
((${#alerts[@]} > 0)) || fail "no '- alert:' lines found in $rules"
missing=()
for alert in "${alerts[@]}"; do
  grep -Eq "alertname: $alert, exp_alerts: \[\]\}" "$tests" ||
    missing+=("$alert (no case where it does not fire)")
  grep -EA1 "^ *alertname: $alert *$" "$tests" | grep -Eq '^ *exp_alerts: *$' ||
    missing+=("$alert (no case where it fires)")
done
if ((${#missing[@]} > 0)); then
  fail "untested alerts in $tests:"$'\n'"$(printf '  %s\n' "${missing[@]}")"
fi

# promtool resolves rule_files relative to the test file.
promtool test rules "$tests" || fail "promtool test rules failed for $tests"

# ---- the dashboard ----
jq -e . "$dashboard" >/dev/null || fail "$dashboard is not valid JSON"
jq -e '.schemaVersion == 39' "$dashboard" >/dev/null || fail "$dashboard: schemaVersion is not 39"
jq -e '[.templating.list[] | select(.name == "DS_PROMETHEUS" and .type == "datasource"
        and .query == "prometheus")] | length == 1' "$dashboard" >/dev/null ||
  fail "$dashboard: no datasource variable DS_PROMETHEUS of type prometheus"
# Every panel but rows, every query and every query variable reads ${DS_PROMETHEUS}.
bad=$(jq -r '(.panels[] | select(.type != "row")
               | select(.datasource.uid != "${DS_PROMETHEUS}") | "panel \(.title)"),
             (.panels[] | .title as $t | .targets[]?
               | select(.datasource.uid != "${DS_PROMETHEUS}") | "query \(.refId) of \($t)"),
             (.templating.list[] | select(.type == "query")
               | select(.datasource.uid != "${DS_PROMETHEUS}") | "variable \(.name)")' \
  "$dashboard")
[[ -z "$bad" ]] || fail "$dashboard: not on \${DS_PROMETHEUS}:"$'\n'"$bad"
dups=$(jq -r '[.panels[].id] | group_by(.) | map(select(length > 1)[0]) | .[]' "$dashboard")
[[ -z "$dups" ]] || fail "$dashboard: duplicate panel ids: $dups"
# Rectangles on the grid: inside 24 columns, no two overlapping.
jq -r '.panels[] | "\(.id) \(.gridPos.x) \(.gridPos.y) \(.gridPos.w) \(.gridPos.h)"' \
  "$dashboard" >"$tmp/grid"
overlaps=$(awk '{ id[NR] = $1; x[NR] = $2; y[NR] = $3; w[NR] = $4; h[NR] = $5
  if ($2 < 0 || $4 < 1 || $2 + $4 > 24 || $5 < 1) print "panel " $1 " leaves the grid" }
  END { for (i = 1; i <= NR; i++) for (j = i + 1; j <= NR; j++)
          if (x[i] < x[j] + w[j] && x[j] < x[i] + w[i] && y[i] < y[j] + h[j] && y[j] < y[i] + h[i])
            print "panels " id[i] " and " id[j] " overlap" }' "$tmp/grid")
[[ -z "$overlaps" ]] || fail "$dashboard:"$'\n'"$overlaps"
# Every query as a recording rule: promtool parses the PromQL. Grafana's variables get values
# of the right shape first ($__rate_interval a duration, $job and $instance a regex).
jq -r '.panels[].targets[]?.expr' "$dashboard" >"$tmp/exprs"
queries=$(wc -l <"$tmp/exprs")
((queries > 0)) || fail "$dashboard has no queries"
{
  echo 'groups:'
  echo '  - name: sbx-dashboard-queries'
  echo '    rules:'
  n=0
  while IFS= read -r expr; do
    expr=${expr//\$__rate_interval/5m}
    expr=${expr//\$job/.*}
    expr=${expr//\$instance/.*}
    n=$((n + 1))
    printf '      - record: dashboard_query_%d\n        expr: %s\n' "$n" \
      "$(jq -Rn --arg e "$expr" '$e')"
  done <"$tmp/exprs"
} >"$tmp/dashboard-queries.yaml"
promtool check rules "$tmp/dashboard-queries.yaml" >"$tmp/check.out" 2>&1 ||
  fail "a dashboard query is not valid PromQL:"$'\n'"$(cat "$tmp/check.out")"

echo "monitoring: ${#alerts[@]} alerts checked and unit-tested both ways;" \
  "dashboard: $queries queries parse, $(wc -l <"$tmp/grid") panels laid out"
