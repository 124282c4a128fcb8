//! Import-only conformance: imported models infer the output types the ONNX
//! test data expects.

mod common;

use rlx_onnx::conformance::{check_import, check_import_with, Outcome};
use rlx_onnx::importer::{import_file, Registry};
use rlx_onnx::testdata::{arange_input, case_dirs, light_models, read_pb};

#[test]
fn node_suite_imports() {
    let Some(data) = common::testdata() else {
        return;
    };
    let registry = Registry::standard();
    let cases = case_dirs(&data.join("node")).unwrap();
    assert_eq!(cases.len(), 1765);
    let mut passed = 0;
    let mut failed = Vec::new();
    for case in &cases {
        match check_import(case, &registry) {
            Outcome::Passed => passed += 1,
            Outcome::Failed(r) => failed.push(format!("{}: {r}", case.display())),
            Outcome::Unsupported(_) => {}
        }
    }
    assert!(
        passed >= 1500,
        "{passed} passed; failures:\n{}",
        failed.join("\n")
    );
}

#[test]
fn light_models_import_with_declared_output_shapes() {
    let Some(data) = common::testdata() else {
        return;
    };
    let registry = Registry::standard();
    let models = light_models(&data.join("light")).unwrap();
    assert_eq!(models.len(), 9);
    for m in models {
        let model = import_file(&m.model, &registry).unwrap_or_else(|e| panic!("{}: {e}", m.name));
        let g = &model.graph;
        let inputs: Vec<_> = g
            .inputs()
            .iter()
            .map(|&i| {
                arange_input(
                    &g.node(i).outputs[0]
                        .shape
                        .as_known()
                        .expect("light inputs are static"),
                )
                .unwrap()
            })
            .collect();
        let expected = read_pb(&m.output).unwrap();
        assert_eq!(
            check_import_with(&m.model, &registry, &inputs, &[expected]),
            Outcome::Passed,
            "{}",
            m.name
        );
    }
}

#[test]
fn golden_models_import_with_expected_output_shapes() {
    let registry = Registry::standard();
    for case in common::golden_cases() {
        assert_eq!(
            check_import(&case, &registry),
            Outcome::Passed,
            "{}",
            case.display()
        );
    }
}
