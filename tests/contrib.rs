//! ONNX Runtime's contrib ops (`com.microsoft` and the default-domain forms its
//! tools write): each one-node model of tests/data/contrib runs on the CPU
//! and matches the outputs ONNX Runtime gave (tests/data/contrib/make_cases.py
//! writes both).

mod common;

use rlx_onnx::conformance::{run_case, Outcome, Tolerance};
use rlx_onnx::importer::Registry;
use rlx_onnx::Target;

/// f32 outputs match ORT's this closely; integer outputs match exactly.
const TOL: Tolerance = Tolerance {
    rtol: 1e-4,
    atol: 1e-5,
};

#[test]
fn contrib_ops_match_onnxruntime() {
    let registry = Registry::standard();
    let cases = rlx_onnx::testdata::case_dirs(&common::root().join("tests/data/contrib")).unwrap();
    assert!(cases.len() >= 50, "{} contrib cases", cases.len());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| match run_case(case, &registry, Target::Cpu, TOL) {
            Outcome::Passed => None,
            other => Some(format!(
                "{}: {} {}",
                case.file_name().unwrap_or_default().to_string_lossy(),
                other.label(),
                match &other {
                    Outcome::Failed(m) | Outcome::Unsupported(m) => m.as_str(),
                    Outcome::Passed => "",
                }
            )),
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
