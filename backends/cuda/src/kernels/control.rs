//! The control-flow launches on CUDA: rlx-gpu's planned slab copies and loop
//! counters as launches of `kernels/cuda/control.cu`.

use rlx_gpu::control::{CounterParams, SlabCopy};
use rlx_gpu::geometry::fold_grid;
use rlx_gpu::{Layout, ParamBlock, Params, Range};

use super::{Modules, Source};
use crate::schedule::{KernelLaunch, Launch};

pub const SOURCE: Source = Source {
    name: "control",
    source: include_str!("../../../../kernels/cuda/control.cu"),
    layouts,
};

fn layouts() -> Vec<Layout> {
    vec![
        rlx_gpu::control::SlabCopyParams::LAYOUT,
        CounterParams::LAYOUT,
    ]
}

/// Threads per block of the slab copy.
const BLOCK: u64 = 256;
/// The most blocks a slab copy launches; its grid-stride loop covers the rest.
const MAX_BLOCKS: u64 = 4096;

fn kernel(
    module: usize,
    entry: &str,
    grid: [u32; 3],
    block: u32,
    operands: Vec<Range>,
    params: ParamBlock,
) -> Launch {
    Launch::Kernel(KernelLaunch {
        module,
        entry: entry.to_string(),
        grid,
        block: [block, 1, 1],
        shared: 0,
        operands,
        params,
        node: String::new(),
        origin: Vec::new(),
    })
}

/// A slab copy: one thread per destination word (or byte when unaligned).
pub fn slab(modules: &mut Modules, copy: SlabCopy) -> Launch {
    let p = &copy.params;
    let [dst, src, _] = copy.operands;
    let aligned = (dst.offset
        | src.offset
        | u64::from(p.inner)
        | u64::from(p.src_stride)
        | u64::from(p.dst_stride)
        | u64::from(p.src_step)
        | u64::from(p.dst_step))
        % 4
        == 0;
    let units = if aligned {
        copy.span.div_ceil(4)
    } else {
        copy.span
    };
    let blocks = units.div_ceil(BLOCK).clamp(1, MAX_BLOCKS);
    let m = modules.of(&SOURCE);
    kernel(
        m,
        "slab_copy",
        fold_grid(blocks),
        BLOCK as u32,
        copy.operands.to_vec(),
        ParamBlock::of(&copy.params),
    )
}

/// Resets (or increments) the i64 loop counter: one thread.
pub fn counter(modules: &mut Modules, counter: Range, increment: bool) -> Launch {
    let m = modules.of(&SOURCE);
    let p = CounterParams {
        increment: u32::from(increment),
    };
    kernel(
        m,
        "counter",
        [1, 1, 1],
        1,
        vec![counter],
        ParamBlock::of(&p),
    )
}
