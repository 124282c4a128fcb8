#!/usr/bin/env python3
"""scikit-learn estimators converted by skl2onnx, with ONNX Runtime references.

    python3 -m pip install --target /tmp/skl scikit-learn==1.9.1 skl2onnx==1.20.0 "protobuf<7"
    PYTHONPATH=/tmp/skl python3 tests/data/sklearn/make_cases.py [CASE...]

Each estimator is trained on a small synthetic data set (fixed seeds), converted
with skl2onnx (classifiers without ZipMap: probabilities as a tensor), and
written in the ONNX backend-test layout (model.onnx, test_data_set_0/) beside
this script, with outputs from ONNX Runtime 1.31.1 on held-out rows. (skl2onnx
1.20 writes numpy bools into int attributes, which protobuf 7 refuses.)
tests/contrib.rs checks every case: labels exactly, the rest within 1e-5.
"""
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
import sklearn
import skl2onnx
from onnx import numpy_helper
from skl2onnx import to_onnx
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import (ExtraTreesClassifier, GradientBoostingClassifier, GradientBoostingRegressor,
                              HistGradientBoostingClassifier, RandomForestClassifier, RandomForestRegressor)
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.neighbors import KNeighborsRegressor
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler
from sklearn.svm import SVC, SVR, LinearSVR, OneClassSVM
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

assert sklearn.__version__ == "1.9.1", sklearn.__version__
assert skl2onnx.__version__ == "1.20.0", skl2onnx.__version__
assert ort.__version__ == "1.31.1", ort.__version__

HERE = os.path.dirname(os.path.abspath(__file__))
# Case names given on the command line: write only those.
ONLY = set(sys.argv[1:])


def data(kind, classes=2, n=240, features=6):
    if kind == "clf":
        x, y = make_classification(n, features, n_informative=4, n_classes=classes, random_state=7)
    else:
        x, y = make_regression(n, features, n_informative=4, noise=0.3, random_state=7)
    x = x.astype(np.float32)
    return x[:200], y[:200], x[200:]


# Class names for the estimators trained on string labels.
NAMES = np.array(["bird", "cat", "dog", "eel"])


def map_proto(row):
    """A dict of class -> probability as a MapProto (numpy_helper.from_dict
    does not take string keys)."""
    m = onnx.MapProto()
    keys = list(row)
    if isinstance(keys[0], str):
        m.key_type = onnx.TensorProto.STRING
        m.string_keys.extend(k.encode() for k in keys)
    else:
        m.key_type = onnx.TensorProto.INT64
        m.keys.extend(int(k) for k in keys)
    m.values.elem_type = onnx.SequenceProto.TENSOR
    m.values.tensor_values.extend(numpy_helper.from_array(np.array(row[k], dtype=np.float32)) for k in keys)
    return m


def save(name, est, kind, classes=2, names=False, zipmap=False):
    if ONLY and name not in ONLY:
        return
    x, y, test = data(kind, classes)
    if names:
        y = NAMES[y]
    est.fit(x, y)
    options = {id(est): {"zipmap": False}} if kind == "clf" and not zipmap else None
    model = to_onnx(est, x[:1], options=options, target_opset={"": 17, "ai.onnx.ml": 3})
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: test}
    outs = sess.run(None, feed)
    d = os.path.join(HERE, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save_model(model, os.path.join(d, "model.onnx"))
    onnx.save_tensor(numpy_helper.from_array(test), os.path.join(d, "test_data_set_0", "input_0.pb"))
    for i, y in enumerate(outs):
        path = os.path.join(d, "test_data_set_0", f"output_{i}.pb")
        if isinstance(y, list):
            # ZipMap's probabilities: a sequence of maps, one per row.
            seq = onnx.SequenceProto(elem_type=onnx.SequenceProto.MAP)
            seq.map_values.extend(map_proto(row) for row in y)
            with open(path, "wb") as f:
                f.write(seq.SerializeToString())
        else:
            onnx.save_tensor(numpy_helper.from_array(np.asarray(y)), path)
    ops = sorted({f"{n.domain or 'ai.onnx'}:{n.op_type}" for n in model.graph.node})
    print(f"{name}: {', '.join(ops)}")


def main():
    save("linear_regression", LinearRegression(), "reg")
    save("logistic_regression_3", LogisticRegression(max_iter=500), "clf", classes=3)
    save("scaled_logistic_regression", make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), "clf")
    save("decision_tree_classifier_3", DecisionTreeClassifier(max_depth=5, random_state=0), "clf", classes=3)
    save("decision_tree_regressor", DecisionTreeRegressor(max_depth=5, random_state=0), "reg")
    save("random_forest_classifier", RandomForestClassifier(n_estimators=6, max_depth=4, random_state=0), "clf")
    save("random_forest_regressor", RandomForestRegressor(n_estimators=6, max_depth=4, random_state=0), "reg")
    save("extra_trees_classifier_3", ExtraTreesClassifier(n_estimators=5, max_depth=4, random_state=0), "clf", classes=3)
    save("gradient_boosting_classifier", GradientBoostingClassifier(n_estimators=8, max_depth=3, random_state=0), "clf")
    save("gradient_boosting_classifier_3", GradientBoostingClassifier(n_estimators=6, max_depth=3, random_state=0), "clf", classes=3)
    save("gradient_boosting_regressor", GradientBoostingRegressor(n_estimators=8, max_depth=3, random_state=0), "reg")
    save("hist_gradient_boosting_classifier", HistGradientBoostingClassifier(max_iter=8, max_depth=3, random_state=0), "clf")
    save("mlp_classifier_3", make_pipeline(MinMaxScaler(), MLPClassifier((16,), max_iter=300, random_state=0)), "clf", classes=3)
    save("kneighbors_regressor", KNeighborsRegressor(n_neighbors=4), "reg")
    save("svc_rbf_3", make_pipeline(StandardScaler(), SVC(kernel="rbf")), "clf", classes=3)
    save("svc_poly", make_pipeline(StandardScaler(), SVC(kernel="poly", degree=2)), "clf")
    save("svc_sigmoid_4", make_pipeline(StandardScaler(), SVC(kernel="sigmoid")), "clf", classes=4)
    save("svr_rbf", make_pipeline(StandardScaler(), SVR(kernel="rbf", C=50.0)), "reg")
    save("linear_svr", LinearSVR(max_iter=5000, random_state=0), "reg")
    save("one_class_svm", make_pipeline(StandardScaler(), OneClassSVM(nu=0.2)), "reg")
    # String class labels: the label output is a string tensor.
    save("logistic_regression_names_3", LogisticRegression(max_iter=500), "clf", classes=3, names=True)
    save("random_forest_classifier_names_3",
         RandomForestClassifier(n_estimators=6, max_depth=4, random_state=0), "clf", classes=3, names=True)
    save("svc_rbf_names_3", make_pipeline(StandardScaler(), SVC(kernel="rbf")), "clf", classes=3, names=True)
    # skl2onnx's default classifier output: probabilities through ZipMap.
    save("logistic_regression_zipmap_3", LogisticRegression(max_iter=500), "clf", classes=3, zipmap=True)
    save("random_forest_classifier_zipmap_names", RandomForestClassifier(n_estimators=6, max_depth=4, random_state=0),
         "clf", names=True, zipmap=True)


if __name__ == "__main__":
    main()
