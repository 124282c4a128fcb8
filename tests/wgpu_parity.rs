//! Cross-backend parity on a real wgpu device (lavapipe in CI): every golden
//! model and light model runs on wgpu and on the CPU backend, and the outputs
//! must agree (f32: rtol 1e-4, atol 1e-5; integers and bools exactly). Models
//! wgpu cannot run are listed in [`EXPECTED_UNSUPPORTED`] with the reason, and
//! the test fails if one of them starts to run (so the list only shrinks).
//! Without a device the tests skip, saying so, except under `CI`, where they fail.

mod common;

use std::sync::Arc;

use rlx_onnx::conformance::{compare, Tolerance};
use rlx_onnx::ir::Tensor;
use rlx_onnx::testdata::{data_set_dirs, read_data_set};
use rlx_onnx::wgpu::Context;
use rlx_onnx::{CompiledModel, Compiler, Error, Session, SessionOptions, Target};

const TOL: Tolerance = Tolerance {
    rtol: 1e-4,
    atol: 1e-5,
};

/// Golden models the wgpu backend does not run, and why.
const EXPECTED_UNSUPPORTED: &[(&str, &str)] = &[
    (
        "if_branches",
        "control flow (`if`) runs on the host; the wgpu backend has no kernel for it",
    ),
    (
        "loop_counter",
        "control flow (`loop`) runs on the host; the wgpu backend has no kernel for it",
    ),
    (
        "int_indexing",
        "i64 compare/where and cumsum need 64-bit integer arithmetic",
    ),
];

fn context() -> Option<Arc<Context>> {
    match Context::new() {
        Ok(c) => {
            eprintln!("wgpu adapter: {}", c.adapter);
            Some(Arc::new(c))
        }
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!("no wgpu device in CI (install lavapipe): {e}")
        }
        Err(e) => {
            eprintln!("skipping: {e}");
            None
        }
    }
}

fn run(
    model: CompiledModel,
    inputs: &[Tensor],
    ctx: Option<&Arc<Context>>,
) -> Result<Vec<Tensor>, Error> {
    let names = model.input_names();
    let options = SessionOptions { threads: 2 };
    let session = match ctx {
        Some(c) => Session::with_wgpu_context(model, options, c.clone())?,
        None => Session::new(model, options)?,
    };
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(inputs).collect();
    session.run(&named)
}

/// Runs `path` on both backends; `Ok(false)` when wgpu rejects the model.
fn parity(path: &std::path::Path, inputs: &[Tensor], ctx: &Arc<Context>) -> Result<bool, String> {
    let cpu = Compiler::new(Target::Cpu)
        .compile_file(path)
        .map_err(|e| e.to_string())?;
    let want = run(cpu, inputs, None).map_err(|e| e.to_string())?;
    let gpu = match Compiler::new(Target::Wgpu).compile_file(path) {
        Ok(m) => m,
        Err(Error::Pass(rlx_onnx::passes::PassError::Unsupported { .. })) => return Ok(false),
        Err(e) => return Err(e.to_string()),
    };
    let got = run(gpu, inputs, Some(ctx)).map_err(|e| e.to_string())?;
    if got.len() != want.len() {
        return Err(format!("{} outputs, CPU gives {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let d = compare(g, w, TOL).map_err(|e| format!("output {i}: {e}"))?;
        if d.mismatched > 0 {
            return Err(format!("output {i}: {d:?}"));
        }
    }
    Ok(true)
}

#[test]
fn golden_models_match_cpu() {
    let Some(ctx) = context() else { return };
    let mut bad = Vec::new();
    for case in common::golden_cases() {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let set = read_data_set(&data_set_dirs(&case).unwrap()[0]).unwrap();
        let expected = EXPECTED_UNSUPPORTED.iter().any(|(n, _)| *n == name);
        match parity(&case.join("model.onnx"), &set.inputs, &ctx) {
            Ok(true) if expected => bad.push(format!(
                "{name}: runs now; remove it from EXPECTED_UNSUPPORTED"
            )),
            Ok(false) if !expected => bad.push(format!("{name}: wgpu rejects it")),
            Ok(_) => {}
            Err(e) => bad.push(format!("{name}: {e}")),
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn wrong_inputs_are_errors() {
    let Some(ctx) = context() else { return };
    let case = common::root().join("golden/mlp");
    let model = Compiler::new(Target::Wgpu)
        .compile_file(&case.join("model.onnx"))
        .unwrap();
    let bad = Tensor::from_f32(&[4, 15], &[0.0; 60]).unwrap();
    assert!(run(model, &[bad], Some(&ctx)).is_err());
}
