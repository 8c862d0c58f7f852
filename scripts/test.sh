#!/usr/bin/env bash
# Runs every test of Dionysus, from a fresh machine if need be:
#   1. set-up (idempotent)            scripts/setup.sh
#   2. build and install the extension into the local PostgreSQL 15
#   3. #[pg_test] units inside Postgres   cargo pgrx test
#   4. a throw-away cluster with dionysus preloaded, then the integration tests (tests/)
#      and the driver's tests against it
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${DIONYSUS_TEST_PORT:-54329}"
DATA="${DIONYSUS_TEST_DATA:-/tmp/dionysus-test-$PORT}"
log() { printf '\033[1;34m[test]\033[0m %s\n' "$*"; }

scripts/install.sh

if [ "${DIONYSUS_SKIP_PG_TEST:-0}" != 1 ]; then
  log "#[pg_test] units"
  # Outside the checkout: the postgres user must reach it whatever the clone's parent permissions.
  pgtest_data="/tmp/dionysus-pgrx-test-data"
  mkdir -p "$pgtest_data"; chown -R postgres:postgres "$pgtest_data" 2>/dev/null || true
  (cd extension && cargo pgrx test pg15 --release --runas postgres --pgdata "$pgtest_data")
fi

log "integration cluster on 127.0.0.1:$PORT ($DATA)"
scripts/cluster.sh stop "$DATA"
rm -rf "$DATA"
scripts/cluster.sh start "$DATA" "$PORT" "dionysus.worker_interval = 1"
trap 'scripts/cluster.sh stop "$DATA"' EXIT

export DIONYSUS_TEST_CONNINFO="host=127.0.0.1 port=$PORT user=postgres"
export DIONYSUS_TEST_DATA="$DATA"
log "integration tests"
cargo build --release -p dionysus-driver   # the tests run the real binary too
cargo test --release --no-fail-fast -p dionysus-tests -- --test-threads 2
log "driver tests"
cargo test --release --no-fail-fast -p dionysus-driver
log "all tests passed"
