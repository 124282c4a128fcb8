#!/usr/bin/env python3
"""PyTorch latency on the GPU, the peer of `rlx-onnx bench --target cuda`.

Runs ON THE LENT GPU MACHINE (torch 2.11 + torchvision 0.26 are installed
there), in the same call as rlx-onnx, and prints one line per model:

    torch <model> eager_ms=<median> graph_ms=<median> [fp16_graph_ms=<median>]

Batch 1, fp32 with TF32 off (what rlx-onnx's default precision matches), eval
mode, no autograd; median of --iters runs timed with CUDA events after warm-up.
`graph_ms` replays the whole forward captured as a CUDA graph. Models are the
torchvision architectures of the onnx `light/` models (where torchvision has
one) at the light models' input sizes, and the golden transformer's
architecture rebuilt in torch (golden/make_golden.py).
"""
import argparse
import statistics

import torch
import torchvision

# light model name -> (torchvision constructor, input shape)
MODELS = {
    "light_bvlc_alexnet": ("alexnet", (1, 3, 224, 224)),
    "light_densenet121": ("densenet121", (1, 3, 224, 224)),
    "light_inception_v1": ("googlenet", (1, 3, 224, 224)),
    "light_resnet50": ("resnet50", (1, 3, 224, 224)),
    "light_squeezenet": ("squeezenet1_0", (1, 3, 224, 224)),
    "light_vgg19": ("vgg19", (1, 3, 224, 224)),
    # shufflenet (v1), inception_v2 and zfnet512 have no torchvision twin.
    # The golden transformer block (golden/make_golden.py), batch x tokens.
    "golden_transformer_1x8": ("transformer", (1, 8)),
    "golden_transformer_8x64": ("transformer", (8, 64)),
    "golden_transformer_32x128": ("transformer", (32, 128)),
}


class Block(torch.nn.Module):
    """golden/make_golden.py's transformer(): one pre-norm encoder block
    (d 16, 2 heads, MLP 32 with the erf GELU) with an additive mask."""

    def __init__(self, d=16, heads=2, ff=32):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
        self.fc1, self.fc2 = torch.nn.Linear(d, ff), torch.nn.Linear(ff, d)

    def forward(self, x, mask):
        b, s, d = x.shape
        h = self.ln1(x)
        split = lambda t: t.view(b, s, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
        scores = q @ k.transpose(-1, -2) * (d // self.heads) ** -0.5 + mask
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.o(ctx)
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


def timed(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def graphed(model, x):
    """The forward captured once as a CUDA graph; returns its replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model(x)
    return graph.replay


def build(ctor):
    if ctor == "transformer":
        return Block()
    kwargs = {"weights": None}
    if ctor == "googlenet":
        kwargs.update(aux_logits=False, init_weights=True)
    return getattr(torchvision.models, ctor)(**kwargs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--fp16", action="store_true", help="also time fp16 graph replay")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}", flush=True)
    for name in a.models:
        ctor, shape = MODELS[name]
        with torch.inference_mode():
            model = build(ctor).eval().to(dev)
            if ctor == "transformer":
                b, s = shape
                x = torch.randn((b, s, 16), device=dev)
                mask = torch.zeros((b, 1, 1, s), device=dev)
                model = (lambda m: lambda x: m(x, mask))(model)
            else:
                x = torch.randn(shape, device=dev)
            eager = timed(lambda: model(x), a.iters, a.warmup)
            graph = timed(graphed(model, x), a.iters, a.warmup)
            line = f"torch {name} eager_ms={eager:.3f} graph_ms={graph:.3f}"
            if a.fp16 and ctor != "transformer":
                m16, x16 = model.half(), x.half()
                line += f" fp16_graph_ms={timed(graphed(m16, x16), a.iters, a.warmup):.3f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
