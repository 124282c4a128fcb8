//! `--precision`: fp16 and bf16 rewrite the graph (the half type inside,
//! f32 at the model's edges) and stay close to exact results; tf32 marks the
//! CUDA schedule; each survives an artifact round trip.

mod common;

use rlx_onnx::ir::{DType, Op, Tensor};
use rlx_onnx::testdata::{data_set_dirs, read_data_set};
use rlx_onnx::{artifact, Compiler, Precision, Session, SessionOptions, Target};

fn cnn() -> std::path::PathBuf {
    common::root().join("golden/cnn")
}

fn casts(c: &rlx_onnx::CompiledModel) -> usize {
    let g = &c.graph;
    g.node_ids()
        .into_iter()
        .filter(|&id| matches!(g.node(id).op, Op::Cast(_)))
        .count()
}

#[test]
fn fp16_computes_in_half_inside_and_f32_at_the_edges() {
    let exact = Compiler::new(Target::Cuda)
        .compile_file(&cnn().join("model.onnx"))
        .unwrap();
    let half = Compiler::new(Target::Cuda)
        .precision(Precision::Fp16)
        .compile_file(&cnn().join("model.onnx"))
        .unwrap();
    assert_eq!(half.precision, Precision::Fp16);
    // One cast per model input and output, none inside.
    let edges = half.graph.inputs().len() + half.graph.outputs().len();
    assert_eq!(casts(&half) - casts(&exact), edges);
    let set = read_data_set(&data_set_dirs(&cnn()).unwrap()[0]).unwrap();
    let names = half.input_names();
    let session = Session::new(half, SessionOptions { threads: 1 }).unwrap();
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&set.inputs).collect();
    let s = session.cuda_schedule(&named).unwrap();
    for l in &s.launches {
        if let rlx_onnx::cuda::Launch::Gemm(g) = l {
            assert_eq!(g.gemm.dtype, DType::F16, "{}", g.gemm);
        }
    }
    assert!(s.inputs.iter().all(|i| i.dtype == DType::F32));
    assert!(s.outputs.iter().all(|o| o.dtype == DType::F32));
}

/// The golden CNN at `p` on the CPU: per output, the largest difference
/// from the reference outputs and the reference's largest magnitude.
fn cnn_on_the_cpu(p: Precision) -> Vec<(f32, f32)> {
    let half = Compiler::new(Target::Cpu)
        .precision(p)
        .compile_file(&cnn().join("model.onnx"))
        .unwrap();
    let set = read_data_set(&data_set_dirs(&cnn()).unwrap()[0]).unwrap();
    let names = half.input_names();
    let session = Session::new(half, SessionOptions { threads: 1 }).unwrap();
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&set.inputs).collect();
    let got = session.run(&named).unwrap();
    got.iter()
        .zip(&set.outputs)
        .map(|(g, w)| {
            let (g, w) = (g.as_slice::<f32>().unwrap(), w.as_slice::<f32>().unwrap());
            let scale = w.iter().fold(0f32, |m, v| m.max(v.abs()));
            let worst = g.iter().zip(w).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            (worst, scale)
        })
        .collect()
}

#[test]
fn fp16_on_the_cpu_stays_close_to_the_reference() {
    for (worst, scale) in cnn_on_the_cpu(Precision::Fp16) {
        // f16 keeps 11 bits: 1e-2 of the output's range.
        assert!(worst <= 1e-2 * scale.max(1.0), "{worst} of {scale}");
    }
}

#[test]
fn tf32_marks_the_cuda_schedule_and_survives_an_artifact() {
    let m = Compiler::new(Target::Cuda)
        .precision(Precision::Tf32)
        .compile_file(&cnn().join("model.onnx"))
        .unwrap();
    let back = artifact::from_bytes(&artifact::to_bytes(&m)).unwrap();
    assert_eq!(back.precision, Precision::Tf32);
    let set = read_data_set(&data_set_dirs(&cnn()).unwrap()[0]).unwrap();
    let names = back.input_names();
    let session = Session::new(back, SessionOptions { threads: 1 }).unwrap();
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&set.inputs).collect();
    let s = session.cuda_schedule(&named).unwrap();
    assert!(s.tf32);
    assert!(s.to_string().lines().next().unwrap().ends_with(", tf32"));
}

#[test]
fn fp16_light_models_cast_only_at_their_edges_on_cuda() {
    let Some(data) = common::testdata() else {
        return;
    };
    for m in rlx_onnx::testdata::light_models(&data.join("light")).unwrap() {
        let exact = Compiler::new(Target::Cuda).compile_file(&m.model).unwrap();
        let half = Compiler::new(Target::Cuda)
            .precision(Precision::Fp16)
            .compile_file(&m.model)
            .unwrap();
        let edges = half.graph.inputs().len() + half.graph.outputs().len();
        let g = &half.graph;
        let f32_nodes: Vec<String> = g
            .node_ids()
            .into_iter()
            .filter(|&id| {
                let n = g.node(id);
                !matches!(n.op, Op::Cast(_) | Op::Input(_))
                    && n.outputs.iter().any(|t| t.dtype == DType::F32)
            })
            .map(|id| format!("{} ({})", g.node(id).name, g.node(id).op.name()))
            .collect();
        assert!(
            f32_nodes.is_empty(),
            "{}: f32 left in {f32_nodes:?}",
            m.name
        );
        assert_eq!(casts(&half) - casts(&exact), edges, "{}", m.name);
    }
}

#[test]
fn bf16_computes_in_bf16_inside_and_f32_at_the_edges() {
    let exact = Compiler::new(Target::Cuda)
        .compile_file(&cnn().join("model.onnx"))
        .unwrap();
    let half = Compiler::new(Target::Cuda)
        .precision(Precision::Bf16)
        .compile_file(&cnn().join("model.onnx"))
        .unwrap();
    let back = artifact::from_bytes(&artifact::to_bytes(&half)).unwrap();
    assert_eq!(back.precision, Precision::Bf16);
    let edges = half.graph.inputs().len() + half.graph.outputs().len();
    assert_eq!(casts(&half) - casts(&exact), edges);
    let g = &half.graph;
    let computed: Vec<DType> = g
        .node_ids()
        .into_iter()
        .filter(|&id| !matches!(g.node(id).op, Op::Cast(_) | Op::Input(_)))
        .flat_map(|id| g.node(id).outputs.iter().map(|t| t.dtype))
        .collect();
    assert!(computed.contains(&DType::BF16), "{computed:?}");
    assert!(!computed.contains(&DType::F16), "{computed:?}");
    let set = read_data_set(&data_set_dirs(&cnn()).unwrap()[0]).unwrap();
    let names = back.input_names();
    let session = Session::new(back, SessionOptions { threads: 1 }).unwrap();
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(&set.inputs).collect();
    let s = session.cuda_schedule(&named).unwrap();
    for l in &s.launches {
        if let rlx_onnx::cuda::Launch::Gemm(g) = l {
            assert_eq!(g.gemm.dtype, DType::BF16, "{}", g.gemm);
        }
    }
}

#[test]
fn bf16_on_the_cpu_stays_close_to_the_reference() {
    for (worst, scale) in cnn_on_the_cpu(Precision::Bf16) {
        // bf16 keeps 8 bits: a few 1e-2 of the output's range, where f16
        // (11 bits) stays within 1e-2.
        assert!(worst <= 5e-2 * scale.max(1.0), "{worst} of {scale}");
        assert!(
            worst > 0.0,
            "bf16 gave the exact result: did it run in bf16?"
        );
    }
}
