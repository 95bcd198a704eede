#!/usr/bin/env bash
# One throwaway PostgreSQL 15 for a whole ctest run (the CTest fixture sbx_postgres; see
# tests/support/CMakeLists.txt). Tests that need PostgreSQL read its URL from STATE_FILE
# ($SBX_TEST_POSTGRES_STATE, tests/support/postgres_server.h); without the fixture each test
# binary starts a server of its own.
#   postgres-fixture.sh start STATE_FILE   # initdb in a temp dir, start on a free loopback port
#   postgres-fixture.sh stop STATE_FILE    # fast shutdown, remove the temp dir and STATE_FILE
#   postgres-fixture.sh restart STATE_FILE # crash it (immediate shutdown: every connection cut,
#                                          # recovery from the WAL at start) and start it again
#                                          # on the same port (the chaos tests)
# STATE_FILE holds two lines: the superuser URL (postgres://postgres@127.0.0.1:PORT) and the
# temp dir. As root, initdb and postgres run as Debian's postgres user. Binaries: $SBX_PG_BIN,
# default /usr/lib/postgresql/15/bin.
set -euo pipefail

action=${1:?usage: postgres-fixture.sh start|stop|restart STATE_FILE}
state=${2:?usage: postgres-fixture.sh start|stop|restart STATE_FILE}
bin=${SBX_PG_BIN:-/usr/lib/postgresql/15/bin}

as_postgres=()
if [[ $(id -u) -eq 0 ]]; then
  as_postgres=(runuser -u postgres --)
fi

# start_server PORT — starts the server of $root on PORT, waiting until it accepts connections.
# Built for speed: no fsync (a crash of the server process loses nothing, one of the machine
# would), and commits acknowledged before their WAL is written unless SBX_PG_SYNCHRONOUS_COMMIT=on
# (the chaos tests: a crash then loses no acknowledged commit, as in production).
start_server() {
  "${as_postgres[@]}" "$bin/pg_ctl" -D "$root/data" -l "$root/postgres.log" -w -t 60 \
    -o "-k $root/data -p $1 -c listen_addresses=127.0.0.1 -c fsync=off \
        -c synchronous_commit=${SBX_PG_SYNCHRONOUS_COMMIT:-off} -c full_page_writes=off \
        -c max_connections=300" \
    start </dev/null >"$root/pg_ctl.log" 2>&1
}

stop() {
  [[ -f "$state" ]] || return 0
  local root
  root=$(sed -n 2p "$state")
  if [[ -n "$root" && -d "$root/data" ]]; then
    "${as_postgres[@]}" "$bin/pg_ctl" -D "$root/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  if [[ -n "$root" && "$root" == */sbx-pg-fixture.* ]]; then
    rm -rf "$root"
  fi
  rm -f "$state"
}

case "$action" in
  stop)
    stop
    ;;
  restart)
    root=$(sed -n 2p "$state")
    port=$(sed -n 1p "$state" | sed 's/.*://')
    "${as_postgres[@]}" "$bin/pg_ctl" -D "$root/data" -m immediate -w stop >/dev/null
    start_server "$port" || {
      cat "$root/pg_ctl.log" "$root/postgres.log" >&2
      exit 1
    }
    ;;
  start)
    stop  # a state file left by an interrupted run
    root=$(mktemp -d "${TMPDIR:-/tmp}/sbx-pg-fixture.XXXXXX")
    chmod 755 "$root"
    mkdir -m 700 "$root/data"
    if [[ $(id -u) -eq 0 ]]; then
      chown postgres: "$root/data"
    fi
    if ! "${as_postgres[@]}" "$bin/initdb" -D "$root/data" -U postgres --auth=trust --no-sync \
      --no-locale -E UTF8 --no-instructions >"$root/initdb.log" 2>&1; then
      cat "$root/initdb.log" >&2
      rm -rf "$root"
      exit 1
    fi
    touch "$root/postgres.log"
    if [[ $(id -u) -eq 0 ]]; then
      chown postgres: "$root/postgres.log"
    fi
    for _ in 1 2 3 4 5; do
      port=$((20000 + RANDOM % 30000))
      if start_server "$port"; then
        printf 'postgres://postgres@127.0.0.1:%s\n%s\n' "$port" "$root" >"$state"
        exit 0
      fi
    done
    cat "$root/pg_ctl.log" "$root/postgres.log" >&2
    rm -rf "$root"
    exit 1
    ;;
  *)
    echo "usage: postgres-fixture.sh start|stop|restart STATE_FILE" >&2
    exit 2
    ;;
esac
