//! Cross-backend parity on the two WGSL devices (lavapipe in CI): every
//! golden model runs on wgpu, on Vulkan (with the validation layer on) and
//! on the CPU backend, and the outputs must agree (f32: rtol 1e-4, atol
//! 1e-5; integers and bools exactly). The light models (large CNNs) run on
//! Vulkan only: the plan is the same for both devices, and on lavapipe each
//! pass over them takes minutes. Models the WGSL plan cannot run are listed
//! in [`EXPECTED_UNSUPPORTED`] with the reason, and the test fails if one of
//! them starts to run (so the list only shrinks). Without a device the tests
//! skip, saying so, except under `CI`, where they fail.

#[path = "common/attention.rs"]
mod attention;
mod common;

use std::sync::Arc;

use rlx_onnx::conformance::{compare, Tolerance};
use rlx_onnx::ir::{DType, Tensor};
use rlx_onnx::testdata::{arange_input, data_set_dirs, light_models, read_data_set};
use rlx_onnx::wgpu::{Executable, WgpuError};
use rlx_onnx::wgsl::Caps;
use rlx_onnx::{CompiledModel, Compiler, Devices, Error, Session, SessionOptions, Target};

const TOL: Tolerance = Tolerance {
    rtol: 1e-4,
    atol: 1e-5,
};

/// Golden models the WGSL plan does not run, and why: a model that cannot
/// goes here with its reason, and the test fails if one listed starts to run.
const EXPECTED_UNSUPPORTED: &[(&str, &str)] = &[
    (
        "if_rank",
        "the rank of `by_sign`'s output depends on the input data; GPU schedules are static",
    ),
    (
        "while_loops",
        "`until`'s trip count (the length of its scan output) depends on the input data",
    ),
];

/// A WGSL device with its session devices.
struct Gpu {
    target: Target,
    devices: Arc<Devices>,
}

fn wgpu() -> Option<Gpu> {
    Some(Gpu {
        target: Target::Wgpu,
        devices: common::wgpu_devices()?,
    })
}

fn vulkan() -> Option<Gpu> {
    Some(Gpu {
        target: Target::Vulkan,
        devices: common::vulkan_devices(true)?,
    })
}

fn run(
    model: CompiledModel,
    inputs: &[Tensor],
    devices: Option<&Arc<Devices>>,
) -> Result<Vec<Tensor>, Error> {
    let names = model.input_names();
    let options = SessionOptions { threads: 2 };
    let session = match devices {
        Some(d) => Session::with_devices(model, options, d.clone())?,
        None => Session::new(model, options)?,
    };
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(inputs).collect();
    session.run(&named)
}

/// Runs `path` on the CPU and on `gpu`; `Ok(false)` when the GPU rejects
/// the model.
fn parity(path: &std::path::Path, inputs: &[Tensor], gpu: &Gpu) -> Result<bool, String> {
    let cpu = Compiler::new(Target::Cpu)
        .compile_file(path)
        .map_err(|e| e.to_string())?;
    let want = run(cpu, inputs, None).map_err(|e| e.to_string())?;
    let model = match Compiler::new(gpu.target).compile_file(path) {
        Ok(m) => m,
        Err(Error::Pass(rlx_onnx::passes::PassError::Unsupported { .. })) => return Ok(false),
        Err(e) => return Err(e.to_string()),
    };
    let got = match run(model, inputs, Some(&gpu.devices)) {
        Ok(t) => t,
        Err(Error::Wgpu(WgpuError::Unsupported(_))) => return Ok(false),
        Err(Error::Vulkan(rlx_onnx::vulkan::VulkanError::Unsupported(_))) => return Ok(false),
        Err(e) => return Err(e.to_string()),
    };
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

fn golden_models_match_cpu_on(gpu: Gpu) {
    let mut bad = Vec::new();
    for case in common::golden_cases() {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let set = read_data_set(&data_set_dirs(&case).unwrap()[0]).unwrap();
        let expected = EXPECTED_UNSUPPORTED.iter().any(|(n, _)| *n == name);
        match parity(&case.join("model.onnx"), &set.inputs, &gpu) {
            Ok(true) if expected => bad.push(format!(
                "{name}: runs now; remove it from EXPECTED_UNSUPPORTED"
            )),
            Ok(false) if !expected => bad.push(format!("{name}: {} rejects it", gpu.target)),
            Ok(_) => {}
            Err(e) => bad.push(format!("{name}: {e}")),
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The WGSL attention kernels against the CPU backend on the attention
/// cases the CUDA kernels are tested on, f32 (rtol 2e-4, atol 2e-5): the
/// 8-row kernel takes the cases of 8 or more query rows and heads up to 64,
/// the row kernel the rest. On Vulkan only (the plan is the same for both
/// devices).
#[test]
fn attention_matches_cpu_on_vulkan() {
    let Some(gpu) = vulkan() else { return };
    let tol = Tolerance {
        rtol: 2e-4,
        atol: 2e-5,
    };
    let mut bad = Vec::new();
    for (i, c) in attention::cases().iter().enumerate() {
        let text = attention::graph(c, "f32");
        let ins: Vec<Tensor> = attention::inputs(c, DType::F32, 17 * i as u64)
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        let want = run(attention::compiled(&text, Target::Cpu), &ins, None).unwrap();
        let got = run(
            attention::compiled(&text, gpu.target),
            &ins,
            Some(&gpu.devices),
        );
        match got
            .map_err(|e| e.to_string())
            .and_then(|g| compare(&g[0], &want[0], tol).map_err(|e| e.to_string()))
        {
            Ok(d) if d.mismatched == 0 => {}
            Ok(d) => bad.push(format!("{}: {d:?}", c.name)),
            Err(e) => bad.push(format!("{}: {e}", c.name)),
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Norms against the CPU backend on Vulkan: rows held in registers (up to
/// 1024 elements) and longer ones, with a residual add that
/// `fuse-residual-norm` joins to the norm (its sum is an output too).
#[test]
fn norms_match_cpu_on_vulkan() {
    let Some(gpu) = vulkan() else { return };
    let graphs: [(&str, &[&[usize]]); 3] = [
        ("  %0 = input \"x\" : f32[3,40]\n  %1 = input \"s\" : f32[40]\n  %2 = input \"b\" : f32[40]\n  %3 = layer_norm(%0, %1, %2) {axis=-1, epsilon=1e-5, stats=false} : f32[3,40]\n  output \"y\" = %3\n", &[&[3, 40], &[40], &[40]]),
        ("  %0 = input \"x\" : f32[2,1100]\n  %1 = input \"s\" : f32[1100]\n  %2 = rms_norm(%0, %1) {axis=-1, epsilon=1e-5} : f32[2,1100]\n  output \"y\" = %2\n", &[&[2, 1100], &[1100]]),
        ("  %0 = input \"x\" : f32[4,2,96]\n  %1 = input \"r\" : f32[4,2,96]\n  %2 = input \"s\" : f32[96]\n  %3 = input \"b\" : f32[96]\n  %4 = add(%0, %1) : f32[4,2,96]\n  %5 = layer_norm(%4, %2, %3) {axis=-1, epsilon=1e-5, stats=false} : f32[4,2,96]\n  output \"y\" = %5\n  output \"sum\" = %4\n", &[&[4, 2, 96], &[4, 2, 96], &[96], &[96]]),
    ];
    let graphs: Vec<(String, &[&[usize]])> =
        graphs.iter().map(|(b, d)| (b.to_string(), *d)).collect();
    let bad = ir_parity(&gpu, &graphs);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// Inputs for IR text with inputs of `dims`: a fixed pattern in [-1, 1].
fn pattern_inputs(dims: &[&[usize]], salt: usize) -> Vec<Tensor> {
    dims.iter()
        .enumerate()
        .map(|(j, d)| {
            let n: usize = d.iter().product();
            let v: Vec<f32> = (0..n)
                .map(|e| ((e * 7 + j * 13 + salt) % 23) as f32 / 11.0 - 1.0)
                .collect();
            Tensor::from_values(d, &v).unwrap()
        })
        .collect()
}

/// Runs each IR body (with inputs of the dims beside it) on the CPU and on
/// Vulkan and lists the outputs that differ beyond [`TOL`].
fn ir_parity(gpu: &Gpu, graphs: &[(String, &[&[usize]])]) -> Vec<String> {
    let mut bad = Vec::new();
    for (i, (body, dims)) in graphs.iter().enumerate() {
        let text = format!("rlx-ir 2\ngraph {{\n{body}}}\n");
        let ins = pattern_inputs(dims, i);
        let want = run(attention::compiled(&text, Target::Cpu), &ins, None).unwrap();
        let got = run(
            attention::compiled(&text, gpu.target),
            &ins,
            Some(&gpu.devices),
        )
        .unwrap();
        for (o, (g, w)) in got.iter().zip(&want).enumerate() {
            match compare(g, w, TOL) {
                Ok(d) if d.mismatched == 0 => {}
                Ok(d) => bad.push(format!("graph {i} output {o}: {d:?}")),
                Err(e) => bad.push(format!("graph {i} output {o}: {e}")),
            }
        }
    }
    bad
}

/// Every activation a GEMM epilogue applies, against the CPU on Vulkan: in
/// the split-K sum's epilogue (K 512), and for two of them in the GEMM's own
/// (K 16) and a fused convolution's (each pipeline compiles for seconds on
/// lavapipe, so not every activation in every kernel).
#[test]
fn epilogues_match_cpu_on_vulkan() {
    let Some(gpu) = vulkan() else { return };
    const SHORT: &[&[usize]] = &[&[4, 16], &[16, 8], &[8]];
    const LONG: &[&[usize]] = &[&[4, 512], &[512, 8], &[8]];
    let mut graphs: Vec<(String, &[&[usize]])> = Vec::new();
    for act in ["relu", "sigmoid", "tanh", "gelu_erf", "gelu_tanh", "silu"] {
        let own = matches!(act, "gelu_tanh" | "silu");
        for (k, dims) in [(16, SHORT), (512, LONG)] {
            if k == 16 && !own {
                continue;
            }
            graphs.push((
                format!("  %0 = input \"x\" : f32[4,{k}]\n  %1 = input \"w\" : f32[{k},8]\n  %2 = input \"b\" : f32[8]\n  %3 = fused_matmul(%0, %1, %2) {{activation={act}}} : f32[4,8]\n  output \"y\" = %3\n"),
                dims,
            ));
        }
        if !own {
            continue;
        }
        graphs.push((
            format!("  %0 = input \"x\" : f32[1,3,8,8]\n  %1 = input \"w\" : f32[4,3,3,3]\n  %2 = input \"b\" : f32[4]\n  %3 = fused_conv(%0, %1, %2) {{strides=[1, 1], dilations=[1, 1], pads=[1, 1, 1, 1], auto_pad=notset, group=1, activation={act}}} : f32[1,4,8,8]\n  output \"y\" = %3\n"),
            &[&[1, 3, 8, 8], &[4, 3, 3, 3], &[4]],
        ));
    }
    let bad = ir_parity(&gpu, &graphs);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn golden_models_match_cpu_on_wgpu() {
    if let Some(gpu) = wgpu() {
        golden_models_match_cpu_on(gpu);
    }
}

#[test]
fn golden_models_match_cpu_on_vulkan() {
    if let Some(gpu) = vulkan() {
        golden_models_match_cpu_on(gpu);
    }
}

/// Both branches of an If: the golden input (all positive) takes `then`, its
/// negation takes `else`; a Loop runs its full trip and stacks scan outputs.
fn control_flow_matches_cpu_on(gpu: Gpu) {
    let case = common::root().join("golden/if_branches");
    let set = read_data_set(&data_set_dirs(&case).unwrap()[0]).unwrap();
    let x = &set.inputs[0];
    let neg: Vec<f32> = x.as_slice::<f32>().unwrap().iter().map(|v| -v).collect();
    let neg = Tensor::from_f32(x.dims(), &neg).unwrap();
    for input in [x.clone(), neg] {
        assert_eq!(parity(&case.join("model.onnx"), &[input], &gpu), Ok(true));
    }
    let case = common::root().join("golden/loop_counter");
    let x = Tensor::from_f32(&[3], &[0.25, -4.0, 3.0]).unwrap();
    assert_eq!(parity(&case.join("model.onnx"), &[x], &gpu), Ok(true));
}

#[test]
fn control_flow_matches_cpu_on_wgpu() {
    if let Some(gpu) = wgpu() {
        control_flow_matches_cpu_on(gpu);
    }
}

#[test]
fn control_flow_matches_cpu_on_vulkan() {
    if let Some(gpu) = vulkan() {
        control_flow_matches_cpu_on(gpu);
    }
}

/// The light models lavapipe runs here, every one but VGG-19: its 20 GMAC
/// of 3x3 convolutions took two of this test's four and a half minutes on
/// CI's two cores, and its ops (Conv, Relu, MaxPool, Gemm, Dropout,
/// Softmax) are AlexNet's and ZFNet's, which run. It runs on NVIDIA's
/// Vulkan driver in `scripts/gpu-check.sh vulkan`.
const LAVAPIPE_SKIPS: &[&str] = &["light_vgg19"];

/// On Vulkan without the validation layer (which multiplies the time of
/// these large models; the golden models and the node suite run with it).
#[test]
fn light_models_match_cpu_on_vulkan() {
    let Some(data) = common::testdata() else {
        return;
    };
    let Some(devices) = common::vulkan_devices(false) else {
        return;
    };
    let gpu = Gpu {
        target: Target::Vulkan,
        devices,
    };
    let mut bad = Vec::new();
    for m in light_models(&data.join("light")).unwrap() {
        if LAVAPIPE_SKIPS.contains(&m.name.as_str()) {
            continue;
        }
        let c = Compiler::new(Target::Cpu).compile_file(&m.model).unwrap();
        let g = &c.graph;
        let dims = g.node(g.inputs()[0]).outputs[0].shape.as_known().unwrap();
        let x = arange_input(&dims).unwrap();
        match parity(&m.model, &[x], &gpu) {
            Ok(true) => {}
            Ok(false) => bad.push(format!("{}: vulkan rejects it", m.name)),
            Err(e) => bad.push(format!("{}: {e}", m.name)),
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// An arena larger than the binding limit: every dispatch binds a window
/// (on wgpu; Vulkan binds the same windows).
#[test]
fn small_binding_limit_uses_windows() {
    let Some(devices) = common::wgpu_devices() else {
        return;
    };
    let ctx = devices.wgpu().unwrap();
    let case = common::root().join("golden/cnn");
    let set = read_data_set(&data_set_dirs(&case).unwrap()[0]).unwrap();
    let model = Compiler::new(Target::Wgpu)
        .compile_file(&case.join("model.onnx"))
        .unwrap();
    let names = model.input_names();
    let session = Session::new(model.clone(), SessionOptions { threads: 1 }).unwrap();
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&set.inputs).collect();
    let full = session.wgpu_schedule(&named, Caps::default()).unwrap();
    // The smallest limit every single operand fits (with window alignment).
    let largest = full
        .dispatches
        .iter()
        .flat_map(|d| &d.operands)
        .map(|r| r.bytes)
        .max()
        .unwrap();
    let limit = (largest + 512).next_multiple_of(256);
    assert!(
        full.buffer_bytes > 2 * limit,
        "the test needs a buffer well over the limit"
    );
    let small = session
        .wgpu_schedule(&named, Caps { max_binding: limit })
        .unwrap();
    assert!(small
        .dispatches
        .iter()
        .all(|d| d.windows.iter().all(|w| w.bytes <= limit)));
    assert!(small.dispatches.iter().any(|d| d.windows.len() > 1));
    assert!(small
        .dispatches
        .iter()
        .any(|d| d.windows.iter().any(|w| w.offset > 0)));
    let exec = Executable::new(ctx.clone(), small).unwrap();
    let inputs: Vec<&Tensor> = set.inputs.iter().collect();
    let got = exec.run(&inputs).unwrap();
    let want = run(
        Compiler::new(Target::Cpu)
            .compile_file(&case.join("model.onnx"))
            .unwrap(),
        &set.inputs,
        None,
    )
    .unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(compare(g, w, TOL).unwrap().mismatched, 0);
    }
    // A limit below one operand is a clear planning error.
    match session.wgpu_schedule(&named, Caps { max_binding: 256 }) {
        Err(Error::Wgpu(WgpuError::Node { reason, .. })) => {
            assert!(reason.contains("binding limit"), "{reason}")
        }
        other => panic!(
            "expected a binding-limit error, got {:?}",
            other.map(|s| s.dispatches.len())
        ),
    }
}

#[test]
fn wrong_inputs_are_errors() {
    for gpu in [wgpu(), vulkan()].into_iter().flatten() {
        let case = common::root().join("golden/mlp");
        let model = Compiler::new(gpu.target)
            .compile_file(&case.join("model.onnx"))
            .unwrap();
        let bad = Tensor::from_f32(&[4, 15], &[0.0; 60]).unwrap();
        assert!(run(model, &[bad], Some(&gpu.devices)).is_err());
    }
}

/// A Loop whose trip count is 2^62 and whose condition stays true ends
/// with an error naming it at the session's iteration limit, on both WGSL
/// devices, instead of dispatching for hours; under the limit it runs.
#[test]
fn a_loop_past_the_iteration_limit_is_an_error() {
    let text = "rlx-ir 2\ngraph {\n  %0 = input \"m\" : i64[]\n  %1 = input \"x\" : f32[3]\n  %2 = constant bool[] [true] : bool[]\n  %3 = loop(%0, %2, %1) {body=graph {\n    %0 = input \"i\" : i64[]\n    %1 = input \"cond\" : bool[]\n    %2 = input \"acc\" : f32[3]\n    %3 = neg(%2) : f32[3]\n    output \"cond_out\" = %1\n    output \"acc_out\" = %3\n  }, num_carried=1} : f32[3]\n  output \"y\" = %3\n}\n";
    for gpu in [wgpu(), vulkan()].into_iter().flatten() {
        let mut model = Compiler::new(gpu.target)
            .compile(common::imported(text), None)
            .unwrap();
        model.limits = rlx_onnx::Limits {
            max_loop_iterations: 1000,
            ..rlx_onnx::Limits::default()
        };
        let x = Tensor::from_f32(&[3], &[1.0, 2.0, 3.0]).unwrap();
        let session =
            Session::with_devices(model, SessionOptions { threads: 1 }, gpu.devices.clone())
                .unwrap();
        let m = Tensor::scalar_i64(1 << 62);
        let e = session
            .run(&[("m", &m), ("x", &x)])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("would run 4611686018427387904 iterations")
                || e.contains("ran 1000 iterations and would run more"),
            "{:?}: {e}",
            gpu.target
        );
        assert!(e.contains("max_loop_iterations"), "{e}");
        let m = Tensor::scalar_i64(10);
        let y = session.run(&[("m", &m), ("x", &x)]).unwrap();
        assert_eq!(y[0].values::<f32>().unwrap(), &[1.0, 2.0, 3.0]);
    }
}
