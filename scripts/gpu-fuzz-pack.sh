#!/usr/bin/env bash
# Run HERE before a fuzzing call on the lent machine (its CPU cores, not its
# GPU): strips and compresses the built fuzz targets and their working
# corpora into gpu-fuzz/ (git-ignored), which the call carries:
#   bash scripts/gpu-fuzz-pack.sh [TARGET...]      (default: import structured)
# then there:  bash scripts/gpu-fuzz.sh SECONDS JOBS [TARGET...]
# The targets come from target/fuzz (scripts/fuzz.sh builds them).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(import structured)
host=$(rustc -vV | sed -n 's/^host: //p')
rm -rf gpu-fuzz && mkdir -p gpu-fuzz
for t in "${targets[@]}"; do
  strip -o "gpu-fuzz/$t" "target/fuzz/$host/release/$t"
  xz -T2 -6 "gpu-fuzz/$t"
  mkdir -p ".cache/fuzz/$t/corpus"
  tar cf - -C ".cache/fuzz/$t" corpus | xz -T2 -6 > "gpu-fuzz/$t-corpus.tar.xz"
done
ls -la gpu-fuzz
