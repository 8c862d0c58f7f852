#!/usr/bin/env bash
# Set-up (idempotent), then build and install the extension into the local PostgreSQL.
# A running server keeps the library it loaded: restart it afterwards (scripts/cluster.sh restart).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
printf '\033[1;34m[install]\033[0m %s\n' "building and installing the extension"
(cd extension && cargo pgrx install --release --pg-config "/usr/lib/postgresql/${PG_MAJOR:-15}/bin/pg_config" >/dev/null)
