#!/usr/bin/env bash
# Builds sbx with AddressSanitizer + UndefinedBehaviorSanitizer, runs every test (labels unit,
# integration, e2e, chaos), then the style checks (scripts/check-style.sh: clang-format and
# clang-tidy on this build's compile commands). The same command as CI.
#   scripts/test.sh                  # asan preset (Debug + sanitizers): what CI runs
#   SBX_PRESET=dev scripts/test.sh   # no sanitizers: a faster build while iterating
#   scripts/test.sh -L unit          # extra arguments go to ctest
#   SBX_STYLE=0 scripts/test.sh      # skip the style checks (CI never sets it)
# Tests run two at a time (CTEST_PARALLEL_LEVEL overrides); they only use 127.0.0.1 and port 0.
# The style checks run after the tests, whatever their outcome, so one run reports both; the
# script fails if either failed.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${SBX_PRESET:-asan}
export CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-2}

scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
tests=0
ctest --preset "$preset" --timeout 300 "$@" || tests=$?
style=0
if [[ "${SBX_STYLE:-1}" != 0 ]]; then
  SBX_PRESET="$preset" scripts/check-style.sh || style=$?
fi
if ((tests != 0)); then
  exit "$tests"
fi
exit "$style"
