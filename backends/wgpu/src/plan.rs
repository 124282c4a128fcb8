//! The wgpu plan: a legalized, concrete graph with its memory plan becomes a
//! [`Schedule`]. Pure: no device. The buffer holds the arena at offset 0, then
//! every constant a dispatch reads (256-byte aligned), then a scratch area that
//! kernels needing temporaries (im2col) share one node at a time.

use std::collections::HashMap;

use rlx_ir::{Graph, NodeId, Op, Tensor, Value, Weights};
use rlx_passes::memory::{is_view, MemoryPlan};
use rlx_passes::Slot;

use crate::kernels::{lower, Cx, Draft, Operand, Pipelines};
use crate::schedule::{ConstBlock, Dispatch, IoSlot, Range, Schedule};
use crate::{Caps, WgpuError};

/// Alignment of constant blocks and windows (storage offset alignment).
pub const BLOCK_ALIGN: u64 = 256;

/// Invocations per workgroup of element-wise kernels.
pub const WG: u64 = 64;

/// What the plan is made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlanOptions {
    pub caps: Caps,
}

fn internal(s: impl Into<String>) -> WgpuError {
    WgpuError::Internal(s.into())
}

fn leaf_value(g: &Graph, weights: &Weights, id: NodeId) -> Option<Tensor> {
    match &g.node(id).op {
        Op::Constant(c) => Some(c.value.clone()),
        Op::Weight(w) => weights.get(&w.name).cloned(),
        _ => None,
    }
}

/// Places constants after the arena, once each.
struct Consts {
    at: HashMap<NodeId, u64>,
    blocks: Vec<ConstBlock>,
    end: u64,
}

impl Consts {
    fn place(&mut self, g: &Graph, w: &Weights, id: NodeId) -> Result<u64, WgpuError> {
        if let Some(&o) = self.at.get(&id) {
            return Ok(o);
        }
        let t = leaf_value(g, w, id)
            .ok_or_else(|| internal(format!("constant `{}` has no value", g.node(id).name)))?;
        let offset = self.end.next_multiple_of(BLOCK_ALIGN);
        self.end = offset + t.bytes().len() as u64;
        self.blocks.push(ConstBlock {
            offset,
            bytes: t.bytes().to_vec(),
        });
        self.at.insert(id, offset);
        Ok(offset)
    }
}

fn operand(g: &Graph, mem: &MemoryPlan, consts: &Consts, v: Value) -> Result<Operand, WgpuError> {
    let t = g.ty(v);
    let dims = t
        .shape
        .as_known()
        .ok_or_else(|| internal(format!("symbolic shape {t} in a planned graph")))?;
    let bytes = t.byte_size().unwrap_or(0) as u64;
    let at = match mem.slots.get(&v) {
        Some(Slot::Arena { offset, .. }) => *offset as u64,
        Some(Slot::Const(id)) => *consts
            .at
            .get(id)
            .ok_or_else(|| internal("a constant operand was not placed"))?,
        None => return Err(internal("a value without a slot")),
    };
    Ok(Operand {
        at,
        bytes,
        dtype: t.dtype,
        dims,
    })
}

/// Builds the schedule of a legalized, concrete graph.
pub fn plan(
    g: &Graph,
    weights: &Weights,
    mem: &MemoryPlan,
    opts: &PlanOptions,
) -> Result<Schedule, WgpuError> {
    let arena = mem.arena_bytes as u64;
    let mut consts = Consts {
        at: HashMap::new(),
        blocks: Vec::new(),
        end: arena,
    };
    // Constants any kernel or output reads, in schedule order (deterministic).
    let mut kernel_nodes = Vec::new();
    for &id in &mem.order {
        let node = g.node(id);
        if node.op.is_leaf() || is_view(&node.op) {
            continue;
        }
        for v in g.inputs_of(id) {
            if let Some(Slot::Const(c)) = mem.slots.get(&v) {
                consts.place(g, weights, *c)?;
            }
        }
        kernel_nodes.push(id);
    }
    for o in g.outputs() {
        if let Some(Slot::Const(c)) = mem.slots.get(&o.value) {
            consts.place(g, weights, *c)?;
        }
    }
    let scratch_at = consts.end.next_multiple_of(BLOCK_ALIGN);
    let mut scratch_end = scratch_at;
    let mut pipelines = Pipelines::default();
    let mut drafts: Vec<(NodeId, Draft)> = Vec::new();
    for id in kernel_nodes {
        let node = g.node(id);
        let ins = g.inputs_of(id);
        let inputs = ins
            .iter()
            .map(|v| operand(g, mem, &consts, *v))
            .collect::<Result<Vec<_>, _>>()?;
        let outputs = (0..node.outputs.len())
            .map(|p| operand(g, mem, &consts, Value::new(id, p as u16)))
            .collect::<Result<Vec<_>, _>>()?;
        let values = ins.iter().map(|v| leaf_value(g, weights, v.node)).collect();
        let mut cx = Cx::new(node, inputs, outputs, values, scratch_at, &mut pipelines);
        cx.max_binding = opts.caps.max_binding;
        lower(&mut cx).map_err(|reason| WgpuError::Node {
            node: node.name.clone(),
            origin: node.origin.clone(),
            reason,
        })?;
        scratch_end = scratch_end.max(cx.scratch_end());
        for d in cx.take_drafts() {
            drafts.push((id, d));
        }
    }
    let buffer_bytes = scratch_end.next_multiple_of(BLOCK_ALIGN).max(BLOCK_ALIGN);
    let max_binding = opts.caps.max_binding;
    let mut dispatches = Vec::with_capacity(drafts.len());
    for (id, d) in drafts {
        let node = g.node(id);
        let (windows, handles) =
            windows_of(&d.operands, buffer_bytes, max_binding).map_err(|reason| {
                WgpuError::Node {
                    node: node.name.clone(),
                    origin: node.origin.clone(),
                    reason,
                }
            })?;
        let mut params = handles;
        params.extend_from_slice(&d.params);
        dispatches.push(Dispatch {
            pipeline: d.pipeline,
            groups: groups(d.groups),
            windows,
            params,
            operands: d.operands,
            node: node.name.clone(),
            origin: node.origin.clone(),
        });
    }
    let slot = |name: &str, v: Value| -> Result<IoSlot, WgpuError> {
        let o = operand(g, mem, &consts, v)?;
        Ok(IoSlot {
            name: name.to_string(),
            offset: o.at,
            dtype: o.dtype,
            dims: o.dims,
            bytes: o.bytes,
        })
    };
    let inputs = g
        .inputs()
        .iter()
        .map(|i| slot(&g.node(*i).name, Value::of(*i)))
        .collect::<Result<_, _>>()?;
    let outputs = g
        .outputs()
        .iter()
        .map(|o| slot(&o.name, o.value))
        .collect::<Result<_, _>>()?;
    Ok(Schedule {
        pipelines: pipelines.into_vec(),
        dispatches,
        consts: consts.blocks,
        inputs,
        outputs,
        arena_bytes: arena,
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
pub fn groups(n: u64) -> [u32; 3] {
    const MAX: u64 = 65535;
    if n <= MAX {
        return [n as u32, 1, 1];
    }
    [MAX as u32, n.div_ceil(MAX) as u32, 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_grids_fold_into_y() {
        assert_eq!(groups(10), [10, 1, 1]);
        assert_eq!(groups(65536), [65535, 2, 1]);
        assert_eq!(groups(65535 * 3), [65535, 3, 1]);
    }

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
