#!/usr/bin/env python3
"""Text generation with a key/value cache: rlx-onnx `generate` against
`transformers`' `generate` on the same device, in one call.

For each decoder (GPT-2 small, and a Llama-style decoder of our own
configuration: grouped-query attention, rotary embeddings, RMSNorm,
SwiGLU), with random weights (vector parameters moved off 0 and 1, weights
scaled so greedy decoding does not repeat one token), it

1. exports the decoder with its cache as `transformers`/Optimum lay it out
   (`input_ids`, `attention_mask`, `position_ids`, `past_key_values.N.key`
   /`.value` in; `logits`, `present.N.key`/`.value` out), with the
   TorchScript exporter (`dynamo=False`);
2. decodes greedily with `transformers`' `generate` (fp32, TF32 off):
   eager with its dynamic cache, and on a GPU with a static cache, with
   which `generate` compiles its decoding step itself (`torch.compile`,
   mode `reduce-overhead`: CUDA graphs), timing the prompt (a generate of
   one token) and the whole run;
3. runs `rlx-onnx generate --warmup 1` on the export (the cache written in
   place on the device; the untimed first generation plans and loads
   kernels) and reads its prefill and decode times (a decode step: choosing
   the tokens from the last logits, then the step on them);
4. checks that the tokens are PyTorch's, and prints per-token decode
   latency and the ratios.

    python3 scripts/generate_bench.py --binary gpu-bin/rlx-onnx --device cuda \\
        [--models gpt2,llama] [--prompt 128] [--new 256] [--batch 1,8]

On `--device cpu` the peer is ONNX Runtime (CPU) decoding the same export
with its cache bound through IOBinding, with `--threads N` for both;
`--tiny` makes small versions (a check of the export and the tokens).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

try:  # not needed with --models-from (ONNX Runtime the only peer)
    import torch
except ImportError:
    torch = None


def build(arch, tiny):
    """A decoder with random weights: (model, layers, kv heads, head dim, vocab)."""
    import transformers as tf

    torch.manual_seed(0)
    if arch == "gpt2":
        cfg = (tf.GPT2Config(n_embd=64, n_layer=2, n_head=2, vocab_size=256, n_positions=512)
               if tiny else tf.GPT2Config())
        cfg.pad_token_id = 0
        m = tf.GPT2LMHeadModel(cfg)
        layers, kv, hd = cfg.n_layer, cfg.n_head, cfg.n_embd // cfg.n_head
    elif arch == "llama":
        kw = (dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=256)
              if tiny else
              dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
                   num_key_value_heads=4, vocab_size=32000))
        cfg = tf.LlamaConfig(**kw, max_position_embeddings=4096, pad_token_id=0)
        m = tf.LlamaForCausalLM(cfg)
        layers, kv = cfg.num_hidden_layers, cfg.num_key_value_heads
        hd = cfg.hidden_size // cfg.num_attention_heads
    else:
        raise ValueError(arch)
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
            else:
                # Initial weights give near-uniform logits: greedy decoding
                # would repeat one token and check little.
                p.mul_(4.0)
    return m.eval(), layers, kv, hd, cfg.vocab_size


def with_past(model, layers):
    """The decoder with its cache as flat tensors, as Optimum exports it."""

    class WithPast(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model, self.layers = model, layers

        def forward(self, input_ids, attention_mask, position_ids, *past):
            import transformers as tf

            cache = tf.DynamicCache()
            for i in range(self.layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                             past_key_values=cache, use_cache=True)
            flat = []
            for layer in out.past_key_values.layers:
                flat += [layer.keys, layer.values]
            return (out.logits, *flat)

    return WithPast()


def export(model, layers, kv, hd, vocab, path):
    w = with_past(model, layers).eval()
    b, p, s = 1, 3, 2
    ids = torch.randint(0, vocab, (b, s))
    mask = torch.ones(b, p + s, dtype=torch.int64)
    pos = torch.arange(p, p + s)[None]
    past = [torch.randn(b, kv, p, hd) for _ in range(2 * layers)]
    names = ["input_ids", "attention_mask", "position_ids"] + [
        f"past_key_values.{i}.{t}" for i in range(layers) for t in ("key", "value")]
    outs = ["logits"] + [f"present.{i}.{t}" for i in range(layers) for t in ("key", "value")]
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
           "position_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    dyn.update({n: {0: "batch", 2: "past"} for n in names[3:]})
    dyn.update({n: {0: "batch", 2: "total"} for n in outs[1:]})
    with torch.no_grad():
        torch.onnx.export(w, (ids, mask, pos, *past), str(path), dynamo=False, opset_version=17,
                          input_names=names, output_names=outs, dynamic_axes=dyn)
    model.eval()


def hf_generate(model, prompt, new, device, compiled):
    """(tokens, seconds of a one-token generate, seconds of the whole run)."""
    ids = torch.from_numpy(prompt).to(device)
    mask = torch.ones_like(ids)
    # No end token: every run makes exactly `n` tokens, none suppressed
    # (`min_new_tokens` would mask Llama's end token 2 out of the logits).
    model.generation_config.eos_token_id = None
    kw = dict(attention_mask=mask, do_sample=False, pad_token_id=0)
    if compiled:
        # A static cache makes `generate` compile the decoding forward
        # itself (`torch.compile`, mode reduce-overhead: CUDA graphs).
        from transformers import CompileConfig

        kw["cache_implementation"] = "static"
        kw["compile_config"] = CompileConfig(mode="reduce-overhead", fullgraph=True)

    def run(n):
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=n, **kw)
        if device == "cuda":
            torch.cuda.synchronize()
        return out, time.perf_counter() - t

    for _ in range(2 if compiled else 1):  # compile and warm up
        run(new)
        run(1)
    one = min(run(1)[1] for _ in range(3))
    out, whole = min((run(new) for _ in range(2)), key=lambda r: r[1])
    return out[:, prompt.shape[1]:].cpu().numpy(), one, whole


def ort_generate(path, prompt, new, threads):
    """ONNX Runtime (CPU) decoding the same export greedily, its cache bound
    with IOBinding (each step's present values bound as the next step's
    past, never copied through numpy): (tokens, prefill ms, median decode
    ms per step)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    s = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    ins = {i.name: i for i in s.get_inputs()}
    outs = [o.name for o in s.get_outputs()]
    b = prompt.shape[0]
    past = [n for n in ins if n.startswith("past_key_values")]
    empty = {n: np.zeros([b if i == 0 else 0 if i == 2 else d for i, d in enumerate(ins[n].shape)], np.float32)
             for n in past}
    ids, pos, toks, times = prompt, 0, [], []
    cache = None
    for step in range(new):
        t = time.perf_counter()
        io = s.io_binding()
        io.bind_cpu_input("input_ids", ids)
        io.bind_cpu_input("attention_mask", np.ones((b, pos + ids.shape[1]), np.int64))
        io.bind_cpu_input("position_ids", np.tile(np.arange(pos, pos + ids.shape[1]), (b, 1)))
        for n in past:
            if cache is None:
                io.bind_cpu_input(n, empty[n])
            else:
                io.bind_ortvalue_input(n, cache[n.replace("past_key_values", "present")])
        for o in outs:
            io.bind_output(o)
        s.run_with_iobinding(io)
        vals = dict(zip(outs, io.get_outputs()))
        logits = vals["logits"].numpy()[:, -1]
        nxt = logits.argmax(-1)
        times.append((time.perf_counter() - t) * 1e3)
        toks.append(nxt)
        cache = vals
        pos += ids.shape[1]
        ids = nxt[:, None].astype(np.int64)
    return np.stack(toks, 1), times[0], float(np.median(times[1:]))


def rlx_generate(binary, model, prompt_file, new, device, threads, extra=()):
    """(tokens, prefill ms, decode ms per step, cache line) of rlx-onnx."""
    target = ["--target", "cuda"] if device == "cuda" else ["--threads", str(threads)]
    cmd = [binary, "generate", str(model), "--prompt-ids", str(prompt_file), "--max-new-tokens", str(new),
           "--warmup", "1", *target, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"rlx-onnx generate: {r.stderr.strip()[-800:]}")
    rows = [list(map(int, l.split("] ", 1)[1].split())) for l in r.stdout.splitlines() if l.startswith("[")]
    pre = float(re.search(r"prefill: .* in ([0-9.]+) ms", r.stderr).group(1))
    dec = float(re.search(r"decode: .*\(median ([0-9.]+)\)", r.stderr).group(1))
    cache = next((l for l in r.stderr.splitlines() if l.startswith("cache:")), "")
    prof = r.stdout[r.stdout.find("profile:"):] if "profile:" in r.stdout else ""
    if prof:
        print(prof, flush=True)
    return np.array(rows), pre, dec, cache


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="target/release/rlx-onnx")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="where the exports go [default: a temporary folder]")
    ap.add_argument("--models-from", default=None,
                    help="a folder of ARCH.onnx exports to use instead of building them (CPU only: ONNX "
                         "Runtime the only peer, no torch needed; scripts/model_skeleton.py carries them)")
    ap.add_argument("--vocab", type=int, default=None, help="prompt ids below this [--models-from: 1000]")
    ap.add_argument("--profile", action="store_true", help="print rlx-onnx's profile of one decode step")
    ap.add_argument("--top", type=int, default=15, help="steps the profile lists [default: 15]")
    a = ap.parse_args()
    if a.models_from and a.device != "cpu":
        raise SystemExit("--models-from compares with ONNX Runtime on the CPU: use --device cpu")
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    out = Path(a.out or tempfile.mkdtemp(prefix="rlx-generate-"))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for arch in a.models.split(","):
        if a.models_from:
            model, path, vocab = None, Path(a.models_from) / f"{arch}.onnx", a.vocab or 1000
        else:
            model, layers, kv, hd, vocab = build(arch, a.tiny)
            path = out / f"{arch}.onnx"
            export(model, layers, kv, hd, vocab, path)
            model = model.to(a.device)
        compiled = a.device == "cuda"
        for batch in map(int, a.batch.split(",")):
            gen = np.random.default_rng(batch)
            prompt = gen.integers(1, vocab, (1, a.prompt)).repeat(batch, 0).astype(np.int64)
            pfile = out / f"{arch}_prompt_{batch}.npy"
            np.save(pfile, prompt)
            peers = {}
            if model is not None:
                want, one, whole = hf_generate(model, prompt, a.new, a.device, False)
                peers["eager"] = (one, (whole - one) / (a.new - 1))
            if a.device == "cpu":
                got_o, pre_o, dec_o = ort_generate(path, prompt, a.new, a.threads)
                peers["ort"] = (pre_o / 1e3, dec_o / 1e3)
                if model is None:  # the reference is ONNX Runtime's decode
                    want = got_o
                elif not (got_o == want).all():
                    print(f"{arch} batch {batch}: onnxruntime's tokens differ from PyTorch's", flush=True)
            if compiled:
                got_c, one_c, whole_c = hf_generate(model, prompt, a.new, a.device, True)
                peers["compile"] = (one_c, (whole_c - one_c) / (a.new - 1))
                same_c = bool((got_c == want).all())
            else:
                same_c = None
            extra = ["--profile", "--top", str(a.top)] if a.profile else []
            toks, pre, dec, cache = rlx_generate(a.binary, path, pfile, a.new, a.device, a.threads, extra)
            same = toks.shape == want.shape and bool((toks == want).all())
            first_diff = None if same else int(np.argmax((toks != want).any(0))) if toks.shape == want.shape else -1
            rows.append((arch, batch, peers, pre, dec, same, first_diff, same_c, cache))
            print(f"{arch} batch {batch}: rlx prefill {pre:.2f} ms, decode {dec:.3f} ms/step; "
                  + ", ".join(f"{k} prefill {v[0] * 1e3:.2f} ms decode {v[1] * 1e3:.3f} ms/step" for k, v in peers.items())
                  + f"; tokens {'identical' if same else f'differ from step {first_diff}'}; {cache}", flush=True)
    print()
    print(f"device {a.device}, prompt {a.prompt}, new tokens {a.new}, fp32 (TF32 off); decode: ms per step "
          "(one token per row); rlx: median step of `rlx-onnx generate`; transformers: (whole - prompt) / "
          "(new - 1) of `generate`")
    eager = not a.models_from
    head = "| model | batch | rlx prefill | rlx decode |" + (" eager prefill | eager decode |" if eager else "")
    sep = "|---|---|---|---|" + ("---|---|" if eager else "")
    if a.device == "cuda":
        head += " compile prefill | compile decode | decode rlx/compile | compile tokens same |"
        sep += "---|---|---|---|"
    else:
        head += " ort prefill | ort decode | decode rlx/ort |"
        sep += "---|---|---|"
    print(head + (" tokens same as eager |" if eager else " tokens same as ORT |"))
    print(sep + "---|")
    for arch, batch, peers, pre, dec, same, first, same_c, cache in rows:
        line = f"| {arch} | {batch} | {pre:.2f} | {dec:.3f} |"
        if "eager" in peers:
            e = peers["eager"]
            line += f" {e[0] * 1e3:.2f} | {e[1] * 1e3:.3f} |"
        if "compile" in peers:
            c = peers["compile"]
            line += f" {c[0] * 1e3:.2f} | {c[1] * 1e3:.3f} | {dec / (c[1] * 1e3):.2f} | {same_c} |"
        if "ort" in peers:
            o = peers["ort"]
            line += f" {o[0] * 1e3:.2f} | {o[1] * 1e3:.3f} | {dec / (o[1] * 1e3):.2f} |"
        print(line + f" {same if same else f'no (step {first})'} |")


if __name__ == "__main__":
    main()
