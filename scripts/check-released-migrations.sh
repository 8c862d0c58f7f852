#!/usr/bin/env bash
# A released update script never changes (extension/releases.toml says why and how to release).
# Fails when:
#   - a script recorded there (an update script, the oldest release's full script) is missing
#     or its sha256 differs: an edit or a deletion of something a database may already have run
#     (a script kept gzipped, the test fixture, is checked by its decompressed bytes);
#   - extension/sql/ holds an update script recorded nowhere, other than the one into the
#     current, unreleased version (Cargo.toml's), from the last release;
#   - extension/sql/ holds a full script: the current one is generated from sql/ at build time.
# Cheap (a dozen sha256s): scripts/test.sh runs it first. Usage: check-released-migrations.sh [ROOT]
set -uo pipefail
cd "${1:-$(dirname "$0")/..}"
record=extension/releases.toml
problems=()

current="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)"
versions=(); declare -A recorded=()
check() {  # check FILE SHA256: the recorded file is there, byte for byte
  local file="$1" want="$2"
  recorded["$file"]=1
  if [ ! -f "$file" ]; then
    problems+=("$file is released ($record) but missing: a released script is never deleted")
  elif [ "$(case "$file" in *.gz) gzip -dc "$file" ;; *) cat "$file" ;; esac | sha256sum | cut -c1-64)" != "$want" ]; then
    problems+=("$file differs from its released version ($record): a released script is never edited; put the change in the current version's update script")
  fi
}
version="" script="" sha=""
flush() {
  [ -n "$script" ] && check "$script" "$sha"
  version="" script="" sha=""
}
while IFS= read -r line; do
  case "$line" in
    '[[release]]') flush ;;
    version\ =\ *) version="${line#*\"}"; version="${version%\"}"; versions+=("$version") ;;
    update_script\ =\ * | full_script\ =\ *) script="${line#*\"}"; script="${script%\"}" ;;
    sha256\ =\ *) sha="${line#*\"}"; sha="${sha%\"}" ;;
  esac
done <"$record"
flush

last="${versions[${#versions[@]}-1]}"
unreleased=""
[ "$last" != "$current" ] && unreleased="extension/sql/dionysus--$last--$current.sql"
for file in extension/sql/*.sql; do
  [ -e "$file" ] || continue
  [ -n "${recorded[$file]:-}" ] && continue
  [ "$file" = "$unreleased" ] && continue
  case "$(basename "$file")" in
    dionysus--*--*.sql) problems+=("$file is no released update script ($record) and not the one into the current version ($unreleased)") ;;
    *) problems+=("$file: extension/sql/ holds update scripts only (pgrx generates the current full script from sql/)") ;;
  esac
done
if [ -n "$unreleased" ] && [ ! -f "$unreleased" ]; then
  problems+=("$unreleased is missing: the update from the last release ($last) into $current")
fi

if [ "${#problems[@]}" -gt 0 ]; then
  printf 'check-released-migrations: %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "check-released-migrations: ${#recorded[@]} released scripts unchanged; $current's update script: ${unreleased:-none (released)}"
