#!/usr/bin/env python3
"""A bounded load test of the Serve deployment (serve_app.py): a local Ray
cluster, the model served by N replicas, a fixed number of requests from a
few concurrent clients, every answer checked against onnxruntime's on the
same input, p50/p99 latency and throughput printed, the cluster shut down at
the end. Exit status 1 if any answer differs.

    python3 examples/serve-ray/load_test.py golden/cnn/model.onnx [--replicas 1] [--clients 4] [--requests 200]
        [--provider CUDAExecutionProvider --gpus 1] [--rows 1]

The model's first input gets random rows of its declared shape, with the
batch axis (its first dim) set to --rows.
"""
import argparse
import os
import shutil
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--requests", type=int, default=200, help="in all, over the clients")
    ap.add_argument("--rows", type=int, default=1)
    ap.add_argument("--provider", default="CPUExecutionProvider")
    ap.add_argument("--gpus", type=float, default=0)
    ap.add_argument("--cpus", type=float, default=1)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    a = ap.parse_args()

    import onnxruntime
    import ray
    from ray import serve

    from serve_app import app

    import rlx_onnx

    model = os.path.abspath(a.model)
    ref = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    # Replicas load a compiled artifact: no ONNX parsing or compiling at start.
    tmp = tempfile.mkdtemp()
    artifact = os.path.join(tmp, "model.rlx")
    rlx_onnx.convert(model, artifact, target=a.provider)
    inp = ref.get_inputs()[0]
    shape = [a.rows] + [d if isinstance(d, int) else 1 for d in inp.shape[1:]]
    rng = np.random.default_rng(0)
    per_client = a.requests // a.clients
    feeds = [
        [{inp.name: rng.standard_normal(shape).astype(np.float32)} for _ in range(per_client)]
        for _ in range(a.clients)
    ]
    ray.init(num_cpus=max(2, int(a.replicas * a.cpus) + 1), include_dashboard=False, log_to_driver=False)
    try:
        handle = serve.run(app(artifact, a.replicas, a.provider, a.gpus, a.cpus), name="rlx", route_prefix=None)
        print(f"{a.replicas} replica(s) on {handle.providers.remote().result()}, {a.clients} clients, "
              f"{per_client * a.clients} requests of {a.rows} row(s)")
        handle.remote(feeds[0][0]).result()  # warm: every replica has compiled at start
        latencies = [[] for _ in range(a.clients)]
        bad = []

        def client(i):
            for feed in feeds[i]:
                t = time.perf_counter()
                got = handle.remote(feed).result()
                latencies[i].append(time.perf_counter() - t)
                want = ref.run(None, feed)
                for name, w in zip((o.name for o in ref.get_outputs()), want):
                    if not np.allclose(got[name], w, rtol=a.rtol, atol=a.atol):
                        bad.append(f"client {i}: output {name} differs by {np.abs(got[name] - w).max():.3g}")

        start = time.perf_counter()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
        lat = sorted(x for l in latencies for x in l)
        p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1e3  # noqa: E731
        print(f"p50 {p(0.50):.2f} ms, p99 {p(0.99):.2f} ms, {len(lat) / wall:.1f} requests/s "
              f"({len(lat)} answered, {len(bad)} wrong)")
        for b in bad[:5]:
            print("  " + b)
        return 1 if bad or len(lat) != per_client * a.clients else 0
    finally:
        serve.shutdown()
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
