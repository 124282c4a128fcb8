//! The WGSL plan: rlx-gpu's planner lays the graph out in one storage buffer
//! and walks it, control flow included; this file supplies the WGSL
//! [`Lowering`] (WGSL dispatches per node, the slab-copy and counter kernels)
//! and binds each dispatch's operands in at most four windows of the buffer.
//! Pure: no device.

use rlx_gpu::control::SlabCopy;
use rlx_gpu::{Lowered, Lowering, NodeIo, PlanError, Planned};
use rlx_ir::{Graph, Node, Weights};
use rlx_passes::memory::MemoryPlan;

use crate::kernels::{control, lower, Cx, Draft, LResult, Pipelines};
use crate::schedule::{Dispatch, Range, Schedule};
use crate::sync::{overlaps, place_barriers};
use crate::Caps;

pub use rlx_gpu::plan::BLOCK_ALIGN;

/// Invocations per workgroup of element-wise kernels.
pub const WG: u64 = 64;

/// What the plan is made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlanOptions {
    pub caps: Caps,
}

/// The WGSL lowering: pipelines shared by all dispatches of the schedule.
struct Wgsl {
    pipelines: Pipelines,
    max_binding: u64,
}

impl Lowering for Wgsl {
    type Launch = Draft;

    fn node(&mut self, node: &Node, io: NodeIo) -> LResult<Lowered<Draft>> {
        let outs: Vec<Range> = io.outs.iter().map(|o| o.range()).collect();
        let scratch_at = io.scratch_at;
        let mut cx = Cx::new(
            node,
            io.ins,
            io.outs,
            io.values,
            io.scratch_at,
            &mut self.pipelines,
        );
        cx.max_binding = self.max_binding;
        cx.read = io.read;
        lower(&mut cx)?;
        // A dispatch writes the node's outputs and its scratch, and reads
        // the rest.
        let scratch = Range {
            offset: scratch_at,
            bytes: cx.scratch_end() - scratch_at,
        };
        let mut launches = cx.take_drafts();
        for d in &mut launches {
            d.writes = d
                .operands
                .iter()
                .map(|r| overlaps(r, &scratch) || outs.iter().any(|o| overlaps(r, o)))
                .collect();
        }
        Ok(Lowered {
            scratch_end: cx.scratch_end(),
            launches,
            consts: Vec::new(),
        })
    }

    fn slab_copy(&mut self, copy: SlabCopy) -> LResult<Draft> {
        Ok(control::slab(&mut self.pipelines, copy))
    }

    fn counter(&mut self, counter: Range, increment: bool) -> LResult<Draft> {
        Ok(control::counter(&mut self.pipelines, counter, increment))
    }
}

/// Builds the schedule of a legalized, concrete graph.
pub fn plan(
    g: &Graph,
    weights: &Weights,
    mem: &MemoryPlan,
    opts: &PlanOptions,
) -> Result<Schedule, PlanError> {
    let max_binding = opts.caps.max_binding;
    let mut wgsl = Wgsl {
        pipelines: Pipelines::default(),
        max_binding,
    };
    let Planned {
        launches,
        steps,
        consts,
        inputs,
        outputs,
        arena_bytes,
        buffer_bytes,
    } = rlx_gpu::plan(g, weights, mem, &mut wgsl)?;
    let mut dispatches = Vec::with_capacity(launches.len());
    for placed in launches {
        let d = placed.launch;
        let (windows, handles) =
            windows_of(&d.operands, buffer_bytes, max_binding).map_err(|reason| {
                PlanError::Node {
                    node: placed.node.clone(),
                    origin: placed.origin.clone(),
                    reason,
                }
            })?;
        dispatches.push(Dispatch {
            pipeline: d.pipeline,
            groups: groups(d.groups),
            windows,
            handles,
            params: d.params,
            operands: d.operands,
            writes: d.writes,
            barrier: false,
            node: placed.node,
            origin: placed.origin,
        });
    }
    place_barriers(&steps, &mut dispatches);
    Ok(Schedule {
        pipelines: wgsl.pipelines.into_vec(buffer_bytes <= max_binding),
        dispatches,
        steps,
        consts,
        inputs,
        outputs,
        arena_bytes,
        buffer_bytes,
        max_binding,
    })
}

/// Bindable windows per dispatch (kernels address 4).
pub const WINDOWS: usize = 4;

/// The windows a dispatch binds and its operand handles. When the buffer fits
/// the binding limit, one window is the whole buffer; otherwise operands are
/// grouped, in address order, into at most [`WINDOWS`] aligned spans within
/// the limit.
fn windows_of(ops: &[Range], buffer: u64, limit: u64) -> Result<(Vec<Range>, Vec<u32>), String> {
    if buffer <= limit {
        let whole = Range {
            offset: 0,
            bytes: buffer,
        };
        return Ok((vec![whole], ops.iter().map(|r| r.offset as u32).collect()));
    }
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&i| ops[i].offset);
    let mut windows: Vec<Range> = Vec::new();
    let mut slot = vec![0usize; ops.len()];
    for i in order {
        let r = ops[i];
        let end = (r.offset + r.bytes).next_multiple_of(4);
        let lo = r.offset / BLOCK_ALIGN * BLOCK_ALIGN;
        if end - lo > limit {
            return Err(format!(
                "an operand of {} bytes does not fit the binding limit of {limit}",
                r.bytes
            ));
        }
        match windows.last_mut() {
            Some(w) if end.max(w.offset + w.bytes) - w.offset <= limit => {
                w.bytes = end.max(w.offset + w.bytes) - w.offset;
            }
            _ => windows.push(Range {
                offset: lo,
                bytes: (end - lo).max(4),
            }),
        }
        slot[i] = windows.len() - 1;
    }
    if windows.len() > WINDOWS {
        return Err(format!(
            "its operands need {} windows of the binding limit of {limit}; kernels bind {WINDOWS}",
            windows.len()
        ));
    }
    let handles = ops
        .iter()
        .zip(&slot)
        .map(|(r, &s)| ((s as u32) << 30) | (r.offset - windows[s].offset) as u32)
        .collect();
    Ok((windows, handles))
}

/// Workgroup counts for `n` workgroups: x up to 65535, the rest in y.
pub use rlx_gpu::geometry::fold_grid as groups;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_operands_and_respect_the_limit() {
        let r = |offset, bytes| Range { offset, bytes };
        let (w, h) = windows_of(&[r(0, 64), r(512, 8)], 1024, 4096).unwrap();
        assert_eq!((w, h), (vec![r(0, 1024)], vec![0, 512]));
        let (w, h) = windows_of(&[r(1000, 8), r(1300, 6)], 4096, 1024).unwrap();
        assert_eq!(w, vec![r(768, 540)]);
        assert_eq!(h, vec![232, 532]);
        // Far-apart operands get their own windows (handle: window << 30 | offset).
        let (w, h) = windows_of(&[r(3000, 8), r(0, 8)], 4096, 1024).unwrap();
        assert_eq!(w, vec![r(0, 8), r(2816, 192)]);
        assert_eq!(h, vec![(1 << 30) | 184, 0]);
        assert!(windows_of(&[r(0, 2000)], 4096, 1024).is_err());
        let five: Vec<Range> = (0..5).map(|i| r(i * 1024, 8)).collect();
        assert!(windows_of(&five, 8192, 512)
            .unwrap_err()
            .contains("5 windows"));
    }
}
