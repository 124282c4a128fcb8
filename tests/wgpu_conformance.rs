//! The ONNX node tests on the wgpu backend (lavapipe in CI), against the
//! expected-failures list `tests/expected/wgpu.txt` (`folder/case  reason`).
//! The run fails if a case not on the list fails, or if a listed case passes
//! (so the list only shrinks). Without a device it skips, except under `CI`.

mod common;

use std::sync::Arc;

use rlx_onnx::conformance::{run_case_on, Outcome, Tolerance};
use rlx_onnx::importer::Registry;
use rlx_onnx::testdata::case_dirs;
use rlx_onnx::wgpu::Context;
use rlx_onnx::{Devices, Target};

#[test]
fn wgpu_node_suite_matches_expected_failures() {
    let Some(data) = common::testdata() else {
        return;
    };
    let ctx = match Context::new() {
        Ok(c) => Arc::new(Devices::with_wgpu(Arc::new(c))),
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!("no wgpu device in CI (install lavapipe): {e}")
        }
        Err(e) => {
            eprintln!("skipping: {e}");
            return;
        }
    };
    let registry = Registry::standard();
    let expected = common::expected_failures("wgpu.txt");
    let mut surprises = Vec::new();
    let mut passed = 0;
    let mut seen = 0;
    for case in case_dirs(&data.join("node")).unwrap() {
        let key = format!("node/{}", case.file_name().unwrap().to_string_lossy());
        let outcome = run_case_on(
            &case,
            &registry,
            Target::Wgpu,
            Tolerance::default(),
            Some(&ctx),
        );
        seen += 1;
        let ok = outcome == Outcome::Passed;
        passed += usize::from(ok);
        match (ok, expected.contains_key(&key)) {
            (true, true) => surprises.push(format!(
                "{key}: passes now; remove it from tests/expected/wgpu.txt"
            )),
            (false, false) => {
                surprises.push(format!("{key}: {} ({})", outcome.label(), outcome.reason()))
            }
            _ => {}
        }
    }
    eprintln!("wgpu: {passed} of {seen} node cases pass");
    assert!(seen >= 1765, "only {seen} cases found");
    assert!(
        surprises.is_empty(),
        "{} surprises:\n{}",
        surprises.len(),
        surprises.join("\n")
    );
    assert!(passed >= 1220, "only {passed} node cases pass");
}
