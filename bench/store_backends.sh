#!/usr/bin/env bash
# PostgreSQL against SQLite in one run on one machine (issue #17's benchmark):
#   1. bench/store_backend_bench on each backend: apply throughput (1,000 creates in one Apply,
#      the same re-applied unchanged, 1,000 single-object Applies), status writes/s, and the
#      latency from a status write to a watcher seeing it (through another store instance — the
#      sbxctl → sbxd path — and through the same one), p50/p95/p99;
#   2. bench/converge.sh at N AgentWorkers (N sandboxes + N workers) with sbxd and sbxctl on each
#      backend (SBX_BENCH_DB), against the emulator with its usual latency and rate limit;
#   3. the PostgreSQL connections one sbxd opens (pg_stat_activity), without and with --listen.
# Then one table: both backends, the ratio PostgreSQL ÷ SQLite for every metric, and the load
# average at the start and the end. PostgreSQL is a throwaway server of its own (initdb in a temp
# dir, a free loopback port, the server's default durability: fsync and synchronous_commit on),
# stopped and removed on exit. The micro benchmark also runs on PostgreSQL with
# synchronous_commit=off (SQLite's synchronous=NORMAL in WAL mode likewise does not wait for
# the disk at commit) to show what the commit flush costs.
#   bench/store_backends.sh 1000          # N = 1000 (default); about 10 minutes
#   SBX_BENCH_BIN=build/bench-rel/cli bench/store_backends.sh 20
# Env: SBX_BENCH_BIN (binaries, else build/bench-rel is built), SBX_PG_BIN (default
# /usr/lib/postgresql/15/bin), SBX_BENCH_SAMPLES (watch samples, default 200), SBX_BENCH_ROUNDS
# (batch rounds, default 3), SBX_BENCH_CONVERGE=0 (micro benchmark and connections only),
# SBX_BENCH_CONVERGE_BACKENDS (default "sqlite postgres postgres_async").
# Prints JSON lines, then the Markdown table; everything also goes to bench/out/.
source "$(dirname "$0")/lib.sh"

n=${1:-1000}
pg_bin=${SBX_PG_BIN:-/usr/lib/postgresql/15/bin}
samples=${SBX_BENCH_SAMPLES:-200}
rounds=${SBX_BENCH_ROUNDS:-3}
converge=${SBX_BENCH_CONVERGE:-1}
converge_backends=${SBX_BENCH_CONVERGE_BACKENDS:-sqlite postgres postgres_async}
micro_bin="$bench_bin/../bench/store_backend_bench"

if [[ -z "${SBX_BENCH_BIN:-}" ]]; then
  bench_build
  cmake --build "$bench_root/build/bench-rel" --target store_backend_bench -j2 >/dev/null
fi
export SBX_BENCH_BIN="$bench_bin"

mkdir -p "$bench_root/bench/out"
out="$bench_root/bench/out/store-backends-$(date -u +%Y%m%dT%H%M%SZ).jsonl"
pg_root=""
pg_port=""
as_postgres=()
if [[ $(id -u) -eq 0 ]]; then
  as_postgres=(runuser -u postgres --)
fi

pg_stop() {
  if [[ -n "$pg_root" && -d "$pg_root/data" ]]; then
    "${as_postgres[@]}" "$pg_bin/pg_ctl" -D "$pg_root/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  if [[ -n "$pg_root" && "$pg_root" == */sbx-bench-pg.* ]]; then
    rm -rf "$pg_root"
  fi
  pg_root=""
}
cleanup() {
  bench_cleanup
  pg_stop
}
trap cleanup EXIT

pg_start() {
  pg_root=$(mktemp -d /tmp/sbx-bench-pg.XXXXXX)
  chmod 755 "$pg_root"
  mkdir -m 700 "$pg_root/data"
  touch "$pg_root/postgres.log"
  if [[ $(id -u) -eq 0 ]]; then
    chown postgres: "$pg_root/data" "$pg_root/postgres.log"
  fi
  "${as_postgres[@]}" "$pg_bin/initdb" -D "$pg_root/data" -U postgres --auth=trust --no-locale \
    -E UTF8 --no-instructions >"$pg_root/initdb.log" 2>&1 || {
    cat "$pg_root/initdb.log" >&2
    return 1
  }
  local try
  for try in 1 2 3 4 5; do
    pg_port=$((20000 + RANDOM % 30000))
    if "${as_postgres[@]}" "$pg_bin/pg_ctl" -D "$pg_root/data" -l "$pg_root/postgres.log" -w -t 60 \
      -o "-k $pg_root/data -p $pg_port -c listen_addresses=127.0.0.1" start \
      </dev/null >"$pg_root/pg_ctl.log" 2>&1; then
      return 0
    fi
    echo "postgres did not start on port $pg_port (try $try)" >&2
  done
  cat "$pg_root/pg_ctl.log" "$pg_root/postgres.log" >&2
  return 1
}

pg_url() { echo "postgres://postgres@127.0.0.1:$pg_port/$1"; }
psql_q() { "$pg_bin/psql" -X -q -A -t -v ON_ERROR_STOP=1 "$(pg_url postgres)" -c "$1"; }
new_db() { psql_q "CREATE DATABASE $1" >/dev/null && pg_url "$1"; }

# pg_cpu — CPU seconds of the whole PostgreSQL server so far: the postmaster, its reaped
# children (cutime + cstime) and its live children.
pg_cpu() {
  local pm tck
  pm=$(head -n1 "$pg_root/data/postmaster.pid")
  tck=$(getconf CLK_TCK)
  {
    awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pm/stat"
    for child in $(pgrep -P "$pm"); do
      awk '{ print $14 + $15 }' "/proc/$child/stat" 2>/dev/null || true
    done
  } | awk -v tck="$tck" '{ s += $1 } END { printf "%.2f\n", s / tck }'
}

# connections DB — client connections to DB now.
connections() {
  psql_q "SELECT count(*) FROM pg_stat_activity WHERE datname = '$1' AND backend_type = 'client backend'"
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
{
  machine_line
  echo "{\"phase\":\"start\",\"loadavg\":\"$load_start\",\"commit\":\"$(git -C "$bench_root" rev-parse --short HEAD 2>/dev/null || echo unknown)\"}"
} | tee -a "$out"

pg_start
echo "{\"phase\":\"postgres\",\"version\":\"$(psql_q 'SHOW server_version')\",\"fsync\":\"$(psql_q 'SHOW fsync')\",\"synchronous_commit\":\"$(psql_q 'SHOW synchronous_commit')\"}" | tee -a "$out"

# 1. The store itself, each backend in turn, the same program.
micro_tmp=$(mktemp -d /tmp/sbx-bench-micro.XXXXXX)
micro() {
  "$micro_bin" --label "$1" --db "$2" --samples "$samples" --rounds "$rounds" | tee -a "$out"
}
micro sqlite "$micro_tmp/micro.db"
micro postgres "$(new_db micro)"
micro postgres_async "$(new_db micro_async)?options=-c%20synchronous_commit%3Doff"
rm -rf "$micro_tmp"

# 2. Convergence at N, each backend (converge.sh starts and stops its own emulator and sbxd).
# postgres_async: the same with synchronous_commit=off for sbx's sessions (one flag changed).
if ((converge)); then
  for backend in $converge_backends; do
    db=""
    case "$backend" in
      postgres) db=$(new_db "converge_$n") ;;
      postgres_async) db="$(new_db "converge_async_$n")?options=-c%20synchronous_commit%3Doff" ;;
    esac
    cpu_before=$(pg_cpu)
    syncs_before=$(psql_q "SELECT wal_sync FROM pg_stat_wal")
    line=$(SBX_BENCH_DB="$db" SBX_BENCH_IDLE=0 SBX_BENCH_IDEAL=0 "$bench_root/bench/converge.sh" "$n" |
      grep '"flow":"sbxd"' || true)
    cpu_after=$(pg_cpu)
    [[ -n "$line" ]] || line="{\"n\":$n,\"error\":\"converge.sh printed no result\"}"
    # WAL flushes to disk (each synchronous commit of a write waits for one) and transactions
    # (reads included: every statement outside BEGIN is one), from the server's statistics.
    syncs=$(($(psql_q "SELECT wal_sync FROM pg_stat_wal") - syncs_before))
    xacts=0
    if [[ -n "$db" ]]; then
      xacts=$(psql_q "SELECT xact_commit FROM pg_stat_database WHERE datname = '$(sed 's|.*/||; s|?.*||' <<<"$db")'")
    fi
    echo "{\"phase\":\"converge\",\"backend\":\"$backend\",\"postgres_cpu_seconds\":$(awk -v a="$cpu_before" -v b="$cpu_after" 'BEGIN { printf "%.2f", b - a }'),\"postgres_wal_syncs\":$syncs,\"postgres_transactions\":$xacts,\"result\":$line}" |
      tee -a "$out"
  done
fi

# 3. The connections of one sbxd replica, without and with the API server (--listen), sampled
# for 5 s after it is up and has applied one object (the engine's watch connection opens on its
# first wait).
bench_tmp=$(mktemp -d /tmp/sbx-bench-conns.XXXXXX)
bench_start_emulator --max-sandboxes 0
for listen in no yes; do
  export SBX_BENCH_DB
  SBX_BENCH_DB=$(new_db "conns_$listen")
  export SBX_DB="$SBX_BENCH_DB"
  flags=()
  if [[ "$listen" == yes ]]; then
    install -m 600 /dev/null "$bench_tmp/tokens"
    flags=(--listen 127.0.0.1:0 --tokens-file "$bench_tmp/tokens")
  fi
  bench_start_sbxd "${flags[@]}"
  printf 'apiVersion: sbx.dev/v1alpha1\nkind: Workspace\nmetadata:\n  name: default\nspec:\n  databricks:\n    host: %s\n' \
    "$emu_url" >"$bench_tmp/workspace.yaml"
  sbxctl apply -f "$bench_tmp/workspace.yaml" >/dev/null
  max=0
  end=$((SECONDS + 5))
  while ((SECONDS < end)); do
    c=$(connections "conns_$listen")
    ((c > max)) && max=$c
    sleep 0.2
  done
  echo "{\"phase\":\"connections\",\"listen\":\"$listen\",\"max_connections\":$max}" | tee -a "$out"
  kill -TERM "$sbxd_pid"
  wait "$sbxd_pid" || true
  sbxd_pid=""
done
bench_cleanup
unset SBX_BENCH_DB

load_end=$(cut -d' ' -f1-3 /proc/loadavg)
echo "{\"phase\":\"end\",\"loadavg\":\"$load_end\"}" | tee -a "$out"

# The table. field NAME LINE — a number field of a JSON line (the first match).
field() { grep -o "\"$1\":[0-9.]*" <<<"$2" | head -n1 | cut -d: -f2; }
micro_line() { grep "\"backend\":\"$1\"" "$out" | head -n1; }
sq=$(micro_line sqlite)
pg=$(micro_line postgres)
pa=$(micro_line postgres_async)
conv_sq=$(grep '"phase":"converge","backend":"sqlite"' "$out" || true)
conv_pg=$(grep '"phase":"converge","backend":"postgres"' "$out" || true)
conv_pa=$(grep '"phase":"converge","backend":"postgres_async"' "$out" || true)
row() {  # LABEL SQLITE POSTGRES [POSTGRES_ASYNC]
  awk -v l="$1" -v s="$2" -v p="$3" -v a="${4:-–}" 'BEGIN {
    r = (s + 0 > 0 && p != "") ? sprintf("%.2f", p / s) : "–"
    printf "| %s | %s | %s | **%s** | %s |\n", l, s, p, r, a }'
}
echo
echo "Results: $out"
echo
echo "Load average: start $load_start, end $load_end. PostgreSQL $(grep -o '"version":"[^"]*"' "$out" | cut -d'"' -f4), fsync on, synchronous_commit on (last column: off)."
echo
echo "| metric | SQLite | PostgreSQL | PG ÷ SQLite | PG, synchronous_commit=off |"
echo "|---|---|---|---|---|"
for m in apply_batch_objects_per_s reapply_unchanged_objects_per_s apply_single_objects_per_s \
  status_writes_per_s write_p50_ms watch_other_p50_ms watch_other_p95_ms watch_other_p99_ms \
  watch_same_p50_ms watch_same_p95_ms watch_same_p99_ms; do
  row "$m" "$(field "$m" "$sq")" "$(field "$m" "$pg")" "$(field "$m" "$pa")"
done
if [[ -n "$conv_sq" && -n "$conv_pg" ]]; then
  for m in seconds_to_all_ready sbxd_cpu_seconds sbxd_peak_rss_kib databricks_calls; do
    row "converge N=$n: $m" "$(field "$m" "$conv_sq")" "$(field "$m" "$conv_pg")" "$(field "$m" "$conv_pa")"
  done
  for m in postgres_cpu_seconds postgres_wal_syncs postgres_transactions; do
    row "converge N=$n: $m" "–" "$(field "$m" "$conv_pg")" "$(field "$m" "$conv_pa")"
  done
fi
for l in no yes; do
  echo "| PostgreSQL connections of one sbxd (--listen: $l) | – | $(field max_connections "$(grep "\"listen\":\"$l\"" "$out")") | | |"
done
