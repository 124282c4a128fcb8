#!/usr/bin/env python3
"""Write onnx 1.23's node test cases (opset 28) as files, once.

    python3 scripts/onnx123-cases.py [CACHE_DIR]     (default: .cache/onnx-testdata)

onnx 1.23 no longer ships its node cases as files: `onnx.backend.test.loader`
builds them in memory from the Python case definitions. This script installs the
pinned onnx wheel into CACHE_DIR/onnx-1.23.2/pkg (no dependencies: numpy,
protobuf and ml_dtypes come from the environment, as onnx 1.22 needs them too),
builds every node case with it and writes the backend-test layout that
onnx 1.22's wheel ships: CACHE_DIR/onnx-1.23.2/data/node/<case>/model.onnx and
test_data_set_N/{input,output}_M.pb. Prints the data directory.
"""
import os
import subprocess
import sys

VERSION = "1.23.2"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def proto_of(value, value_info, numpy_helper):
    """The serialised proto of one input or output, by the graph's declared type."""
    t = value_info.type
    if t.HasField("map_type"):
        return numpy_helper.from_dict(value, value_info.name)
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(value, value_info.name)
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(value, value_info.name)
    if hasattr(value, "SerializeToString"):
        return value
    return numpy_helper.from_array(value, value_info.name)


def write_cases(out):
    """Builds the node cases with the onnx on sys.path and writes them under ``out``."""
    import warnings

    warnings.simplefilter("ignore")  # the case definitions overflow casts on purpose
    import onnx
    from onnx import numpy_helper
    from onnx.backend.test import loader

    assert onnx.__version__ == VERSION, f"imported onnx {onnx.__version__}, not {VERSION}"
    cases = loader.load_node_model_tests()
    for case in cases:
        case_dir = os.path.join(out, case.name)
        os.makedirs(case_dir, exist_ok=True)
        graph = case.model.graph
        with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets):
            set_dir = os.path.join(case_dir, f"test_data_set_{i}")
            os.makedirs(set_dir, exist_ok=True)
            for kind, values, infos in (("input", inputs, graph.input), ("output", outputs, graph.output)):
                for j, value in enumerate(values):
                    with open(os.path.join(set_dir, f"{kind}_{j}.pb"), "wb") as f:
                        f.write(proto_of(value, infos[j], numpy_helper).SerializeToString())
    return len(cases)


def main():
    cache = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".cache", "onnx-testdata"))
    base = os.path.join(cache, f"onnx-{VERSION}")
    data = os.path.join(base, "data")
    if os.path.exists(os.path.join(data, ".complete")):
        print(data)
        return
    pkg = os.path.join(base, "pkg")
    if not os.path.isdir(os.path.join(pkg, "onnx")):
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--no-deps", "--only-binary=:all:", "--target", pkg, f"onnx=={VERSION}"],
            check=True, stdout=sys.stderr,
        )
    tmp = data + ".partial"
    subprocess.run(["rm", "-rf", tmp, data], check=True)
    # A child interpreter, so that this onnx (not an installed one) is the one imported.
    env = dict(os.environ, PYTHONPATH=pkg)
    subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--write", os.path.join(tmp, "node")],
        check=True, env=env, stdout=sys.stderr,
    )
    os.rename(tmp, data)
    open(os.path.join(data, ".complete"), "w").close()
    print(data)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write":
        n = write_cases(sys.argv[2])
        print(f"wrote {n} onnx {VERSION} node cases to {sys.argv[2]}")
    else:
        main()
