//! The ONNX backend test suite on the CPU backend, against the expected-failures
//! list `tests/expected/cpu.txt` (`folder/case  reason`, one per line).
//!
//! The run fails if a case not on the list fails, or if a listed case passes (so
//! the list only shrinks). Regenerate with `scripts/update-expected.sh cpu`.

mod common;

use std::collections::BTreeMap;

use rlx_onnx::conformance::{run_case, Outcome, Tolerance};
use rlx_onnx::importer::Registry;
use rlx_onnx::testdata::case_dirs;
use rlx_onnx::Target;

/// Folders of the onnx wheel's test data that CI runs.
pub const FOLDERS: &[&str] = &["node", "simple", "pytorch-converted", "pytorch-operator"];

fn expected(name: &str) -> BTreeMap<String, String> {
    let path = common::root().join("tests/expected").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once(char::is_whitespace) {
            Some((k, r)) => (k.to_string(), r.trim().to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

#[test]
fn cpu_suite_matches_expected_failures() {
    let Some(data) = common::testdata() else {
        return;
    };
    let registry = Registry::standard();
    let expected = expected("cpu.txt");
    for (case, reason) in &expected {
        assert!(
            !reason.is_empty(),
            "expected failure `{case}` has no reason"
        );
    }
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
