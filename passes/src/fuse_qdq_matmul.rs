//! 8-bit products of QDQ graphs (`fuse-qdq-matmul`). Static quantization
//! (onnxruntime's `quantize_static`, the default QDQ format) leaves every
//! quantized product as `matmul(dequantize(a8), dequantize(b8))` in f32.
//! With one scale for `a` and one for `b` or one per column of a 2-D `b`
//! (batched products, attention's of two activations, per tensor), the
//! scales factor out of the sum:
//!
//! `dq(a8, sa, za) · dq(b8, sb, zb) = (sa sb) * ((a8 - za) · (b8 - zb))`
//!
//! so the product becomes `mul(cast(matmul_integer(a8, b8, za, zb), f32),
//! mul(sa, sb))`: exact 8-bit arithmetic with i32 sums (as onnxruntime's
//! QDQ transformer runs it), then one rounding per output where the f32
//! product rounded at every step. The weight's `dequantize_linear` goes
//! unused and folding never widens it. Runs before folding, where the
//! weights are still 8-bit, and only where the target runs `matmul_integer`
//! on these dtypes.

use rlx_ir::ops::{Binary, MatMulInteger};
use rlx_ir::ops::{BinaryKind, Cast, Op, RoundMode};
use rlx_ir::{DType, Graph, Node, NodeId, TensorType, Value};

use crate::manager::{Pass, PassContext, PassError};
use crate::rewrite::{add_op, replace_root, rewrite_each};

pub struct FuseQdqMatMul;

const NAME: &str = "fuse-qdq-matmul";

impl Pass for FuseQdqMatMul {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let product = |n: &Node| {
            matches!(n.op, Op::MatMul(_)) && n.outputs.first().map(|t| t.dtype) == Some(DType::F32)
        };
        rewrite_each(g, cx, NAME, "matmul_integer", product, fuse)
    }
}

/// A dequantized 8-bit operand: `(x8 - zero) * scale`.
struct Dq {
    x8: Value,
    scale: Value,
    zero: Value,
}

/// Whether `v` holds one value.
fn single(g: &Graph, v: Value) -> bool {
    let t = g.ty(v);
    t.shape.rank() <= 1 && t.shape.numel().known() == Some(1)
}

/// `v` as a per-tensor dequantization of 8-bit data or, with `columns`, of
/// a 2-D one per column (axis 1, `columns` scales and zero points).
fn dq(g: &Graph, v: Value, columns: Option<usize>) -> Option<Dq> {
    let Op::DequantizeLinear(d) = &g.node(v.node).op else {
        return None;
    };
    let ins = g.inputs_of(v.node);
    let (x8, scale, zero) = (ins[0], ins[1], ins[2]);
    let xt = g.ty(x8);
    if d.block_size != 0 || !matches!(xt.dtype, DType::U8 | DType::I8) {
        return None;
    }
    if g.ty(scale).dtype != DType::F32 || g.ty(zero).dtype != xt.dtype {
        return None;
    }
    let fits = |p: Value| {
        single(g, p)
            || columns.is_some_and(|n| {
                let t = g.ty(p);
                xt.shape.rank() == 2
                    && (d.axis == 1 || d.axis == -1)
                    && t.shape.rank() == 1
                    && t.shape.0[0].known() == Some(n as i64)
            })
    };
    (fits(scale) && fits(zero)).then_some(Dq { x8, scale, zero })
}

fn fuse(g: &mut Graph, cx: &mut PassContext, id: NodeId) -> Result<bool, String> {
    let ins = g.inputs_of(id);
    let (ta, tb) = (g.ty(ins[0]).clone(), g.ty(ins[1]).clone());
    if ta.shape.rank() < 2 || tb.shape.rank() < 2 {
        return Ok(false);
    }
    // Scales per column only for a 2-D `b` (a weight); batched operands
    // (attention's products of two activations) per tensor.
    let columns = match tb.shape.rank() {
        2 => tb.shape.0[1].known().map(|n| n as usize),
        _ => None,
    };
    let (Some(a), Some(b)) = (dq(g, ins[0], None), dq(g, ins[1], columns)) else {
        return Ok(false);
    };
    let (name, origin) = (g.node(id).name.clone(), g.node(id).origin.clone());
    if let Some(backend) = cx.backend {
        let probe = Node::new(
            MatMulInteger {}.into(),
            name.clone(),
            origin.clone(),
            vec![],
        );
        let types: Vec<TensorType> = [a.x8, b.x8, a.zero, b.zero]
            .iter()
            .map(|&v| g.ty(v).clone())
            .collect();
        if backend.supports(&probe, &types).is_err() {
            return Ok(false);
        }
    }
    let product = add_op(
        g,
        cx.weights,
        MatMulInteger {},
        &format!("{name}_int8"),
        origin.clone(),
        &[a.x8, b.x8, a.zero, b.zero],
    )?;
    let wide = add_op(
        g,
        cx.weights,
        Cast {
            to: DType::F32,
            saturate: false,
            round_mode: RoundMode::Nearest,
        },
        &format!("{name}_f32"),
        origin.clone(),
        &[Value::of(product)],
    )?;
    let scale = add_op(
        g,
        cx.weights,
        Binary {
            kind: BinaryKind::Mul,
        },
        &format!("{name}_scale"),
        origin.clone(),
        &[a.scale, b.scale],
    )?;
    replace_root(
        g,
        cx.weights,
        id,
        Binary {
            kind: BinaryKind::Mul,
        },
        &[Value::of(wide), Value::of(scale)],
        origin,
    )?;
    Ok(true)
}
