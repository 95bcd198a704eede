#!/usr/bin/env bash
# Builds sbx with AddressSanitizer + UndefinedBehaviorSanitizer, runs every test (labels unit,
# integration, e2e, chaos) and the style checks (scripts/check-style.sh: clang-format and
# clang-tidy on this build's compile commands). The same command as CI.
#   scripts/test.sh                  # asan preset (Debug + sanitizers): what CI runs
#   SBX_PRESET=dev scripts/test.sh   # no sanitizers: a faster build while iterating
#   scripts/test.sh -L unit          # extra arguments go to ctest
#   SBX_STYLE=0 scripts/test.sh      # skip the style checks (CI never sets it)
# Tests run two at a time (CTEST_PARALLEL_LEVEL overrides); they only use 127.0.0.1 and port 0.
# The style checks run while the tests run, under `nice -n 19`: the tests spend most of their time
# waiting on real processes and deadlines, and clang-tidy (about 20 CPU-minutes over every file)
# only takes the CPU they leave, so one run reports both in less wall time than one after the
# other (SBX_STYLE_SERIAL=1 runs them after the tests instead). The script fails if either failed.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${SBX_PRESET:-asan}
export CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-2}

scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"

style_log=$(mktemp)
trap 'rm -f "$style_log"' EXIT
style_pid=""
run_style() {
  local start=$SECONDS rc=0
  SBX_PRESET="$preset" nice -n 19 scripts/check-style.sh >"$style_log" 2>&1 || rc=$?
  echo "check-style: finished in $((SECONDS - start)) s" >>"$style_log"
  return "$rc"
}
if [[ "${SBX_STYLE:-1}" != 0 && "${SBX_STYLE_SERIAL:-0}" == 0 ]]; then
  run_style &
  style_pid=$!
fi
tests=0
ctest --preset "$preset" --timeout 300 "$@" || tests=$?
style=0
if [[ -n "$style_pid" ]]; then
  wait "$style_pid" || style=$?
  cat "$style_log"
elif [[ "${SBX_STYLE:-1}" != 0 ]]; then
  run_style || style=$?
  cat "$style_log"
fi
if ((tests != 0)); then
  exit "$tests"
fi
exit "$style"
