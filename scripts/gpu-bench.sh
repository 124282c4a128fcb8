#!/usr/bin/env bash
# Latency of the light models and the golden transformer on the CPU backend and on
# wgpu, run ON THE LENT GPU MACHINE (NVIDIA's Vulkan driver). Build here first:
#   cargo build --release --bin rlx-onnx && mkdir -p gpu-bin && strip -o gpu-bin/rlx-onnx target/release/rlx-onnx
#   bash ../shared/gpu/fetch-vulkan-debs.sh          # fills .gl/ (the Vulkan loader)
# then run with `.gl`, `gpu-bin` and `.cache/onnx-testdata/onnx-1.22.0/data/light` carried:
#   bash scripts/gpu-bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
bin=gpu-bin/rlx-onnx
light=.cache/onnx-testdata/onnx-1.22.0/data/light
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
median() { "$bin" bench "$@" | awk '/^median:/ {print $2}'; }
printf '%-24s %12s %12s\n' model "cpu ms" "wgpu ms"
for m in "$light"/*.onnx golden/transformer/model.onnx; do
  name=$(basename "$(dirname "$m")")/$(basename "$m" .onnx)
  extra=()
  [[ $m == golden/transformer/* ]] && extra=(--bind batch=1 --bind seq=8)
  cpu=$(median "$m" --threads 16 --iters 20 "${extra[@]}")
  gpu=$(median "$m" --target wgpu --iters 20 "${extra[@]}" 2>&1 || echo "error")
  printf '%-24s %12s %12s\n' "$name" "$cpu" "$gpu"
done
