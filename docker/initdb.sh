#!/usr/bin/env bash
# First start of the database container: create the extension in the agent's database.
set -euo pipefail
# The driver logs in as dionysus_driver, the least-privileged role the extension creates.
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
     -v driver_password="$DIONYSUS_DRIVER_PASSWORD" <<'SQL'
CREATE EXTENSION IF NOT EXISTS dionysus CASCADE;
ALTER EXTENSION dionysus UPDATE;
ALTER ROLE dionysus_driver LOGIN PASSWORD :'driver_password';
SQL
