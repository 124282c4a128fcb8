//! Shared helpers of the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The ONNX backend-test data (`node/`, `light/`, ...), fetched by
/// `scripts/fetch-onnx-testdata.sh` into `.cache/onnx-testdata` or pointed to by
/// `RLX_ONNX_TESTDATA`. Missing data fails the test on CI and skips it elsewhere.
pub fn testdata() -> Option<PathBuf> {
    testdata_at(
        "RLX_ONNX_TESTDATA",
        "onnx-1.22.0/data",
        "scripts/fetch-onnx-testdata.sh",
    )
}

/// onnx 1.23's node cases (opset 28), written as files by
/// `scripts/onnx123-cases.py` into `.cache/onnx-testdata/onnx-1.23.2/data` or
/// pointed to by `RLX_ONNX123_TESTDATA`. Missing data fails on CI, skips elsewhere.
pub fn onnx123_testdata() -> Option<PathBuf> {
    testdata_at(
        "RLX_ONNX123_TESTDATA",
        "onnx-1.23.2/data",
        "scripts/onnx123-cases.py",
    )
}

fn testdata_at(env: &str, default: &str, script: &str) -> Option<PathBuf> {
    let dir = std::env::var_os(env)
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".cache/onnx-testdata").join(default));
    if dir.join("node").is_dir() {
        return Some(dir);
    }
    if std::env::var_os("CI").is_some() {
        panic!("ONNX test data missing at {}: run {script}", dir.display());
    }
    eprintln!(
        "skipping: ONNX test data missing at {} (run {script})",
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

/// An expected-failures list `tests/expected/<name>` (`folder/case  reason` per
/// line, `#` comments): case -> reason. Every case must give a reason.
pub fn expected_failures(name: &str) -> BTreeMap<String, String> {
    let path = root().join("tests/expected").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let list: BTreeMap<String, String> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once(char::is_whitespace) {
            Some((k, r)) => (k.to_string(), r.trim().to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect();
    for (case, reason) in &list {
        assert!(
            !reason.is_empty(),
            "expected failure `{case}` in {name} has no reason"
        );
    }
    list
}

/// Makes NVRTC loadable for compile checks: the `nvidia-cuda-nvrtc` wheel
/// (found through python3) or a CUDA toolkit. `Err` says why not; callers
/// fail under `CI` (which installs the wheel) and skip elsewhere.
pub fn nvrtc() -> Result<(), String> {
    let mut dirs = Vec::new();
    let py = std::process::Command::new("python3")
        .args(["-c", "import nvidia; print(list(nvidia.__path__)[0])"])
        .output();
    if let Ok(out) = py {
        let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !p.is_empty() {
            dirs.push(PathBuf::from(p).join("cu13/lib"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    rlx_onnx::cuda::compile::load_nvrtc_from(&dirs)
        .map_err(|e| format!("{e} (pip install nvidia-cuda-nvrtc==13.0.88)"))
}

/// Devices with a wgpu context opened, or `None` (saying why) without a
/// wgpu device; under `CI` a missing device is a failure (CI installs
/// lavapipe).
pub fn wgpu_devices() -> Option<std::sync::Arc<rlx_onnx::Devices>> {
    let devices = std::sync::Arc::new(rlx_onnx::Devices::new());
    match devices.wgpu() {
        Ok(_) => Some(devices),
        Err(e) if std::env::var_os("CI").is_some() => panic!("no wgpu device in CI: {e}"),
        Err(e) => {
            eprintln!("skipping: {e}");
            None
        }
    }
}

/// Devices with a Vulkan context opened, or `None` (saying why) without a
/// Vulkan device; under `CI` a missing device or validation layer is a
/// failure (CI installs lavapipe and the layer). `validate` turns the
/// Khronos validation layer on (where installed, outside CI): each run then
/// fails on anything it reports.
pub fn vulkan_devices(validate: bool) -> Option<std::sync::Arc<rlx_onnx::Devices>> {
    use rlx_onnx::vulkan::{ContextOptions, Validation};
    let ci = std::env::var_os("CI").is_some();
    let validation = match (validate, ci) {
        (false, _) => Validation::Off,
        (true, true) => Validation::Required,
        (true, false) => Validation::IfPresent,
    };
    let devices = std::sync::Arc::new(rlx_onnx::Devices::with_vulkan_options(ContextOptions {
        validation,
        ..ContextOptions::default()
    }));
    match devices.vulkan() {
        Ok(c) => {
            eprintln!(
                "vulkan device: {} (validation {})",
                c.describe(),
                c.validates()
            );
            Some(devices)
        }
        Err(e) if ci => panic!("no Vulkan device in CI: {e}"),
        Err(e) => {
            eprintln!("skipping: {e}");
            None
        }
    }
}

/// Asserts that `got` matches `want` output by output within `tol`, naming
/// `what` and the output when not.
pub fn check_outputs(
    got: &[rlx_onnx::ir::Tensor],
    want: &[rlx_onnx::ir::Tensor],
    tol: rlx_onnx::conformance::Tolerance,
    what: &str,
) {
    assert_eq!(got.len(), want.len(), "{what}: output count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if let Err(e) = rlx_onnx::conformance::compare(g, w, tol) {
            panic!("{what}: output {i}: {e}");
        }
    }
}

/// The prompts of golden/decoder and ONNX Runtime's greedy continuation of
/// each (golden/make_golden.py), as rows of token ids.
pub fn decoder_reference() -> (Vec<Vec<i64>>, Vec<Vec<i64>>) {
    let dir = root().join("golden/decoder");
    let rows = |f: &str| {
        let t = rlx_onnx::npy::read(&dir.join(f)).unwrap();
        let w = t.dims()[1];
        let v = t.to_i64_vec().unwrap();
        v.chunks(w).map(<[i64]>::to_vec).collect::<Vec<_>>()
    };
    (rows("prompts.npy"), rows("greedy.npy"))
}

/// A model of IR text (`rlx-ir 2` form), as the importer would hand it to
/// the compiler: no weights, opset 17.
#[allow(dead_code)]
pub fn imported(text: &str) -> rlx_onnx::importer::ImportedModel {
    rlx_onnx::importer::ImportedModel {
        graph: rlx_onnx::ir::text::parse_graph(text).unwrap(),
        weights: Default::default(),
        ir_version: 8,
        opsets: vec![(String::new(), 17)],
        producer: String::new(),
        metadata: Default::default(),
    }
}
