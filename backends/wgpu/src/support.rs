//! Which nodes the wgpu backend runs, by op, attributes and input dtypes. What
//! it rejects and legalization cannot decompose is reported with the reason.
//! Element-wise arithmetic is f32, 32-bit and 64-bit integers (bool for
//! logic); i64/u64 arithmetic is emulated on u32 pairs (no SHADER_INT64), in
//! element-wise kernels, cumulative sums and integer reductions. Other 8-byte
//! kernels only move (copy, gather, cast).

use rlx_ir::ops::{PoolKind, ScatterReduction};
use rlx_ir::{DType, Node, Op, TensorType};

fn dtype_of(inputs: &[TensorType], i: usize) -> Result<DType, String> {
    inputs
        .get(i)
        .map(|t| t.dtype)
        .ok_or_else(|| format!("input {i} is missing"))
}

fn f32_only(what: &str, d: DType) -> Result<(), String> {
    if d == DType::F32 {
        Ok(())
    } else {
        Err(format!("{what} on {d} has no wgpu kernel (f32 only)"))
    }
}

fn movable(what: &str, d: DType) -> Result<(), String> {
    match d.size() {
        4 | 8 => Ok(()),
        _ => Err(format!(
            "{what} of {d} elements has no wgpu kernel (4- and 8-byte dtypes only)"
        )),
    }
}

/// Dense strided copies also move 1- and 2-byte elements.
fn copyable(what: &str, d: DType) -> Result<(), String> {
    if matches!(d.size(), 1 | 2) && d.packed_bits() == d.size() * 8 {
        return Ok(());
    }
    movable(what, d)
}

/// Scatters move 4- and 8-byte elements; reductions are f32 only.
fn scatter(r: ScatterReduction, d: DType, inputs: &[TensorType]) -> Result<(), String> {
    movable("scatter", d)?;
    if r != ScatterReduction::None {
        f32_only("scatter with a reduction", d)?;
    }
    match dtype_of(inputs, 1)? {
        DType::I32 | DType::I64 => Ok(()),
        d => Err(format!("scatter indices of {d} have no wgpu kernel")),
    }
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
        Op::Pool(p) => {
            f32_only("pooling", d0)?;
            match p.kind {
                PoolKind::Max if node.outputs.len() > 1 => {
                    Err("max pooling with indices has no wgpu kernel".into())
                }
                _ => {
                    let r = inputs.first().map_or(0, |t| t.shape.rank());
                    if (3..=5).contains(&r) {
                        Ok(())
                    } else {
                        Err(format!(
                            "pooling over {} spatial dims has no wgpu kernel (1-D to 3-D)",
                            r.saturating_sub(2)
                        ))
                    }
                }
            }
        }
        Op::GlobalPool(_) => {
            f32_only("global pooling", d0)?;
            Ok(())
        }
        Op::Lrn(_) => f32_only("lrn", d0),
        Op::Reduce(_) | Op::ArgReduce(_) => match d0 {
            DType::F32 => Ok(()),
            d => crate::kernels::reduce::int_mode(&node.op, d).map(|_| ()),
        },
        Op::Softmax(_) => f32_only("softmax", d0),
        Op::LayerNorm(_) => f32_only("layer_norm", d0),
        Op::RmsNorm(_) => f32_only("rms_norm", d0),
        Op::Transpose(_)
        | Op::Slice(_)
        | Op::Split(_)
        | Op::Expand(_)
        | Op::DepthToSpace(_)
        | Op::SpaceToDepth(_) => copyable(node.op.name(), d0),
        Op::Concat(_) | Op::Pad(_) | Op::Tile(_) => movable(node.op.name(), d0),
        Op::GatherElements(_) | Op::Trilu(_) => {
            movable(node.op.name(), d0)?;
            match (&node.op, inputs.get(1).map(|t| t.dtype)) {
                (Op::GatherElements(_), Some(DType::I32 | DType::I64)) | (Op::Trilu(_), _) => {
                    Ok(())
                }
                _ => Err("gather_elements indices must be i32 or i64".into()),
            }
        }
        Op::Cumulative(c) => {
            if crate::kernels::indexing::cumulative_words(d0).is_some() {
                return Ok(());
            }
            f32_only(c.kind.name(), d0)
        }
        Op::NllLoss(_) => {
            f32_only("nll_loss", d0)?;
            match dtype_of(inputs, 1)? {
                DType::I32 | DType::I64 => Ok(()),
                d => Err(format!("nll_loss targets of {d} have no wgpu kernel")),
            }
        }
        Op::Resize(_) => f32_only("resize", d0),
        Op::QuantizeLinear(_) => {
            f32_only("quantize_linear", d0)?;
            f32_only("quantize_linear scales", dtype_of(inputs, 1)?)?;
            let q = inputs.get(2).map_or(DType::U8, |t| t.dtype);
            crate::kernels::quant::qtype(q, true).map(|_| ())
        }
        Op::DequantizeLinear(_) => {
            f32_only("dequantize_linear scales", dtype_of(inputs, 1)?)?;
            crate::kernels::quant::qtype(d0, false).map(|_| ())
        }
        Op::ScatterElements(s) => scatter(s.reduction, d0, inputs),
        Op::ScatterNd(s) => scatter(s.reduction, d0, inputs),
        Op::Gather(_) => {
            movable("gather", d0)?;
            match dtype_of(inputs, 1)? {
                DType::I32 | DType::I64 => Ok(()),
                d => Err(format!("gather indices of {d} have no wgpu kernel")),
            }
        }
        Op::If(_) | Op::Loop(_) | Op::Scan(_) => bodies(node),
        op => Err(format!(
            "the wgpu backend has no kernel for `{}`",
            op.name()
        )),
    }
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
