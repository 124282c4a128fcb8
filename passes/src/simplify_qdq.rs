//! A quantization round trip as arithmetic (`simplify`): QDQ graphs
//! (onnxruntime's `quantize_static`) put `dequantize(quantize(x))` with one
//! scale and zero point after most activations, and where no integer
//! kernel reads the 8-bit value (`fuse-qdq-matmul` takes those first) the
//! pair only rounds `x` to the quantization grid: two passes over the
//! tensor, an 8-bit one between them. With `s` and `z` the pair's scale and
//! zero point and `[lo, hi]` the integer type's range,
//!
//! `(clamp(round(x / s) + z, lo, hi) - z) * s = clamp(round(x / s), lo - z, hi - z) * s`
//!
//! in f32 with the same bits (the quotient is QuantizeLinear's, rounding
//! half to even; the integers stay exact in f32; the product is
//! DequantizeLinear's), as `div`, `round`, `max`, `min`, `mul`: elementwise
//! ops that join the regions around them. The one difference is a NaN,
//! which the kernels quantize to the zero point (dequantized, 0) and the
//! arithmetic carries through; the ONNX reference leaves a NaN's
//! quantization undefined.
//!
//! Applies where every reader of the quantized value is such a
//! dequantization (the 8-bit tensor then goes away), `x` is f32, the
//! integer type is 8 or 16 bits wide, and the target runs the ops.

use rlx_ir::ops::{Binary, BinaryKind, Unary, UnaryKind};
use rlx_ir::{DType, Graph, Node, NodeId, Op, TensorType, Value};

use crate::manager::PassContext;
use crate::rewrite::{
    add_op, constant, float_tensor, remove_dead, replace_root, splat, union_origin,
};

/// The range of the integer types a round trip may go through.
fn range(d: DType) -> Option<(f64, f64)> {
    match d {
        DType::U8 => Some((0.0, 255.0)),
        DType::I8 => Some((-128.0, 127.0)),
        DType::U16 => Some((0.0, 65535.0)),
        DType::I16 => Some((-32768.0, 32767.0)),
        _ => None,
    }
}

/// The scale and zero point of a quantize or dequantize node: one value
/// each (constants whose elements are all equal).
fn params(g: &Graph, cx: &PassContext, id: NodeId) -> Option<(f64, f64, DType)> {
    let ins = g.inputs_of(id);
    let (scale, zero) = (*ins.get(1)?, *ins.get(2)?);
    if g.ty(scale).dtype != DType::F32 {
        return None;
    }
    Some((
        splat(g, cx.weights, scale)?,
        splat(g, cx.weights, zero)?,
        g.ty(zero).dtype,
    ))
}

/// Whether `id` dequantizes, per tensor, the output of quantize `q` with
/// `q`'s parameters, into f32.
fn undoes(g: &Graph, cx: &PassContext, id: NodeId, q: NodeId, want: (f64, f64, DType)) -> bool {
    let node = g.node(id);
    matches!(&node.op, Op::DequantizeLinear(d) if d.block_size == 0)
        && g.inputs_of(id).first() == Some(&Value::of(q))
        && node.outputs.first().map(|t| t.dtype) == Some(DType::F32)
        && params(g, cx, id)
            .is_some_and(|p| p.0.to_bits() == want.0.to_bits() && p.1 == want.1 && p.2 == want.2)
}

/// Whether the target runs `op` on f32 operands shaped `like`.
fn runs(cx: &PassContext, op: Op, like: &TensorType, arity: usize, name: &str) -> bool {
    let probe = Node::new(op, name.to_string(), vec![], vec![like.clone()]);
    let ins = vec![like.clone(); arity];
    cx.backend.is_none_or(|b| b.supports(&probe, &ins).is_ok())
}

/// Rewrites the dequantization `id` of a round trip; returns the rule that
/// applied.
pub fn round_trip(
    g: &mut Graph,
    cx: &mut PassContext,
    id: NodeId,
) -> Result<Option<&'static str>, String> {
    let Some(&qv) = g.inputs_of(id).first() else {
        return Ok(None);
    };
    let q = qv.node;
    if !matches!(&g.node(q).op, Op::QuantizeLinear(op) if op.block_size == 0) {
        return Ok(None);
    }
    let x = g.inputs_of(q)[0];
    let xt = g.ty(x).clone();
    let Some((lo, hi)) = range(g.ty(qv).dtype) else {
        return Ok(None);
    };
    let Some(p) = params(g, cx, q) else {
        return Ok(None);
    };
    let (s, z) = (p.0, p.1);
    let every_reader_undoes = g.outputs().iter().all(|o| o.value != qv)
        && g.users_of(qv).iter().all(|&(u, _)| undoes(g, cx, u, q, p));
    if xt.dtype != DType::F32 || !every_reader_undoes {
        return Ok(None);
    }
    let name = g.node(id).name.clone();
    let bin = |kind| Op::from(Binary { kind });
    let round = Op::from(Unary {
        kind: UnaryKind::Round,
    });
    let ops = [
        (bin(BinaryKind::Div), 2),
        (round.clone(), 1),
        (bin(BinaryKind::Max), 2),
        (bin(BinaryKind::Min), 2),
        (bin(BinaryKind::Mul), 2),
    ];
    if !ops.into_iter().all(|(op, n)| runs(cx, op, &xt, n, &name)) {
        return Ok(None);
    }
    let origin = union_origin(g, &[q, id]);
    let mut scalar = |g: &mut Graph, what: &str, v: f64| -> Result<Value, String> {
        let t = float_tensor(DType::F32, &[], &[v]).ok_or("no f32 scalar")?;
        Ok(constant(
            g,
            cx.weights,
            &format!("{name}.{what}"),
            origin.clone(),
            t,
        ))
    };
    let (sv, lov, hiv) = (
        scalar(g, "scale", s)?,
        scalar(g, "lo", lo - z)?,
        scalar(g, "hi", hi - z)?,
    );
    let mut chain = x;
    for (op, arg) in [
        (bin(BinaryKind::Div), Some(sv)),
        (round, None),
        (bin(BinaryKind::Max), Some(lov)),
        (bin(BinaryKind::Min), Some(hiv)),
    ] {
        let ins: Vec<Value> = std::iter::once(chain).chain(arg).collect();
        chain = Value::of(add_op(g, cx.weights, op, &name, origin.clone(), &ins)?);
    }
    replace_root(
        g,
        cx.weights,
        id,
        bin(BinaryKind::Mul),
        &[chain, sv],
        origin,
    )?;
    remove_dead(g, &[q]);
    Ok(Some("simplify.qdq-round-trip"))
}
