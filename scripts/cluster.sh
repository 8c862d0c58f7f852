#!/usr/bin/env bash
# A local PostgreSQL cluster owned by the postgres user (PostgreSQL refuses to run as root),
# with dionysus preloaded so its maintenance worker runs.
#
#   scripts/cluster.sh start DATADIR PORT [extra postgresql.conf lines...]
#   scripts/cluster.sh standby DATADIR PORT PRIMARY_PORT   a hot standby streaming from the
#                                                          cluster on 127.0.0.1:PRIMARY_PORT
#   scripts/cluster.sh stop DATADIR
#   scripts/cluster.sh restart DATADIR
#
# The socket lives in DATADIR, and the server listens on 127.0.0.1:PORT.
set -euo pipefail
PG_BIN="${PG_BIN:-/usr/lib/postgresql/${PG_MAJOR:-15}/bin}"   # PG_BIN: another installation
cmd="${1:?usage: cluster.sh start|stop|restart DATADIR [PORT]}"
data="${2:?data directory}"

as_pg() {
  if [ "$(id -un)" = postgres ]; then "$@"; else sudo -u postgres -- "$@"; fi
}

# Starts the server in $data unless it runs; on failure, shows why.
start_server() {
  if ! as_pg "$PG_BIN/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    if ! as_pg "$PG_BIN/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 start >/dev/null; then
      # Say why here: the caller's output is often all there is (CI keeps no data directories).
      echo "cluster.sh: PostgreSQL did not start in $data; the end of its log:" >&2
      tail -n 20 "$data/server.log" >&2 || true
      exit 1
    fi
  fi
}

case "$cmd" in
  start)
    port="${3:?port}"; shift 3
    if [ ! -f "$data/PG_VERSION" ]; then
      mkdir -p "$data"
      chown postgres:postgres "$data" 2>/dev/null || true
      chmod 700 "$data"
      as_pg "$PG_BIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
      {
        echo "port = $port"
        echo "listen_addresses = '127.0.0.1'"
        echo "unix_socket_directories = '$data'"
        echo "shared_preload_libraries = 'dionysus'"
        echo "max_worker_processes = 16"
        echo "logging_collector = off"
        for line in "$@"; do echo "$line"; done
      } | as_pg tee -a "$data/postgresql.conf" >/dev/null
    fi
    start_server
    ;;
  standby)
    port="${3:?port}"; primary="${4:?primary port}"
    if [ ! -f "$data/PG_VERSION" ]; then
      mkdir -p "$data"
      chown postgres:postgres "$data" 2>/dev/null || true
      chmod 700 "$data"
      # -R writes standby.signal and primary_conninfo; the copied configuration then gets
      # this server's own port and socket directory (later lines win).
      as_pg "$PG_BIN/pg_basebackup" -h 127.0.0.1 -p "$primary" -U postgres -D "$data" -R -X stream -c fast
      as_pg rm -f "$data/server.log"
      printf "port = %s\nunix_socket_directories = '%s'\n" "$port" "$data" | as_pg tee -a "$data/postgresql.conf" >/dev/null
    fi
    start_server
    ;;
  stop)
    if [ -f "$data/PG_VERSION" ]; then
      as_pg "$PG_BIN/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null 2>&1 || true
    fi
    # A postmaster whose data directory was removed under it cannot be reached by pg_ctl.
    # Fast shutdown first; if it stalls, an immediate one.
    for sig in INT QUIT KILL; do
      pgrep -f -- "postgres -D $data\$" >/dev/null || break
      pkill -"$sig" -f -- "postgres -D $data\$" || true
      for _ in $(seq 1 50); do pgrep -f -- "postgres -D $data\$" >/dev/null || break; sleep 0.2; done
    done
    ;;
  restart)
    as_pg "$PG_BIN/pg_ctl" -D "$data" -l "$data/server.log" -m fast -w -t 60 restart >/dev/null
    ;;
  *)
    echo "unknown command $cmd" >&2; exit 2 ;;
esac
