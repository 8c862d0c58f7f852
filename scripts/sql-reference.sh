#!/usr/bin/env bash
# The SQL reference (docs/src/reference/sql.md), written from the COMMENTs of the installed
# extension: every function and view of the API (schema dionysus), every table, and the
# internal helpers (schema dionysus_internal). The catalog is the one source; the page is
# never edited by hand.
#
#   scripts/sql-reference.sh [CONNINFO]          write the page
#   scripts/sql-reference.sh --check [CONNINFO]  fail when the page names other objects than the
#                                                catalog has (one missing or gone); say so when
#                                                only a comment's words changed
#
# CONNINFO is a libpq key=value string for a superuser on a cluster where dionysus is
# installed (default: $DIONYSUS_TEST_CONNINFO, else scripts/run.sh's cluster). A scratch database
# is created with the extension and dropped afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
conninfo="${1:-${DIONYSUS_TEST_CONNINFO:-host=127.0.0.1 port=5433 user=postgres}}"
page=docs/src/reference/sql.md
db="dionysus_sql_reference_$$"

psql -X -q -v ON_ERROR_STOP=1 "$conninfo dbname=postgres" -c "CREATE DATABASE $db" >/dev/null
# FORCE: a background pass of a preloaded dionysus may be connected to it at that moment.
trap 'psql -X -q "$conninfo dbname=postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null' EXIT
PGOPTIONS="-c client_min_messages=warning" \
  psql -X -q -v ON_ERROR_STOP=1 "$conninfo dbname=$db" -c "CREATE EXTENSION dionysus CASCADE"

generated="$(mktemp)"
psql -X -q -At -v ON_ERROR_STOP=1 "$conninfo dbname=$db" >"$generated" <<'SQL'
-- Markdown-safe text: a comment is prose, so only what Markdown would read as markup is escaped.
CREATE FUNCTION pg_temp.md(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT replace(replace(replace(replace(replace(replace(coalesce(t, '(no comment)'),
         '\', '\\'), '*', '\*'), '_', '\_'), '<', '&lt;'), '>', '&gt;'), '[', '\[')
$$;
WITH api_functions AS (
  SELECT p.proname AS name,
         string_agg(format('%s(%s) → %s', p.proname, pg_get_function_arguments(p.oid),
                           pg_get_function_result(p.oid)), E'\n' ORDER BY pg_get_function_arguments(p.oid)) AS signatures,
         string_agg(DISTINCT concat_ws('; ',
           CASE WHEN p.prosecdef THEN 'runs with the owner''s rights' END,
           CASE WHEN has_function_privilege('dionysus_driver', p.oid, 'EXECUTE') THEN 'the driver''s role may call it'
                ELSE 'not the driver''s role''s' END,
           CASE WHEN NOT has_function_privilege('public', p.oid, 'EXECUTE') THEN 'not PUBLIC''s' END), ' / ') AS access,
         string_agg(DISTINCT pg_temp.md(obj_description(p.oid, 'pg_proc')), E'\n\n') AS comment
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
  WHERE n.nspname = 'dionysus'
  GROUP BY p.proname
), relations AS (
  SELECT c.relname AS name, c.relkind AS kind, n.nspname AS schema,
         pg_temp.md(obj_description(c.oid, 'pg_class')) AS comment,
         (SELECT string_agg(format('- `%s`: %s', a.attname, pg_temp.md(col_description(c.oid, a.attnum))), E'\n' ORDER BY a.attnum)
            FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
             AND col_description(c.oid, a.attnum) IS NOT NULL) AS columns
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname IN ('dionysus', 'dionysus_internal') AND c.relkind IN ('r', 'v', 'p', 'm')
), internal_functions AS (
  SELECT p.proname AS name,
         string_agg(format('`%s(%s)`', p.proname, pg_get_function_arguments(p.oid)), ', ' ORDER BY pg_get_function_arguments(p.oid)) AS signatures,
         string_agg(DISTINCT pg_temp.md(obj_description(p.oid, 'pg_proc')), ' ') AS comment
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
  WHERE n.nspname = 'dionysus_internal'
  GROUP BY p.proname
)
SELECT concat_ws(E'\n',
  '# SQL reference',
  '',
  format('Extension version %s. Written by `scripts/sql-reference.sh` from the `COMMENT`s of the installed '
         'catalog; do not edit it by hand: change the `COMMENT` beside its object in `sql/` and run the script '
         '(`scripts/test.sh` fails when an object is missing here). In psql, `\df+ dionysus.*` shows the same.',
         (SELECT extversion FROM pg_extension WHERE extname = 'dionysus')),
  '',
  'The API is schema `dionysus`. Each function says whether it runs with the extension owner''s rights '
  '(SECURITY DEFINER), whether the driver''s role `dionysus_driver` may call it, and whether PUBLIC may not. '
  'The helpers in `dionysus_internal` are listed last: they are not for direct use and may change in any release.',
  '',
  '## Functions',
  '',
  (SELECT string_agg(format(E'### `%s`\n\n```text\n%s\n```\n\n*%s.*\n\n%s\n', name, signatures, access, comment), E'\n' ORDER BY name)
     FROM api_functions),
  '## Views',
  '',
  (SELECT string_agg(format(E'### `%s`\n\n%s\n', name, comment) || coalesce(E'\n' || columns || E'\n', ''), E'\n' ORDER BY name)
     FROM relations WHERE schema = 'dionysus' AND kind IN ('v', 'm')),
  '## Tables',
  '',
  (SELECT string_agg(format(E'### `%s`\n\n%s\n', name, comment) || coalesce(E'\n' || columns || E'\n', ''), E'\n' ORDER BY name)
     FROM relations WHERE schema = 'dionysus' AND kind IN ('r', 'p')),
  '## Internal helpers (`dionysus_internal`)',
  '',
  'Not for direct use; they may change in any release.',
  '',
  (SELECT string_agg(format('- `%s`: %s', name, comment) , E'\n' ORDER BY name)
     FROM relations WHERE schema = 'dionysus_internal'),
  (SELECT string_agg(format('- %s: %s', signatures, comment), E'\n' ORDER BY name) FROM internal_functions)
);
SQL

headings() { grep -E '^(### |- `)' "$1" | sed -E 's/^- (`[^`(]*).*/\1/' | sort -u; }
if [ "$check" = 1 ]; then
  if [ ! -f "$page" ]; then echo "$page is missing: run scripts/sql-reference.sh" >&2; rm -f "$generated"; exit 1; fi
  if ! diff <(headings "$page") <(headings "$generated") >"$generated.diff"; then
    echo "$page does not name the objects the catalog has (< only on the page, > only in the catalog):" >&2
    grep '^[<>]' "$generated.diff" >&2
    echo "run scripts/sql-reference.sh to write it again" >&2
    rm -f "$generated" "$generated.diff"; exit 1
  fi
  if ! cmp -s "$page" "$generated"; then
    echo "note: $page names every object, but some comments changed since it was written: run scripts/sql-reference.sh"
  fi
  rm -f "$generated" "$generated.diff"
  echo "the SQL reference names every function, view and table of the installed catalog"
else
  mkdir -p "$(dirname "$page")"
  mv "$generated" "$page"
  echo "wrote $page ($(grep -c '^### ' "$page") API entries)"
fi
