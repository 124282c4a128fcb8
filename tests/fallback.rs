//! The CPU fallback of GPU targets (`Fallback::Cpu`): a graph with nodes the
//! GPU cannot run (strings, shapes that depend on data) is refused by default,
//! naming each node; with the fallback it is split into GPU and CPU segments
//! whose run matches ONNX Runtime's outputs (f32: rtol 1e-4, atol 1e-5;
//! strings and integers exactly) and the CPU backend's. The split is pure and
//! tested without a device; the runs need wgpu (lavapipe in CI) and skip,
//! saying so, where there is none, except under `CI`, where they fail.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use rlx_onnx::conformance::Tolerance;
use rlx_onnx::ir::Tensor;
use rlx_onnx::partition::{partition, Place};
use rlx_onnx::testdata::read_data_set;
use rlx_onnx::wgpu::Context;
use rlx_onnx::{artifact, CompiledModel, Compiler, Fallback, Session, SessionOptions, Target};

const TOL: Tolerance = Tolerance {
    rtol: 1e-4,
    atol: 1e-5,
};

fn words_model() -> PathBuf {
    common::root().join("tests/data/fallback/words_to_features/model.onnx")
}

fn context() -> Option<Arc<Context>> {
    match Context::new() {
        Ok(c) => Some(Arc::new(c)),
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!("no wgpu device in CI (install lavapipe): {e}")
        }
        Err(e) => {
            eprintln!("skipping: {e}");
            None
        }
    }
}

fn run(model: CompiledModel, inputs: &[Tensor], ctx: Option<&Arc<Context>>) -> Vec<Tensor> {
    let names = model.input_names();
    let options = SessionOptions { threads: 2 };
    let session = match ctx {
        Some(c) => Session::with_wgpu_context(model, options, c.clone()).unwrap(),
        None => Session::new(model, options).unwrap(),
    };
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(inputs).collect();
    session.run(&named).unwrap()
}

fn check(got: &[Tensor], want: &[Tensor], what: &str) {
    common::check_outputs(got, want, TOL, what);
}

#[test]
fn gpu_targets_refuse_what_they_cannot_run_unless_asked() {
    for target in [Target::Wgpu, Target::Cuda] {
        let e = Compiler::new(target)
            .compile_file(&words_model())
            .unwrap_err()
            .to_string();
        for named in [
            "`vocab` (string_map",
            "`exclaim` (string_concat",
            "--fallback cpu",
        ] {
            assert!(e.contains(named), "{target}: `{named}` not in: {e}");
        }
    }
}

#[test]
fn the_split_puts_strings_on_the_cpu_and_numbers_on_the_gpu() {
    for target in [Target::Wgpu, Target::Cuda] {
        let m = Compiler::new(target)
            .fallback(Fallback::Cpu)
            .compile_file(&words_model())
            .unwrap();
        let p = partition(&m.graph, &m.weights, target.backend()).unwrap();
        let ops = |place: Place| -> Vec<String> {
            let mut ops: Vec<String> = p
                .segments
                .iter()
                .filter(|s| s.place == place)
                .flat_map(|s| {
                    s.graph
                        .node_ids()
                        .into_iter()
                        .map(|id| s.graph.node(id))
                        .filter(|n| !n.op.is_leaf())
                        .flat_map(|n| n.origin.clone())
                        .collect::<Vec<_>>()
                })
                .collect();
            ops.sort();
            ops.dedup();
            ops
        };
        assert_eq!(ops(Place::Host), ["exclaim", "vocab"], "{target}");
        assert_eq!(
            ops(Place::Device),
            ["act", "bias", "embed", "project"],
            "{target}"
        );
        // Host first (the ids), then the device: two segments, not more.
        let places: Vec<Place> = p.segments.iter().map(|s| s.place).collect();
        assert_eq!(places, [Place::Host, Place::Device], "{target}");
        assert_eq!(p.outputs.len(), 2);
    }
}

#[test]
fn split_runs_match_onnx_runtime_and_the_cpu() {
    let Some(ctx) = context() else { return };
    let case = words_model();
    let data = read_data_set(&case.with_file_name("test_data_set_0")).unwrap();
    let cpu = run(
        Compiler::new(Target::Cpu).compile_file(&case).unwrap(),
        &data.inputs,
        None,
    );
    let m = Compiler::new(Target::Wgpu)
        .fallback(Fallback::Cpu)
        .compile_file(&case)
        .unwrap();
    let split = run(m, &data.inputs, Some(&ctx));
    check(&split, &data.outputs, "wgpu + cpu against ONNX Runtime");
    check(&split, &cpu, "wgpu + cpu against the cpu backend");
}

/// `if_rank` picks a branch whose output rank depends on the data: no GPU
/// schedule can hold it, so its `If` runs on the CPU and the rest on the GPU.
#[test]
fn data_dependent_ranks_run_with_the_fallback() {
    let Some(ctx) = context() else { return };
    let case = common::root().join("golden/if_rank");
    for set in ["test_data_set_0", "test_data_set_1"] {
        let data = read_data_set(&case.join(set)).unwrap();
        let m = Compiler::new(Target::Wgpu)
            .fallback(Fallback::Cpu)
            .compile_file(&case.join("model.onnx"))
            .unwrap();
        let split = run(m, &data.inputs, Some(&ctx));
        check(&split, &data.outputs, &format!("if_rank {set}"));
    }
}

#[test]
fn artifacts_keep_the_fallback() {
    let m = Compiler::new(Target::Wgpu)
        .fallback(Fallback::Cpu)
        .compile_file(&words_model())
        .unwrap();
    let back = artifact::from_bytes(&artifact::to_bytes(&m)).unwrap();
    assert_eq!(back.fallback, Fallback::Cpu);
    let plain = Compiler::new(Target::Wgpu)
        .compile_file(&common::root().join("golden/mlp/model.onnx"))
        .unwrap();
    let back = artifact::from_bytes(&artifact::to_bytes(&plain)).unwrap();
    assert_eq!(back.fallback, Fallback::Refuse);
}
