#!/usr/bin/env bash
# Runs Dionysus on this machine, from a fresh Debian 12 if need be:
#   set-up (idempotent) → build and install the extension → a local cluster owned by the
#   postgres user (dionysus preloaded) → database 'dionysus' with the extension → the driver.
#
# Environment: DIONYSUS_PORT (5433), DIONYSUS_DATA (/var/lib/dionysus/pgdata),
#              DIONYSUS_DB (dionysus). Anything after the script's name goes to the driver
#              (default: run — the terminal conversation unless a Discord token is set).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${DIONYSUS_PORT:-5433}"
DATA="${DIONYSUS_DATA:-/var/lib/dionysus/pgdata}"
DB="${DIONYSUS_DB:-dionysus}"
log() { printf '\033[1;34m[run]\033[0m %s\n' "$*"; }

scripts/install.sh
log "building the driver"
cargo build --release -p dionysus-driver --quiet

mkdir -p "$(dirname "$DATA")"
if [ -f "$DATA/postmaster.pid" ]; then
  # A running server keeps the old library: restart it so the new build is loaded.
  scripts/cluster.sh restart "$DATA"
else
  scripts/cluster.sh start "$DATA" "$PORT"
fi
log "cluster on 127.0.0.1:$PORT ($DATA), log in $DATA/server.log"
psql "host=127.0.0.1 port=$PORT user=postgres dbname=postgres" -qtAc "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1 \
  || psql "host=127.0.0.1 port=$PORT user=postgres dbname=postgres" -qc "CREATE DATABASE $DB"
# The update brings an older database's schema to this build's version, keeping its data.
psql "host=127.0.0.1 port=$PORT user=postgres dbname=$DB" -qc "CREATE EXTENSION IF NOT EXISTS dionysus CASCADE; ALTER EXTENSION dionysus UPDATE;" 2>&1 | grep -v "already installed" || true
# The driver runs as dionysus_driver, the least-privileged role the extension creates (the
# local cluster trusts local connections; give it a password on any other server).
psql "host=127.0.0.1 port=$PORT user=postgres dbname=$DB" -qc "ALTER ROLE dionysus_driver LOGIN"

export DIONYSUS_DATABASE_URL="${DIONYSUS_DATABASE_URL:-postgresql://dionysus_driver@127.0.0.1:$PORT/$DB}"
log "psql \"$DIONYSUS_DATABASE_URL\" to talk to it; scripts/cluster.sh stop $DATA to stop it"
if [ $# -eq 0 ]; then set -- run; fi
if [ "$1" = run ] || [ "$1" = chat ]; then
  # What works and what is missing (an LLM that is not running yet is a warning, not a stop).
  target/release/dionysus doctor || true
  log "type to talk; Ctrl-D or Ctrl-C ends the conversation"
fi
exec target/release/dionysus "$@"
