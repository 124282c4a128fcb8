//! `convert --target cuda`: the artifact carries the PTX of every kernel
//! module of the model's schedule, so a session on it compiles nothing
//! (checked on the plan half here, without a GPU; `cuda_parity` checks the
//! NVRTC count on a device). A corrupt PTX section is a typed error.

mod common;

use rlx_onnx::artifact::{self, ArtifactError};
use rlx_onnx::cuda::CompileOptions;
use rlx_onnx::ir::Tensor;
use rlx_onnx::testdata::{data_set_dirs, read_data_set};
use rlx_onnx::{Compiler, Session, SessionOptions, Target};

fn cnn_set() -> rlx_onnx::testdata::DataSet {
    let case = common::root().join("golden/cnn");
    read_data_set(&data_set_dirs(&case).unwrap()[0]).unwrap()
}

/// golden/cnn for CUDA, its batch bound to the data set's, kernels prebuilt.
fn prebuilt_cnn() -> Option<Vec<u8>> {
    if let Err(why) = common::nvrtc() {
        assert!(
            std::env::var_os("CI").is_none(),
            "NVRTC is required in CI: {why}"
        );
        eprintln!("skipping: {why}");
        return None;
    }
    let n = cnn_set().inputs[0].dims()[0] as i64;
    let mut m = Compiler::new(Target::Cuda)
        .bind("N", n)
        .compile_file(&common::root().join("golden/cnn/model.onnx"))
        .unwrap();
    let n = m.prebuild_cuda((9, 0), &CompileOptions::default()).unwrap();
    assert!(n > 0);
    Some(artifact::to_bytes(&m))
}

#[test]
fn every_module_of_a_loaded_artifact_is_prebuilt() {
    let Some(bytes) = prebuilt_cnn() else { return };
    let m = artifact::from_bytes(&bytes).unwrap();
    let ptx = m.cuda_ptx.clone().expect("the artifact carries PTX");
    assert_eq!(ptx.arch, "sm_90");
    assert!(ptx.modules.values().all(|p| p.contains(".target sm_90")));
    let set = cnn_set();
    let names = m.input_names();
    let session = Session::new(m, SessionOptions { threads: 1 }).unwrap();
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&set.inputs).collect();
    let s = session.cuda_schedule(&named).unwrap();
    assert!(!s.modules.is_empty());
    for m in &s.modules {
        assert!(m.ptx.is_some(), "module `{}` has no prebuilt PTX", m.name);
    }
    assert!(s.to_string().contains("PTX prebuilt"));
}

#[test]
fn symbolic_inputs_and_other_targets_are_refused_by_name() {
    let mut cpu = Compiler::new(Target::Cpu)
        .compile_file(&common::root().join("golden/cnn/model.onnx"))
        .unwrap();
    let e = cpu
        .prebuild_cuda((9, 0), &CompileOptions::default())
        .unwrap_err();
    assert!(e.to_string().contains("not cpu"), "{e}");
    let mut t = Compiler::new(Target::Cuda)
        .compile_file(&common::root().join("golden/cnn/model.onnx"))
        .unwrap();
    let e = t
        .prebuild_cuda((9, 0), &CompileOptions::default())
        .unwrap_err();
    assert!(e.to_string().contains("symbolic dims"), "{e}");
}

#[test]
fn a_corrupt_ptx_section_is_an_error() {
    let Some(bytes) = prebuilt_cnn() else { return };
    // The PTX section is the last one: cut into it, keep the header's
    // length and checksum honest, and the reader reports truncation.
    let mut b = bytes[..bytes.len() - 100].to_vec();
    let payload = (b.len() - 32) as u64;
    b[16..24].copy_from_slice(&payload.to_le_bytes());
    let crc = crc32fast::hash(&b[32..]);
    b[24..28].copy_from_slice(&crc.to_le_bytes());
    match artifact::from_bytes(&b) {
        Err(ArtifactError::Malformed(_) | ArtifactError::Truncated(_)) => {}
        other => panic!("expected a typed error, got {other:?}"),
    }
}
