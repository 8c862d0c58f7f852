#!/usr/bin/env bash
# Set-up (idempotent), then build and install the extension into the local PostgreSQL
# (PG_MAJOR, default 15: /usr/lib/postgresql/$PG_MAJOR, see scripts/setup.sh for 16-18).
# A running server keeps the library it loaded: restart it afterwards (scripts/cluster.sh restart).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
printf '\033[1;34m[install]\033[0m %s\n' "building and installing the extension"
PG_CONFIG="/usr/lib/postgresql/${PG_MAJOR:-15}/bin/pg_config"
# The feature of this major instead of the default pg15 (cargo pgrx would also infer it from
# pg_config's version; said here for the reader). It installs the current version's script,
# generated from sql/, and the update scripts extension/sql/dionysus--A--B.sql: a database is
# created at this version or updated to it from 0.10.0 or later (extension/releases.toml).
(cd extension && cargo pgrx install --release --pg-config "$PG_CONFIG" \
  --no-default-features --features "pg${PG_MAJOR:-15}${DIONYSUS_EXTENSION_FEATURES:+ $DIONYSUS_EXTENSION_FEATURES}" >/dev/null)
