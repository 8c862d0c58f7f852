#!/usr/bin/env bash
# First start of the database container: create the extension in the agent's database.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
     -c "CREATE EXTENSION IF NOT EXISTS dionysus CASCADE;"
