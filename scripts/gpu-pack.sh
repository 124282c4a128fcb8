#!/usr/bin/env bash
# Run HERE (the CPU-only machine) before a GPU call: builds the release binary and
# the GPU test binaries, strips and compresses them with the ONNX test data into
# gpu-bin/ (git-ignored, a few MB), which the call then carries:
#   bash scripts/gpu-pack.sh        then, on the lent machine:  bash scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
data=${RLX_ONNX_TESTDATA:-$(scripts/fetch-onnx-testdata.sh)}
rm -rf gpu-bin && mkdir -p gpu-bin
cargo build --release --bin rlx-onnx
strip -o gpu-bin/rlx-onnx target/release/rlx-onnx
# Test executables, by the names cargo reports for them.
tests=$(cargo test --release --no-run --test cuda_parity --test cuda_attention --test device_io -p rlx-onnx --message-format=json 2>/dev/null;
        cargo test --release --no-run -p rlx-cuda --lib --message-format=json 2>/dev/null)
for t in cuda_parity cuda_attention device_io rlx_cuda; do
  exe=$(printf '%s\n' "$tests" | python3 -c '
import json, sys
name = sys.argv[1]
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == name:
        print(m["executable"])' "$t" | tail -1)
  strip -o "gpu-bin/$t" "$exe"
done
xz -T2 -6 gpu-bin/rlx-onnx gpu-bin/cuda_parity gpu-bin/cuda_attention gpu-bin/device_io gpu-bin/rlx_cuda
tar cf - -C "$data" node light | xz -T2 -9 > gpu-bin/testdata.tar.xz
# onnx 1.23's node cases, when scripts/onnx123-cases.py can write them here.
if data123=$(scripts/onnx123-cases.py 2>/dev/null); then
  tar cf - -C "$data123" node | xz -T2 -9 > gpu-bin/testdata123.tar.xz
fi
ls -la gpu-bin
# The Python wheel scripts/python-test.sh built, for gpu-check.sh's python stage.
if ls target/wheels/rlx_onnx-*.whl >/dev/null 2>&1; then
  cp target/wheels/rlx_onnx-*.whl gpu-bin/
fi
