//! The f32 epilogue of an 8-bit product, part of `fuse-matmul`. Dynamic
//! quantization (onnxruntime's `quantize_dynamic`), QDQ products after
//! `fuse-qdq-matmul` and the contrib MatMulIntegerToFloat all end in
//!
//! `act(mul(cast(matmul_integer(a, b, za, zb), f32), scale) + bias)`
//!
//! with `scale` and `bias` one value or one per column. The rules here make
//! that one `fused_matmul_integer`, whose kernel corrects, converts, scales
//! and activates each tile of sums while it is still in registers instead of
//! three passes over the i32 and f32 products. Each rule checks that the
//! target runs the fused node.

use rlx_ir::ops::{Activation, FusedMatMulInteger};
use rlx_ir::{DType, Graph, Node, Op, TensorType, Value};

use crate::fold_batchnorm::rev;
use crate::fuse_matmul::{act_rules, root_activation};
use crate::manager::PassContext;
use crate::pattern::{any, op, op_if, Match, Rule};
use crate::rewrite::{replace_root, union_origin};

/// The rules, for [`crate::fuse_matmul::FuseMatMul`].
pub fn rules() -> Vec<Rule> {
    let product = op("matmul_integer", [any("a"), any("b"), any("za"), any("zb")]);
    let plain5 = op_if(
        is_plain,
        [any("a"), any("b"), any("za"), any("zb"), any("scale")],
    )
    .bind("p");
    let plain6 = op_if(
        is_plain,
        [
            any("a"),
            any("b"),
            any("za"),
            any("zb"),
            any("scale"),
            any("bias"),
        ],
    )
    .bind("p");
    let mut rules = vec![
        Rule {
            name: "fused_matmul_integer.scale",
            pattern: op("mul", [op_if(is_cast_to_f32, [product]), any("scale")]).commutative(),
            rewrite: scale,
        },
        Rule {
            name: "fused_matmul_integer.bias",
            pattern: op("add", [plain5.clone(), any("bias")]).commutative(),
            rewrite: bias,
        },
    ];
    rules.extend(act_rules(
        &[plain5, plain6],
        activate,
        "fused_matmul_integer.activation",
    ));
    rules
}

fn is_cast_to_f32(op: &Op) -> bool {
    matches!(op, Op::Cast(c) if c.to == DType::F32)
}

fn is_plain(op: &Op) -> bool {
    matches!(op, Op::FusedMatMulInteger(f) if f.activation == Activation::None)
}

/// Whether `v` is f32 with one value or one per column of the product
/// `out` (its last dim).
fn per_column(g: &Graph, v: Value, out: &TensorType) -> bool {
    let t = g.ty(v);
    let n = out.shape.0.last().and_then(|d| d.known());
    let count = t.shape.numel().known();
    t.dtype == DType::F32
        && t.shape.rank() <= 1
        && (count == Some(1) || (count.is_some() && count == n && t.shape.rank() == 1))
}

/// Makes `m`'s root the fused node on `ins`, where the target runs it.
fn fuse(
    g: &mut Graph,
    cx: &mut PassContext,
    m: &Match,
    activation: Activation,
    ins: &[Value],
) -> Result<bool, String> {
    let op = FusedMatMulInteger { activation };
    if let Some(backend) = cx.backend {
        let root = g.node(m.root());
        let probe = Node::new(op.clone().into(), root.name.clone(), vec![], vec![]);
        let types: Vec<TensorType> = ins.iter().map(|&v| g.ty(v).clone()).collect();
        if backend.supports(&probe, &types).is_err() {
            return Ok(false);
        }
    }
    let origin = union_origin(g, &rev(g, m));
    replace_root(g, cx.weights, m.root(), op, ins, origin)?;
    Ok(true)
}

fn scale(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let out = g.node(m.root()).outputs[0].clone();
    if out.dtype != DType::F32 || !per_column(g, m.v("scale"), &out) {
        return Ok(false);
    }
    let ins = [m.v("a"), m.v("b"), m.v("za"), m.v("zb"), m.v("scale")];
    fuse(g, cx, m, Activation::None, &ins)
}

fn bias(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let out = g.node(m.n("p")).outputs[0].clone();
    if g.node(m.root()).outputs[0] != out || !per_column(g, m.v("bias"), &out) {
        return Ok(false);
    }
    let names = ["a", "b", "za", "zb", "scale", "bias"];
    let ins: Vec<Value> = names.iter().map(|n| m.v(n)).collect();
    fuse(g, cx, m, Activation::None, &ins)
}

fn activate(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let Some(act) = root_activation(g, cx.weights, m) else {
        return Ok(false);
    };
    if g.node(m.n("p")).outputs[0] != g.node(m.root()).outputs[0] {
        return Ok(false);
    }
    let mut ins: Vec<Value> = ["a", "b", "za", "zb", "scale"]
        .iter()
        .map(|n| m.v(n))
        .collect();
    if let Some(b) = m.values.get("bias") {
        ins.push(*b);
    }
    fuse(g, cx, m, act, &ins)
}
