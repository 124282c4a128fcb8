#!/usr/bin/env bash
# ON THE LENT GPU MACHINE, in one call (carry gpu-bin/ made by scripts/gpu-pack.sh):
#   1. the rlx-cuda device tests, 2. parity of every golden and light model with
#   the CPU backend, 3. the ONNX node suite on CUDA (report in $OUT), 4. latency of
#   the light models and the golden transformer: rlx-onnx on CUDA, rlx-onnx on the
#   CPU with 16 threads, and PyTorch (eager and CUDA graph) on the same GPU in the
#   same call, with ratios; 5. cuDNN against cuBLASLt convolutions. Stages:
#   all (default), tests (1-2), nodes (3), domains (contrib, ai.onnx.ml and
#   golden cases with `check --target cuda`, then again with `--fallback cpu`
#   together with tests/data/fallback, and `compare` of every golden
#   model's intermediates against the CPU), bench (4-5), ab (5), and corpus
#   (the real-model corpus parts carried in gpu-corpus/, packed by
#   scripts/corpus/pack.py; not part of `all`), nodes123 (onnx 1.23's node
#   cases against tests/expected/cuda-onnx123.txt), focus (ResNet-50 at each
#   precision and the golden transformer's three sizes against PyTorch, with
#   ResNet-50's fp16 profile: two minutes, for a change aimed at those), cpu16
#   (scripts/bench_vs_ort.py with 16 threads: rlx-onnx on the CPU against
#   onnxruntime on this machine's 16 cores, alternating), transformers
#   (scripts/transformer_bench.py: BERT, GPT-2, ViT, a GQA decoder and a long
#   encoder, both exporters, against PyTorch eager, CUDA graphs and
#   torch.compile; arguments after the stage go to the script), generate
#   (scripts/generate_bench.py: GPT-2 and a GQA decoder exported with their
#   cache, rlx-onnx generate against transformers' generate, eager and
#   static cache under torch.compile; arguments after the stage go to it),
#   vulkan (the node suite on NVIDIA's Vulkan driver against
#   tests/expected/vulkan.txt, lavapipe's list, and scripts/gpu_backends_bench.py:
#   ResNet-50, MobileNetV3, BERT, GPT-2 and ViT on CUDA, Vulkan and wgpu side
#   by side, scripts/gpu_ops_bench.py: GEMMs, norms and chains of dependent
#   dispatches on each GPU target against PyTorch's kernels, and every light
#   model against the CPU; needs .gl carried; arguments after the stage go to
#   gpu_backends_bench.py), python (the rlx_onnx wheel
#   gpu-pack.sh copied, beside torch: python/tests/test_cuda.py, and on a
#   host of two GPUs or more scripts/multi_gpu_scaling.py).
#   Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/gpu-env.sh
out=${OUT:-/tmp/rlx-gpu-out}; mkdir -p "$out"
# The test binaries find golden/ through the path they were built in.
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
bin=/tmp/rlx-gpu-bin; mkdir -p "$bin" /tmp/rlx-data
for f in rlx-onnx cuda_parity cuda_attention device_io rlx_cuda; do xz -dc "gpu-bin/$f.xz" > "$bin/$f"; chmod +x "$bin/$f"; done
tar xJf gpu-bin/testdata.tar.xz -C /tmp/rlx-data
export RLX_ONNX_TESTDATA=/tmp/rlx-data PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
stage=${1:-all}
status=0

if [[ $stage == all || $stage == tests ]]; then
  echo "== rlx-cuda device tests"
  INSTA_WORKSPACE_ROOT=/work/main "$bin/rlx_cuda" --test-threads 1 2>&1 | tee "$out/rlx_cuda.log" | grep -E "^test |test result|panicked"
  echo "== parity with the CPU backend"
  "$bin/cuda_parity" --nocapture 2>&1 | tee "$out/parity.log" | grep -E "parity|max error|test result|skipping"
  echo "== device tensors and generation on CUDA"
  "$bin/device_io" 2>&1 | tee "$out/device_io.log" | grep -E "^test |test result|panicked"
  echo "== attention kernels against the CPU"
  "$bin/cuda_attention" --nocapture 2>&1 | tee "$out/attention.log" | grep -E "^test |test result|panicked|^[a-z0-9_]+ (f32|f16|bf16)"
fi

# The node cases under $1/node on target $4 (cuda when not given) against the
# expected list $2; $3 names the suite in the logs. One process per first
# letter: a device fault stays in its batch.
node_suite() {
  local data=$1 list=$2 name=$3 target=${4:-cuda}
  echo "== $name on $target"
  : > "$out/$name.md"
  for l in a b c d e f g h i j k l m n o p q r s t u v w x y z; do
    timeout 120 "$bin/rlx-onnx" conformance --data "$data/node" --target "$target" --filter "test_$l" \
      --report "$out/part.md" > "$out/part.txt" 2>&1
    echo "$l: $(tail -1 "$out/part.txt")"
    [ -f "$out/part.md" ] && tail -n +3 "$out/part.md" >> "$out/$name.md"
    rm -f "$out/part.md"
  done > "$out/$name-batches.txt"
  echo "$name: $(grep -c '| passed |' "$out/$name.md") passed, $(grep -c '| failed |' "$out/$name.md") failed, $(grep -c '| unsupported |' "$out/$name.md") unsupported"
  # Against the expected-failures list (same format as update-expected.sh).
  { sed -n '1,2p' "$list"
    awk -F ' \\| ' '/^\| test_/ { sub(/^\| /, "", $1); if ($2 != "passed") { r = $3; sub(/ \|$/, "", r); gsub(/\\\|/, "|", r); print "node/" $1 "  " $2 ": " r } }' "$out/$name.md" | sort
  } > "$out/$name-expected.txt"
  cases() { grep -v '^#' "$1" | awk '{print $1}' | sort; }
  local new fixed
  new=$(comm -13 <(cases "$list") <(cases "$out/$name-expected.txt"))
  fixed=$(comm -23 <(cases "$list") <(cases "$out/$name-expected.txt"))
  if [[ -z $new && -z $fixed ]]; then
    echo "$name matches $list"
  else
    [[ -n $new ]] && echo "NOT in $list (new failures):" && echo "$new"
    [[ -n $fixed ]] && echo "pass now (remove from $list):" && echo "$fixed"
    echo "the list this run gives: \$OUT/$name-expected.txt"
    status=1
  fi
}

if [[ $stage == all || $stage == nodes ]]; then
  node_suite /tmp/rlx-data tests/expected/cuda.txt cuda-node
fi

# onnx 1.23's generated node cases (opset 28), packed by gpu-pack.sh when
# scripts/onnx123-cases.py has written them.
if [[ $stage == all || $stage == nodes123 ]] && [ -f gpu-bin/testdata123.tar.xz ]; then
  mkdir -p /tmp/rlx-data123 && tar xJf gpu-bin/testdata123.tar.xz -C /tmp/rlx-data123
  node_suite /tmp/rlx-data123 tests/expected/cuda-onnx123.txt cuda-node123
fi

if [[ $stage == all || $stage == domains ]]; then
  echo "== contrib and ai.onnx.ml cases, golden models on cuda (check against ORT's outputs)"
  : > "$out/cuda-domains.txt"
  for c in tests/data/contrib/*/ tests/data/ml/*/ tests/data/sklearn/*/ golden/*/; do
    [ -f "$c/model.onnx" ] || continue
    r=$(timeout 60 "$bin/rlx-onnx" check "$c" --target cuda --rtol 1e-3 --atol 1e-5 2>&1 | tail -1)
    echo "$(basename "$c"): $r" >> "$out/cuda-domains.txt"
  done
  echo "cuda domains: $(grep -c ': pass$' "$out/cuda-domains.txt") of $(wc -l < "$out/cuda-domains.txt") pass; the others:"
  grep -v ': pass$' "$out/cuda-domains.txt" | cut -c1-220
  echo "== the same cases and tests/data/fallback with --fallback cpu (what CUDA cannot run goes to the CPU)"
  : > "$out/cuda-fallback.txt"
  for c in tests/data/fallback/*/ tests/data/contrib/*/ tests/data/ml/*/ tests/data/sklearn/*/ golden/*/; do
    [ -f "$c/model.onnx" ] || continue
    r=$(timeout 60 "$bin/rlx-onnx" check "$c" --target cuda --fallback cpu --rtol 1e-3 --atol 1e-5 2>&1 | tail -1)
    echo "$(basename "$c"): $r" >> "$out/cuda-fallback.txt"
  done
  echo "cuda with the cpu fallback: $(grep -c ': pass$' "$out/cuda-fallback.txt") of $(wc -l < "$out/cuda-fallback.txt") pass; the others:"
  grep -v ': pass$' "$out/cuda-fallback.txt" | cut -c1-220
  echo "== compare: every golden model's intermediates on cuda against the cpu"
  for c in golden/*/; do
    [ -f "$c/model.onnx" ] || continue
    r=$(timeout 60 "$bin/rlx-onnx" compare "$c/model.onnx" --target cuda --against cpu \
        --inputs "$c/test_data_set_0" 2>&1 | grep -v '^note' | head -3 | paste -sd' ' | cut -c1-300)
    echo "$(basename "$c"): $r"
  done
fi

if [[ $stage == corpus ]]; then
  # The real-model corpus, packed here by scripts/corpus/pack.py into parts that
  # fit one call each: carry gpu-corpus/part-N.tar.xz beside gpu-bin.
  echo "== real-model corpus on cuda (check against ORT's outputs, tests/expected/corpus-cuda.txt)"
  mkdir -p /tmp/rlx-corpus
  for part in gpu-corpus/part-*.tar.xz; do
    [ -f "$part" ] || { echo "no gpu-corpus/part-*.tar.xz carried"; status=1; break; }
    tar xJf "$part" -C /tmp/rlx-corpus
    names=$(tar tJf "$part" | awk -F/ 'NF > 2 && $1 == "cases" {print $2}' | sort -u | paste -sd, -)
    python3 scripts/corpus/check.py --binary "$bin/rlx-onnx" --cache /tmp/rlx-corpus --target cuda \
      --only "$names" 2>&1 | tee -a "$out/corpus-cuda.txt" || status=1
  done
fi

if [[ $stage == all || $stage == bench ]]; then
  echo "== latency (median ms)"
  median() { "$bin/rlx-onnx" bench "$@" 2>>"$out/bench-errors.log" | awk '/^median:/ {print $2}'; }
  python3 scripts/torch_baseline.py --fp16 > "$out/torch.log" 2>&1 || tail -5 "$out/torch.log"
  printf '%-22s %10s %10s %10s %10s %9s %9s\n' model cuda cpu16 torch-eag torch-grf eag/cuda grf/cuda
  # The golden transformer at three sizes: batch 1 x 8 tokens is launch-bound
  # (15 dependent launches of microseconds), the larger ones are not.
  for m in /tmp/rlx-data/light/*.onnx golden/transformer/model.onnx:1:8 \
      golden/transformer/model.onnx:8:64 golden/transformer/model.onnx:32:128; do
    name=$(basename "$m" .onnx); extra=()
    if [[ $m == golden/transformer/* ]]; then
      IFS=: read -r m batch seq <<< "$m"
      name=golden_transformer_${batch}x$seq; extra=(--bind batch=$batch --bind seq=$seq)
    fi
    cuda=$(median "$m" --target cuda --iters 200 --warmup 100 "${extra[@]}"); cuda=${cuda:-error}
    cpu=$(median "$m" --threads 16 --iters 10 "${extra[@]}"); cpu=${cpu:-error}
    eager=$(awk -v n="$name" '$2==n {sub("eager_ms=","",$3); print $3}' "$out/torch.log")
    graph=$(awk -v n="$name" '$2==n {sub("graph_ms=","",$4); print $4}' "$out/torch.log")
    ratio() { [[ $1 =~ ^[0-9.]+$ && $2 =~ ^[0-9.]+$ ]] && awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}' || echo -; }
    printf '%-22s %10s %10s %10s %10s %9s %9s\n' "$name" "$cuda" "$cpu" "${eager:--}" "${graph:--}" \
      "$(ratio "${eager:-}" "$cuda")" "$(ratio "${graph:-}" "$cuda")"
  done | tee "$out/bench.txt"
  echo "== precision (median ms): rlx-onnx exact / tf32 / fp16, PyTorch fp16 CUDA graph"
  printf '%-22s %10s %10s %10s %12s %9s\n' model exact tf32 fp16 torch-fp16 t16/rlx16
  for m in /tmp/rlx-data/light/*.onnx; do
    name=$(basename "$m" .onnx); row=()
    for p in exact tf32 fp16; do
      t=$(median "$m" --target cuda --iters 200 --warmup 100 --precision $p); row+=("${t:-error}")
    done
    t16=$(awk -v n="$name" '$2==n {sub("fp16_graph_ms=","",$5); print $5}' "$out/torch.log")
    r=$([[ ${t16:-} =~ ^[0-9.]+$ && ${row[2]} =~ ^[0-9.]+$ ]] && awk -v a="$t16" -v b="${row[2]}" 'BEGIN {printf "%.2f", a/b}' || echo -)
    printf '%-22s %10s %10s %10s %12s %9s\n' "$name" "${row[@]}" "${t16:--}" "$r"
  done | tee "$out/precision.txt"
  "$bin/rlx-onnx" bench /tmp/rlx-data/light/light_resnet50.onnx --target cuda --iters 20 --profile > "$out/profile-resnet50.txt" 2>&1
  head -30 "$out/profile-resnet50.txt"
  for m in light_resnet50 light_bvlc_alexnet light_vgg19; do
    "$bin/rlx-onnx" bench /tmp/rlx-data/light/$m.onnx --target cuda --iters 20 --precision fp16 --profile \
      > "$out/profile-$m-fp16.txt" 2>&1
  done
  head -24 "$out/profile-light_bvlc_alexnet-fp16.txt"
fi

if [[ $stage == focus ]]; then
  echo "== focus (median ms): rlx-onnx cuda exact / fp16 against PyTorch, same call"
  median() { "$bin/rlx-onnx" bench "$@" 2>>"$out/bench-errors.log" | awk '/^median:/ {print $2}'; }
  python3 scripts/torch_baseline.py --fp16 --models light_resnet50 golden_transformer_1x8 \
    golden_transformer_8x64 golden_transformer_32x128 > "$out/torch.log" 2>&1 || tail -5 "$out/torch.log"
  cat "$out/torch.log"
  for p in exact fp16; do
    echo "resnet50 $p: $(median /tmp/rlx-data/light/light_resnet50.onnx --target cuda --iters 200 --warmup 100 --precision $p)"
  done
  for bs in 1:8 8:64 32:128; do
    IFS=: read -r b s <<< "$bs"
    t="golden/transformer/model.onnx --iters 200 --warmup 100 --bind batch=$b --bind seq=$s"
    echo "transformer ${b}x$s cuda: $(median $t --target cuda)" \
      "(small GEMMs in cuBLASLt: $(median $t --target cuda --cuda-small-gemm cublaslt))" \
      "cpu16: $(median golden/transformer/model.onnx --threads 16 --iters 50 --bind batch=$b --bind seq=$s)"
  done
  "$bin/rlx-onnx" bench /tmp/rlx-data/light/light_resnet50.onnx --target cuda --iters 20 --precision fp16 --profile \
    > "$out/profile-resnet50-fp16.txt" 2>&1
  head -40 "$out/profile-resnet50-fp16.txt"
  "$bin/rlx-onnx" bench golden/transformer/model.onnx --target cuda --iters 200 --warmup 100 --profile \
    --bind batch=1 --bind seq=8 > "$out/profile-transformer-1x8.txt" 2>&1
  head -30 "$out/profile-transformer-1x8.txt"
fi

if [[ $stage == cpu16 ]]; then
  echo "== CPU, 16 threads: rlx-onnx against onnxruntime (median ms, alternating)"
  python3 scripts/bench_vs_ort.py --threads 16 --rounds 2 --iters 20 --binary "$bin/rlx-onnx" 2>&1 \
    | grep -v onnxruntime: | tee "$out/cpu16.txt"
fi

# Transformers against PyTorch (scripts/transformer_bench.py; arguments after
# the stage go to it): not part of `all`.
if [[ $stage == transformers ]]; then
  shift
  echo "== transformers on cuda against PyTorch (ms)"
  python3 scripts/transformer_bench.py --binary "$bin/rlx-onnx" --out "$out" "$@" > "$out/transformers.log" 2>&1
  grep -aE '^(\||sdpa|  \{|[a-z0-9_]+ (script|dynamo) )' "$out/transformers.log"
fi

if [[ $stage == generate ]]; then
  shift
  echo "== generation on cuda against transformers (ms)"
  python3 scripts/generate_bench.py --binary "$bin/rlx-onnx" --out "$out/generate" "$@" > "$out/generate.log" 2>&1
  grep -aE '^(\||[a-z0-9_]+ batch |device |Traceback|[A-Za-z]*Error|profile:|  )' "$out/generate.log" | grep -av "^  File\|^    "
fi

if [[ $stage == all || $stage == bench || $stage == ab ]]; then
  echo "== convolutions: cuDNN, or cuBLASLt GEMMs for pointwise / all ungrouped ones (median ms; two alternating rounds)"
  for round in 1 2; do
    for m in light_resnet50 light_densenet121 light_inception_v1 light_squeezenet light_vgg19; do
      for g in never pointwise all; do
        t=$("$bin/rlx-onnx" bench /tmp/rlx-data/light/$m.onnx --target cuda --iters 200 --warmup 100 \
          --cuda-conv-gemm $g 2>>"$out/bench-errors.log" | awk '/^median:/ {print $2}')
        printf '%s %-22s %-9s %s\n' "$round" "$m" "$g" "$t"
      done
    done
  done | tee "$out/ab.txt"
fi

if [[ $stage == python ]]; then
  # The rlx_onnx wheel (gpu-pack.sh copies the one scripts/python-test.sh
  # built) beside the machine's torch: the CUDA provider, device values and
  # DLPack into torch (python/tests/test_cuda.py, run as a script).
  echo "== rlx_onnx from Python on CUDA"
  python3 -m pip install -q --no-deps --no-index --target /tmp/rlx-py gpu-bin/rlx_onnx-*.whl
  (cd python/tests && PYTHONPATH=/tmp/rlx-py python3 test_cuda.py) || status=1
  # On a host of several GPUs: one session per GPU against one.
  if (( $(nvidia-smi -L | wc -l) >= 2 )); then
    echo "== one session per GPU (scripts/multi_gpu_scaling.py)"
    PYTHONPATH=/tmp/rlx-py python3 scripts/multi_gpu_scaling.py --seconds 8 | tee "$out/scaling.txt" || status=1
  fi
fi

if [[ $stage == vulkan ]]; then
  node_suite /tmp/rlx-data tests/expected/vulkan.txt vulkan-node vulkan
  # Every light model against the CPU, VGG-19 included (too slow for
  # lavapipe in CI: tests/wgsl_parity.rs skips it there).
  echo "== light models on NVIDIA's Vulkan against the CPU"
  for m in /tmp/rlx-data/light/light_*.onnx; do
    if "$bin/rlx-onnx" compare "$m" --target vulkan --against cpu --generate-missing --rtol 1e-3 --atol 1e-4 >"$out/compare-$(basename "$m" .onnx).txt" 2>&1; then
      echo "  $(basename "$m" .onnx): match"
    else
      echo "  $(basename "$m" .onnx): DIFFERS (see compare-$(basename "$m" .onnx).txt)"; status=1
    fi
  done
  echo "== CUDA, Vulkan and wgpu side by side"
  python3 scripts/gpu_backends_bench.py --binary "$bin/rlx-onnx" --out "$out" "${@:2}" || status=1
  echo "== single operators and dependent-dispatch chains, against PyTorch's kernels"
  python3 scripts/gpu_ops_bench.py --binary "$bin/rlx-onnx" | tee "$out/ops.txt" || status=1
fi

exit $status
