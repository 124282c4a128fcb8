#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora under fuzz/corpus/ (kept small: they
are committed). Seeds: the golden models and the smallest ONNX node-suite
model of each op type (import), the golden graphs' IR text (ir_text), the
golden models converted to artifacts by --binary (artifact), tensor files
of several dtypes (tensor_files), random bytes (structured, text_ops).

    python3 scripts/fuzz-seeds.py --binary target/release/rlx-onnx [--testdata DIR]
"""
import argparse
import io
import os
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"


def write(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def node_suite(testdata, limit_bytes):
    """The smallest model.onnx per op type of the node suite."""
    best = {}
    node = Path(testdata) / "node"
    for case in sorted(node.iterdir()):
        model = case / "model.onnx"
        if not model.is_file() or "_expanded" in case.name:
            continue
        size = model.stat().st_size
        op = case.name[len("test_"):].split("_")[0]
        if size <= limit_bytes and (op not in best or size < best[op][0]):
            best[op] = (size, model)
    return [m for _, m in best.values()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", help="an rlx-onnx binary, to convert artifacts")
    ap.add_argument("--testdata", default=os.environ.get("RLX_ONNX_TESTDATA"))
    a = ap.parse_args()
    shutil.rmtree(CORPUS, ignore_errors=True)
    golden = sorted(p for p in (ROOT / "golden").iterdir() if (p / "model.onnx").is_file())
    for g in golden:
        write("import", f"golden_{g.name}.onnx", (g / "model.onnx").read_bytes())
    if a.testdata:
        for m in node_suite(a.testdata, 1500):
            write("import", f"node_{m.parent.name}.onnx", m.read_bytes())
    for snap in sorted((ROOT / "golden" / "snapshots").glob("*.snap")):
        if not snap.name.startswith(("import__", "o2__")):
            continue
        text = snap.read_text().split("---\n", 2)[-1]
        if len(text) <= 8192:
            write("ir_text", snap.stem + ".rlxir", text.encode())
    if a.binary:
        for g in golden:
            if g.name in ("external_data", "transformer", "cnn"):
                continue
            out = CORPUS / "artifact" / f"{g.name}.rlx"
            out.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([a.binary, "convert", str(g / "model.onnx"), "-o", str(out), "--force"],
                           check=True, capture_output=True)
    arrays = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "i64": np.array([[1, -2], [3, 4]], dtype=np.int64),
        "bool": np.array([True, False, True]),
        "f16": np.array([0.5, -1.0], dtype=np.float16),
        "u8": np.arange(4, dtype=np.uint8),
        "scalar": np.array(3.5, dtype=np.float64),
    }
    for name, arr in arrays.items():
        buf = io.BytesIO()
        np.save(buf, arr)
        write("tensor_files", f"npy_{name}", b"\x00" + buf.getvalue())
    for name, save in (("plain", np.savez), ("compressed", np.savez_compressed)):
        buf = io.BytesIO()
        save(buf, a=arrays["f32"], b=arrays["i64"])
        write("tensor_files", f"npz_{name}", b"\x01" + buf.getvalue())
    for g in golden:
        for pb in sorted((g / "test_data_set_0").glob("*.pb")):
            if pb.stat().st_size <= 4096:
                write("tensor_files", f"pb_{g.name}_{pb.stem}", b"\x02" + pb.read_bytes())
    rng = random.Random(7)
    for i in range(8):
        write("structured", f"random_{i}", bytes(rng.randrange(256) for _ in range(64 << (i % 4))))
    rng = random.Random(11)
    for i in range(6):
        write("text_ops", f"random_{i}", bytes(rng.randrange(256) for _ in range(64 << (i % 4))))
    total = sum(f.stat().st_size for f in CORPUS.rglob("*") if f.is_file())
    print(f"{sum(1 for f in CORPUS.rglob('*') if f.is_file())} seeds, {total} bytes, in {CORPUS}")


if __name__ == "__main__":
    main()
