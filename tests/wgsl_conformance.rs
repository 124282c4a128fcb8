//! The ONNX node tests on the two WGSL devices, wgpu and Vulkan (lavapipe in
//! CI), against their expected-failures lists `tests/expected/{wgpu,vulkan}.txt`
//! (`folder/case  reason`). A run fails if a case not on its list fails, or
//! if a listed case passes (so the lists only shrink). Without a device it
//! skips, except under `CI`.

mod common;

use std::sync::Arc;

use rlx_onnx::conformance::{run_case_on, Outcome, Tolerance};
use rlx_onnx::importer::Registry;
use rlx_onnx::testdata::case_dirs;
use rlx_onnx::{Devices, Target};

/// Runs the node folder on `target` and checks it against `list`.
fn node_suite(target: Target, devices: Arc<Devices>, list: &str, at_least: usize) {
    let Some(data) = common::testdata() else {
        return;
    };
    let registry = Registry::standard();
    let expected = common::expected_failures(list);
    let mut surprises = Vec::new();
    let mut passed = 0;
    let mut seen = 0;
    for case in case_dirs(&data.join("node")).unwrap() {
        let key = format!("node/{}", case.file_name().unwrap().to_string_lossy());
        let outcome = run_case_on(
            &case,
            &registry,
            target,
            Tolerance::default(),
            Some(&devices),
        );
        seen += 1;
        let ok = outcome == Outcome::Passed;
        passed += usize::from(ok);
        match (ok, expected.contains_key(&key)) {
            (true, true) => surprises.push(format!(
                "{key}: passes now; remove it from tests/expected/{list}"
            )),
            (false, false) => {
                surprises.push(format!("{key}: {} ({})", outcome.label(), outcome.reason()))
            }
            _ => {}
        }
    }
    eprintln!("{target}: {passed} of {seen} node cases pass");
    assert!(seen >= 1765, "only {seen} cases found");
    assert!(
        surprises.is_empty(),
        "{} surprises:\n{}",
        surprises.len(),
        surprises.join("\n")
    );
    assert!(passed >= at_least, "only {passed} node cases pass");
}

#[test]
fn wgpu_node_suite_matches_expected_failures() {
    if let Some(devices) = common::wgpu_devices() {
        node_suite(Target::Wgpu, devices, "wgpu.txt", 1220);
    }
}

/// With the validation layer on: a call it finds wrong fails the case.
#[test]
fn vulkan_node_suite_matches_expected_failures() {
    if let Some(devices) = common::vulkan_devices(true) {
        node_suite(Target::Vulkan, devices, "vulkan.txt", 1220);
    }
}
