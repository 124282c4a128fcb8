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
use crate::kernels::{module_source, PRELUDE, SOURCES};
use crate::{plan, Context, Executable, PlanOptions, Schedule};

pub(crate) fn graph(body: &str) -> rlx_ir::Graph {
    let src = format!("rlx-ir 2\ngraph {{\n{body}}}\n");
    let mut g = parse_graph(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    infer_graph(&mut g, None).unwrap_or_else(|e| panic!("{e}\n{src}"));
    g
}

pub(crate) fn planned(body: &str) -> Schedule {
    planned_with(body, &PlanOptions::default())
}

/// Plan options sending every MatMul to cuBLASLt (the fixtures here are
/// small enough for the tile kernel).
pub(crate) fn cublaslt() -> PlanOptions {
    PlanOptions {
        small_gemm: crate::SmallGemm::Cublaslt,
        ..PlanOptions::default()
    }
}

pub(crate) fn planned_with(body: &str, opts: &PlanOptions) -> Schedule {
    let g = graph(body);
    let mem = plan_memory(&g).unwrap();
    plan(&g, &Weights::default(), &mem, opts).unwrap_or_else(|e| panic!("{e}"))
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
    insta::assert_snapshot!(planned_with(MATMULS, &cublaslt()).to_string());
}

#[test]
fn control_flow_schedule() {
    insta::assert_snapshot!(planned(CONTROL).to_string());
}

#[test]
fn other_ops_are_refused_by_name() {
    let g = graph("  %0 = input \"x\" : f32[2,2]\n  %1 = det(%0) : f32[]\n  output \"y\" = %1\n");
    let mem = plan_memory(&g).unwrap();
    let e = plan(&g, &Weights::default(), &mem, &PlanOptions::default()).unwrap_err();
    assert!(e.to_string().contains("no kernel for `det`"), "{e}");
    for id in g.node_ids() {
        let n = g.node(id);
        let ins: Vec<_> = g.inputs_of(id).iter().map(|v| g.ty(*v).clone()).collect();
        let r = crate::support::supports(n, &ins);
        assert_eq!(r.is_ok(), !matches!(n.op, rlx_ir::Op::Det(_)), "{r:?}");
    }
}

/// Opens libnvrtc (and its builtins) by path when the dynamic loader
/// cannot find it by name: from the `nvidia-cuda-nvrtc` wheel (found through
/// python3) or a CUDA toolkit. Loaded objects are matched by soname, so
/// cudarc's later open by name finds them.
/// Whether NVRTC loads; CI requires it, elsewhere the test named `what`
/// says why it skips.
pub(crate) fn nvrtc_or_skip(what: &str) -> bool {
    match find_nvrtc() {
        Ok(()) => true,
        Err(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "NVRTC is required in CI: {why}"
            );
            eprintln!("skipping {what}: {why}");
            false
        }
    }
}

pub(crate) fn find_nvrtc() -> Result<(), String> {
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

/// Compiles with NVRTC every fixed module, every module of `schedules` and
/// every fixed module's parameter structs with their checks (skipped,
/// saying why, where libnvrtc is missing outside CI); returns the compiler.
/// The compiler of the NVRTC tests: sm_90, with a disk cache keyed by
/// source, architecture and NVRTC version, shared by the test processes of
/// one run (the CUDA plans test compiles many of the modules the unit tests
/// compile), so each distinct module is compiled once per machine.
pub(crate) fn test_compiler() -> Compiler {
    let cache = std::env::temp_dir().join("rlx-onnx-nvrtc-tests");
    Compiler::new(
        (9, 0),
        &CompileOptions {
            cache_dir: Some(cache),
        },
    )
    .unwrap()
}

pub(crate) fn compile_all(schedules: &[Schedule]) -> Option<Compiler> {
    if !nvrtc_or_skip("the NVRTC compile test") {
        return None;
    }
    let c = test_compiler();
    let mut sources: Vec<(String, String)> = SOURCES
        .iter()
        .map(|f| (f.name.to_string(), module_source(f)))
        .collect();
    for s in schedules {
        for m in &s.modules {
            sources.push((m.name.clone(), m.source.clone()));
        }
    }
    for f in SOURCES {
        for l in (f.layouts)() {
            let src = format!("{PRELUDE}\n{}{}", l.cuda(), l.cuda_checks());
            sources.push((format!("layout_{}", l.name), src));
        }
    }
    compile_once(&c, sources);
    Some(c)
}

/// Compiles every `(name, source)` with NVRTC, panicking with the log of
/// the first that fails; a source this test process compiled already (the
/// fixed modules every compile test plans) is not compiled again.
pub(crate) fn compile_once(c: &Compiler, mut sources: Vec<(String, String)>) {
    static DONE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    sources.sort();
    sources.dedup();
    {
        let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
        sources.retain(|(_, src)| !done.contains(src));
        // Claimed now: a test compiling the same source meanwhile skips it
        // (a failure panics this test, which fails the run).
        done.extend(sources.iter().map(|(_, src)| src.clone()));
    }
    let jobs: Vec<(&str, &str)> = sources
        .iter()
        .map(|(n, s)| (n.as_str(), s.as_str()))
        .collect();
    for ((name, src), ptx) in sources.iter().zip(c.ptx_many(&jobs)) {
        let ptx = ptx.unwrap_or_else(|e| panic!("{e}\n{src}"));
        assert!(ptx.contains(".version"), "{name}: no PTX");
        // Every kernel waits for the one before it first (prelude.cuh's
        // rlx_grid_wait), so every one may be launched to overlap it.
        let waiting = crate::dependent::waiting_entries(&ptx);
        let late: Vec<&str> = crate::dependent::entries(&ptx)
            .into_iter()
            .filter(|e| !waiting.contains(*e))
            .collect();
        assert!(
            late.is_empty(),
            "{name}: {late:?} touch memory before rlx_grid_wait()"
        );
    }
}

#[test]
fn every_module_and_param_struct_compiles_with_nvrtc() {
    let Some(c) = compile_all(&[planned(MATMULS), planned(CONTROL)]) else {
        return;
    };
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
    for _ in 0..2 {
        let out = exe.run(&[&x, &w, &y, &z, &v]).unwrap();
        let a = host_matmul(&x, &w);
        let b = host_matmul(&host_matmul(&a, &y), &z);
        let c = host_matmul(&b, &v);
        for (got, want) in out.iter().zip([a, b, c]) {
            assert_eq!(got.dims(), want.dims());
            let (g, w) = (
                got.as_slice::<f32>().unwrap(),
                want.as_slice::<f32>().unwrap(),
            );
            for (i, (g, w)) in g.iter().zip(w).enumerate() {
                assert!((g - w).abs() <= 1e-4 * w.abs().max(1.0), "[{i}] {g} vs {w}");
            }
        }
    }
    assert!(
        exe.replays_graph(),
        "a schedule without host reads replays a graph"
    );
}

/// numpy matmul on the host, f32 (1-D operands promoted and dropped).
fn host_matmul(a: &Tensor, b: &Tensor) -> Tensor {
    let (ad, bd) = (a.dims().to_vec(), b.dims().to_vec());
    let a2 = if ad.len() == 1 {
        vec![1, ad[0]]
    } else {
        ad.clone()
    };
    let b2 = if bd.len() == 1 {
        vec![bd[0], 1]
    } else {
        bd.clone()
    };
    let (m, k, n) = (a2[a2.len() - 2], a2[a2.len() - 1], b2[b2.len() - 1]);
    let (ab, bb) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let r = ab.len().max(bb.len());
    let pad = |d: &[usize]| [vec![1; r - d.len()], d.to_vec()].concat();
    let (pa, pb) = (pad(ab), pad(bb));
    let batch: Vec<usize> = pa.iter().zip(&pb).map(|(x, y)| *x.max(y)).collect();
    let (av, bv) = (a.as_slice::<f32>().unwrap(), b.as_slice::<f32>().unwrap());
    let nb: usize = batch.iter().product();
    let mut out = vec![0f32; nb * m * n];
    for i in 0..nb {
        let (mut rem, mut ia, mut ib, mut sa, mut sb) = (i, 0, 0, 1, 1);
        for d in (0..r).rev() {
            let j = rem % batch[d];
            rem /= batch[d];
            ia += (j % pa[d]) * sa;
            ib += (j % pb[d]) * sb;
            sa *= pa[d];
            sb *= pb[d];
        }
        for x in 0..m {
            for y in 0..n {
                out[(i * m + x) * n + y] = (0..k)
                    .map(|t| av[(ia * m + x) * k + t] * bv[(ib * k + t) * n + y])
                    .sum();
            }
        }
    }
    let mut dims = batch;
    if ad.len() > 1 {
        dims.push(m);
    }
    if bd.len() > 1 {
        dims.push(n);
    }
    Tensor::from_f32(&dims, &out).unwrap()
}

/// The entries of a ptxas report that spill: `(entry, the line saying so)`.
fn spilling(report: &str) -> Vec<(String, String)> {
    let mut entry = String::new();
    let mut out = Vec::new();
    for line in report.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            entry = rest.split('\'').next().unwrap_or_default().to_string();
        } else if line.contains("spill stores") && !line.contains(" 0 bytes spill stores") {
            out.push((entry.clone(), line.trim().to_string()));
        }
    }
    out
}

#[test]
fn tensor_core_attention_kernels_keep_their_registers() {
    // A spill puts local-memory traffic on the path of every key tile; it
    // shows only in ptxas's report, so it is checked here, without a GPU.
    if !nvrtc_or_skip("the ptxas report test") {
        return;
    }
    // The report's form, as NVRTC 13.0 writes it.
    let sample = "ptxas info    : Compiling entry function 'k' for 'sm_90'\n\
                  ptxas         .     8 bytes stack frame, 16 bytes spill stores, 24 bytes spill loads\n";
    assert_eq!(spilling(sample).len(), 1);
    let c = test_compiler();
    use crate::kernels::attention::{
        FLASH_BF16, FLASH_BF16_PLAIN, FLASH_BF16_SPLIT, FLASH_BF16_SPLIT_PLAIN,
        FLASH_BF16_SPLIT_UNMASKED, FLASH_BF16_UNMASKED, FLASH_F16, FLASH_F16_PLAIN,
        FLASH_F16_SPLIT, FLASH_F16_SPLIT_PLAIN, FLASH_F16_SPLIT_UNMASKED, FLASH_F16_UNMASKED,
        FLASH_F32,
    };
    let mut spills = Vec::new();
    for f in [
        &FLASH_F32,
        &FLASH_F16,
        &FLASH_BF16,
        &FLASH_F16_SPLIT,
        &FLASH_BF16_SPLIT,
        &FLASH_F16_PLAIN,
        &FLASH_BF16_PLAIN,
        &FLASH_F16_SPLIT_PLAIN,
        &FLASH_BF16_SPLIT_PLAIN,
        &FLASH_F16_UNMASKED,
        &FLASH_BF16_UNMASKED,
        &FLASH_F16_SPLIT_UNMASKED,
        &FLASH_BF16_SPLIT_UNMASKED,
    ] {
        let report = c.ptxas_report(f.name, &module_source(f)).unwrap();
        assert!(report.contains("Compiling entry function"), "{report}");
        spills.extend(spilling(&report));
    }
    assert!(spills.is_empty(), "kernels spilling registers: {spills:#?}");
}

#[test]
fn row_gemv_kernels_keep_their_registers() {
    // Eight rows of sums of 16-byte vectors are 64 registers a lane; a
    // spill would put local-memory traffic beside every weight load.
    if !nvrtc_or_skip("the ptxas report test") {
        return;
    }
    let c = test_compiler();
    let f = &crate::kernels::row_gemv::SOURCE;
    let report = c.ptxas_report(f.name, &module_source(f)).unwrap();
    assert!(report.contains("row_gemv_f16_v8_r8"), "{report}");
    let spills = spilling(&report);
    assert!(
        spills.is_empty(),
        "row GEMV kernels spilling registers: {spills:#?}"
    );
}

#[test]
fn wide_row_norm_kernels_keep_their_registers() {
    // Eight 16-byte vectors a lane are 64 floats of f16 rows held across
    // two warp sums; a spill would put local memory between them.
    if !nvrtc_or_skip("the ptxas report test") {
        return;
    }
    let c = test_compiler();
    let f = &crate::kernels::norm::SOURCE;
    let report = c.ptxas_report(f.name, &module_source(f)).unwrap();
    assert!(report.contains("residual_norm_wide8_f16"), "{report}");
    let spills = spilling(&report);
    assert!(
        spills.is_empty(),
        "norm kernels spilling registers: {spills:#?}"
    );
}
