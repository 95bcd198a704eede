#!/usr/bin/env bash
# Installs the Debian 12 packages sbx builds and tests with, skipping those already present,
# then the real `codex exec-server` the real_executor tests run (npm @openai/codex, pinned, into
# a fixed directory outside /tmp: emulated sandboxes have a private /tmp). Idempotent; needs root
# (or sudo) only when something is missing.
#   SBX_CODEX_PREFIX   where codex goes (default /opt/sbx/codex-<version>); the binary is
#                      $SBX_CODEX_PREFIX/node_modules/@openai/codex-linux-x64/vendor/
#                      x86_64-unknown-linux-musl/bin/codex (never run through npx)
set -euo pipefail

codex_version=0.171.0
codex_prefix=${SBX_CODEX_PREFIX:-/opt/sbx/codex-$codex_version}
codex_bin=$codex_prefix/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex

packages=(
  build-essential cmake ninja-build ccache pkg-config git curl ca-certificates
  libcpprest-dev libssl-dev libboost-dev
  libyaml-cpp-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libsqlite3-dev sqlite3
  # PostgreSQL 15: libpq for PostgresStore (always built), the server for its conformance tests
  # (tests/support/postgres_server.h runs initdb/postgres from /usr/lib/postgresql/15/bin).
  libpq-dev postgresql
  libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  util-linux procps jq
  # GitSource: sbxd fetches with the git CLI (git is above), over ssh for sshKeyFrom.
  openssh-client
  clang-14 libclang-rt-14-dev
  # scripts/check-style.sh: clang-format and clang-tidy (run-clang-tidy comes with clang-tidy).
  clang-format clang-tidy
  # promtool, which lints sbxd's live /metrics (tests/e2e/metrics_promtool_e2e_test.sh). The
  # package also ships the Prometheus server and enables its service; where services are started
  # on install it listens on :9090, which the tests never use (they bind port 0).
  prometheus
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# npm installs the real codex below (tests labelled real_executor). Debian's package, unless an
# npm is already there (a NodeSource nodejs ships its own and conflicts with Debian's npm).
if ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  sudo_cmd=(sudo)
fi

if ((${#missing[@]} > 0)); then
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The real codex, pinned: skipped when the binary there already reports this version.
if [[ -x "$codex_bin" ]] && [[ "$("$codex_bin" --version 2>/dev/null)" == "codex-cli $codex_version" ]]; then
  exit 0
fi
echo "install-deps: installing @openai/codex@$codex_version into $codex_prefix" >&2
"${sudo_cmd[@]}" mkdir -p "$codex_prefix"
"${sudo_cmd[@]}" npm install --prefix "$codex_prefix" --no-audit --no-fund --no-save \
  "@openai/codex@$codex_version" >&2
got=$("$codex_bin" --version 2>/dev/null || true)
if [[ "$got" != "codex-cli $codex_version" ]]; then
  echo "install-deps: $codex_bin reports '$got', expected 'codex-cli $codex_version'" >&2
  exit 1
fi
