#!/usr/bin/env bash
# Fails unless the PostgreSQL major that docker/ ships is among the majors given: those that
# scripts/test.sh tested fully in this run (#[pg_test] units; integration tests, all of them or the
# tier whose outcome can depend on the major; driver and golden SQL tests).
# What is shipped must be what is tested (docker/ once shipped 17, which no run tested).
#   scripts/check-docker-major.sh 15 18
set -euo pipefail
cd "$(dirname "$0")/.."
# Every place docker/ names a major: image tags, Debian packages, paths, pgrx's flags, comments.
majors="$(grep -ohE 'postgres:[0-9]+|postgresql-(server-dev-)?[0-9]+|postgresql/[0-9]+|--pg[0-9]+|features pg[0-9]+|PostgreSQL [0-9]+' docker/* \
  | grep -oE '[0-9]+$' | sort -u | tr '\n' ' ')"
majors="${majors% }"
case "$majors" in
  "") echo "docker/ names no PostgreSQL major" >&2; exit 1 ;;
  *" "*) echo "docker/ names several PostgreSQL majors ($majors): it must build and run one" >&2; exit 1 ;;
esac
case " $* " in
  *" $majors "*) echo "docker/ ships PostgreSQL $majors, which this run tested fully" ;;
  *) echo "docker/ ships PostgreSQL $majors, but this run tested fully only: ${*:-none}" \
       "(units, integration and driver tests: DIONYSUS_FULL_MAJORS, without DIONYSUS_SKIP_PG_TEST)" >&2
     exit 1 ;;
esac
