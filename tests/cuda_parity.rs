//! Cross-backend parity on a CUDA GPU: every golden, light and small
//! exported transformer model runs on
//! CUDA and on the CPU backend, and the outputs must agree (f32: rtol 1e-4,
//! atol 1e-5; integers and bools exactly). A model CUDA refuses is reported
//! by name with the reason, and counts as a failure: the test asserts parity
//! of every model. Without a CUDA device (CI has none) it skips, saying so;
//! `scripts/gpu-check.sh` runs it on the lent GPU machine. The light models
//! and the small exported transformers (`tests/data/exported`) also run with
//! `--precision tf32` and `fp16`, within their own bounds.

mod common;

use std::sync::Arc;

use rlx_onnx::conformance::{compare, Tolerance};
use rlx_onnx::ir::Tensor;
use rlx_onnx::testdata::{arange_input, data_set_dirs, light_models, read_data_set};
use rlx_onnx::{Compiler, Devices, Error, Precision, Session, SessionOptions, Target};

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
    run_at(target, Precision::Exact, path, inputs, devices)
}

fn run_at(
    target: Target,
    precision: Precision,
    path: &std::path::Path,
    inputs: &[Tensor],
    devices: &Arc<Devices>,
) -> Result<Vec<Tensor>, Error> {
    let model = Compiler::new(target)
        .precision(precision)
        .compile_file(path)?;
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

/// The small exported transformers of `tests/data/exported` (both PyTorch
/// exporters): attention reading Q, K and V as views of packed projections,
/// masks, causality, grouped heads.
fn exported() -> Vec<(String, std::path::PathBuf, Vec<Tensor>)> {
    let root = common::root().join("tests/data/exported");
    let mut names: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let case = root.join(&name);
            let set = read_data_set(&data_set_dirs(&case).unwrap()[0]).unwrap();
            (
                format!("exported/{name}"),
                case.join("model.onnx"),
                set.inputs,
            )
        })
        .collect()
}

/// Golden models whose shapes depend on the input data, which the CUDA
/// backend's static schedules refuse: `if_rank` (the rank of `by_sign`'s
/// output) and `while_loops` (the trip count of `until`).
const DATA_DEPENDENT: &[&str] = &["if_rank", "while_loops"];

#[test]
fn golden_and_light_models_match_cpu() {
    let Some(devices) = devices() else { return };
    let mut cases: Vec<(String, std::path::PathBuf, Vec<Tensor>)> = Vec::new();
    for case in common::golden_cases() {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let set = read_data_set(&data_set_dirs(&case).unwrap()[0]).unwrap();
        if DATA_DEPENDENT.contains(&name.as_str()) {
            // Refused by name, never run some other way.
            let e = run(
                Target::Cuda,
                &case.join("model.onnx"),
                &set.inputs,
                &devices,
            );
            assert!(
                matches!(
                    e,
                    Err(Error::Cuda(rlx_onnx::cuda::CudaError::Unsupported(_)))
                ),
                "{name} on CUDA: {e:?}"
            );
            continue;
        }
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
    cases.extend(exported());
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

/// The light models and the exported transformers in TF32 and fp16 against
/// the CPU in exact fp32: the
/// largest error relative to the output's largest magnitude, at most 1e-2
/// (TF32: a 10-bit mantissa in the products) and 5e-2 (fp16 activations).
#[test]
fn light_models_in_tf32_and_fp16_stay_close_to_exact() {
    let Some(devices) = devices() else { return };
    let Some(data) = common::testdata() else {
        return;
    };
    let mut bad = Vec::new();
    let mut models: Vec<(String, std::path::PathBuf, Vec<Tensor>)> = Vec::new();
    for m in light_models(&data.join("light")).unwrap() {
        let c = Compiler::new(Target::Cpu).compile_file(&m.model).unwrap();
        let g = &c.graph;
        let dims = g.node(g.inputs()[0]).outputs[0].shape.as_known().unwrap();
        models.push((
            m.name.clone(),
            m.model.clone(),
            vec![arange_input(&dims).unwrap()],
        ));
    }
    models.extend(exported());
    for (name, model, x) in &models {
        let want = run(Target::Cpu, model, x, &devices).unwrap();
        // bf16 keeps 8 bits of mantissa where f16 keeps 11 (measured on an
        // H200, 2026-12-01: at most 1.24e-2, BERT's).
        for (p, bound) in [
            (Precision::Tf32, 1e-2),
            (Precision::Fp16, 5e-2),
            (Precision::Bf16, 5e-2),
        ] {
            let got = match run_at(Target::Cuda, p, model, x, &devices) {
                Ok(g) => g,
                Err(e) => {
                    bad.push(format!("{name} {p}: {e}"));
                    continue;
                }
            };
            let mut worst = 0f64;
            for (g, w) in got.iter().zip(&want) {
                let (g, w) = (g.as_slice::<f32>().unwrap(), w.as_slice::<f32>().unwrap());
                let scale = w
                    .iter()
                    .fold(0f64, |a, v| a.max(f64::from(v.abs())))
                    .max(1e-30);
                for (a, b) in g.iter().zip(w) {
                    worst = worst.max(f64::from((a - b).abs()) / scale);
                }
            }
            eprintln!("{name} {p}: max error {worst:.2e} of the output's range");
            if !(worst <= bound) {
                bad.push(format!(
                    "{name} {p}: max error {worst:.2e} (bound {bound:.0e})"
                ));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// An artifact converted for CUDA with its kernels prebuilt loads and runs
/// on a fresh context without one NVRTC compile, and matches the CPU.
#[test]
fn a_prebuilt_artifact_runs_without_compiling() {
    let Some(probe) = devices() else { return };
    let arch = probe.cuda().unwrap().capability();
    let path = common::root().join("golden/cnn/model.onnx");
    let case = common::root().join("golden/cnn");
    let set = read_data_set(&data_set_dirs(&case).unwrap()[0]).unwrap();
    let mut m = Compiler::new(Target::Cuda)
        .bind("N", set.inputs[0].dims()[0] as i64)
        .compile_file(&path)
        .unwrap();
    m.prebuild_cuda(arch, &rlx_onnx::cuda::CompileOptions::default())
        .unwrap();
    let loaded = rlx_onnx::artifact::from_bytes(&rlx_onnx::artifact::to_bytes(&m)).unwrap();
    let fresh = Arc::new(Devices::new());
    let ctx = fresh.cuda().unwrap();
    let names = loaded.input_names();
    let session =
        Session::with_devices(loaded, SessionOptions { threads: 1 }, fresh.clone()).unwrap();
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&set.inputs).collect();
    let got = session.run(&named).unwrap();
    assert_eq!(
        ctx.compiler().compiled(),
        0,
        "loading the artifact compiled kernels"
    );
    let want = run(Target::Cpu, &path, &set.inputs, &probe).unwrap();
    for (g, w) in got.iter().zip(&want) {
        let d = compare(g, w, TOL).unwrap();
        assert_eq!(d.mismatched, 0, "{d:?}");
    }
    eprintln!("prebuilt artifact: ran with 0 NVRTC compiles");
}

/// LayerNorm (with its statistics), RmsNorm and both residual norms over
/// many rows of the lengths each CUDA row kernel takes (a warp holding
/// 2, 4 or 8 vectors a lane, partly filled or full; a length that is not a
/// whole number of vectors; a row too long for a warp), in f32, f16 and
/// bf16, against the CPU backend: f32 within TOL, the half types within
/// two units in the last place of the output (2^-9 and 2^-6 relative).
/// Without a GPU the graphs are still planned for CUDA and run on the CPU.
#[test]
fn norms_of_many_rows_match_cpu() {
    let devices = Arc::new(Devices::new());
    let on_gpu = devices.cuda().is_ok();
    let mut bad = Vec::new();
    for (d, tol) in [
        ("f32", TOL),
        (
            "f16",
            Tolerance {
                rtol: 2e-3,
                atol: 2e-3,
            },
        ),
        (
            "bf16",
            Tolerance {
                rtol: 1.6e-2,
                atol: 1.6e-2,
            },
        ),
    ] {
        for (rows, len) in [
            (1024, 768),
            (600, 1000),
            (512, 136),
            (512, 2048),
            (520, 130),
            (197, 768),
            (5, 136),
        ] {
            let text = norms_graph(d, rows, len);
            let feeds = norm_feeds(rows, len);
            let named: Vec<(&str, &Tensor)> =
                ["x", "r", "s", "b"].into_iter().zip(&feeds).collect();
            let run = |target: Target| {
                let model = Compiler::new(target)
                    .compile(common::imported(&text), None)
                    .unwrap();
                if target == Target::Cuda && !on_gpu {
                    return None;
                }
                let session =
                    Session::with_devices(model, SessionOptions { threads: 4 }, devices.clone())
                        .unwrap();
                Some(session.run(&named).unwrap())
            };
            let want = run(Target::Cpu).unwrap();
            let Some(got) = run(Target::Cuda) else {
                continue;
            };
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let diff = compare(g, w, tol).unwrap();
                if diff.mismatched > 0 {
                    bad.push(format!("{d} [{rows}, {len}] output {i}: {diff:?}"));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// x and r (`[rows, len]`, within about 3.5 of 0.5), scale and bias
/// (`[len]`, within 0.25 of 0.5), from sines of different steps.
fn norm_feeds(rows: usize, len: usize) -> Vec<Tensor> {
    [
        (rows, 0.37f32, 3.0f32),
        (rows, 0.11, 3.0),
        (1, 0.05, 0.25),
        (1, 0.23, 0.25),
    ]
    .iter()
    .map(|&(r, step, amp)| {
        let v: Vec<f32> = (0..r * len)
            .map(|i| (i as f32 * step).sin() * amp + 0.5)
            .collect();
        let dims = if r == 1 { vec![len] } else { vec![r, len] };
        Tensor::from_f32(&dims, &v).unwrap()
    })
    .collect()
}

/// The norms of `norms_of_many_rows_match_cpu` over `d[rows, len]`, fed
/// in f32 and answering in f32 (the statistics are f32 already).
fn norms_graph(d: &str, rows: usize, len: usize) -> String {
    let t = format!("{d}[{rows},{len}]");
    let f = format!("f32[{rows},{len}]");
    let cast = |to: &str, x: &str, ty: &str| {
        format!("cast(%{x}) {{to={to}, saturate=true, round_mode=up}} : {ty}")
    };
    let row = format!("{d}[{len}]");
    let mut s = format!(
        "rlx-ir 2\ngraph {{\n  %0 = input \"x\" : {f}\n  %1 = input \"r\" : {f}\n  \
         %2 = input \"s\" : f32[{len}]\n  %3 = input \"b\" : f32[{len}]\n"
    );
    s += &format!("  %4 = {}\n  %5 = {}\n", cast(d, "0", &t), cast(d, "1", &t));
    s += &format!(
        "  %6 = {}\n  %7 = {}\n",
        cast(d, "2", &row),
        cast(d, "3", &row)
    );
    s += &format!(
        "  %8:3 = layer_norm(%4, %6, %7) {{axis=-1, epsilon=1e-5, stats=true}} : ({t}, f32[{rows},1], f32[{rows},1])\n  \
         %9 = rms_norm(%4, %6) {{axis=-1, epsilon=1e-6}} : {t}\n  \
         %10:2 = residual_norm(%4, %5, %6, %7) {{axis=-1, epsilon=1e-5, rms=false}} : ({t}, {t})\n  \
         %11:2 = residual_norm(%4, %5, %6) {{axis=-1, epsilon=1e-5, rms=true}} : ({t}, {t})\n"
    );
    let outs = ["8.0", "9", "10.0", "10.1", "11.0", "11.1"];
    for (k, v) in outs.iter().enumerate() {
        s += &format!("  %{} = {}\n", 12 + k, cast("f32", v, &f));
    }
    for (k, name) in ["a", "c", "d", "e", "f", "g"].iter().enumerate() {
        s += &format!("  output \"{name}\" = %{}\n", 12 + k);
    }
    s += "  output \"m\" = %8.1\n  output \"v\" = %8.2\n}\n";
    s
}
