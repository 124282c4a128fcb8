//! Transformers as PyTorch's two ONNX exporters write them: BERT, GPT-2, a
//! Llama-style decoder (grouped-query heads, rotary embeddings, RMSNorm,
//! SwiGLU) and torchvision's ViT, each exported with `dynamo=False` and
//! `dynamo=True` (torch 2.11, transformers 5.17; two layers, random weights,
//! `scripts/transformer_bench.py --tiny` wrote them with PyTorch's outputs).
//!
//! On the CPU every model matches PyTorch (rtol 1e-4, atol 1e-5). Planned for
//! CUDA (no device needed), every layer's attention is one `attention` node
//! (no softmax left), the decoders' norms are `rms_norm` / `residual_norm`
//! and their rotations `rotary_embedding`,
//! and no head split or merge is left as a transpose where the operand
//! comes straight from a projection, nor a split or slice of a packed one
//! (`fold-attention-layout`: Q, K and V read as views of one projection);
//! what stays is listed per model, so a fusion that stops matching an
//! exporter's form fails here.

#[path = "common/attention.rs"]
#[allow(dead_code)]
mod attention;
mod common;

use std::path::PathBuf;

use rlx_onnx::conformance::Tolerance;
use rlx_onnx::ir::{Graph, Tensor};
use rlx_onnx::testdata::{data_set_dirs, read_data_set};
use rlx_onnx::{Compiler, Session, SessionOptions, Target};

const TOL: Tolerance = Tolerance {
    rtol: 1e-4,
    atol: 1e-5,
};

/// (model, transposes left on CUDA, whether attention reads Q, K and V as
/// views of one packed projection). BERT, GPT-2 and the decoder (its Q and
/// K rotated in 3-D by `rotary_embedding`) read every head in place;
/// BERT's three projections become one, and GPT-2's and torchvision's
/// packed QKV (split, or unflattened and selected sequence-first) is read
/// where the projection wrote it, with ViT's head merge written in place.
/// ViT keeps the one transpose of its patch embedding.
const MODELS: &[(&str, usize, bool)] = &[
    ("bert_script", 0, true),
    ("bert_dynamo", 0, true),
    ("gpt2_script", 0, true),
    ("gpt2_dynamo", 0, true),
    ("llama_script", 0, false),
    ("llama_dynamo", 0, false),
    ("vit_script", 1, true),
    ("vit_dynamo", 1, true),
];

fn dir(name: &str) -> PathBuf {
    common::root().join("tests/data/exported").join(name)
}

fn count(g: &Graph, op: &str) -> usize {
    g.node_ids()
        .into_iter()
        .filter(|&id| g.node(id).op.name() == op)
        .count()
}

#[test]
fn exported_transformers_match_pytorch_on_the_cpu() {
    for (name, _, _) in MODELS {
        let d = dir(name);
        let model = Compiler::new(Target::Cpu)
            .compile_file(&d.join("model.onnx"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let set = read_data_set(&data_set_dirs(&d).unwrap()[0]).unwrap();
        let names = model.input_names();
        let session = Session::new(model, SessionOptions { threads: 2 }).unwrap();
        let named: Vec<(&str, &Tensor)> =
            names.iter().map(String::as_str).zip(&set.inputs).collect();
        let got = session
            .run(&named)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        common::check_outputs(&got, &set.outputs, TOL, name);
    }
}

/// A decoder's mask as the exporters write it (`where(and(T, P), 0,
/// -3.4e38)`, `T` the lower triangle, `P` per-key padding) against what
/// `causal-mask` makes of it on GPU targets (the causal flag and
/// `where(P, 0, -3.4e38)`): the same attention on the CPU, over 70
/// positions (key tiles end mid-tile) with padding keys past the first.
#[test]
fn a_written_causal_mask_and_the_flag_agree_on_the_cpu() {
    let (s, heads, d) = (70usize, 2usize, 16usize);
    let tri: Vec<String> = (0..s * s).map(|x| (x % s <= x / s).to_string()).collect();
    let attention = |causal: bool, mask: &str| {
        format!(
            "  %9 = attention(%0, %1, %2, {mask}) {{q_num_heads={heads}, kv_num_heads={heads}, scale=0.25, is_causal={causal}, softcap=0.0, qk_matmul_output_mode=0, has_mask=true, has_past=false, has_nonpad=false, num_outputs=1, left_window_size=-1, right_window_size=-1, softmax_precision=none}} : f32[1,{heads},{s},{d}]\n  output \"y\" = %9\n}}\n"
        )
    };
    let head = format!(
        "rlx-ir 2\ngraph {{\n  %0 = input \"q\" : f32[1,{heads},{s},{d}]\n  %1 = input \"k\" : f32[1,{heads},{s},{d}]\n  %2 = input \"v\" : f32[1,{heads},{s},{d}]\n  %3 = input \"pad\" : bool[1,1,1,{s}]\n  %6 = constant f32[] [0.0] : f32[]\n  %7 = constant f32[] [-3.4028235e38] : f32[]\n"
    );
    let written = format!(
        "{head}  %4 = constant bool[1,1,{s},{s}] [{}] : bool[1,1,{s},{s}]\n  %5 = and(%4, %3) : bool[1,1,{s},{s}]\n  %8 = where(%5, %6, %7) : f32[1,1,{s},{s}]\n{}",
        tri.join(", "),
        attention(false, "%8")
    );
    let flagged = format!(
        "{head}  %8 = where(%3, %6, %7) : f32[1,1,1,{s}]\n{}",
        attention(true, "%8")
    );
    let n = heads * s * d;
    let values = |seed: u32| -> Vec<f32> {
        (0..n as u32)
            .map(|i| ((i.wrapping_mul(2_654_435_761) ^ seed) % 2000) as f32 / 1000.0 - 1.0)
            .collect()
    };
    let dims = [1, heads, s, d];
    let pad: Vec<u8> = (0..s).map(|j| u8::from(j % 7 != 3)).collect();
    let inputs = [
        ("q", Tensor::from_values(&dims, &values(1)).unwrap()),
        ("k", Tensor::from_values(&dims, &values(2)).unwrap()),
        ("v", Tensor::from_values(&dims, &values(3)).unwrap()),
        (
            "pad",
            Tensor::from_slice(rlx_onnx::ir::DType::Bool, &[1, 1, 1, s], &pad).unwrap(),
        ),
    ];
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (*n, t)).collect();
    let run = |text: &str| {
        let model = attention::compiled(text, Target::Cpu);
        Session::new(model, SessionOptions { threads: 1 })
            .unwrap()
            .run(&named)
            .unwrap()
    };
    common::check_outputs(&run(&flagged), &run(&written), TOL, "causal flag");
}

#[test]
fn exported_transformers_plan_fused_layers_for_cuda() {
    for (name, transposes, packed) in MODELS {
        let model = Compiler::new(Target::Cuda)
            .compile_file(&dir(name).join("model.onnx"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let g = &model.graph;
        let text = rlx_onnx::ir::text::print_graph(g);
        assert_eq!(
            count(g, "attention"),
            2,
            "{name}: one attention a layer\n{text}"
        );
        assert_eq!(count(g, "softmax"), 0, "{name}\n{text}");
        assert_eq!(count(g, "transpose"), *transposes, "{name}\n{text}");
        for id in g.node_ids() {
            if let rlx_onnx::ir::Op::Attention(a) = &g.node(id).op {
                assert_eq!(!a.views.is_empty(), *packed, "{name}: views\n{text}");
                let ins = g.inputs_of(id);
                if *packed {
                    assert!(
                        ins[0] == ins[1] && ins[1] == ins[2],
                        "{name}: Q, K and V from one projection\n{text}"
                    );
                }
            }
        }
        // The decoders' written masks read as the causal flag.
        let causal = !name.starts_with("bert") && !name.starts_with("vit");
        for id in g.node_ids() {
            if let rlx_onnx::ir::Op::Attention(a) = &g.node(id).op {
                assert_eq!(a.is_causal, causal, "{name}: causal flag\n{text}");
            }
        }
        // Nothing left to split or select the packed projection.
        assert_eq!(count(g, "split"), 0, "{name}\n{text}");
        assert_eq!(count(g, "slice"), 0, "{name}\n{text}");
        if name.starts_with("llama") {
            assert_eq!(
                count(g, "reduce_mean"),
                0,
                "{name}: RMSNorm unfused\n{text}"
            );
            assert_eq!(
                count(g, "rotary_embedding"),
                4,
                "{name}: RoPE unfused\n{text}"
            );
        }
    }
}
