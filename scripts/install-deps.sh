#!/usr/bin/env bash
# Installs the Debian 12 packages sbx builds and tests with, skipping those already present.
# Idempotent; needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git curl ca-certificates
  libcpprest-dev libssl-dev libboost-dev
  libyaml-cpp-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libsqlite3-dev sqlite3
  libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  util-linux procps jq
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

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
