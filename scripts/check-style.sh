#!/usr/bin/env bash
# The style checks CI runs (STYLE.md rule 6; issue #11 item 5), from scripts/test.sh:
#   1. format: `clang-format --dry-run --Werror` (.clang-format: Google, 100 columns) over every
#      tracked .h and .cc file;
#   2. tidy: clang-tidy with the checks in .clang-tidy (braces on every control statement,
#      bugprone-*, performance-*, …) over the non-test translation units of api/, cli/,
#      controller/, emulator/ and httpserver/ and the headers of those folders they include,
#      using the compile commands of build/<preset> (configure that preset first: every preset
#      exports compile_commands.json). Runs SBX_STYLE_JOBS (default 2) clang-tidy processes at
#      a time.
# Prints every finding once (a header included by many files is reported once), a count per
# folder, and exits non-zero if there is any.
#
#   scripts/check-style.sh                 # both checks, compile commands of build/asan
#   SBX_PRESET=dev scripts/check-style.sh  # … of build/dev
#   scripts/check-style.sh --format        # only the format check (needs no build)
#   scripts/check-style.sh --tidy          # only clang-tidy
#   scripts/check-style.sh --tidy controller/store/sqlite_store.cc api/codec.cc   # some files
#
# To apply the format fixes: git ls-files '*.h' '*.cc' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
preset=${SBX_PRESET:-asan}
jobs=${SBX_STYLE_JOBS:-2}

run_format=1
run_tidy=1
case "${1:-}" in
  --format) run_tidy=0; shift ;;
  --tidy) run_format=0; shift ;;
esac
only=("$@")

for tool in clang-format clang-tidy; do
  if ! command -v "$tool" >/dev/null; then
    echo "check-style: $tool not found; run scripts/install-deps.sh" >&2
    exit 2
  fi
done

# Prints "<count> <folder>" per folder for lines "path" or "path:line:…".
count_by_folder() {
  sed -E 's|^([^:]*)/[^/:]*(:.*)?$|\1|' | sort | uniq -c | sed 's/^ */  /'
}

status=0
if ((run_format)); then
  start=$SECONDS
  mapfile -t files < <(git ls-files '*.h' '*.cc')
  # One line per file that is not formatted; the diagnostics themselves are long.
  unformatted=$(printf '%s\0' "${files[@]}" |
    xargs -0 -n 16 -P "$jobs" clang-format --dry-run --Werror 2>&1 |
    sed -n 's|^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*|\1|p' |
    sort -u || true)
  if [[ -n "$unformatted" ]]; then
    echo "check-style: $(wc -l <<<"$unformatted") of ${#files[@]} files are not clang-formatted:"
    sed 's/^/  /' <<<"$unformatted"
    echo "  per folder:"
    count_by_folder <<<"$unformatted"
    echo "  fix: git ls-files '*.h' '*.cc' | xargs clang-format -i"
    status=1
  else
    echo "check-style: format ok (${#files[@]} files, $((SECONDS - start)) s)"
  fi
fi

if ((run_tidy)); then
  start=$SECONDS
  db="build/$preset/compile_commands.json"
  if [[ ! -f "$db" ]]; then
    echo "check-style: $db missing; run: cmake --preset $preset" >&2
    exit 2
  fi
  if ((${#only[@]} > 0)); then
    units=("${only[@]}")
  else
    # The non-test translation units of the four source folders, as the build compiles them.
    mapfile -t units < <(jq -r '.[].file' "$db" | sed "s|^$root/||" |
      grep -E '^(api|cli|controller|emulator|httpserver)/.*\.cc$' | sort -u)
  fi
  out=$(mktemp)
  trap 'rm -f "$out"' EXIT
  # The header filter is given here rather than trusted to .clang-tidy alone: compile commands
  # name files by absolute path. Files that include generated headers need the build to have
  # generated them (scripts/test.sh builds before it checks).
  printf '%s\0' "${units[@]}" |
    xargs -0 -n 1 -P "$jobs" clang-tidy -p "build/$preset" --quiet \
      --header-filter="^$root/(api|cli|controller|emulator|httpserver)/" >"$out" 2>/dev/null || true
  # "path:line:col: warning: text [check]" once each, with the path relative to the repository.
  findings=$(grep -E '^/.*:[0-9]+:[0-9]+: (warning|error): ' "$out" | sed "s|^$root/||" |
    grep -E '^(api|cli|controller|emulator|httpserver)/' | sort -u || true)
  if [[ -n "$findings" ]]; then
    echo "$findings"
    echo "check-style: $(wc -l <<<"$findings") clang-tidy findings in ${#units[@]} files" \
      "($((SECONDS - start)) s); per folder:"
    count_by_folder <<<"$findings"
    status=1
  else
    echo "check-style: clang-tidy ok (${#units[@]} files, $((SECONDS - start)) s)"
  fi
fi
exit "$status"
