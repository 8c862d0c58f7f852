#!/usr/bin/env bash
# Gives the installed dionysus library's path a fresh copy of itself (cp, then an atomic rename).
# `cargo pgrx test --runas` installs its build with `sudo cp`, which writes over the file in
# place: a running server that loaded it (shared_preload_libraries) has its code changed under
# it and dies of SIGBUS, taking its cluster down (seen: tests run beside a running server).
# After this, what gets overwritten is a file no process maps; a running server keeps the code
# it loaded until it is restarted. (`cargo pgrx install` itself removes the file first.) A
# server that loads the library on demand rather than at start can still map it while the
# tests build: stop such a server, or preload the library (scripts/cluster.sh's clusters do).
set -euo pipefail
PG_CONFIG="/usr/lib/postgresql/${PG_MAJOR:-15}/bin/pg_config"
LIB="$($PG_CONFIG --pkglibdir)/dionysus.so"
[ -f "$LIB" ] || exit 0
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
trap '$SUDO rm -f "$LIB.fresh.$$"' EXIT
$SUDO cp -p "$LIB" "$LIB.fresh.$$"
$SUDO mv -f "$LIB.fresh.$$" "$LIB"
