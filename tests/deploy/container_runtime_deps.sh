#!/usr/bin/env bash
# The container image can start its binaries: every shared library that `ldd` resolves for
# them comes from a Debian package the runtime stage of deploy/container/Containerfile installs,
# or from that list's dependency closure, or from debian:12-slim itself (the Priority: required
# packages). No container runtime is available here (issue #26 item 6), so each library is
# resolved to its package with `dpkg -S`, and the closure with `apt-cache depends --recurse`.
# Sanitizer runtimes (an ASan build's libasan, libubsan) are skipped: the image builds the
# release preset, which links none.
#   tests/deploy/container_runtime_deps.sh CONTAINERFILE BINARY...
set -euo pipefail
containerfile=$1
shift

fail() { echo "FAIL: $*" >&2; exit 1; }
command -v dpkg >/dev/null && command -v apt-cache >/dev/null || fail "needs dpkg and apt-cache"

# The runtime stage: the packages of the `apt-get install` after the last FROM.
runtime=$(awk '/^FROM /{stage=""} {stage = stage $0 "\n"} END{printf "%s", stage}' "$containerfile" |
  sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | grep -o 'apt-get install[^&]*' | head -1 |
  tr ' ' '\n' | grep -Ev '^(apt-get|install|-.*|)$' || true)
[[ -n "$runtime" ]] || fail "no apt-get install in the runtime stage of $containerfile"

closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances $runtime 2>/dev/null | grep -Ev '^[[:space:]<]' | sort -u)
base=$(dpkg-query -W -f='${Package}\t${Priority}\t${Essential}\n' |
  awk -F'\t' '$2 == "required" || $3 == "yes" { print $1 }' | sort -u)
provided=$(printf '%s\n%s\n' "$closure" "$base" | sort -u)

# Every library each binary links ("binary lib" lines), sanitizer runtimes left out.
needs=""
for binary in "$@"; do
  [[ -x "$binary" ]] || fail "$binary is not an executable"
  needs+=$(ldd "$binary" | awk -v b="$(basename "$binary")" '$2 == "=>" && $3 ~ /^\// { print b, $3 }' |
    grep -Ev '/lib(asan|ubsan|lsan|tsan)\.' || true)$'\n'
done
# One dpkg -S for every path a library may be known by (it, its target, with and without the
# /usr prefix of Debian 12's merged /usr): each dpkg -S reads the whole package database, so one
# call per library took most of a minute.
declare -A candidates owner
while read -r _ lib; do
  [[ -n "$lib" && -z "${candidates[$lib]:-}" ]] || continue
  candidates[$lib]="$lib $(readlink -f "$lib") /usr$lib ${lib#/usr}"
done <<<"$needs"
while IFS= read -r line; do
  pkg=${line%%: *}
  owner[${line#*: }]=${pkg%%:*}
done < <(printf '%s\n' ${candidates[@]} | sort -u | xargs dpkg -S 2>/dev/null || true)

missing=0
while read -r binary lib; do
  [[ -n "$lib" ]] || continue
  pkg=""
  for path in ${candidates[$lib]}; do
    pkg=${owner[$path]:-} && [[ -n "$pkg" ]] && break
  done
  [[ -n "$pkg" ]] || fail "$binary: $lib belongs to no Debian package"
  if ! grep -qx "$pkg" <<<"$provided"; then
    echo "MISSING: $binary needs $lib from package $pkg, which the runtime stage of $containerfile does not install" >&2
    missing=1
  fi
done <<<"$needs"
((missing == 0)) || exit 1
echo "ok: every library of $(printf '%s ' "${@##*/}")comes from the runtime stage's packages ($(wc -w <<<"$runtime") listed, $(wc -l <<<"$closure") with their dependencies)"
