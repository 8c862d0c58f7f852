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
# TLS for the driver's sslmode tests: a CA of its own and a server certificate for 127.0.0.1
# and localhost, kept beside the data directory (generated once).
TLS="$DATA-tls"
if [ ! -f "$TLS/server.pem" ]; then
  mkdir -p "$TLS"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=dionysus test CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$TLS/ca.key" -out "$TLS/ca.pem" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$TLS/server.key" -out "$TLS/server.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$TLS/server.ext"
  openssl x509 -req -in "$TLS/server.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" -CAcreateserial -days 3650 \
    -extfile "$TLS/server.ext" -out "$TLS/server.pem" 2>/dev/null
fi
chown postgres:postgres "$TLS/server.key" "$TLS/server.pem" 2>/dev/null || true
chmod 600 "$TLS/server.key"
# As a developer's shell often has it: errors must stay one clean line anyway (tests/trust.rs).
export RUST_BACKTRACE=1
scripts/cluster.sh start "$DATA" "$PORT" "dionysus.worker_interval = 1" \
  "ssl = on" "ssl_cert_file = '$TLS/server.pem'" "ssl_key_file = '$TLS/server.key'"
trap 'scripts/cluster.sh stop "$DATA"' EXIT

export DIONYSUS_TEST_CONNINFO="host=127.0.0.1 port=$PORT user=postgres"
export DIONYSUS_TEST_SSL_CA="$TLS/ca.pem"
export DIONYSUS_TEST_DATA="$DATA"
log "integration tests"
cargo build --release -p dionysus-driver   # the tests run the real binary too
cargo test --release --no-fail-fast -p dionysus-tests -- --test-threads 2
log "driver tests"
cargo test --release --no-fail-fast -p dionysus-driver
log "all tests passed"
