#!/usr/bin/env bash
# Builds sbx with AddressSanitizer + UndefinedBehaviorSanitizer and runs every test (labels unit,
# integration, e2e, chaos). The same command as CI.
#   scripts/test.sh                  # asan preset (Debug + sanitizers): what CI runs
#   SBX_PRESET=dev scripts/test.sh   # no sanitizers: a faster build while iterating
#   scripts/test.sh -L unit          # extra arguments go to ctest
# Tests run two at a time (CTEST_PARALLEL_LEVEL overrides); they only use 127.0.0.1 and port 0.
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${SBX_PRESET:-asan}
export CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-2}

scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
ctest --preset "$preset" --timeout 300 "$@"
