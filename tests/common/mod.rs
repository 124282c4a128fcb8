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
        panic!("ONNX test data missing at {}: run scripts/fetch-onnx-testdata.sh", dir.display());
    }
    eprintln!("skipping: ONNX test data missing at {} (run scripts/fetch-onnx-testdata.sh)", dir.display());
    None
}

/// The golden models (`golden/*.onnx`), sorted.
pub fn golden_models() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("golden/models"))
        .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "onnx")).collect())
        .unwrap_or_default();
    v.sort();
    v
}
