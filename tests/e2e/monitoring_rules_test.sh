#!/usr/bin/env bash
# e2e (issue #16): the Prometheus alert rules shipped in deploy/monitoring/ are valid
# (`promtool check rules`), behave as their unit tests say (`promtool test rules`), and every
# alert has such a test: at least one evaluation where it fires and one where it does not.
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

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

command -v promtool >/dev/null ||
  fail "promtool not found: install Debian's prometheus package (scripts/install-deps.sh)"

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

echo "monitoring rules: ${#alerts[@]} alerts checked and unit-tested both ways"
