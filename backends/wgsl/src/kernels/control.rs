//! The WGSL kernels of control flow (`kernels/wgsl/slab.wgsl`,
//! `kernels/wgsl/counter.wgsl`), planned by rlx-gpu's `control`: slab
//! copies that move values into and out of subgraph bodies (optionally at a
//! slice picked by the loop counter), and the loop counter itself.

use rlx_gpu::control::{
    slab_copy, CounterParams, SlabCopy, SlabCopyParams, COUNTER_OPERANDS, SLAB_OPERANDS,
};
use rlx_gpu::{ParamBlock, Params};

pub use rlx_gpu::control::{Index, Side};

use crate::plan::WG;
use crate::schedule::Range;

use super::{Draft, LResult, Pipelines};

const SLAB: &str = include_str!("../../../../kernels/wgsl/slab.wgsl");
const COUNTER: &str = include_str!("../../../../kernels/wgsl/counter.wgsl");

/// The dispatch of a planned slab copy: one invocation per destination word.
pub fn slab(pipelines: &mut Pipelines, c: SlabCopy) -> Draft {
    Draft {
        pipeline: pipelines.typed(
            "control.slab_copy",
            SLAB_OPERANDS,
            &SlabCopyParams::LAYOUT,
            SLAB,
        ),
        operands: c.operands.to_vec(),
        // dst, src, counter: the copy writes its destination only.
        writes: vec![true, false, false],
        params: ParamBlock::of(&c.params),
        groups: (c.span / 4 + 2).div_ceil(WG),
    }
}

/// Copies `rows` rows of `inner` bytes from `src` to `dst`.
pub fn copy(
    pipelines: &mut Pipelines,
    dst: Side,
    src: Side,
    rows: u64,
    inner: u64,
    index: Option<Index>,
) -> LResult<Option<Draft>> {
    Ok(slab_copy(dst, src, rows, inner, index)?.map(|c| slab(pipelines, c)))
}

/// Sets the counter to zero (`increment == false`) or adds one.
pub fn counter(pipelines: &mut Pipelines, counter: Range, increment: bool) -> Draft {
    Draft {
        pipeline: pipelines.typed(
            "control.counter",
            COUNTER_OPERANDS,
            &CounterParams::LAYOUT,
            COUNTER,
        ),
        operands: vec![counter],
        writes: vec![true],
        params: ParamBlock::of(&CounterParams {
            increment: u32::from(increment),
        }),
        groups: 1,
    }
}
