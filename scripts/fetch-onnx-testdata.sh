#!/usr/bin/env bash
# Fetches the ONNX backend conformance data shipped in the onnx==1.22.0 wheel
# (the last wheel that ships it as files) into a cache directory, once.
# Usage: scripts/fetch-onnx-testdata.sh [CACHE_DIR]   (default: .cache/onnx-testdata)
# Prints the data directory (containing node/, light/, simple/, ...).
set -euo pipefail
version=1.22.0
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${1:-$root/.cache/onnx-testdata}
data=$cache/onnx-$version/data
if [ ! -f "$data/.complete" ]; then
  mkdir -p "$cache/wheel"
  if ! ls "$cache"/wheel/onnx-$version-*.whl >/dev/null 2>&1; then
    python3 -m pip download --quiet --no-deps --only-binary=:all: "onnx==$version" -d "$cache/wheel" >&2
  fi
  wheel=$(ls "$cache"/wheel/onnx-$version-*.whl | head -n 1)
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 - "$wheel" "$tmp" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        if n.startswith("onnx/backend/test/data/"):
            z.extract(n, out)
PY
  rm -rf "$data"
  mkdir -p "$(dirname "$data")"
  mv "$tmp/onnx/backend/test/data" "$data"
  touch "$data/.complete"
fi
echo "$data"
