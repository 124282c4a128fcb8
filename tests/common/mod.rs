//! Shared helpers of the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The ONNX backend-test data (`node/`, `light/`, ...), fetched by
/// `scripts/fetch-onnx-testdata.sh` into `.cache/onnx-testdata` or pointed to by
/// `RLX_ONNX_TESTDATA`. Missing data fails the test on CI and skips it elsewhere.
pub fn testdata() -> Option<PathBuf> {
    let dir = std::env::var_os("RLX_ONNX_TESTDATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".cache/onnx-testdata/onnx-1.22.0/data"));
    if dir.join("node").is_dir() {
        return Some(dir);
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "ONNX test data missing at {}: run scripts/fetch-onnx-testdata.sh",
            dir.display()
        );
    }
    eprintln!(
        "skipping: ONNX test data missing at {} (run scripts/fetch-onnx-testdata.sh)",
        dir.display()
    );
    None
}

/// The golden model case directories (`golden/<name>/model.onnx`), sorted.
pub fn golden_cases() -> Vec<PathBuf> {
    rlx_onnx::testdata::case_dirs(&root().join("golden")).unwrap_or_default()
}

/// The golden models (`golden/<name>/model.onnx`), sorted.
pub fn golden_models() -> Vec<PathBuf> {
    golden_cases()
        .into_iter()
        .map(|c| c.join("model.onnx"))
        .collect()
}
