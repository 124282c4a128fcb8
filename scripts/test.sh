#!/usr/bin/env bash
# The test command: fetches the ONNX conformance data (once) and runs every
# test, then the real-model corpus (scripts/corpus: models shipped in PyPI
# wheels, checked against ONNX Runtime) when onnx and onnxruntime are
# installed; CI installs them and always runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
export RLX_ONNX_TESTDATA=${RLX_ONNX_TESTDATA:-$(scripts/fetch-onnx-testdata.sh)}
cargo test --workspace "$@"
if [[ -n "${CI:-}" ]] || python3 -c "import onnx, onnxruntime" 2>/dev/null; then
  cargo build --bin rlx-onnx
  python3 scripts/corpus/fetch.py
  python3 scripts/corpus/check.py --binary target/debug/rlx-onnx
else
  echo "real-model corpus skipped: pip install onnx==1.22.0 onnxruntime==1.31.1 numpy to run it"
fi
