#!/usr/bin/env python3
"""Transformers on CUDA: rlx-onnx against PyTorch on the same GPU, in one call.

Runs ON THE LENT GPU MACHINE (torch, torchvision and transformers are
installed there; nothing is downloaded). For each architecture it builds the
model with random weights, exports it with both ONNX exporters
(`dynamo=False`, the TorchScript one, and `dynamo=True`), runs the export
through `rlx-onnx run --target cuda` and checks its output against
PyTorch's, then prints the latency of

- PyTorch eager, PyTorch's eager forward replayed as a CUDA graph, and
  `torch.compile` (default mode) replayed as a CUDA graph, each timed with
  CUDA events on device-resident inputs (`*_dev`), and `torch.compile`'s
  graph host to host (`compile_h2h`: input copied up, output copied down,
  timed with the host clock after a synchronize);
- rlx-onnx `bench --target cuda` host to host (`rlx_h2h`, median) and with
  its inputs uploaded once and its outputs left on the device (`rlx_dev`,
  `bench --io device`: the library's IOBinding, timed with the host clock
  around each synchronous run).

Two ratios compare like with like: `h2h ratio` is `rlx_h2h / compile_h2h`,
`dev ratio` is `rlx_dev / compile_dev` (where the output is large, as GPT-2's
logits at 1,024 tokens, 206 MB in f32, the host copies dominate `h2h`:
torch's `.cpu()` into pageable memory). Precision:
fp32 with TF32 off (rlx-onnx `--precision exact`), and with `--precision
fp16` torch in fp16. Both sides run the same random weights from the
exported file.

    python3 scripts/transformer_bench.py --binary gpu-bin/rlx-onnx \
        [--models bert_1x128,gpt2_1x128] [--exporters script,dynamo] \
        [--precisions fp32,fp16] [--out DIR] [--profile]

`--tiny DIR` instead writes small versions of every architecture (both
exporters, with inputs and PyTorch's outputs in the ONNX test-case layout)
for the plan tests on a machine without a GPU.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

# name -> (architecture, batch, sequence length); ViT's "sequence" is its image side.
MODELS = {
    "bert_1x128": ("bert", 1, 128),
    "bert_8x128_pad": ("bert", 8, 128),
    "gpt2_1x128": ("gpt2", 1, 128),
    "gpt2_1x1024": ("gpt2", 1, 1024),
    "vit_b16": ("vit", 1, 224),
    "llama_gqa_1x256": ("llama", 1, 256),
    "encoder_1x1536": ("bert_long", 1, 1536),
}

TINY = {
    "bert": ("bert", 2, 16),
    "gpt2": ("gpt2", 1, 16),
    "vit": ("vit_tiny", 1, 32),
    "llama": ("llama", 1, 16),
}


def build(arch, tiny):
    """A model with random weights and a wrapper that returns one tensor."""
    model, vocab, fn = build_raw(arch, tiny)
    # Biases start at zero and norm scales at one, which the compiler would
    # fold away: move every vector parameter off them, as trained models are.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    return model, vocab, fn


def build_raw(arch, tiny):
    import transformers as tf

    torch.manual_seed(0)
    small = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    if arch in ("bert", "bert_long"):
        cfg = tf.BertConfig(**(small if tiny else {}),
                            max_position_embeddings=2048 if arch == "bert_long" else 512,
                            vocab_size=128 if tiny else 30522)
        m = tf.BertModel(cfg, add_pooling_layer=False)
        return m, cfg.vocab_size, lambda ids, mask: m(input_ids=ids, attention_mask=mask).last_hidden_state
    if arch == "gpt2":
        cfg = tf.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=128) if tiny else tf.GPT2Config()
        m = tf.GPT2LMHeadModel(cfg)
        return m, cfg.vocab_size, lambda ids, mask: m(input_ids=ids, attention_mask=mask, use_cache=False).logits
    if arch == "llama":
        kw = (dict(hidden_size=32, intermediate_size=80, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=128)
              if tiny else
              dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
                   num_key_value_heads=4, vocab_size=32000))
        cfg = tf.LlamaConfig(**kw, max_position_embeddings=4096)
        m = tf.LlamaForCausalLM(cfg)
        return m, cfg.vocab_size, lambda ids, mask: m(input_ids=ids, attention_mask=mask, use_cache=False).logits
    if arch in ("vit", "vit_tiny"):
        import torchvision

        if arch == "vit":
            m = torchvision.models.vit_b_16(weights=None)
        else:
            m = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                                     hidden_dim=32, mlp_dim=64)
        # torchvision starts the classifier at zero: outputs would be all zeros.
        torch.nn.init.normal_(m.heads.head.weight, std=0.02)
        return m, None, lambda x: m(x)
    raise ValueError(arch)


class Wrap(torch.nn.Module):
    def __init__(self, model, fn):
        super().__init__()
        self.model, self.fn = model, fn

    def forward(self, *xs):
        return self.fn(*xs)


def inputs_for(arch, batch, seq, vocab, gen):
    """(names, tensors) on the CPU."""
    if arch.startswith("vit"):
        return ["x"], [torch.randn((batch, 3, seq, seq), generator=gen)]
    ids = torch.randint(0, vocab, (batch, seq), generator=gen)
    # Decoders take a mask of ones (as Optimum exports them; without one the
    # TorchScript exporter meets aten::diff in transformers' mask code).
    mask = torch.ones((batch, seq), dtype=torch.int64)
    if arch.startswith("bert"):
        for b in range(1, batch):  # padded rows: batch 8 has 8 lengths
            mask[b, seq - (b * seq) // (2 * batch):] = 0
    return ["input_ids", "attention_mask"], [ids, mask]


def export(model, xs, names, path, dynamo):
    path.parent.mkdir(parents=True, exist_ok=True)
    kw = dict(input_names=names, output_names=["y"])
    if dynamo:
        torch.onnx.export(model, tuple(xs), str(path), dynamo=True, external_data=True, **kw)
    else:
        torch.onnx.export(model, tuple(xs), str(path), dynamo=False, opset_version=17, **kw)


def write_case(dir, names, xs, y):
    from onnx import numpy_helper

    d = dir / "test_data_set_0"
    d.mkdir(parents=True, exist_ok=True)
    for i, (n, x) in enumerate(zip(names, xs)):
        (d / f"input_{i}.pb").write_bytes(numpy_helper.from_array(x.numpy(), n).SerializeToString())
    (d / "output_0.pb").write_bytes(numpy_helper.from_array(y.numpy(), "y").SerializeToString())


def tiny(out):
    gen = torch.Generator().manual_seed(1)
    for name, (arch, batch, seq) in TINY.items():
        model, vocab, fn = build(arch, tiny=True)
        w = Wrap(model, fn).eval()
        names, xs = inputs_for(arch, batch, seq, vocab, gen)
        with torch.no_grad():
            y = w(*xs)
        for exporter in ("script", "dynamo"):
            d = out / f"{name}_{exporter}"
            try:
                export(w, xs, names, d / "model.onnx", exporter == "dynamo")
                write_case(d, names, xs, y)
                print(f"tiny {name} {exporter}: ok", flush=True)
            except Exception as e:  # an exporter that cannot take the model is a finding
                print(f"tiny {name} {exporter}: export failed: {type(e).__name__}: {e}".splitlines()[0], flush=True)


def cuda_time(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def host_time(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def graphed(fn, xs):
    """`fn(*xs)` captured as a CUDA graph: (replay, the captured output)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(*xs)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = fn(*xs)
    return g.replay, y


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return float("inf")
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def run_rlx(binary, model, feeds, precision, outdir, iters, profile):
    """(output, median ms, profile text) of rlx-onnx on CUDA."""
    args = []
    for n, f in feeds:
        args += ["--input", f"{n}={f}"]
    prec = ["--precision", precision] if precision != "exact" else []
    r = subprocess.run([binary, "run", str(model), "--target", "cuda", *prec, *args, "--output-dir", str(outdir),
                        "--force"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"rlx-onnx run: {r.stderr.strip()[-600:]}")
    y = np.load(outdir / "y.npy")
    b = subprocess.run([binary, "bench", str(model), "--target", "cuda", *prec, *args, "--iters", str(iters),
                        "--warmup", "5", *(["--profile", "--top", "40"] if profile else [])],
                       capture_output=True, text=True)
    if b.returncode != 0:
        raise RuntimeError(f"rlx-onnx bench: {b.stderr.strip()[-600:]}")
    med = float(next(l.split()[1] for l in b.stdout.splitlines() if l.startswith("median:")))
    d = subprocess.run([binary, "bench", str(model), "--target", "cuda", *prec, *args, "--iters", str(iters),
                        "--warmup", "5", "--io", "device"], capture_output=True, text=True)
    if d.returncode != 0:
        raise RuntimeError(f"rlx-onnx bench --io device: {d.stderr.strip()[-600:]}")
    dev = float(next(l.split()[1] for l in d.stdout.splitlines() if l.startswith("median:")))
    return y, med, dev, b.stdout


def bench_one(a, name, exporter, precision, work, rows):
    arch, batch, seq = MODELS[name]
    gen = torch.Generator().manual_seed(2)
    model, vocab, fn = build(arch, tiny=False)
    w = Wrap(model, fn).eval()
    names, xs = inputs_for(arch, batch, seq, vocab, gen)
    path = work / f"{name}_{exporter}" / "model.onnx"
    if not path.exists():
        t = time.time()
        with torch.no_grad():
            export(w, xs, names, path, exporter == "dynamo")
        print(f"  exported {name} ({exporter}) in {time.time() - t:.0f} s", flush=True)
    feeds = []
    for n, x in zip(names, xs):
        f = path.parent / f"{n}.npy"
        np.save(f, x.numpy())
        feeds.append((n, f))
    if a.export_only:
        return
    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]
    dev = torch.device("cuda")
    w = w.to(dev)
    if dt != torch.float32:
        w = w.to(dt)
    dxs = [x.to(dev) if x.dtype != torch.float32 else x.to(dev, dt) for x in xs]
    row = {"model": name, "exporter": exporter, "precision": precision}
    with torch.inference_mode():
        ref = w(*dxs).float().cpu()
        row["eager_dev"] = cuda_time(lambda: w(*dxs), a.iters, 5)
        try:
            replay, _ = graphed(w, dxs)
            row["graph_dev"] = cuda_time(replay, a.iters, 5)
        except Exception as e:
            row["graph_dev"] = None
            print(f"  eager CUDA graph failed: {type(e).__name__}", flush=True)
        try:
            c = torch.compile(w)
            for _ in range(3):
                c(*dxs)
            creplay, cy = graphed(c, dxs)
            row["compile_dev"] = cuda_time(creplay, a.iters, 5)
            hxs = [x.pin_memory() for x in (x if x.dtype != torch.float32 else x.to(dt) for x in xs)]
            targets = dxs

            def h2h():
                for t, h in zip(targets, hxs):
                    t.copy_(h, non_blocking=True)
                creplay()
                cy.cpu()

            row["compile_h2h"] = host_time(h2h, a.iters, 5)
            if a.peer_profile:
                (a.out / f"peer_profile_{name}_{exporter}_{precision}.txt").write_text(kernel_table(c, dxs))
        except Exception as e:
            row["compile_dev"] = row["compile_h2h"] = None
            print(f"  torch.compile failed: {type(e).__name__}: {e}".splitlines()[0], flush=True)
    del w, model
    torch.cuda.empty_cache()
    rlx_prec = {"fp32": "exact", "fp16": "fp16", "bf16": "bf16"}[precision]
    try:
        y, med, dev, prof = run_rlx(a.binary, path, feeds, rlx_prec, path.parent / f"out_{precision}", a.iters,
                                    a.profile)
        row["rlx_h2h"] = med
        row["rlx_dev"] = dev
        row["rel_err"] = rel_err(y, ref.numpy())
        if a.profile:
            (a.out / f"profile_{name}_{exporter}_{precision}.txt").write_text(prof)
    except Exception as e:
        row["rlx_h2h"] = row["rlx_dev"] = row["rel_err"] = None
        row["error"] = str(e).splitlines()[-1][:300]
    rows.append(row)
    print("  " + json.dumps(row), flush=True)


def kernel_table(fn, xs, runs=20):
    """Where `fn`'s device time goes: torch.profiler's kernels over `runs` calls
    (not replayed as a graph, so each kernel is its own record), slowest first."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn(*xs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            fn(*xs)
        torch.cuda.synchronize()
    return f"{runs} calls\n" + prof.key_averages().table(sort_by="cuda_time_total", row_limit=40, max_name_column_width=90)


def fmt(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def table(rows):
    head = ("model", "exporter", "prec", "eager", "graph", "compile", "compile h2h", "rlx h2h", "rlx dev",
            "h2h ratio", "dev ratio", "rel err")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def ratio(r, ours, peer):
        return r[ours] / r[peer] if r.get(ours) and r.get(peer) else None

    for r in rows:
        err = r.get("rel_err")
        lines.append("| " + " | ".join([
            r["model"], r["exporter"], r["precision"], fmt(r["eager_dev"]), fmt(r["graph_dev"]),
            fmt(r["compile_dev"]), fmt(r["compile_h2h"]), fmt(r["rlx_h2h"]) if r.get("rlx_h2h") else
            "error: " + r.get("error", "")[:80], fmt(r.get("rlx_dev")), fmt(ratio(r, "rlx_h2h", "compile_h2h"), 2),
            fmt(ratio(r, "rlx_dev", "compile_dev"), 2), "-" if err is None else f"{err:.1e}"]) + " |")
    return "\n".join(lines)


def sdpa(a):
    """PyTorch's flash SDPA on fp16 [1, 12, S, 64] against rlx-onnx's attention, in TFLOP/s."""
    from torch.nn.functional import scaled_dot_product_attention as attn
    from torch.nn.attention import SDPBackend, sdpa_kernel

    for s in (128, 1024, 2048, 4096):
        q, k, v = (torch.randn(1, 12, s, 64, device="cuda", dtype=torch.float16) for _ in range(3))
        flops = 4 * 12 * s * s * 64
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            ms = cuda_time(lambda: attn(q, k, v), 50, 5)
        print(f"sdpa flash fp16 1x12x{s}x64: {ms:.4f} ms {flops / ms / 1e9:.1f} TFLOP/s", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default="gpu-bin/rlx-onnx")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--exporters", default="script,dynamo")
    ap.add_argument("--precisions", default="fp32")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--work", default="/tmp/rlx-transformers")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--profile", action="store_true", help="keep rlx-onnx's per-node profile of each run")
    ap.add_argument("--peer-profile", action="store_true",
                    help="write torch.compile's kernels and their times (torch.profiler) beside --profile's")
    ap.add_argument("--sdpa", action="store_true", help="also time PyTorch's flash SDPA")
    ap.add_argument("--tiny", help="write the small test models here and stop")
    ap.add_argument("--export-only", action="store_true",
                    help="export the models and write their inputs under --work, time nothing")
    a = ap.parse_args()
    a.out = Path(a.out)
    if a.tiny:
        tiny(Path(a.tiny))
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}", flush=True)
    if a.sdpa:
        sdpa(a)
    work, rows = Path(a.work), []
    for name in a.models.split(","):
        for exporter in a.exporters.split(","):
            for precision in a.precisions.split(","):
                print(f"{name} {exporter} {precision}", flush=True)
                try:
                    bench_one(a, name, exporter, precision, work, rows)
                except Exception:
                    print(traceback.format_exc().splitlines()[-1], flush=True)
                    rows.append({"model": name, "exporter": exporter, "precision": precision, "eager_dev": None,
                                 "graph_dev": None, "compile_dev": None, "compile_h2h": None, "rlx_h2h": None,
                                 "error": "export or torch failed"})
    if a.export_only:
        return
    (a.out / "transformer_bench.json").write_text(json.dumps(rows, indent=1))
    print(table(rows))


if __name__ == "__main__":
    sys.exit(main())
