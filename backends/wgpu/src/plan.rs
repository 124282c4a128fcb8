//! The wgpu plan: a legalized, concrete graph with its memory plan becomes a
//! [`Schedule`]. Pure: no device. The buffer holds the arena at offset 0, then
//! every constant a dispatch reads (256-byte aligned), then the arenas,
//! constants and loop state of control-flow bodies (planned the same way,
//! recursively), then a scratch area that kernels needing temporaries (im2col)
//! share one node at a time.

use std::collections::HashMap;

use rlx_ir::{Graph, Node, NodeId, Op, Tensor, Value, Weights};
use rlx_passes::memory::{is_view, plan_memory, MemoryPlan};
use rlx_passes::Slot;

use crate::kernels::{axis, control, lower, Cx, Draft, Operand, Pipelines};
use crate::schedule::{ConstBlock, Dispatch, IoSlot, Range, Schedule, Step, Trip};
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

/// Where one graph (the model or a subgraph body) lives in the buffer.
struct Layout {
    /// Offset of the graph's arena in the buffer.
    base: u64,
    mem: MemoryPlan,
    consts: HashMap<NodeId, u64>,
    /// Per control-flow node: the layouts of its bodies and, for loops, its
    /// state (the i64 counter at +0, the condition at +8).
    controls: HashMap<NodeId, Control>,
}

struct Control {
    bodies: Vec<Layout>,
    state: Option<u64>,
}

/// Bytes of a loop's state: counter (i64) and condition (bool, one word).
const LOOP_STATE: u64 = 16;

/// Builds a schedule: lays every graph out in the buffer (arena, constants,
/// bodies), then lowers nodes to dispatches with the scratch area last.
struct Planner<'a> {
    weights: &'a Weights,
    end: u64,
    blocks: Vec<ConstBlock>,
    pipelines: Pipelines,
    /// Every dispatch before windowing, with its node's name and origin.
    drafts: Vec<(String, Vec<String>, Draft)>,
    scratch_at: u64,
    scratch_end: u64,
    max_binding: u64,
}

fn node_err(node: &Node, reason: impl Into<String>) -> WgpuError {
    WgpuError::Node {
        node: node.name.clone(),
        origin: node.origin.clone(),
        reason: reason.into(),
    }
}

fn operand(g: &Graph, lay: &Layout, v: Value) -> Result<Operand, WgpuError> {
    let t = g.ty(v);
    let dims = t
        .shape
        .as_known()
        .ok_or_else(|| internal(format!("symbolic shape {t} in a planned graph")))?;
    let bytes = t.byte_size().unwrap_or(0) as u64;
    let at = match lay.mem.slots.get(&v) {
        Some(Slot::Arena { offset, .. }) => lay.base + *offset as u64,
        Some(Slot::Const(id)) => *lay
            .consts
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

/// Nodes that become dispatches or control steps, in schedule order.
fn runs(g: &Graph, mem: &MemoryPlan) -> Vec<NodeId> {
    mem.order
        .iter()
        .copied()
        .filter(|&id| {
            let op = &g.node(id).op;
            !op.is_leaf() && !is_view(op)
        })
        .collect()
}

impl<'a> Planner<'a> {
    fn alloc(&mut self, bytes: u64) -> u64 {
        let offset = self.end.next_multiple_of(BLOCK_ALIGN);
        self.end = offset + bytes;
        offset
    }

    fn place_const(&mut self, g: &Graph, lay: &mut Layout, id: NodeId) -> Result<(), WgpuError> {
        if lay.consts.contains_key(&id) {
            return Ok(());
        }
        let t = leaf_value(g, self.weights, id)
            .ok_or_else(|| internal(format!("constant `{}` has no value", g.node(id).name)))?;
        let offset = self.alloc(t.bytes().len() as u64);
        self.blocks.push(ConstBlock {
            offset,
            bytes: t.bytes().to_vec(),
        });
        lay.consts.insert(id, offset);
        Ok(())
    }

    /// Places the arena of `g`, the constants it reads (in schedule order, so
    /// layouts are deterministic), then the layouts of its control-flow bodies.
    fn layout(&mut self, g: &Graph, mem: MemoryPlan) -> Result<Layout, WgpuError> {
        let base = self.alloc(mem.arena_bytes as u64);
        let mut lay = Layout {
            base,
            mem,
            consts: HashMap::new(),
            controls: HashMap::new(),
        };
        let order = runs(g, &lay.mem);
        for &id in &order {
            for v in g.inputs_of(id) {
                if let Some(Slot::Const(c)) = lay.mem.slots.get(&v).copied() {
                    self.place_const(g, &mut lay, c)?;
                }
            }
        }
        for o in g.outputs() {
            if let Some(Slot::Const(c)) = lay.mem.slots.get(&o.value).copied() {
                self.place_const(g, &mut lay, c)?;
            }
        }
        for &id in &order {
            let node = g.node(id);
            let subs = node.op.subgraphs();
            if subs.is_empty() {
                continue;
            }
            let mut bodies = Vec::with_capacity(subs.len());
            for sub in subs {
                let mem = plan_memory(sub).map_err(|e| {
                    node_err(
                        node,
                        format!("its body cannot be planned statically on wgpu: {e}"),
                    )
                })?;
                bodies.push(self.layout(sub, mem)?);
            }
            let state = match node.op {
                Op::Loop(_) | Op::Scan(_) => Some(self.alloc(LOOP_STATE)),
                _ => None,
            };
            lay.controls.insert(id, Control { bodies, state });
        }
        Ok(lay)
    }

    fn push(&mut self, node: &Node, d: Draft, steps: &mut Vec<Step>) {
        self.drafts
            .push((node.name.clone(), node.origin.clone(), d));
        steps.push(Step::Dispatch(self.drafts.len() - 1));
    }

    /// The steps of `g`: its nodes' dispatches and control steps, in order.
    fn lower_graph(&mut self, g: &Graph, lay: &Layout) -> Result<Vec<Step>, WgpuError> {
        let mut steps = Vec::new();
        for id in runs(g, &lay.mem) {
            let node = g.node(id);
            if let Some(ctl) = lay.controls.get(&id) {
                self.lower_control(g, id, lay, ctl, &mut steps)?;
                continue;
            }
            let ins = g.inputs_of(id);
            let inputs = ins
                .iter()
                .map(|v| operand(g, lay, *v))
                .collect::<Result<Vec<_>, _>>()?;
            let outputs = (0..node.outputs.len())
                .map(|p| operand(g, lay, Value::new(id, p as u16)))
                .collect::<Result<Vec<_>, _>>()?;
            let values = ins
                .iter()
                .map(|v| leaf_value(g, self.weights, v.node))
                .collect();
            let mut cx = Cx::new(
                node,
                inputs,
                outputs,
                values,
                self.scratch_at,
                &mut self.pipelines,
            );
            cx.max_binding = self.max_binding;
            lower(&mut cx).map_err(|reason| node_err(node, reason))?;
            self.scratch_end = self.scratch_end.max(cx.scratch_end());
            for d in cx.take_drafts() {
                self.push(node, d, &mut steps);
            }
        }
        Ok(steps)
    }

    /// A whole-value copy (skipped when empty); sizes must agree.
    fn copy(
        &mut self,
        node: &Node,
        dst: &Operand,
        src: &Operand,
        steps: &mut Vec<Step>,
    ) -> Result<(), WgpuError> {
        if dst.bytes != src.bytes || dst.dtype != src.dtype {
            return Err(internal(format!(
                "`{}`: a body value of {} ({} bytes) meets one of {} ({} bytes)",
                node.name, src.dtype, src.bytes, dst.dtype, dst.bytes
            )));
        }
        if let Some(d) = control::copy_value(&mut self.pipelines, dst.range(), src.range())
            .map_err(|r| node_err(node, r))?
        {
            self.push(node, d, steps);
        }
        Ok(())
    }

    fn counter(&mut self, node: &Node, counter: Range, increment: bool, steps: &mut Vec<Step>) {
        let d = control::counter(&mut self.pipelines, counter, increment);
        self.push(node, d, steps);
    }

    /// A copy into a body input; unused inputs (`None`) take none.
    fn copy_in(
        &mut self,
        node: &Node,
        dst: &Option<Operand>,
        src: &Operand,
        steps: &mut Vec<Step>,
    ) -> Result<(), WgpuError> {
        match dst {
            Some(dst) => self.copy(node, dst, src, steps),
            None => Ok(()),
        }
    }

    /// The operands of a body's inputs (`None` where the body never reads
    /// one) and outputs.
    #[allow(clippy::type_complexity)]
    fn body_io(
        sub: &Graph,
        lay: &Layout,
    ) -> Result<(Vec<Option<Operand>>, Vec<Operand>), WgpuError> {
        let ins = sub
            .inputs()
            .iter()
            .map(|i| {
                let v = Value::of(*i);
                sub.is_used(v).then(|| operand(sub, lay, v)).transpose()
            })
            .collect::<Result<_, _>>()?;
        let outs = sub
            .outputs()
            .iter()
            .map(|o| operand(sub, lay, o.value))
            .collect::<Result<_, _>>()?;
        Ok((ins, outs))
    }

    fn lower_control(
        &mut self,
        g: &Graph,
        id: NodeId,
        lay: &Layout,
        ctl: &Control,
        steps: &mut Vec<Step>,
    ) -> Result<(), WgpuError> {
        let node = g.node(id);
        let ins = g
            .inputs_of(id)
            .iter()
            .map(|v| operand(g, lay, *v))
            .collect::<Result<Vec<_>, _>>()?;
        let outs = (0..node.outputs.len())
            .map(|p| operand(g, lay, Value::new(id, p as u16)))
            .collect::<Result<Vec<_>, _>>()?;
        let state = ctl.state.map(|at| {
            (
                Range {
                    offset: at,
                    bytes: 8,
                },
                Operand {
                    at: at + 8,
                    bytes: 1,
                    dtype: rlx_ir::DType::Bool,
                    dims: Vec::new(),
                },
            )
        });
        match &node.op {
            Op::If(op) => {
                let mut branches = Vec::with_capacity(2);
                for (sub, sl) in [&op.then_branch, &op.else_branch]
                    .into_iter()
                    .zip(&ctl.bodies)
                {
                    let (b_ins, b_outs) = Self::body_io(sub, sl)?;
                    let mut b = Vec::new();
                    for (k, dst) in b_ins.iter().enumerate() {
                        let src = ins
                            .get(1 + k)
                            .ok_or_else(|| internal("a missing capture"))?;
                        self.copy_in(node, dst, src, &mut b)?;
                    }
                    b.extend(self.lower_graph(sub, sl)?);
                    for (dst, src) in outs.iter().zip(&b_outs) {
                        self.copy(node, dst, src, &mut b)?;
                    }
                    branches.push(b);
                }
                let otherwise = branches.pop().unwrap_or_default();
                let then = branches.pop().unwrap_or_default();
                steps.push(Step::If {
                    node: node.name.clone(),
                    origin: node.origin.clone(),
                    cond: ins[0].range(),
                    then,
                    otherwise,
                });
            }
            Op::Loop(op) => {
                let (counter, cond) = state.ok_or_else(|| internal("a loop without state"))?;
                let (sub, sl) = (&op.body, &ctl.bodies[0]);
                let (b_ins, b_outs) = Self::body_io(sub, sl)?;
                let k = op.num_carried as usize;
                if ins.len() < 2 + k || b_ins.len() != ins.len() || b_outs.len() != 1 + outs.len() {
                    return Err(internal(format!(
                        "loop `{}` has a malformed body",
                        node.name
                    )));
                }
                // Init: counter, condition, carried values (kept in the outputs).
                self.counter(node, counter, false, steps);
                self.copy(node, &cond, &ins[1], steps)?;
                for c in 0..k {
                    self.copy(node, &outs[c], &ins[2 + c], steps)?;
                }
                let mut b = Vec::new();
                let counter_op = Operand {
                    at: counter.offset,
                    bytes: 8,
                    dtype: rlx_ir::DType::I64,
                    dims: Vec::new(),
                };
                self.copy_in(node, &b_ins[0], &counter_op, &mut b)?;
                self.copy_in(node, &b_ins[1], &cond, &mut b)?;
                for c in 0..k {
                    self.copy_in(node, &b_ins[2 + c], &outs[c], &mut b)?;
                }
                for j in 2 + k..ins.len() {
                    self.copy_in(node, &b_ins[j], &ins[j], &mut b)?;
                }
                b.extend(self.lower_graph(sub, sl)?);
                let always = op.runs_full_trip()
                    && leaf_value(g, self.weights, g.inputs_of(id)[1].node)
                        .and_then(|t| t.to_i64_vec())
                        .is_some_and(|v| v == [1]);
                if !always {
                    self.copy(node, &cond, &b_outs[0], &mut b)?;
                }
                for c in 0..k {
                    self.copy(node, &outs[c], &b_outs[1 + c], &mut b)?;
                }
                let index = control::Index {
                    counter,
                    reverse: None,
                };
                for (dst, src) in outs[k..].iter().zip(&b_outs[1 + k..]) {
                    self.scan_copy(node, dst, src, 0, true, index, &mut b)?;
                }
                self.counter(node, counter, true, &mut b);
                let trip = match leaf_value(g, self.weights, g.inputs_of(id)[0].node)
                    .and_then(|t| t.to_i64_vec())
                {
                    Some(v) => Trip::Count(v.first().copied().unwrap_or(0).max(0) as u64),
                    None => Trip::Read(ins[0].range()),
                };
                steps.push(Step::Loop {
                    node: node.name.clone(),
                    origin: node.origin.clone(),
                    trip,
                    cond: (!always).then(|| cond.range()),
                    body: b,
                });
            }
            Op::Scan(op) => {
                let (counter, _) = state.ok_or_else(|| internal("a scan without state"))?;
                let (sub, sl) = (&op.body, &ctl.bodies[0]);
                let (b_ins, b_outs) = Self::body_io(sub, sl)?;
                let (ns, ni) = (op.num_state as usize, op.num_scan_inputs as usize);
                if ni == 0
                    || ins.len() < ns + ni
                    || outs.len() < ns
                    || b_ins.len() != ins.len()
                    || b_outs.len() != outs.len()
                {
                    return Err(internal(format!(
                        "scan `{}` has a malformed body",
                        node.name
                    )));
                }
                let in_axes = (0..ni)
                    .map(|j| {
                        let a = op.scan_input_axes.get(j).copied().unwrap_or(0);
                        axis(a, ins[ns + j].dims.len()).map_err(|r| node_err(node, r))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let len = ins[ns].dims[in_axes[0]] as u64;
                self.counter(node, counter, false, steps);
                for s in 0..ns {
                    self.copy(node, &outs[s], &ins[s], steps)?;
                }
                let mut b = Vec::new();
                for s in 0..ns {
                    self.copy_in(node, &b_ins[s], &outs[s], &mut b)?;
                }
                for j in 0..ni {
                    let reverse = op.scan_input_directions.get(j).copied().unwrap_or(0) == 1;
                    let index = control::Index {
                        counter,
                        reverse: reverse.then_some(len),
                    };
                    if let Some(dst) = &b_ins[ns + j] {
                        self.scan_copy(node, &ins[ns + j], dst, in_axes[j], false, index, &mut b)?;
                    }
                }
                for j in ns + ni..ins.len() {
                    self.copy_in(node, &b_ins[j], &ins[j], &mut b)?;
                }
                b.extend(self.lower_graph(sub, sl)?);
                for s in 0..ns {
                    self.copy(node, &outs[s], &b_outs[s], &mut b)?;
                }
                for j in 0..outs.len() - ns {
                    let dst = &outs[ns + j];
                    let a = op.scan_output_axes.get(j).copied().unwrap_or(0);
                    let a = axis(a, dst.dims.len()).map_err(|r| node_err(node, r))?;
                    let reverse = op.scan_output_directions.get(j).copied().unwrap_or(0) == 1;
                    let index = control::Index {
                        counter,
                        reverse: reverse.then_some(len),
                    };
                    self.scan_copy(node, dst, &b_outs[ns + j], a, true, index, &mut b)?;
                }
                self.counter(node, counter, true, &mut b);
                steps.push(Step::Loop {
                    node: node.name.clone(),
                    origin: node.origin.clone(),
                    trip: Trip::Count(len),
                    cond: None,
                    body: b,
                });
            }
            op => {
                return Err(node_err(
                    node,
                    format!("`{}` has bodies the wgpu plan does not know", op.name()),
                ))
            }
        }
        Ok(())
    }

    /// Copies between a stacked value (`whole`, sliced along `axis` by the
    /// loop counter) and one slice of it (`part`, dense); `into_whole` says
    /// which way.
    #[allow(clippy::too_many_arguments)]
    fn scan_copy(
        &mut self,
        node: &Node,
        whole: &Operand,
        part: &Operand,
        axis: usize,
        into_whole: bool,
        index: control::Index,
        steps: &mut Vec<Step>,
    ) -> Result<(), WgpuError> {
        let size = whole.dtype.size();
        if whole.dtype != part.dtype || axis >= whole.dims.len() {
            return Err(internal(format!(
                "`{}`: a scan slice of {} does not fit a stack of {}",
                node.name, part.dtype, whole.dtype
            )));
        }
        let rows = whole.dims[..axis].iter().product::<usize>() as u64;
        let inner = (whole.dims[axis + 1..].iter().product::<usize>() * size) as u64;
        if rows * inner != part.bytes {
            return Err(internal(format!(
                "`{}`: a scan slice of {} bytes, expected {}",
                node.name,
                part.bytes,
                rows * inner
            )));
        }
        let sliced = control::Side::sliced(whole.range(), &whole.dims, axis, size);
        let dense = control::Side::dense(part.range());
        let (dst, src) = if into_whole {
            (sliced, dense)
        } else {
            (dense, sliced)
        };
        if let Some(d) = control::copy(&mut self.pipelines, dst, src, rows, inner, Some(index))
            .map_err(|r| node_err(node, r))?
        {
            self.push(node, d, steps);
        }
        Ok(())
    }
}

/// Builds the schedule of a legalized, concrete graph.
pub fn plan(
    g: &Graph,
    weights: &Weights,
    mem: &MemoryPlan,
    opts: &PlanOptions,
) -> Result<Schedule, WgpuError> {
    let mut p = Planner {
        weights,
        end: 0,
        blocks: Vec::new(),
        pipelines: Pipelines::default(),
        drafts: Vec::new(),
        scratch_at: 0,
        scratch_end: 0,
        max_binding: opts.caps.max_binding,
    };
    let top = p.layout(g, mem.clone())?;
    p.scratch_at = p.end.next_multiple_of(BLOCK_ALIGN);
    p.scratch_end = p.scratch_at;
    let steps = p.lower_graph(g, &top)?;
    let buffer_bytes = p.scratch_end.next_multiple_of(BLOCK_ALIGN).max(BLOCK_ALIGN);
    let max_binding = opts.caps.max_binding;
    let mut dispatches = Vec::with_capacity(p.drafts.len());
    for (node, origin, d) in p.drafts {
        let (windows, handles) =
            windows_of(&d.operands, buffer_bytes, max_binding).map_err(|reason| {
                WgpuError::Node {
                    node: node.clone(),
                    origin: origin.clone(),
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
            node,
            origin,
        });
    }
    let slot = |name: &str, v: Value| -> Result<IoSlot, WgpuError> {
        let o = operand(g, &top, v)?;
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
        pipelines: p.pipelines.into_vec(),
        dispatches,
        steps,
        consts: p.blocks,
        inputs,
        outputs,
        arena_bytes: mem.arena_bytes as u64,
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
