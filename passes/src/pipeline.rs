//! The pass registry and the named pipelines, per target and opt level.
//!
//! A pipeline is a plain list of pass names. `-O0` runs only what execution
//! needs (inference, and legalization for a real target); `-O1` adds folding,
//! simplification, CSE and DCE; `-O2` adds the fusions.

use crate::manager::{OptLevel, Pass};

/// The pipeline of no particular target: no legalization.
pub const GENERIC: &str = "generic";

/// A registered pass: its name, what it does, and how to make it.
pub struct PassInfo {
    pub name: &'static str,
    pub about: &'static str,
    pub make: fn() -> Box<dyn Pass>,
}

macro_rules! reg {
    ($name:literal, $about:literal, $e:expr) => {
        PassInfo {
            name: $name,
            about: $about,
            make: || Box::new($e),
        }
    };
}

/// Every pass, by name.
pub const PASSES: &[PassInfo] = &[
    reg!("infer", "type and shape inference over the whole graph", crate::fold::Infer),
    reg!("fold-shapes", "replace values inference already knows (shape arithmetic) by constants", crate::fold::FoldShapes),
    reg!("fold-constants", "evaluate nodes whose inputs are all constant; inline constant `if`s", crate::fold::FoldConstants),
    reg!("loop-invariants", "loop-carried values a body passes through -> captures; constant captures -> constants inside the body (then folded there)", crate::loop_invariant::LoopInvariants),
    reg!("loop-trips", "while-loops whose condition depends on known values only: the trip count, found by running that part of the body at compile time -> a fixed count (the loop's outputs get known shapes)", crate::loop_trips::LoopTrips),
    reg!("unroll-loops", "loops of a known, small trip count -> their body inlined once per iteration", crate::unroll_loops::UnrollLoops),
    reg!("simplify", "algebraic identities: no-op ops, x*1, x+0, transpose/reshape/cast chains", crate::simplify::Simplify),
    reg!("cse", "merge nodes computing the same op on the same inputs", crate::cse::Cse),
    reg!("dce", "remove nodes no output depends on and unused weights", crate::dce::Dce),
    reg!("fold-batchnorm", "fold per-channel multiply-adds (BatchNormalization) into the preceding conv or matmul weights", crate::fold_batchnorm::FoldBatchNorm),
    reg!("fuse-layer-norm", "ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div(/Mul/Add) -> layer_norm", crate::fuse_layer_norm::FuseLayerNorm),
    reg!("fuse-gelu", "the Erf and Tanh GELU formulas -> gelu", crate::fuse_gelu::FuseGelu),
    reg!("fuse-hard-activations", "HardSigmoid and HardSwish chains -> one elementwise_region", crate::fuse_hard::FuseHard),
    reg!("merge-projections", "products of one row by several constant weights -> one product over the weights side by side, split into views (GPU targets)", crate::merge_projections::MergeProjections),
    reg!("fuse-rope", "x*cos + rotate_half(x)*sin with constant split-half caches -> rotary_embedding (3-D on a head split)", crate::fuse_rope::FuseRope),
    reg!("fuse-attention", "MatMul(Q, K^T), scale, mask add, Softmax, MatMul(V) with the head reshapes -> attention", crate::fuse_attention::FuseAttention),
    reg!("fuse-residual-norm", "residual add + layer_norm/rms_norm -> residual_norm", crate::fuse_residual_norm::FuseResidualNorm),
    reg!("fuse-int8-matmul", "i32 matmul of widened 8-bit operands less their zero points -> matmul_integer (targets that run it)", crate::fuse_int8_matmul::FuseInt8MatMul),
    reg!("fuse-qdq-matmul", "matmul of dequantized 8-bit operands (QDQ) -> matmul_integer scaled (targets that run it)", crate::fuse_qdq_matmul::FuseQdqMatMul),
    reg!("fuse-matmul", "matmul + bias add + activation -> fused_matmul; the f32 epilogue of matmul_integer -> fused_matmul_integer", crate::fuse_matmul::FuseMatMul),
    reg!("causal-mask", "an attention mask writing causality out (a constant lower triangle, and a per-key padding mask) -> the causal flag and the per-key part (GPU targets)", crate::causal_mask::CausalMask),
    reg!("fold-attention-layout", "attention operands read in place through their layout ops (packed QKV, head splits, selects); Q/K/V projections of one input -> one projection (targets that run it)", crate::fold_attention_layout::FoldAttentionLayout),
    reg!("stack-matmuls", "matmuls of one constant weight over independent rows -> one matmul over their rows stacked (an unrolled recurrence's input projections)", crate::stack_matmuls::StackMatMuls),
    reg!("fuse-conv", "conv + bias add + activation -> fused_conv", crate::fuse_conv::FuseConv),
    reg!("fuse-elementwise", "chains of elementwise ops -> elementwise_region", crate::fuse_elementwise::FuseElementwise),
    reg!("to-f16", "compute in f16 what the target runs in f16, casting at the edges (--precision fp16)", crate::to_f16::ToF16::F16),
    reg!("to-bf16", "compute in bf16 what the target runs in bf16, casting at the edges (--precision bf16)", crate::to_f16::ToF16::BF16),
    reg!("legalize", "decompose what the target cannot run; report what remains", crate::legalize::Legalize),
];

/// Makes the pass called `name`.
pub fn make_pass(name: &str) -> Option<Box<dyn Pass>> {
    PASSES.iter().find(|p| p.name == name).map(|p| (p.make)())
}

/// What a pass does, for listings.
pub fn about(name: &str) -> &'static str {
    PASSES
        .iter()
        .find(|p| p.name == name)
        .map_or("", |p| p.about)
}

/// CSE runs before folding too: a weight read through the same op in many
/// places (an unrolled recurrent layer's transposed Gemm weight) must fold
/// into one constant, not a copy per use.
const FOLD: &[&str] = &[
    "fold-shapes",
    "cse",
    "fold-constants",
    "loop-trips",
    "unroll-loops",
    // What the constants, trip counts and unrolled bodies made known (shape
    // arithmetic through a `range` only the evaluator runs) folds in turn.
    "fold-shapes",
    "fold-constants",
    "simplify",
    "loop-invariants",
    "simplify",
    "cse",
    "dce",
];

const FUSE: &[&str] = &[
    "fuse-int8-matmul",
    "fold-batchnorm",
    "fuse-layer-norm",
    "fuse-gelu",
    "fuse-hard-activations",
    "fuse-rope",
    "fuse-attention",
    "simplify",
    "fuse-residual-norm",
    "fuse-matmul",
    // After the projections took their biases.
    "fold-attention-layout",
    "stack-matmuls",
    "fuse-conv",
];

/// The pass names of the pipeline of `target` at `level`.
pub fn names(target: &str, level: OptLevel) -> Vec<&'static str> {
    let mut v = vec!["infer"];
    if level >= OptLevel::O2 {
        // Before folding widens the 8-bit weights to f32.
        v.push("fuse-qdq-matmul");
    }
    if level >= OptLevel::O1 {
        v.extend(FOLD);
    }
    if level >= OptLevel::O2 {
        let gpu = target != GENERIC && target != "cpu";
        for &pass in FUSE {
            v.push(pass);
            if pass == "fuse-attention" && gpu {
                // Its mask rows are the kernels' view of -3.4e38 (hidden),
                // not ONNX's: GPU targets only (see the pass).
                v.push("causal-mask");
            }
        }
        if gpu {
            // A launch's fixed cost is a GPU's; the activations it leaves
            // apart join the regions below.
            v.push("merge-projections");
        }
        // Regions come last: they absorb what the named fusions left.
        v.push("fuse-elementwise");
        v.push("dce");
    }
    if target != GENERIC {
        v.push("legalize");
        if level >= OptLevel::O1 {
            // Decompositions may leave foldable or duplicate pieces.
            v.extend(["simplify", "cse", "dce"]);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pipeline_pass_is_registered() {
        for t in [GENERIC, "cpu", "cuda"] {
            for l in [OptLevel::O0, OptLevel::O1, OptLevel::O2] {
                for n in names(t, l) {
                    assert!(make_pass(n).is_some(), "{n} is not registered");
                    assert_eq!(make_pass(n).unwrap().name(), n);
                }
            }
        }
        let mut all: Vec<&str> = PASSES.iter().map(|p| p.name).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), PASSES.len(), "two passes share a name");
    }

    #[test]
    fn o0_only_runs_what_execution_needs() {
        assert_eq!(names("cpu", OptLevel::O0), ["infer", "legalize"]);
        assert_eq!(names(GENERIC, OptLevel::O0), ["infer"]);
    }
}
