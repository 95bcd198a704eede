#!/usr/bin/env bash
# e2e (issue #12 item 14): every line scripts/quickstart.sh prints under "Try:" works when pasted
# into a new shell that has nothing of the quickstart's environment, and the printed stop command
# stops it. Runs the quickstart on already built binaries (SBX_QUICKSTART_BIN) into a temporary
# state directory (SBX_QUICKSTART_STATE), so it never touches a quickstart of the developer's.
#
#   tests/e2e/quickstart_e2e_test.sh BIN_DIR     # BIN_DIR holds sbxctl, sbxd and sbx-emulator
#
# Each printed line runs in `env -i HOME=… bash -c '<first line>; <line>'`: the first line must
# be the `source` of the env file, which must be mode 0600. Only the sanitizer options of the
# test environment (asan preset) are passed through. A watch (`-w`) must still be running after
# 5 s; every other line must exit 0 within 60 s.
set -euo pipefail
bin=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sbx-quickstart-e2e.XXXXXX")
export SBX_QUICKSTART_STATE="$tmp/state" SBX_QUICKSTART_BIN="$bin"
failures=0

cleanup() {
  "$root/scripts/quickstart.sh" stop >/dev/null 2>&1 || true
  if ((failures == 0)); then
    rm -rf "$tmp"
  else
    echo "test directory kept for inspection: $tmp" >&2
  fi
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# A new shell: HOME, and the sanitizer options when the test runs under the asan preset.
fresh_shell=(env -i "HOME=$HOME")
for v in ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS; do
  if [[ -n "${!v:-}" ]]; then
    fresh_shell+=("$v=${!v}")
  fi
done

if ! "$root/scripts/quickstart.sh" >"$tmp/quickstart.out" 2>&1; then
  cat "$tmp/quickstart.out" >&2
  fail "scripts/quickstart.sh failed"
  exit 1
fi

# The lines between "… Try:" and "Stop everything with: …", without their indentation.
mapfile -t lines < <(sed -n '/ Try:$/,/^Stop everything with: /p' "$tmp/quickstart.out" |
  sed '1d;$d' | sed 's/^  //')
stop_line=$(sed -n 's/^Stop everything with: //p' "$tmp/quickstart.out")
if ((${#lines[@]} < 2)) || [[ -z "$stop_line" ]]; then
  cat "$tmp/quickstart.out" >&2
  fail "no Try: lines or stop command in the quickstart's output"
  exit 1
fi

first=${lines[0]}
read -r verb env_file _ <<<"$first"
if [[ "$verb" != source ]]; then
  fail "the first Try: line must source the env file, got: $first"
elif [[ "$(stat -c %a "$env_file")" != 600 ]]; then
  fail "$env_file is mode $(stat -c %a "$env_file"), want 600"
fi

for line in "${lines[@]:1}"; do
  limit=60
  want=0
  if [[ "$line" =~ [[:space:]]-w([[:space:]]|$) ]]; then
    limit=5
    want=124  # still watching when the timeout ends it
  fi
  set +e
  out=$(cd "$tmp" && timeout "$limit" "${fresh_shell[@]}" bash -c "$first
$line" 2>&1)
  rc=$?
  set -e
  if ((rc != want)); then
    fail "exit $rc (want $want): $line"$'\n'"$out"
    continue
  fi
  case "$line" in
    "sbxctl exec "*)
      [[ "$out" == *workspace* ]] || fail "exec did not list the home directory: $line"$'\n'"$out"
      ;;
    "sbxctl describe "*)
      [[ "$out" == *Conditions* ]] || fail "describe printed no conditions: $line"$'\n'"$out"
      ;;
    "sbxctl get sandboxes -w"*)
      [[ "$out" == *dev* ]] || fail "the watch showed no sandbox dev: $line"$'\n'"$out"
      ;;
    "sbxctl run --pool "*)
      [[ "$out" == *Succeeded* && "$out" == *"hello from a pool"* ]] ||
        fail "the pool did not run the task: $line"$'\n'"$out"
      ;;
  esac
  echo "ok: $line"
done

# The stop command, pasted in a new shell too, stops both processes.
pids=$(cat "$tmp/state/sbxd.pid" "$tmp/state/emulator.pid")
set +e
out=$(cd "$tmp" && timeout 60 "${fresh_shell[@]}" bash -c "$stop_line" 2>&1)
rc=$?
set -e
((rc == 0)) || fail "exit $rc: $stop_line"$'\n'"$out"
for pid in $pids; do
  if kill -0 "$pid" 2>/dev/null; then
    fail "process $pid still runs after: $stop_line"
  fi
done
echo "ok: $stop_line"

((failures == 0))
