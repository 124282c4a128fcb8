//! The CUDA attention kernels against the CPU backend, over the cases a
//! tiled kernel can get wrong: query and key counts that are not multiples
//! of a tile (a single query row and 520-key sequences among them), head
//! sizes padded up to the kernel's (16, 64, 80, 128), 3-D and 4-D operands,
//! grouped-query heads, float and bool masks that broadcast, causality, key
//! windows, per-batch key lengths, softcap, and rows whose every key is
//! masked. Each case runs on the tiled kernel (in the half types with
//! 64-row tiles and with key-split ones) and on the row kernel, in f32
//! (rtol 2e-4, atol 2e-5), f16 (rtol 1e-2, atol 2e-3) and bf16 (rtol 4e-2,
//! atol 1.5e-2): the half types round the probabilities to their own
//! precision before P.V, where the CPU keeps them in f32. Inputs are
//! uniform in [-1, 1) from a fixed seed per case. Without a CUDA device (CI
//! has none) it skips, saying so; `scripts/gpu-check.sh` runs it on the lent
//! GPU machine.

use std::sync::Arc;

#[path = "common/attention.rs"]
mod attention;

use attention::{cases, compiled, graph, inputs};
use rlx_onnx::conformance::{compare, Tolerance};
use rlx_onnx::cuda::{AttentionKernel, ContextOptions, PlanOptions};
use rlx_onnx::ir::{DType, Tensor};
use rlx_onnx::{CompiledModel, Devices, Session, SessionOptions, Target};

fn run(model: CompiledModel, devices: &Arc<Devices>, ins: &[(&'static str, Tensor)]) -> Tensor {
    let s = Session::with_devices(model, SessionOptions { threads: 2 }, devices.clone()).unwrap();
    let named: Vec<(&str, &Tensor)> = ins.iter().map(|(n, t)| (*n, t)).collect();
    s.run(&named).unwrap().remove(0)
}

#[test]
fn attention_kernels_match_the_cpu() {
    let cpu_devices = Arc::new(Devices::new());
    let devices = Arc::new(Devices::new());
    match devices.cuda() {
        Ok(c) => eprintln!("cuda device: {}", c.name()),
        Err(e) => {
            eprintln!("skipping: {e}");
            return;
        }
    }
    // One device context per kernel choice, so each module compiles once.
    let gpus: Vec<(AttentionKernel, Arc<Devices>)> = [
        AttentionKernel::TiledWide,
        AttentionKernel::TiledSplit,
        AttentionKernel::Rows,
    ]
    .into_iter()
    .map(|kernel| {
        let plan = PlanOptions {
            attention: kernel,
            ..PlanOptions::default()
        };
        let options = ContextOptions {
            plan,
            ..ContextOptions::default()
        };
        (kernel, Arc::new(Devices::with_cuda_options(options)))
    })
    .collect();
    let mut failures = Vec::new();
    for (d, name, tol) in [
        (
            DType::F32,
            "f32",
            Tolerance {
                rtol: 2e-4,
                atol: 2e-5,
            },
        ),
        (
            DType::F16,
            "f16",
            Tolerance {
                rtol: 1e-2,
                atol: 2e-3,
            },
        ),
        (
            DType::BF16,
            "bf16",
            Tolerance {
                rtol: 4e-2,
                atol: 1.5e-2,
            },
        ),
    ] {
        for (i, c) in cases().iter().enumerate() {
            let text = graph(c, name);
            let ins = inputs(c, d, 17 * i as u64);
            let want = run(compiled(&text, Target::Cpu), &cpu_devices, &ins);
            for (kernel, gpu) in &gpus {
                let got = run(compiled(&text, Target::Cuda), gpu, &ins);
                match compare(&got, &want, tol) {
                    Ok(diff) if diff.mismatched == 0 => {}
                    Ok(diff) => failures.push(format!("{} {name} {kernel:?}: {diff:?}", c.name)),
                    Err(e) => failures.push(format!("{} {name} {kernel:?}: {e}", c.name)),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
