//! `-O0` and `-O2` agree (f32 rtol 1e-4, f16/bf16 2 ulp) on every golden model, every light
//! model and every node-suite case that passes on the CPU, with the verifier
//! on after every pass.

mod common;

use rlx_onnx::conformance::Outcome;
use rlx_onnx::equivalence::{agree, eq_tol, equivalence_case, outputs_at};
use rlx_onnx::importer::{import_file, Registry};
use rlx_onnx::testdata::{arange_input, case_dirs, data_set_dirs, light_models, read_data_set};
use rlx_onnx::OptLevel;

#[test]
fn golden_models_agree_at_o0_and_o2() {
    let registry = Registry::standard();
    for case in common::golden_cases() {
        let m = import_file(&case.join("model.onnx"), &registry).unwrap();
        let sets: Vec<_> = data_set_dirs(&case)
            .unwrap()
            .iter()
            .map(|d| read_data_set(d).unwrap().inputs)
            .collect();
        let o0 = outputs_at(&m, OptLevel::O0, &sets)
            .unwrap_or_else(|e| panic!("{}: -O0: {e}", case.display()));
        let o2 = outputs_at(&m, OptLevel::O2, &sets)
            .unwrap_or_else(|e| panic!("{}: -O2: {e}", case.display()));
        agree(&o0, &o2, eq_tol).unwrap_or_else(|e| panic!("{}: {e}", case.display()));
    }
}

#[test]
fn light_models_agree_at_o0_and_o2() {
    let Some(data) = common::testdata() else {
        return;
    };
    let registry = Registry::standard();
    for lm in light_models(&data.join("light")).unwrap() {
        let m = import_file(&lm.model, &registry).unwrap();
        let dims = m.graph.node(m.graph.inputs()[0]).outputs[0]
            .shape
            .as_known()
            .unwrap();
        let sets = vec![vec![arange_input(&dims).unwrap()]];
        let o0 =
            outputs_at(&m, OptLevel::O0, &sets).unwrap_or_else(|e| panic!("{}: -O0: {e}", lm.name));
        let o2 =
            outputs_at(&m, OptLevel::O2, &sets).unwrap_or_else(|e| panic!("{}: -O2: {e}", lm.name));
        agree(&o0, &o2, eq_tol).unwrap_or_else(|e| panic!("{}: {e}", lm.name));
    }
}

#[test]
fn node_suite_agrees_at_o0_and_o2() {
    let Some(data) = common::testdata() else {
        return;
    };
    let registry = Registry::standard();
    let mut failures = Vec::new();
    let mut passed = 0;
    for case in case_dirs(&data.join("node")).unwrap() {
        match equivalence_case(&case, &registry) {
            Outcome::Passed => passed += 1,
            Outcome::Failed(r) => failures.push(format!("{}: {r}", case.display())),
            Outcome::Unsupported(_) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} cases disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(passed >= 1400, "only {passed} node cases compared");
}
