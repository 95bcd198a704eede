#!/usr/bin/env bash
# Builds sbx and runs every test (labels unit, integration, e2e). Same command as CI.
#   scripts/test.sh            # dev preset (Debug)
#   SBX_PRESET=asan scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${SBX_PRESET:-dev}

scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
ctest --preset "$preset" --timeout 300 "$@"
