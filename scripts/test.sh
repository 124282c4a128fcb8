#!/usr/bin/env bash
# The test command: fetches the ONNX conformance data (once) and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
export RLX_ONNX_TESTDATA=${RLX_ONNX_TESTDATA:-$(scripts/fetch-onnx-testdata.sh)}
cargo test --workspace "$@"
