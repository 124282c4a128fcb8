//! Softmax, LogSoftmax and Hardmax on CUDA (`kernels/cuda/softmax.cu`),
//! planned by rlx-gpu's `kernels::softmax`: contiguous rows (axis last) a
//! warp or a block each, strided rows a thread each (adjacent threads on
//! adjacent columns).

use rlx_gpu::kernels::softmax::{softmax_params, SoftmaxParams};
use rlx_gpu::{Layout, Params};
use rlx_ir::{DType, Node, Op, TensorType};

use super::{Cx, LResult, Source};

pub const SOURCE: Source = Source {
    name: "softmax",
    source: concat!(
        include_str!("../../../../kernels/cuda/rows.cuh"),
        "\n",
        include_str!("../../../../kernels/cuda/softmax.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![SoftmaxParams::LAYOUT]
}

/// Threads per block.
const BLOCK: u32 = 256;
/// Contiguous rows up to this long take a warp each; longer ones a block.
const WARP_ROW: u32 = 1024;

/// The entry-point suffix of float dtype `d`.
pub fn float_suffix(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        _ => return None,
    })
}

/// f32, f64, f16 and bf16.
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d = inputs
        .first()
        .map(|t| t.dtype)
        .ok_or("input 0 is missing")?;
    float_suffix(d)
        .map(|_| ())
        .ok_or_else(|| format!("`{}` on {d} has no cuda kernel", node.op.name()))
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let Op::Softmax(s) = &cx.node.op else {
        return Err(format!("`{}` is not a softmax", cx.node.op.name()));
    };
    let (x, y) = (cx.input(0)?.clone(), cx.output(0)?.clone());
    let p = softmax_params(s, &x.dims)?;
    let sfx = float_suffix(x.dtype).ok_or_else(|| format!("softmax on {}", x.dtype))?;
    let m = cx.modules.of(&SOURCE);
    let rows = u64::from(p.rows);
    let (entry, blocks) = if p.inner > 1 {
        ("col", rows.div_ceil(u64::from(BLOCK)))
    } else if p.len <= WARP_ROW {
        ("warp", rows.div_ceil(u64::from(BLOCK / 32)))
    } else {
        ("block", rows)
    };
    let ops = vec![x.range(), y.range()];
    cx.kernel_params(m, &format!("softmax_{entry}_{sfx}"), blocks, BLOCK, ops, &p);
    Ok(())
}
