//! TopK on CUDA (`kernels/cuda/topk.cu`), planned by rlx-gpu's
//! `kernels::topk`: a block per row bitonic-sorts the row in shared memory,
//! or in scratch when the row is longer than `TK_SHARED` elements.

use rlx_gpu::kernels::topk::{topk_params, TopKParams};
use rlx_gpu::{Layout, Params};
use rlx_ir::{DType, Node, Op, TensorType};

use super::{dtype_of, num_name, Cx, LResult, Source};

pub const SOURCE: Source = Source {
    name: "topk",
    source: concat!(
        include_str!("../../../../kernels/cuda/numeric.cuh"),
        include_str!("../../../../kernels/cuda/topk.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![TopKParams::LAYOUT]
}

/// Rows up to this long sort in shared memory (`TK_SHARED` in topk.cu).
const SHARED: u32 = 4096;
/// Threads per block.
const BLOCK: u32 = 512;

/// The entry suffix of `d` (bool sorts as u8, as on the CPU).
fn suffix(d: DType) -> Option<&'static str> {
    if d == DType::Bool {
        return Some("u8");
    }
    num_name(d)
}

pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d = dtype_of(inputs, 0)?;
    suffix(d)
        .map(|_| ())
        .ok_or_else(|| format!("`{}` on {d} has no cuda kernel", node.op.name()))
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let Op::TopK(t) = &cx.node.op else {
        return Err(format!("`{}` is not a topk", cx.node.op.name()));
    };
    let x = cx.input(0)?.clone();
    let (vals, idx) = (cx.output(0)?.clone(), cx.output(1)?.clone());
    let a = rlx_gpu::geometry::axis(t.axis, x.dims.len())?;
    let k = vals.dims.get(a).copied().ok_or("topk output rank")?;
    let p = topk_params(&x.dims, t.axis, k, t.largest)?;
    let sfx = suffix(x.dtype).ok_or_else(|| format!("topk on {}", x.dtype))?;
    let m = cx.modules.of(&SOURCE);
    let (entry, scratch) = if p.pow2 <= SHARED {
        ("shared", vals.range())
    } else {
        let bytes = u64::from(p.rows) * u64::from(p.pow2) * 12;
        ("global", cx.scratch(bytes))
    };
    let ops = vec![x.range(), vals.range(), idx.range(), scratch];
    let block = BLOCK.min(p.pow2.div_ceil(2).next_multiple_of(32));
    cx.kernel_params(
        m,
        &format!("topk_{entry}_{sfx}"),
        u64::from(p.rows),
        block,
        ops,
        &p,
    );
    Ok(())
}
