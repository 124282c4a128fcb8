//! The CUDA backend without a GPU: every ONNX node case (and every golden and
//! light model) is compiled for `--target cuda` and planned with its test
//! inputs, and every kernel module the plans contain is compiled by NVRTC
//! for sm_90, so a kernel that does not compile fails CI. The number of cases
//! that plan is printed and held to a minimum (it only grows); cases that do
//! not plan must be refused as unsupported, never fail otherwise.

mod common;

use std::collections::BTreeMap;

use rlx_onnx::conformance::{is_unsupported, run_error_unsupported};
use rlx_onnx::cuda::{CompileOptions, Compiler};
use rlx_onnx::importer::{import_file, Registry};
use rlx_onnx::ir::Tensor;
use rlx_onnx::testdata::{case_dirs, data_set_dirs, light_models, read_data_set};
use rlx_onnx::{Compiler as ModelCompiler, Session, SessionOptions, Target};

/// Node cases that must plan for CUDA (raise it as kernel families land).
const MIN_PLANNED: usize = 1592;

enum Planned {
    Modules(Vec<(String, String)>),
    Unsupported(String),
    Failed(String),
}

fn plan_case(model: &std::path::Path, inputs: &[Tensor]) -> Planned {
    let registry = Registry::standard();
    let imported = match import_file(model, &registry) {
        Ok(m) => m,
        // Import limits are the importer's (the CPU conformance lists them).
        Err(e) if is_unsupported(&e) => return Planned::Unsupported(e.to_string()),
        Err(e) => return Planned::Unsupported(format!("does not import: {e}")),
    };
    let classify = |e: rlx_onnx::Error| {
        if run_error_unsupported(&e) {
            Planned::Unsupported(e.to_string())
        } else {
            Planned::Failed(e.to_string())
        }
    };
    let compiled = match ModelCompiler::new(Target::Cuda).compile(imported, None) {
        Ok(c) => c,
        Err(e) => return classify(e),
    };
    let names = compiled.input_names();
    let session = match Session::new(compiled, SessionOptions { threads: 1 }) {
        Ok(s) => s,
        Err(e) => return classify(e),
    };
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(inputs).collect();
    match session.cuda_schedule(&named) {
        Ok(s) => Planned::Modules(s.modules.into_iter().map(|m| (m.name, m.source)).collect()),
        Err(e) => classify(e),
    }
}

#[test]
fn every_cuda_plan_compiles_with_nvrtc() {
    let Some(data) = common::testdata() else {
        return;
    };
    let nvrtc = common::nvrtc();
    if let Err(why) = &nvrtc {
        assert!(
            std::env::var_os("CI").is_none(),
            "NVRTC is required in CI: {why}"
        );
        eprintln!("planning only, no NVRTC compile: {why}");
    }
    let mut models: Vec<(String, std::path::PathBuf, Vec<Tensor>)> = Vec::new();
    for case in case_dirs(&data.join("node")).unwrap() {
        let name = format!("node/{}", case.file_name().unwrap().to_string_lossy());
        let Ok(dirs) = data_set_dirs(&case) else {
            continue;
        };
        let Some(Ok(set)) = dirs.first().map(|d| read_data_set(d)) else {
            continue;
        };
        models.push((name, case.join("model.onnx"), set.inputs));
    }
    let node_cases = models.len();
    for case in common::golden_cases() {
        let set = read_data_set(&data_set_dirs(&case).unwrap()[0]).unwrap();
        let name = format!("golden/{}", case.file_name().unwrap().to_string_lossy());
        models.push((name, case.join("model.onnx"), set.inputs));
    }
    for m in light_models(&data.join("light")).unwrap() {
        let dims = {
            let c = ModelCompiler::new(Target::Cpu)
                .compile_file(&m.model)
                .unwrap();
            let g = &c.graph;
            g.node(g.inputs()[0]).outputs[0].shape.as_known().unwrap()
        };
        let x = rlx_onnx::testdata::arange_input(&dims).unwrap();
        models.push((format!("light/{}", m.name), m.model.clone(), vec![x]));
    }
    let mut modules: BTreeMap<String, (String, String)> = BTreeMap::new();
    let (mut planned, mut planned_nodes, mut failures) = (0, 0, Vec::new());
    let mut unsupported: BTreeMap<String, usize> = BTreeMap::new();
    for (i, (name, model, inputs)) in models.iter().enumerate() {
        match plan_case(model, inputs) {
            Planned::Modules(ms) => {
                planned += 1;
                planned_nodes += usize::from(i < node_cases);
                for (m, src) in ms {
                    modules.entry(src).or_insert((m, name.clone()));
                }
            }
            Planned::Unsupported(why) => {
                if let Some(pat) = std::env::var_os("RLX_CUDA_PLANS_SHOW") {
                    if why.contains(pat.to_string_lossy().as_ref()) {
                        eprintln!("  {name}: {why}");
                    }
                }
                // Group refusals by their reason, less the node names.
                let key = why.rsplit(": ").next().unwrap_or(&why).to_string();
                *unsupported.entry(key).or_default() += 1;
            }
            Planned::Failed(why) => failures.push(format!("{name}: {why}")),
        }
    }
    let mut top: Vec<_> = unsupported.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1));
    eprintln!("cuda plans: {planned} of {} models ({planned_nodes} of {node_cases} node cases), {} distinct modules", models.len(), modules.len());
    for (why, n) in top.iter().take(60) {
        eprintln!("  {n:>4} unsupported: {why}");
    }
    if nvrtc.is_ok() {
        // The unit tests' cache (rlx_cuda::tests::test_compiler): a module
        // they compiled already is not compiled again.
        let c = Compiler::new(
            (9, 0),
            &CompileOptions {
                cache_dir: Some(std::env::temp_dir().join("rlx-onnx-nvrtc-tests")),
            },
        )
        .unwrap();
        let jobs: Vec<(&str, &str)> = modules
            .iter()
            .map(|(src, (m, _))| (m.as_str(), src.as_str()))
            .collect();
        for ((_, (m, case)), r) in modules.iter().zip(c.ptx_many(&jobs)) {
            if let Err(e) = r {
                failures.push(format!(
                    "module `{m}` (first planned by {case}) does not compile: {e}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        planned_nodes >= MIN_PLANNED,
        "only {planned_nodes} node cases plan for CUDA (at least {MIN_PLANNED} did before)"
    );
}
