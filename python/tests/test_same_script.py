"""ONNX Runtime's five-line script, run twice: once with `onnxruntime`, once
with `rlx_onnx` in its place, on the golden models and the real-model corpus;
the outputs must agree (rtol 1e-3, atol 1e-5 unless the corpus states a
wider tolerance for the model, with its reason)."""

import os
import sys

import pytest

import rlx_onnx
from conftest import REPO, assert_close, corpus_cases, golden_cases, read_inputs

sys.path.insert(0, os.path.join(REPO, "scripts", "corpus"))
from fetch import session_options  # noqa: E402
from models import TOLERANCE  # noqa: E402


def expected_failures():
    """tests/expected/corpus.txt: the cases the CLI's corpus check expects
    to fail, each with its reason."""
    out = {}
    for line in open(os.path.join(REPO, "tests", "expected", "corpus.txt")):
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, why = line.partition(" ")
            out[name] = why.strip()
    return out


EXPECTED = expected_failures()


def script(ort, model, inputs):
    """What a user writes: options, a session, the input names, a run. The
    options are those the corpus's references are made with
    (scripts/corpus/fetch.py), for which its tolerances are stated: one
    thread, ORT's graph optimizations off, and for dynamic int8 models its
    fused kernels with exact 8-bit products (unfused, without AVX-512 VNNI,
    ORT sums u8 x s8 pairs in saturating 16-bit lanes)."""
    options = session_options(ort, model)
    session = ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, inputs)))


def check(ort, case):
    model = os.path.join(case, "model.onnx")
    inputs = read_inputs(case)
    want = script(ort, model, inputs)
    got = script(rlx_onnx, model, inputs)
    rtol, atol, _ = TOLERANCE.get(os.path.basename(case), (1e-3, 1e-5, ""))
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, rtol, atol, f"{os.path.basename(case)} output {i}")


@pytest.mark.parametrize("case", golden_cases(), ids=os.path.basename)
def test_golden(ort, case):
    check(ort, case)


def corpus_params():
    for case in corpus_cases():
        why = EXPECTED.get(os.path.basename(case))
        marks = [pytest.mark.xfail(reason=why, strict=True)] if why else []
        yield pytest.param(case, marks=marks, id=os.path.basename(case))


@pytest.mark.parametrize("case", corpus_params())
def test_corpus(ort, case):
    check(ort, case)
