"""Shared cases: the golden models of the repository and, when fetched
(`python3 scripts/corpus/fetch.py`), the real-model corpus, each with its
inputs in the ONNX backend-test layout."""

import glob
import os

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.environ.get("RLX_CORPUS_CACHE", os.path.join(REPO, ".cache", "corpus"))


def read_inputs(case_dir):
    """The arrays of test_data_set_0/input_N.pb, in order."""
    from onnx import load_tensor, numpy_helper

    files = sorted(
        glob.glob(os.path.join(case_dir, "test_data_set_0", "input_*.pb")),
        key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]),
    )
    return [numpy_helper.to_array(load_tensor(f)) for f in files]


def golden_cases():
    return sorted(
        d for d in glob.glob(os.path.join(REPO, "golden", "*"))
        if os.path.exists(os.path.join(d, "model.onnx"))
    )


def corpus_cases():
    return sorted(glob.glob(os.path.join(CORPUS, "cases", "*")))


def assert_close(got, want, rtol, atol, what):
    """Outputs as ONNX Runtime returns them: arrays, lists, dicts."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), what
        for k in want:
            assert_close(got[k], want[k], rtol, atol, f"{what}[{k!r}]")
        return
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), what
        for i, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, rtol, atol, f"{what}[{i}]")
        return
    if isinstance(want, (float, int, str)):
        want, got = np.asarray(want), np.asarray(got)
    assert isinstance(got, np.ndarray), f"{what}: {type(got)}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, ORT {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, ORT {want.shape}"
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.fixture(scope="session")
def ort():
    return pytest.importorskip("onnxruntime")
