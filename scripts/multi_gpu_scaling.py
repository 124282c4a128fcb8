#!/usr/bin/env python3
"""Throughput of one rlx_onnx session against one session per GPU: what one
Ray Serve replica per GPU does (Ray's wheel cannot travel to the lent
machine, docs/perf.md), with PyTorch measured the same way in the same call.

Each replica is a process holding one session (`CUDAExecutionProvider` with
its `device_id`) that answers requests back to back: a batch of host inputs
in, host outputs out, as a Serve replica's batched handler does. The
replicas start together (a barrier) and run for the same time; the table
gives requests a second, the per-request p50/p99 and the scaling against
one replica. Run on the lent 2-GPU host, with the rlx_onnx wheel importable:

    python3 scripts/multi_gpu_scaling.py --models resnet50,bert --seconds 10

Models are built there with random weights (torchvision, transformers) and
exported with `torch.onnx.export` (dynamo=False); nothing is downloaded.
"""
import argparse
import multiprocessing as mp
import os
import tempfile
import time

import numpy as np


def module(name):
    """`name` with random weights, returning one tensor."""
    import torch

    torch.manual_seed(0)
    if name == "resnet50":
        import torchvision

        return torchvision.models.resnet50(weights=None).eval()
    if name == "bert":
        import transformers

        class Bert(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = transformers.BertModel(transformers.BertConfig(), add_pooling_layer=False)

            def forward(self, ids, mask):
                return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

        return Bert().eval()
    raise SystemExit(f"unknown model {name}")


def build(name, batch, path):
    """Exports `name` at `batch` to `path`; the feed."""
    import torch

    net = module(name)
    if name == "resnet50":
        xs, names = (torch.randn(batch, 3, 224, 224),), ["x"]
    else:
        ids = torch.randint(0, 30522, (batch, 128))
        xs, names = (ids, torch.ones_like(ids)), ["input_ids", "attention_mask"]
    torch.onnx.export(net, xs, path, input_names=names, output_names=["y"], dynamo=False, opset_version=17)
    return {n: x.numpy() for n, x in zip(names, xs)}


def replica(engine, name, path, feed, gpu, barrier, seconds, results):
    """One replica on `gpu`: warm up, wait for the others, answer requests."""
    if engine == "rlx":
        import rlx_onnx

        s = rlx_onnx.InferenceSession(path, providers=[("CUDAExecutionProvider", {"device_id": gpu})])

        def answer():
            return s.run(None, feed)

    else:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        dev = torch.device("cuda", gpu)
        net = module(name).to(dev)

        def answer():
            with torch.no_grad():
                return net(*[torch.from_numpy(v).to(dev) for v in feed.values()]).cpu().numpy()

    for _ in range(5):
        answer()
    barrier.wait()
    times = []
    end = time.perf_counter() + seconds
    while True:
        t0 = time.perf_counter()
        if t0 >= end:
            break
        answer()
        times.append(time.perf_counter() - t0)
    results.put((gpu, times))


def measure(engine, name, path, feed, gpus, seconds):
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(len(gpus)), ctx.Queue()
    procs = [
        ctx.Process(target=replica, args=(engine, name, path, feed, g, barrier, seconds, results)) for g in gpus
    ]
    for p in procs:
        p.start()
    got = [results.get() for _ in procs]
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"{engine} replica failed ({p.exitcode})")
    times = np.concatenate([np.array(t) for _, t in got]) * 1e3
    return len(times) / seconds, np.percentile(times, 50), np.percentile(times, 99)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet50,bert")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--engines", default="rlx,torch")
    args = ap.parse_args()
    import torch

    have = torch.cuda.device_count()
    if have < args.gpus:
        raise SystemExit(f"{args.gpus} GPUs asked, {have} here")
    print(f"{have} x {torch.cuda.get_device_name(0)}; batch {args.batch}, {args.seconds:.0f} s a run")
    print("| model | engine | replicas | requests/s | p50 ms | p99 ms | scaling |")
    print("|---|---|---|---|---|---|---|")
    tmp = tempfile.mkdtemp()
    for name in args.models.split(","):
        path = os.path.join(tmp, f"{name}.onnx")
        feed = build(name, args.batch, path)
        for engine in args.engines.split(","):
            one = None
            for n in (1, args.gpus):
                rate, p50, p99 = measure(engine, name, path, feed, list(range(n)), args.seconds)
                one = one or rate
                print(
                    f"| {name} b{args.batch} | {engine} | {n} | {rate:.1f} | {p50:.2f} | {p99:.2f} | "
                    f"{rate / one:.2f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
