#!/usr/bin/env bash
# The Python package's tests: builds the wheel once (maturin, with the dev
# profile's settings so the workspace's test build is reused), installs it
# into a fresh virtualenv beside onnxruntime, and runs python/tests with
# pytest, then the Ray Serve example's load test (examples/serve-ray). Prints
# the wheel's build time and size.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/py-test-venv
rm -rf "$venv" target/wheels
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
"$venv/bin/python" -m pip install -q maturin==1.16.0 pytest==8.4.2 numpy onnx==1.22.0 onnxruntime==1.31.1 "ray[serve]==2.60.0"
start=$(date +%s)
"$venv/bin/maturin" build --profile dev -m python/Cargo.toml -o target/wheels --interpreter "$venv/bin/python" --quiet
wheel=$(ls target/wheels/rlx_onnx-*.whl)
echo "wheel: $(basename "$wheel"), $(du -h "$wheel" | cut -f1), built in $(( $(date +%s) - start )) s"
"$venv/bin/python" -m pip install -q "$wheel"
# From outside the source tree: the installed package, not python/rlx_onnx.
(cd python/tests && "../../$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" .)
# Serving on Ray Serve: a bounded load test on localhost, answers checked
# against onnxruntime's.
RAY_USAGE_STATS_ENABLED=0 "$venv/bin/python" examples/serve-ray/load_test.py golden/cnn/model.onnx \
  --replicas 2 --clients 4 --requests 200
