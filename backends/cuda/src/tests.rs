//! Device-free checks of the plan: small IR graphs planned and snapshotted,
//! and every CUDA module the plans generate (with each parameter struct's
//! layout checks) compiled by NVRTC when libnvrtc can be found, so CUDA C
//! errors and host/kernel struct drift surface on machines without a GPU.
//! A device test runs when a GPU is present and skips, saying why, if not.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use rlx_gpu::Params;
use rlx_ir::analysis::infer_graph;
use rlx_ir::text::parse_graph;
use rlx_ir::{Tensor, Weights};
use rlx_passes::plan_memory;

use crate::compile::{nvrtc_available, CompileOptions, Compiler};
use crate::kernels::{module_source, FAMILIES, PRELUDE};
use crate::{plan, Context, Executable, PlanOptions, Schedule};

fn graph(body: &str) -> rlx_ir::Graph {
    let src = format!("rlx-ir 1\ngraph {{\n{body}}}\n");
    let mut g = parse_graph(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    infer_graph(&mut g, None).unwrap_or_else(|e| panic!("{e}\n{src}"));
    g
}

fn planned(body: &str) -> Schedule {
    let g = graph(body);
    let mem = plan_memory(&g).unwrap();
    plan(&g, &Weights::default(), &mem, &PlanOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// Batched, broadcast, shared-weight and vector matrix products.
const MATMULS: &str = "  %0 = input \"x\" : f32[2,4,8]
  %1 = input \"w\" : f32[8,5]
  %2 = matmul(%0, %1) : f32[2,4,5]
  %3 = input \"y\" : f32[2,5,3]
  %4 = matmul(%2, %3) : f32[2,4,3]
  %5 = input \"z\" : f32[3,1,3,6]
  %6 = matmul(%4, %5) : f32[3,2,4,6]
  %7 = input \"v\" : f32[6]
  %8 = matmul(%6, %7) : f32[3,2,4]
  output \"a\" = %2
  output \"b\" = %6
  output \"c\" = %8
";

/// A loop of known trip count stacking each iteration's square, a loop
/// whose trip count and condition are read, and an If.
const CONTROL: &str = "  %0 = input \"x\" : f32[2,2]
  %1 = constant i64[] [3] : i64[]
  %2 = constant bool[] [true] : bool[]
  %3:2 = loop(%1, %2, %0) {body=graph {
    %0 = input \"i\" : i64[]
    %1 = input \"cond\" : bool[]
    %2 = input \"acc\" : f32[2,2]
    %3 = matmul(%2, %2) : f32[2,2]
    output \"cond_out\" = %1
    output \"acc_out\" = %3
    output \"each\" = %3
  }, num_carried=1} : (f32[2,2], f32[3,2,2])
  %4 = input \"n\" : i64[]
  %5 = input \"go\" : bool[]
  %6 = loop(%4, %5, %3.0) {body=graph {
    %0 = input \"i\" : i64[]
    %1 = input \"cond\" : bool[]
    %2 = input \"acc\" : f32[2,2]
    %3 = matmul(%2, %2) : f32[2,2]
    output \"cond_out\" = %1
    output \"acc_out\" = %3
  }, num_carried=1} : f32[2,2]
  %7 = input \"p\" : bool[]
  %8 = if(%7, %6) {then_branch=graph {
    %0 = input \"a\" : f32[2,2]
    %1 = matmul(%0, %0) : f32[2,2]
    output \"t\" = %1
  }, else_branch=graph {
    %0 = input \"a\" : f32[2,2]
    output \"e\" = %0
  }} : f32[2,2]
  output \"y\" = %8
  output \"stack\" = %3.1
";

#[test]
fn matmul_schedule() {
    insta::assert_snapshot!(planned(MATMULS).to_string());
}

#[test]
fn control_flow_schedule() {
    insta::assert_snapshot!(planned(CONTROL).to_string());
}

#[test]
fn other_ops_are_refused_by_name() {
    let g = graph("  %0 = input \"x\" : f32[4]\n  %1 = relu(%0) : f32[4]\n  output \"y\" = %1\n");
    let mem = plan_memory(&g).unwrap();
    let e = plan(&g, &Weights::default(), &mem, &PlanOptions::default()).unwrap_err();
    assert!(e.to_string().contains("no kernel for `relu`"), "{e}");
    for id in g.node_ids() {
        let n = g.node(id);
        let ins: Vec<_> = g.inputs_of(id).iter().map(|v| g.ty(*v).clone()).collect();
        let r = crate::support::supports(n, &ins);
        assert_eq!(r.is_ok(), !matches!(n.op, rlx_ir::Op::Unary(_)), "{r:?}");
    }
}

/// Opens libnvrtc (and its builtins) by path when the dynamic loader
/// cannot find it by name: from the `nvidia-cuda-nvrtc` wheel (found through
/// python3) or a CUDA toolkit. Loaded objects are matched by soname, so
/// cudarc's later open by name finds them.
fn find_nvrtc() -> Result<(), String> {
    if nvrtc_available() {
        return Ok(());
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    let py = Command::new("python3")
        .args(["-c", "import nvidia, sys; print(list(nvidia.__path__)[0])"])
        .output();
    if let Ok(out) = py {
        let p = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !p.is_empty() {
            dirs.push(PathBuf::from(p).join("cu13/lib"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    for d in &dirs {
        let lib = d.join("libnvrtc.so.13");
        if !lib.exists() {
            continue;
        }
        let builtins = d.join("libnvrtc-builtins.so.13.0");
        // SAFETY: NVIDIA's libraries, whose initializers are benign; kept
        // loaded for the rest of the process.
        unsafe {
            if builtins.exists() {
                std::mem::forget(libloading::Library::new(&builtins).map_err(|e| e.to_string())?);
            }
            std::mem::forget(libloading::Library::new(&lib).map_err(|e| e.to_string())?);
        }
        if nvrtc_available() {
            return Ok(());
        }
    }
    Err(format!(
        "libnvrtc.so.13 is not on the library path nor in {dirs:?} (pip install nvidia-cuda-nvrtc==13.0.88)"
    ))
}

#[test]
fn every_module_and_param_struct_compiles_with_nvrtc() {
    if let Err(why) = find_nvrtc() {
        assert!(
            std::env::var_os("CI").is_none(),
            "NVRTC is required in CI: {why}"
        );
        eprintln!("skipping the NVRTC compile test: {why}");
        return;
    }
    let c = Compiler::new((9, 0), &CompileOptions::default()).unwrap();
    let mut sources: Vec<(String, String)> = FAMILIES
        .iter()
        .map(|f| (f.name.to_string(), module_source(f)))
        .collect();
    for s in [planned(MATMULS), planned(CONTROL)] {
        for m in s.modules {
            sources.push((m.name, m.source));
        }
    }
    for f in FAMILIES {
        for l in (f.layouts)() {
            let src = format!("{PRELUDE}\n{}{}", l.cuda(), l.cuda_checks());
            sources.push((format!("layout_{}", l.name), src));
        }
    }
    for (name, src) in &sources {
        let ptx = c
            .compile(name, src)
            .unwrap_or_else(|e| panic!("{e}\n{src}"));
        assert!(ptx.contains(".version"), "{name}: no PTX");
    }
    // A wrong offset is caught: the checks really run.
    let l = rlx_gpu::control::SlabCopyParams::LAYOUT;
    let bad = format!(
        "{PRELUDE}\n{}{}",
        l.cuda(),
        l.cuda_checks().replace("== 4,", "== 8,")
    );
    assert!(c.compile("drift", &bad).is_err());
}

#[test]
fn control_flow_runs_on_the_device() {
    let ctx = match Context::new() {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("skipping: {e}");
            return;
        }
    };
    let exe = Executable::new(ctx, planned(CONTROL)).unwrap();
    // x = [[1,1],[0,1]]: squaring doubles the corner, x^(2^j) = [[1,2^j],[0,1]].
    let x = Tensor::from_f32(&[2, 2], &[1.0, 1.0, 0.0, 1.0]).unwrap();
    let n = Tensor::from_i64(&[], &[2]).unwrap();
    let t = Tensor::new(
        rlx_ir::DType::Bool,
        vec![],
        rlx_ir::tensor::Bytes::copy_from(&[1]),
    )
    .unwrap();
    let f = Tensor::new(
        rlx_ir::DType::Bool,
        vec![],
        rlx_ir::tensor::Bytes::copy_from(&[0]),
    )
    .unwrap();
    for (p, want) in [(&t, 64.0f32), (&f, 32.0)] {
        let out = exe.run(&[&x, &n, &t, p]).unwrap();
        assert_eq!(out[0].as_slice::<f32>().unwrap(), &[1.0, want, 0.0, 1.0]);
        let stack = out[1].as_slice::<f32>().unwrap();
        assert_eq!([stack[1], stack[5], stack[9]], [2.0, 4.0, 8.0]);
    }
}

#[test]
fn matmuls_run_on_the_device() {
    let ctx = match Context::new() {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("skipping: {e}");
            return;
        }
    };
    let s = planned(MATMULS);
    let exe = Executable::new(ctx, s).unwrap();
    let fill = |dims: &[usize], k: f32| {
        let n: usize = dims.iter().product();
        let v: Vec<f32> = (0..n).map(|i| ((i % 7) as f32 - 3.0) * k).collect();
        Tensor::from_f32(dims, &v).unwrap()
    };
    let (x, w, y, z, v) = (
        fill(&[2, 4, 8], 0.5),
        fill(&[8, 5], 0.25),
        fill(&[2, 5, 3], 1.0),
        fill(&[3, 1, 3, 6], 0.5),
        fill(&[6], 1.0),
    );
    let out = exe.run(&[&x, &w, &y, &z, &v]).unwrap();
    // a = x @ w on the host.
    let (xs, ws) = (x.as_slice::<f32>().unwrap(), w.as_slice::<f32>().unwrap());
    let a = out[0].as_slice::<f32>().unwrap();
    for r in 0..8 {
        for c in 0..5 {
            let want: f32 = (0..8).map(|k| xs[r * 8 + k] * ws[k * 5 + c]).sum();
            assert!((a[r * 5 + c] - want).abs() < 1e-4, "a[{r},{c}]");
        }
    }
}
