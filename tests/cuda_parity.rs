//! Cross-backend parity on a CUDA GPU: every golden and light model runs on
//! CUDA and on the CPU backend, and the outputs must agree (f32: rtol 1e-4,
//! atol 1e-5; integers and bools exactly). A model CUDA refuses is reported
//! by name with the reason, and counts as a failure: the test asserts parity
//! of every model. Without a CUDA device (CI has none) it skips, saying so;
//! `scripts/gpu-check.sh` runs it on the lent GPU machine.

mod common;

use std::sync::Arc;

use rlx_onnx::conformance::{compare, Tolerance};
use rlx_onnx::ir::Tensor;
use rlx_onnx::testdata::{arange_input, data_set_dirs, light_models, read_data_set};
use rlx_onnx::{Compiler, Devices, Error, Session, SessionOptions, Target};

const TOL: Tolerance = Tolerance {
    rtol: 1e-4,
    atol: 1e-5,
};

fn devices() -> Option<Arc<Devices>> {
    let d = Arc::new(Devices::new());
    match d.cuda() {
        Ok(c) => {
            eprintln!("cuda device: {}", c.name());
            Some(d)
        }
        Err(e) => {
            eprintln!("skipping: {e}");
            None
        }
    }
}

fn run(
    target: Target,
    path: &std::path::Path,
    inputs: &[Tensor],
    devices: &Arc<Devices>,
) -> Result<Vec<Tensor>, Error> {
    let model = Compiler::new(target).compile_file(path)?;
    let names = model.input_names();
    let session = Session::with_devices(model, SessionOptions { threads: 4 }, devices.clone())?;
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(inputs).collect();
    session.run(&named)
}

fn parity(path: &std::path::Path, inputs: &[Tensor], devices: &Arc<Devices>) -> Result<(), String> {
    let want = run(Target::Cpu, path, inputs, devices).map_err(|e| format!("cpu: {e}"))?;
    let got = run(Target::Cuda, path, inputs, devices).map_err(|e| e.to_string())?;
    if got.len() != want.len() {
        return Err(format!("{} outputs, CPU gives {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let d = compare(g, w, TOL).map_err(|e| format!("output {i}: {e}"))?;
        if d.mismatched > 0 {
            return Err(format!("output {i}: {d:?}"));
        }
    }
    Ok(())
}

#[test]
fn golden_and_light_models_match_cpu() {
    let Some(devices) = devices() else { return };
    let mut cases: Vec<(String, std::path::PathBuf, Vec<Tensor>)> = Vec::new();
    for case in common::golden_cases() {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let set = read_data_set(&data_set_dirs(&case).unwrap()[0]).unwrap();
        cases.push((
            format!("golden/{name}"),
            case.join("model.onnx"),
            set.inputs,
        ));
    }
    // Both branches of the golden If.
    let case = common::root().join("golden/if_branches");
    let set = read_data_set(&data_set_dirs(&case).unwrap()[0]).unwrap();
    let x = &set.inputs[0];
    let neg: Vec<f32> = x.as_slice::<f32>().unwrap().iter().map(|v| -v).collect();
    let neg = Tensor::from_f32(x.dims(), &neg).unwrap();
    cases.push((
        "golden/if_branches (else)".into(),
        case.join("model.onnx"),
        vec![neg],
    ));
    if let Some(data) = common::testdata() {
        for m in light_models(&data.join("light")).unwrap() {
            let c = Compiler::new(Target::Cpu).compile_file(&m.model).unwrap();
            let g = &c.graph;
            let dims = g.node(g.inputs()[0]).outputs[0].shape.as_known().unwrap();
            let x = arange_input(&dims).unwrap();
            cases.push((format!("light/{}", m.name), m.model.clone(), vec![x]));
        }
    }
    let mut bad = Vec::new();
    for (name, path, inputs) in &cases {
        match parity(path, inputs, &devices) {
            Ok(()) => eprintln!("parity ok: {name}"),
            Err(e) => {
                eprintln!("parity FAILED: {name}: {e}");
                bad.push(format!("{name}: {e}"));
            }
        }
    }
    eprintln!(
        "cuda parity: {} of {} models match the CPU",
        cases.len() - bad.len(),
        cases.len()
    );
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
