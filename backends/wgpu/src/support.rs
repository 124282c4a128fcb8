//! Which nodes the wgpu backend runs, by op, attributes and input dtypes. What
//! it rejects and legalization cannot decompose is reported with the reason.
//! Element-wise arithmetic is f32, 32-bit and 64-bit integers (bool for
//! logic); i64/u64 arithmetic is emulated on u32 pairs (no SHADER_INT64), in
//! element-wise kernels, cumulative sums and integer reductions. Other 8-byte
//! kernels only move (copy, gather, cast).

use rlx_ir::ops::RegionFn;
use rlx_ir::{DType, Node, Op, TensorType};

use crate::kernels::expr;

pub(crate) fn dtype_of(inputs: &[TensorType], i: usize) -> Result<DType, String> {
    inputs
        .get(i)
        .map(|t| t.dtype)
        .ok_or_else(|| format!("input {i} is missing"))
}

pub(crate) fn f32_only(what: &str, d: DType) -> Result<(), String> {
    if d == DType::F32 {
        Ok(())
    } else {
        Err(format!("{what} on {d} has no wgpu kernel (f32 only)"))
    }
}

pub(crate) fn movable(what: &str, d: DType) -> Result<(), String> {
    match d.size() {
        4 | 8 => Ok(()),
        _ => Err(format!(
            "{what} of {d} elements has no wgpu kernel (4- and 8-byte dtypes only)"
        )),
    }
}

/// Dense strided copies also move 1- and 2-byte elements.
pub(crate) fn copyable(what: &str, d: DType) -> Result<(), String> {
    if matches!(d.size(), 1 | 2) && d.packed_bits() == d.size() * 8 {
        return Ok(());
    }
    movable(what, d)
}

fn spatial(what: &str, inputs: &[TensorType]) -> Result<(), String> {
    let r = inputs.first().map_or(0, |t| t.shape.rank());
    if (3..=4).contains(&r) {
        Ok(())
    } else {
        Err(format!(
            "{what} over {} spatial dims has no wgpu kernel (1-D and 2-D only)",
            r.saturating_sub(2)
        ))
    }
}

fn has_kernel(what: &str, d: DType, ok: bool) -> Result<(), String> {
    if ok {
        return Ok(());
    }
    Err(format!("`{what}` on {d} has no wgpu kernel"))
}

/// Whether the backend runs `node` as it is, with inputs of these types:
/// leaves and views always, control flow when its bodies run, and every
/// other node as its kernel family ([`crate::kernels::family`]) says.
pub fn supports(node: &Node, inputs: &[TensorType]) -> Result<(), String> {
    match &node.op {
        Op::Input(_) | Op::Weight(_) | Op::Constant(_) => Ok(()),
        Op::Reshape(_) | Op::Flatten(_) | Op::Squeeze(_) | Op::Unsqueeze(_) => Ok(()),
        Op::If(_) | Op::Loop(_) | Op::Scan(_) => bodies(node),
        op => match crate::kernels::family(op) {
            Some(f) => (f.supports)(node, inputs),
            None => Err(format!(
                "the wgpu backend has no kernel for `{}`",
                op.name()
            )),
        },
    }
}

/// The checks of families whose own `supports` has not moved into their
/// kernel file yet.
pub fn legacy(node: &Node, inputs: &[TensorType]) -> Result<(), String> {
    let d0 = dtype_of(inputs, 0).unwrap_or(DType::F32);
    match &node.op {
        Op::Unary(u) => has_kernel(u.kind.name(), d0, expr::unary(u.kind, d0, "x").is_some()),
        Op::Binary(b) => {
            let d1 = dtype_of(inputs, 1)?;
            let pow = b.kind == rlx_ir::ops::BinaryKind::Pow;
            let pow_float =
                pow && expr::class(d0) == DType::F32 && expr::cast(d1, DType::F32, "b").is_some();
            if pow && d0.is_int() {
                return Err(format!(
                    "`pow` on {d0} has no wgpu kernel (integer powers are not emulated)"
                ));
            }
            let ok = (d1 == d0 || pow_float) && expr::binary(b.kind, d0, "a", "b").is_some();
            has_kernel(b.kind.name(), d0, ok)
        }
        Op::Compare(c) => has_kernel(
            c.kind.name(),
            d0,
            expr::compare(c.kind, d0, "a", "b").is_some(),
        ),
        Op::Logical(_) => Ok(()),
        Op::Where(_) => {
            let d = dtype_of(inputs, 1)?;
            has_kernel("where", d, expr::wgsl_type(d).is_some())
        }
        Op::Cast(c) => {
            if expr::cast(d0, c.to, "x").is_some() {
                Ok(())
            } else {
                Err(format!("cast from {d0} to {} has no wgpu kernel", c.to))
            }
        }
        Op::Clip(_) => has_kernel("clip", d0, expr::clip(d0, "x", "a", "b").is_some()),
        Op::Gelu(_) => f32_only("gelu", expr::class(d0)),
        Op::ElementwiseRegion(r) => {
            f32_only("elementwise_region", expr::class(d0))?;
            for ins in &r.program.0 {
                let ok = match ins.f {
                    RegionFn::Unary(k) => expr::unary(k, d0, "x").is_some(),
                    RegionFn::Binary(k) => expr::binary(k, d0, "a", "b").is_some(),
                };
                if !ok {
                    return Err(format!(
                        "region function `{}` has no wgpu form",
                        ins.f.name()
                    ));
                }
            }
            Ok(())
        }
        Op::MatMul(_) => {
            f32_only("matmul", d0)?;
            f32_only("matmul", dtype_of(inputs, 1)?)
        }
        Op::Conv(_) => {
            f32_only("conv", d0)?;
            spatial("conv", inputs)
        }
        Op::If(_) | Op::Loop(_) | Op::Scan(_) => bodies(node),
        Op::ConvTranspose(_) => {
            f32_only("conv_transpose", d0)?;
            f32_only("conv_transpose", dtype_of(inputs, 1)?)?;
            let r = inputs.first().map_or(0, |t| t.shape.rank());
            if (3..=5).contains(&r) {
                Ok(())
            } else {
                Err(format!(
                    "conv_transpose over {} spatial dims has no wgpu kernel (1-D to 3-D)",
                    r.saturating_sub(2)
                ))
            }
        }
        Op::Attention(a) => attention(a, inputs),
        op => Err(format!(
            "the wgpu backend has no kernel for `{}`",
            op.name()
        )),
    }
}

/// The attention kernel: f32 operands, bool or f32 masks, heads up to 256.
fn attention(a: &rlx_ir::ops::Attention, inputs: &[TensorType]) -> Result<(), String> {
    for i in 0..3 {
        f32_only("attention", dtype_of(inputs, i)?)?;
    }
    let ports = a.ports();
    if let Some(m) = ports.mask {
        match dtype_of(inputs, m)? {
            DType::Bool | DType::F32 => {}
            d => return Err(format!("attention masks of {d} have no wgpu kernel")),
        }
    }
    if let Some(n) = ports.nonpad {
        match dtype_of(inputs, n)? {
            DType::I32 | DType::I64 => {}
            d => return Err(format!("nonpad_kv_seqlen of {d} has no wgpu kernel")),
        }
    }
    for (i, heads) in [(0, a.q_num_heads), (2, a.kv_num_heads)] {
        let t = &inputs[i];
        let head = match t.shape.rank() {
            4 => t.shape.0[3].known(),
            3 if heads > 0 => t.shape.0[2].known().map(|h| h / heads),
            _ => None,
        };
        if head.is_some_and(|h| h > 256) {
            return Err("attention with head sizes above 256 has no wgpu kernel".into());
        }
    }
    Ok(())
}

/// Control flow runs when every node of its bodies does (both branches of an
/// If are planned, whichever runs).
fn bodies(node: &Node) -> Result<(), String> {
    for sub in node.op.subgraphs() {
        for id in sub.node_ids() {
            let n = sub.node(id);
            if n.op.is_leaf() {
                continue;
            }
            let ins: Vec<TensorType> = sub
                .inputs_of(id)
                .iter()
                .map(|v| sub.ty(*v).clone())
                .collect();
            supports(n, &ins).map_err(|r| format!("body node `{}`: {r}", n.name))?;
        }
    }
    Ok(())
}
