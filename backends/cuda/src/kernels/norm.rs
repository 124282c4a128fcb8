//! LayerNorm, RmsNorm and ResidualNorm on CUDA (`kernels/cuda/norm.cu`),
//! planned by rlx-gpu's `kernels::norm`: where there are [`FEW_ROWS`] rows
//! or more, a warp per row up to [`WARP_ROW`] elements and, up to
//! [`WIDE`] 16-byte vectors a lane, a warp per row holding it in vectors;
//! else a block per row, holding it in registers up to [`HELD`] elements a
//! thread and reading it three times beyond; LayerNorm's optional
//! mean and inv_std outputs are written by the same launch.

use rlx_gpu::kernels::norm::{norm_params, NormParams};
use rlx_gpu::{Layout, Params};
use rlx_ir::{DType, Node, Op, TensorType};

use super::softmax::float_suffix;
use super::{Cx, LResult, Source};

pub const SOURCE: Source = Source {
    name: "norm",
    source: concat!(
        include_str!("../../../../kernels/cuda/rows.cuh"),
        "\n",
        include_str!("../../../../kernels/cuda/norm.cu")
    ),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![NormParams::LAYOUT]
}

/// Threads per block of a block per row.
const BLOCK: u32 = 256;
/// Threads per block of a warp per row: 4 rows a block.
const WARP_BLOCK: u32 = 128;
/// Elements a thread holds in registers (`NM_HELD` in `norm.cu`).
pub const HELD: u32 = 4;
/// Rows up to this long take a warp each where there are many
/// ([`FEW_ROWS`]), [`HELD`] elements a lane; longer ones a block that holds
/// its row. A warp once held up to 1024 elements in 32 slots a lane and
/// spilled them: BERT's 1024 x 768 residual norm took 20 us on an H200.
pub const WARP_ROW: u32 = 32 * HELD;
/// Most threads of a block that holds its row.
const HELD_BLOCK: u32 = 1024;
/// Fewer rows than this take a block each whatever their length: a warp per
/// row leaves most multiprocessors of a large GPU idle and the rest with one
/// warp, whose instructions then run one latency at a time (BERT's 128 x 768
/// residual norms: 15 us a warp per row on an H200). The wide-row warp
/// (one a block, its scale and bias loaded with the row) measured slower
/// there too: ViT-B/16 (197 rows) 0.581 -> 0.592 ms, BERT-base 1x128 0.496
/// -> 0.515 ms in fp16, 2-5% in f32.
pub const FEW_ROWS: u64 = 512;
/// The most 16-byte vectors a lane holds of a warp's row (`norm_wide<N>`,
/// N = 2, 4 or 8): rows of up to 2,048 f16 or 1,024 f32 elements.
pub const WIDE: u32 = 8;

/// The `norm_wide<N>` kernel for rows of `len` elements of `dtype`, whose
/// scale and bias span the row: N vectors a lane, or `None` (f64, a length
/// not a whole number of vectors, or too long).
fn wide(dtype: DType, len: u32, scale_len: u32, bias_len: Option<u32>) -> Option<u32> {
    let e = match dtype {
        DType::F32 => 4,
        DType::F16 | DType::BF16 => 8,
        _ => return None,
    };
    let spans = scale_len == len && bias_len.is_none_or(|b| b == len);
    let per_lane = (len / e).div_ceil(32).next_power_of_two().max(2);
    (spans && len % e == 0 && per_lane <= WIDE).then_some(per_lane)
}

/// Float inputs (scale and bias of the same dtype, which the IR checks); a
/// residual of the input's shape.
pub fn supports(node: &Node, inputs: &[TensorType]) -> LResult<()> {
    let d = inputs
        .first()
        .map(|t| t.dtype)
        .ok_or("input 0 is missing")?;
    if float_suffix(d).is_none() {
        return Err(format!("`{}` on {d} has no cuda kernel", node.op.name()));
    }
    if let Op::ResidualNorm(_) = node.op {
        if inputs.get(1).map(|t| &t.shape) != Some(&inputs[0].shape) {
            return Err("residual_norm with a broadcast residual has no cuda kernel".into());
        }
    }
    Ok(())
}

pub fn lower(cx: &mut Cx) -> LResult<()> {
    let (ax, eps, rms, residual) = match &cx.node.op {
        Op::LayerNorm(l) => (l.axis, l.epsilon, false, false),
        Op::RmsNorm(r) => (r.axis, r.epsilon, true, false),
        Op::ResidualNorm(r) => (r.axis, r.epsilon, r.rms, true),
        op => return Err(format!("`{}` is not a norm", op.name())),
    };
    let first = usize::from(residual);
    let x = cx.input(0)?.clone();
    let scale = cx.input(first + 1)?.clone();
    let bias = cx.io.ins.get(first + 2).cloned();
    let y = cx.output(0)?.clone();
    let stats = !residual && cx.io.outs.len() == 3;
    let p = norm_params(
        &x.dims,
        ax,
        eps,
        rms,
        &scale.dims,
        bias.as_ref().map(|b| b.dims.as_slice()),
        stats,
    )?;
    let sfx = float_suffix(x.dtype).ok_or_else(|| format!("norm on {}", x.dtype))?;
    let m = cx.modules.of(&SOURCE);
    let rows = u64::from(p.rows);
    let warp_rows = rows.div_ceil(u64::from(WARP_BLOCK / 32));
    let wide = wide(
        x.dtype,
        p.len,
        p.scale_len,
        (p.has_bias != 0).then_some(p.bias_len),
    );
    let (mode, blocks, block) = if p.len <= WARP_ROW && rows >= FEW_ROWS {
        ("warp".to_string(), warp_rows, WARP_BLOCK)
    } else if let Some(n) = wide.filter(|_| rows >= FEW_ROWS) {
        (format!("wide{n}"), warp_rows, WARP_BLOCK)
    } else if p.len <= HELD * HELD_BLOCK {
        // A few rows: a block each, up to HELD elements a thread, held.
        let threads = p
            .len
            .div_ceil(HELD)
            .next_multiple_of(32)
            .clamp(32, HELD_BLOCK);
        ("held".to_string(), rows, threads)
    } else {
        ("block".to_string(), rows, BLOCK)
    };
    let br = bias.as_ref().map_or(scale.range(), |b| b.range());
    let ops = if residual {
        let r = cx.input(1)?.range();
        let sum = cx.output(1)?.range();
        vec![x.range(), r, scale.range(), br, y.range(), sum]
    } else {
        let stat = |i: usize| cx.io.outs.get(i).map_or(y.range(), |o| o.range());
        vec![x.range(), scale.range(), br, y.range(), stat(1), stat(2)]
    };
    let entry = if residual {
        format!("residual_norm_{mode}_{sfx}")
    } else {
        format!("norm_{mode}_{sfx}")
    };
    cx.kernel_params(m, &entry, blocks, block, ops, &p);
    Ok(())
}
