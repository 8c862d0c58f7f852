#!/usr/bin/env bash
# Runs every test of Dionysus, from a fresh machine if need be, on each PostgreSQL major:
#   1. set-up (idempotent)            scripts/setup.sh, with every major below
#   2. per major: #[pg_test] units inside Postgres   cargo pgrx test pgNN
#   3. on the majors with the full suites: build and install the extension   scripts/install.sh
#      (after the units: `cargo pgrx test` installs its own build, with the test functions),
#      then a throw-away cluster with dionysus preloaded, the integration tests (tests/),
#      the driver's tests and the golden SQL tests (scripts/regress.sh) against it
#   4. the major docker/ ships must be one of those tested fully here   scripts/check-docker-major.sh
#   and the manual: README.md's length, the book's pages and links, its build   scripts/check-docs.sh
#   (after set-up), and on the first full major the SQL reference against the installed catalog
#   (scripts/sql-reference.sh --check)
# Every suite runs even when an earlier one failed; a summary closes the run, and the exit
# status is non-zero when any suite failed. A major whose source the package mirror cannot give
# now (scripts/postgres-versions.sh exits 3) is left out, and the summary names it.
#
# Environment:
#   DIONYSUS_TEST_MAJORS   the majors to test (default "15 18", the oldest and the newest, which
#                          docker/ ships; 16 and 17 on request, e.g. "15 16 17 18": each is a
#                          release build of its own, 3 to 10 minutes that CI's 35 cannot spare)
#   DIONYSUS_FULL_MAJORS   of those, the ones that also run the integration and driver tests
#                          (default "15 18"; the others run the #[pg_test] units only, which need
#                          no install of their own). The first runs every integration test; each
#                          later one runs the tier whose outcome can depend on the server's major
#                          (EVERY_MAJOR below), unless DIONYSUS_EVERY_TEST_ON_EVERY_MAJOR=1
#   DIONYSUS_TEST_PORT     the first integration cluster's port (31329; the next full major takes
#                          the next port). Below Linux's ephemeral range (32768+), where the
#                          suite's own client sockets could already hold a port
#   DIONYSUS_TEST_DATA     the clusters' data directories, with "-PORT" appended (/tmp/dionysus-test)
#   DIONYSUS_SKIP_PG_TEST=1  no #[pg_test] units
set -uo pipefail
cd "$(dirname "$0")/.."
MAJORS="${DIONYSUS_TEST_MAJORS:-15 18}"
FULL="${DIONYSUS_FULL_MAJORS:-15 18}"
# The integration tests (modules of tests/tests/integration.rs) whose outcome can depend on the
# server's major: the catalog and the update scripts, pg_dump and restore, roles, search_path and
# TLS, the server's start, stop and standby, background workers and locks, errors' SQLSTATEs,
# pgvector's indexes and the planner (recall, memory, re-index, decay), erasure's reach. The rest
# drive the driver's flows through the same SQL functions: they run on the first full major.
# (A filter matches a test's name anywhere: memory:: takes working_memory:: along.)
EVERY_MAJOR="upgrade:: backup:: trust:: web_security:: lifecycle:: replica:: concurrency_and_worker:: bounds::
  bad_input:: erasure:: recall:: memory:: reindex:: decay::"
BASE_PORT="${DIONYSUS_TEST_PORT:-31329}"
DATA_BASE="${DIONYSUS_TEST_DATA:-/tmp/dionysus-test}"   # + "-PORT" for each cluster
log() { printf '\033[1;34m[test]\033[0m %s\n' "$*"; }

# Every suite's time goes in the summary: CI has 90 minutes and this run should stay under 60.
run_started=$SECONDS; started=$SECONDS
DIONYSUS_PG_MAJORS="$MAJORS" scripts/setup.sh || exit 1
setup_took=$((SECONDS - started))
# A major set-up had to leave out (its source not downloadable here now) is said in the summary.
skipped=(); available=""
for m in $MAJORS; do
  if [ -x "/usr/lib/postgresql/$m/bin/pg_config" ]; then available="$available $m"
  else skipped+=("SKIPPED pg$m: PostgreSQL $m could not be installed here (set-up above says why)"); fi
done
MAJORS="${available# }"

results=(); failed=0
# The tests' own output, kept so the summary can end with why each failing test failed (a CI
# log shows its tail).
TEST_OUT="$DATA_BASE-output.log"; : >"$TEST_OUT"
# testing CMD...: runs a cargo test command, its output also kept in $TEST_OUT; its status.
testing() { "$@" 2>&1 | tee -a "$TEST_OUT"; return "${PIPESTATUS[0]}"; }
started=$SECONDS
record() {  # record LABEL STATUS: the time since the last record (or since `started=$SECONDS`)
  local took="$((SECONDS - started))s"
  if [ "$2" -eq 0 ]; then results+=("passed  $(printf '%6s' "$took")  $1")
  else results+=("FAILED  $(printf '%6s' "$took")  $1"); failed=1; fi
  started=$SECONDS
}
is_full() { case " $FULL " in *" $1 "*) return 0 ;; esac; return 1; }

# A released update script never changes (extension/releases.toml): a second, before any build.
scripts/check-released-migrations.sh
record "released update scripts unchanged (extension/releases.toml)" $?

log "the manual: README.md, the book's pages and links, mdbook build"
scripts/check-docs.sh
record "docs: README at most 200 lines, the book's pages and links, mdbook build" $?

# As a developer's shell often has it: errors must stay one clean line anyway (tests/trust.rs).
export RUST_BACKTRACE=1
# ring's build script (under rustls, so under the driver, the tests and the extension's ureq) is
# rerun whenever CARGO_MANIFEST_DIR, CARGO_PKG_NAME or CARGO_PKG_VERSION_* change, and `cargo pgrx
# test` builds the library from inside its test process, where cargo has set them to the
# extension's. Every cargo run here gets those same values (cargo still gives each crate its own),
# so ring and everything above it are compiled once, not again after each major's units.
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"
export CARGO_MANIFEST_DIR="$(pwd -P)/extension" CARGO_PKG_NAME=dionysus \
  CARGO_PKG_VERSION_MAJOR="$(echo "$version" | cut -d. -f1)" CARGO_PKG_VERSION_MINOR="$(echo "$version" | cut -d. -f2)" \
  CARGO_PKG_VERSION_PATCH="$(echo "$version" | cut -d. -f3 | cut -d- -f1)" CARGO_PKG_VERSION_PRE=""
any_full=0; for m in $MAJORS; do is_full "$m" && any_full=1; done
if [ "$any_full" = 1 ]; then
  log "building the driver (the integration tests run the real binary too)"
  cargo build --release -p dionysus-driver || exit 1
fi
driver_build_took=$((SECONDS - started))

DATA=""; tested_full=""
trap '[ -z "$DATA" ] || scripts/cluster.sh stop "$DATA"' EXIT
port="$BASE_PORT"
for major in $MAJORS; do
  export PG_MAJOR="$major"   # scripts/install.sh and scripts/cluster.sh (the tests call it too)
  unset DIONYSUS_TEST_CONNINFO DIONYSUS_TEST_SSL_CA DIONYSUS_TEST_DATA
  if [ "${DIONYSUS_SKIP_PG_TEST:-0}" != 1 ]; then
    log "PostgreSQL $major: #[pg_test] units"
    # Outside the checkout: the postgres user must reach it whatever the clone's parent permissions.
    pgtest_data="/tmp/dionysus-pgrx-test-data-pg$major"
    mkdir -p "$pgtest_data"; chown -R postgres:postgres "$pgtest_data" 2>/dev/null || true
    # It installs its build over the library in place: a server running beside must not crash.
    started=$SECONDS
    scripts/fresh-library.sh
    (cd extension && cargo pgrx test "pg$major" --release --runas postgres --pgdata "$pgtest_data")
    record "pg$major #[pg_test] units" $?
  fi

  is_full "$major" || continue
  log "PostgreSQL $major: building and installing the extension"
  started=$SECONDS
  if ! scripts/install.sh; then
    record "pg$major install (no tests run)" 1
    continue
  fi
  # The oldest supported release's full script, for the update tests only (scripts/install.sh
  # installs none: a release is reached from it through the released update scripts).
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  for fixture in tests/upgrade/releases/dionysus--*.sql.gz; do
    gzip -dc "$fixture" | $SUDO tee "$("/usr/lib/postgresql/$major/bin/pg_config" --sharedir)/extension/$(basename "$fixture" .gz)" >/dev/null
  done

  DATA="$DATA_BASE-$port"
  log "PostgreSQL $major: integration cluster on 127.0.0.1:$port ($DATA)"
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
  record "pg$major build and install" 0
  if ! scripts/cluster.sh start "$DATA" "$port" "dionysus.worker_interval = 1" \
         "ssl = on" "ssl_cert_file = '$TLS/server.pem'" "ssl_key_file = '$TLS/server.key'"; then
    record "pg$major integration cluster (no integration or driver tests run)" 1
    DATA=""; port=$((port + 1)); continue
  fi

  export DIONYSUS_TEST_CONNINFO="host=127.0.0.1 port=$port user=postgres"
  export DIONYSUS_TEST_SSL_CA="$TLS/ca.pem"
  export DIONYSUS_TEST_DATA="$DATA"
  # Only the integration binary: the package has no unit tests, and a test harness of the bench
  # binary would be compiled for nothing (cargo still builds the bench itself, as a binary).
  if [ -z "${every_test_ran:-}" ] || [ "${DIONYSUS_EVERY_TEST_ON_EVERY_MAJOR:-0}" = 1 ]; then
    log "PostgreSQL $major: integration tests"
    testing cargo test --release --no-fail-fast -p dionysus-tests --test integration -- --test-threads 2
    record "pg$major integration tests" $?
    every_test_ran=1
  else
    log "PostgreSQL $major: the integration tests a major can change ($(echo $EVERY_MAJOR))"
    # shellcheck disable=SC2086 # one filter per module
    testing cargo test --release --no-fail-fast -p dionysus-tests --test integration -- $EVERY_MAJOR --test-threads 2
    record "pg$major integration tests, the tier every major runs" $?
  fi
  log "PostgreSQL $major: driver tests"
  # The library's units and the driver's own integration tests; not a test harness of main.rs
  # (it has no tests, and compiling the whole binary again in test mode cost CI two minutes).
  testing cargo test --release --no-fail-fast -p dionysus-driver --lib --test '*'
  record "pg$major driver tests" $?
  log "PostgreSQL $major: golden SQL tests (tests/regress)"
  scripts/regress.sh "$port"
  record "pg$major golden SQL tests" $?
  if [ -z "${sql_reference_checked:-}" ]; then
    scripts/sql-reference.sh --check "$DIONYSUS_TEST_CONNINFO"
    record "docs: the SQL reference names every function, view and table (pg$major)" $?
    sql_reference_checked=1
  fi
  [ "${DIONYSUS_SKIP_PG_TEST:-0}" = 1 ] || tested_full="$tested_full $major"
  scripts/cluster.sh stop "$DATA"
  DATA=""; port=$((port + 1))
done

# What docker/ ships must be a major this run tested fully (whether those suites passed is above).
started=$SECONDS
scripts/check-docker-major.sh $tested_full
record "docker/ ships a major tested fully here" $?

log "summary (seconds per step)"
printf '  set-up %ss, driver build %ss\n' "$setup_took" "${driver_build_took:-0}"
npass=0; nfail=0
for r in "${results[@]}"; do
  printf '  %s\n' "$r"
  case "$r" in passed*) npass=$((npass + 1)) ;; *) nfail=$((nfail + 1)) ;; esac
done
for r in "${skipped[@]}"; do printf '  %s\n' "$r"; done
echo "suites: $npass passed, $nfail failed, ${#skipped[@]} majors left out; $(( (SECONDS - run_started) / 60 )) minutes in all"
if [ "$failed" -ne 0 ]; then
  if grep -q '^---- ' "$TEST_OUT"; then
    log "why the failing tests failed (the first lines of each; all of it in $TEST_OUT)"
    # Each failure's header and its panic's place and message, each line cut at 400 characters.
    awk '/^---- / {name = $0; next}
         name != "" && /panicked at/ {print "  " name; n = 3}
         n > 0 {print "    " substr($0, 1, 400); n--; if (n == 0) name = ""}' "$TEST_OUT" | head -80
  fi
  log "some suites failed"
  exit 1
fi
log "all tests passed"
