//! Which nodes the WGSL plan runs (on wgpu and Vulkan), by op, attributes and input dtypes. What
//! it rejects and legalization cannot decompose is reported with the reason.
//! Element-wise arithmetic is f32, 32-bit and 64-bit integers (bool for
//! logic); i64/u64 arithmetic is emulated on u32 pairs (no SHADER_INT64), in
//! element-wise kernels, cumulative sums and integer reductions. Other 8-byte
//! kernels only move (copy, gather, cast).

use rlx_ir::{DType, Node, Op, TensorType};

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
        Err(format!("{what} on {d} has no WGSL kernel (f32 only)"))
    }
}

pub(crate) fn movable(what: &str, d: DType) -> Result<(), String> {
    match d.size() {
        4 | 8 => Ok(()),
        _ => Err(format!(
            "{what} of {d} elements has no WGSL kernel (4- and 8-byte dtypes only)"
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

/// Whether the backend runs `node` as it is, with inputs of these types:
/// leaves and views always, control flow when its bodies run, and every
/// other node as its kernel family ([`crate::kernels::family`]) says.
pub fn supports(node: &Node, inputs: &[TensorType]) -> Result<(), String> {
    match &node.op {
        Op::Input(_) | Op::Weight(_) | Op::Constant(_) => Ok(()),
        Op::Reshape(_) | Op::Flatten(_) | Op::Squeeze(_) | Op::Unsqueeze(_) => Ok(()),
        Op::If(_) | Op::Loop(_) | Op::Scan(_) => rlx_gpu::support::bodies(node, supports),
        op => match crate::kernels::family(op) {
            Some(f) => (f.supports)(node, inputs),
            None => Err(format!("the WGSL plan has no kernel for `{}`", op.name())),
        },
    }
}
