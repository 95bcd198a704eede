#!/usr/bin/env bash
# Fuzz smoke: configures a clang build dir (build/fuzz, or $SBX_FUZZ_BUILD_DIR) with
# -DSBX_BUILD_FUZZERS=ON, builds the libFuzzer targets and runs each for
# $SBX_FUZZ_SECONDS (default 20) seconds from its seed corpus (tests/fuzz/corpus/<target>/).
# Fails on a crash, a leak, a timeout (> 25 s on one input), an out-of-memory (> 2 GiB) or a
# wedged run. New inputs go
# to a scratch corpus dir, not into the repository; crash reproducers go to the build dir.
#   tests/fuzz/run_smoke.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
build=${SBX_FUZZ_BUILD_DIR:-$root/build/fuzz}
seconds=${SBX_FUZZ_SECONDS:-20}
targets=(manifest_codec_fuzzer sse_parser_fuzzer)

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER="${SBX_FUZZ_CXX:-clang++-14}" "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address -fno-omit-frame-pointer" \
  -DSBX_BUILD_TESTS=OFF -DSBX_BUILD_BENCH=OFF -DSBX_BUILD_FUZZERS=ON >/dev/null
cmake --build "$build" --target "${targets[@]}" -j2

status=0
for t in "${targets[@]}"; do
  corpus=$(mktemp -d "/tmp/sbx-fuzz-$t.XXXXXX")
  artifacts="$build/tests/fuzz/artifacts/$t/"
  mkdir -p "$artifacts"
  echo "== $t: ${seconds}s"
  # A fresh corpus dir first (written to), then the seeds (read).
  # The outer timeout guards against a wedged crash report (a libFuzzer timeout report once hung
  # in llvm-symbolizer on a loaded machine): a wedged run fails too.
  if ! ASAN_OPTIONS=detect_leaks=1 timeout --signal=KILL $((seconds + 180)) "$build/tests/fuzz/$t" "$corpus" "$root/tests/fuzz/corpus/${t%_fuzzer}" \
    -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 -artifact_prefix="$artifacts" \
    -print_final_stats=1 >"$build/tests/fuzz/$t.log" 2>&1; then
    echo "FAIL: $t (log: $build/tests/fuzz/$t.log, reproducer under $artifacts)" >&2
    tail -n 40 "$build/tests/fuzz/$t.log" >&2
    status=1
  else
    grep -E '^stat::number_of_executed_units|^stat::new_units_added' "$build/tests/fuzz/$t.log" || true
  fi
  rm -rf "$corpus"
done
exit $status
