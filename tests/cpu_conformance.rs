//! The ONNX backend test suite on the CPU backend, against the expected-failures
//! lists `tests/expected/cpu.txt` (onnx 1.22's files) and
//! `tests/expected/cpu-onnx123.txt` (onnx 1.23's generated node cases), each
//! `folder/case  reason`, one per line.
//!
//! A run fails if a case not on its list fails, or if a listed case passes (so
//! the lists only shrink). Regenerate with `scripts/update-expected.sh cpu` and
//! `scripts/update-expected.sh cpu-onnx123`.

mod common;

use rlx_onnx::conformance::{run_case, Outcome, Tolerance};
use rlx_onnx::importer::Registry;
use rlx_onnx::testdata::case_dirs;
use rlx_onnx::Target;

/// Folders of the onnx wheel's test data that CI runs.
pub const FOLDERS: &[&str] = &["node", "simple", "pytorch-converted", "pytorch-operator"];

#[test]
fn cpu_suite_matches_expected_failures() {
    let Some(data) = common::testdata() else {
        return;
    };
    let registry = Registry::standard();
    let expected = common::expected_failures("cpu.txt");
    let mut surprises = Vec::new();
    let mut node_passed = 0;
    let mut seen = 0;
    for folder in FOLDERS {
        for case in case_dirs(&data.join(folder)).unwrap() {
            let key = format!("{folder}/{}", case.file_name().unwrap().to_string_lossy());
            let outcome = run_case(&case, &registry, Target::Cpu, Tolerance::default());
            seen += 1;
            let passed = outcome == Outcome::Passed;
            if passed && *folder == "node" {
                node_passed += 1;
            }
            match (passed, expected.contains_key(&key)) {
                (true, true) => surprises.push(format!(
                    "{key}: passes now; remove it from tests/expected/cpu.txt"
                )),
                (false, false) => {
                    surprises.push(format!("{key}: {} ({})", outcome.label(), outcome.reason()))
                }
                _ => {}
            }
        }
    }
    assert!(seen > 1800, "only {seen} cases found");
    assert!(
        surprises.is_empty(),
        "{} surprises:\n{}",
        surprises.len(),
        surprises.join("\n")
    );
    assert!(node_passed >= 1450, "only {node_passed} node cases pass");
    assert_eq!(
        rlx_cpu::scratch::overflows(),
        0,
        "a kernel took more scratch on a thread than its plan declared"
    );
}

/// onnx 1.23's node cases (opset 28, built in memory by onnx and written out by
/// `scripts/onnx123-cases.py`) against `tests/expected/cpu-onnx123.txt`.
#[test]
fn cpu_onnx123_node_cases_match_expected_failures() {
    let Some(data) = common::onnx123_testdata() else {
        return;
    };
    let registry = Registry::standard();
    let expected = common::expected_failures("cpu-onnx123.txt");
    let mut surprises = Vec::new();
    let mut passed = 0;
    let cases = case_dirs(&data.join("node")).unwrap();
    for case in &cases {
        let key = format!("node/{}", case.file_name().unwrap().to_string_lossy());
        let outcome = run_case(case, &registry, Target::Cpu, Tolerance::default());
        let ok = outcome == Outcome::Passed;
        passed += usize::from(ok);
        match (ok, expected.contains_key(&key)) {
            (true, true) => surprises.push(format!(
                "{key}: passes now; remove it from tests/expected/cpu-onnx123.txt"
            )),
            (false, false) => {
                surprises.push(format!("{key}: {} ({})", outcome.label(), outcome.reason()))
            }
            _ => {}
        }
    }
    assert!(cases.len() > 1850, "only {} cases found", cases.len());
    assert!(
        surprises.is_empty(),
        "{} surprises:\n{}",
        surprises.len(),
        surprises.join("\n")
    );
    assert!(passed >= 1760, "only {passed} onnx 1.23 node cases pass");
}
