//! The ONNX backend test suite on the CPU backend, against the expected-failures
//! list `tests/expected/cpu.txt` (`folder/case  reason`, one per line).
//!
//! The run fails if a case not on the list fails, or if a listed case passes (so
//! the list only shrinks). Regenerate with `scripts/update-expected.sh cpu`.

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
}
