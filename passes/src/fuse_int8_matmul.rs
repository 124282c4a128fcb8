//! 8-bit matrix products (`fuse-int8-matmul`): the importer writes ONNX's
//! MatMulInteger (and the contrib ops built on it) as an i32 `matmul` of
//! widened operands less their zero points; folding turns a weight side
//! into an i32 constant. This pass finds such a `matmul` and gives the
//! target the bytes back:
//!
//! `matmul(A, B)` with each operand `sub(cast(x8), cast(z8))`, `cast(x8)`
//! (zero point 0) or, for `B`, an i32 constant whose values all fit in i8
//! (or u8) -> `matmul_integer(a8, b8, za8, zb8)`.
//!
//! Widened operands are often shared (one quantized activation feeds the
//! query, key and value products), so the pass does not require the
//! `sub`/`cast` nodes to be read only by the product; DCE drops them when
//! nothing else does. It applies only where the target runs
//! `matmul_integer`.

use rlx_ir::ops::{MatMulInteger, Op};
use rlx_ir::{DType, Graph, Node, NodeId, Tensor, TensorType, Value};

use crate::manager::{Pass, PassContext, PassError};
use crate::rewrite::{const_of, constant, replace_root, rewrite_each};

pub struct FuseInt8MatMul;

const NAME: &str = "fuse-int8-matmul";

impl Pass for FuseInt8MatMul {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let product = |n: &Node| {
            matches!(n.op, Op::MatMul(_)) && n.outputs.first().map(|t| t.dtype) == Some(DType::I32)
        };
        rewrite_each(g, cx, NAME, "matmul_integer", product, fuse)
    }
}

/// An operand of the product as bytes: the 8-bit value and its zero point
/// (`None`: zero), or a constant to store as bytes.
enum Bytes {
    Value(Value, Option<Value>),
    Constant(Tensor),
}

/// `cast(x)` to i32 of an 8-bit `x`.
fn widened(g: &Graph, v: Value) -> Option<Value> {
    let node = g.node(v.node);
    match &node.op {
        Op::Cast(c) if c.to == DType::I32 => {
            let x = g.inputs_of(v.node)[0];
            matches!(g.ty(x).dtype, DType::U8 | DType::I8).then_some(x)
        }
        _ => None,
    }
}

/// What operand `v` of the product is as bytes (zero points: one value);
/// `constant`: whether a constant i32 operand qualifies.
fn as_bytes(g: &Graph, cx: &PassContext, v: Value, constant: bool) -> Option<Bytes> {
    if let Some(x) = widened(g, v) {
        return Some(Bytes::Value(x, None));
    }
    if let Op::Binary(b) = &g.node(v.node).op {
        if b.kind == rlx_ir::ops::BinaryKind::Sub {
            let ins = g.inputs_of(v.node);
            let x = widened(g, ins[0])?;
            let z = widened(g, ins[1])?;
            let scalar = g.ty(z).shape.numel().known() == Some(1) && g.ty(z).shape.rank() <= 1;
            return (scalar && g.ty(z).dtype == g.ty(x).dtype).then_some(Bytes::Value(x, Some(z)));
        }
    }
    if !constant {
        return None;
    }
    let t = const_of(g, cx.weights, v)?;
    let vals = t.as_slice::<i32>().ok()?;
    let (lo, hi) = vals
        .iter()
        .fold((i32::MAX, i32::MIN), |(l, h), &x| (l.min(x), h.max(x)));
    let bytes: Vec<u8> = vals.iter().map(|&x| x as u8).collect();
    let dtype = if lo >= -128 && hi <= 127 {
        DType::I8
    } else if lo >= 0 && hi <= 255 {
        DType::U8
    } else {
        return None;
    };
    Tensor::from_slice(dtype, t.dims(), &bytes)
        .ok()
        .map(Bytes::Constant)
}

fn fuse(g: &mut Graph, cx: &mut PassContext, id: NodeId) -> Result<bool, String> {
    let ins = g.inputs_of(id);
    if g.ty(ins[0]).shape.rank() < 2 || g.ty(ins[1]).shape.rank() < 2 {
        return Ok(false);
    }
    let (Some(a), Some(b)) = (
        as_bytes(g, cx, ins[0], false),
        as_bytes(g, cx, ins[1], true),
    ) else {
        return Ok(false);
    };
    // The fused node's input types, to ask the target before changing anything.
    let types_of = |x: &Bytes| -> (TensorType, TensorType) {
        let t = match x {
            Bytes::Value(v, _) => g.ty(*v).clone(),
            Bytes::Constant(t) => t.ty(),
        };
        let z = match x {
            Bytes::Value(_, Some(z)) => g.ty(*z).clone(),
            _ => TensorType::scalar(t.dtype),
        };
        (t, z)
    };
    let ((ta, tza), (tb, tzb)) = (types_of(&a), types_of(&b));
    let (name, origin) = (g.node(id).name.clone(), g.node(id).origin.clone());
    if let Some(backend) = cx.backend {
        let probe = Node::new(
            MatMulInteger {}.into(),
            name.clone(),
            origin.clone(),
            vec![],
        );
        if backend.supports(&probe, &[ta, tb, tza, tzb]).is_err() {
            return Ok(false);
        }
    }
    let mut operand = |g: &mut Graph, x: Bytes, what: &str| -> Result<(Value, Value), String> {
        let (v, z) = match x {
            Bytes::Value(v, z) => (v, z),
            Bytes::Constant(t) => {
                let v = constant(g, cx.weights, &format!("{name}_{what}"), origin.clone(), t);
                (v, None)
            }
        };
        let z = match z {
            Some(z) => z,
            None => {
                let zero = Tensor::zeros(g.ty(v).dtype, &[]).map_err(|e| e.to_string())?;
                let base = format!("{name}_{what}_zero");
                constant(g, cx.weights, &base, origin.clone(), zero)
            }
        };
        Ok((v, z))
    };
    let (a8, za) = operand(g, a, "a")?;
    let (b8, zb) = operand(g, b, "b")?;
    replace_root(
        g,
        cx.weights,
        id,
        MatMulInteger {},
        &[a8, b8, za, zb],
        origin,
    )?;
    Ok(true)
}
