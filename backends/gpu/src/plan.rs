//! The shared planner: a legalized, concrete graph with its memory plan is
//! laid out in one device buffer and lowered to a [`Step`] tree, every node
//! through the backend's [`Lowering`]. Pure: no device.
//!
//! The buffer holds the arena at offset 0, then every constant a launch
//! reads (256-byte aligned), then the arenas, constants and loop state of
//! control-flow bodies (planned the same way, recursively), then a scratch
//! area that launches needing temporaries (im2col) share one node at a time.
//! Values cross into and out of bodies by slab copies; loop counters live in
//! the buffer, so a loop of known trip count needs no host read.

use std::collections::HashMap;

use rlx_ir::{DType, Graph, Node, NodeId, Op, Tensor, Value, Weights};
use rlx_passes::memory::{is_view, plan_memory, MemoryPlan};
use rlx_passes::Slot;

use crate::control::{slab_copy, Index, Side, SlabCopy};
use crate::geometry::{axis, LResult};
use crate::schedule::{ConstBlock, IoSlot, Range, Step, Trip};
use crate::PlanError;

/// Alignment of constant blocks, arenas and scratch (the strictest storage
/// offset alignment of the backends).
pub const BLOCK_ALIGN: u64 = 256;

/// A tensor operand: where it starts in the buffer and what it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Operand {
    pub at: u64,
    pub bytes: u64,
    pub dtype: DType,
    pub dims: Vec<usize>,
}

impl Operand {
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn range(&self) -> Range {
        Range {
            offset: self.at,
            bytes: self.bytes,
        }
    }
}

/// What a node's lowering sees: its operands, the values of its constant
/// inputs, and where the scratch area starts.
pub struct NodeIo {
    pub ins: Vec<Operand>,
    pub outs: Vec<Operand>,
    /// Whether each output is read (by a node or as a graph output): a
    /// multi-output op (a split whose Q piece attention reads in place)
    /// need not write the others.
    pub read: Vec<bool>,
    /// Values of constant inputs (for value ports such as axes or pads).
    pub values: Vec<Option<Tensor>>,
    pub scratch_at: u64,
    /// Where constant data of this node's own (see [`Lowered::consts`]) may
    /// start: past all scratch that nodes lowered so far use, so no scratch
    /// of theirs overwrites it.
    pub consts_at: u64,
}

/// A node's launches and the end of the scratch bytes they use.
pub struct Lowered<L> {
    pub launches: Vec<L>,
    /// The end of the scratch bytes and constant data the node uses.
    pub scratch_end: u64,
    /// Constant data the lowering made (tap tables, say), at or past
    /// [`NodeIo::consts_at`] and apart from the node's scratch: uploaded
    /// with the graph's constants, and every later node's scratch starts
    /// past it.
    pub consts: Vec<ConstBlock>,
}

/// What a backend supplies to the planner: its launches for a node, and the
/// two kernels control flow is made of.
pub trait Lowering {
    type Launch;
    fn node(&mut self, node: &Node, io: NodeIo) -> LResult<Lowered<Self::Launch>>;
    fn slab_copy(&mut self, copy: SlabCopy) -> LResult<Self::Launch>;
    /// Sets the i64 at `counter` to zero, or adds one.
    fn counter(&mut self, counter: Range, increment: bool) -> LResult<Self::Launch>;
}

/// A launch with the node it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed<L> {
    pub node: String,
    pub origin: Vec<String>,
    pub launch: L,
}

/// A planned graph: launches, the step tree over them, and the buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned<L> {
    pub launches: Vec<Placed<L>>,
    pub steps: Vec<Step>,
    pub consts: Vec<ConstBlock>,
    pub inputs: Vec<IoSlot>,
    pub outputs: Vec<IoSlot>,
    /// Bytes of the top-level arena (at offset 0 of the buffer).
    pub arena_bytes: u64,
    /// Bytes of the whole buffer: arenas, constants, loop state, scratch.
    pub buffer_bytes: u64,
}

fn internal(s: impl Into<String>) -> PlanError {
    PlanError::Internal(s.into())
}

fn node_err(node: &Node, reason: impl Into<String>) -> PlanError {
    PlanError::Node {
        node: node.name.clone(),
        origin: node.origin.clone(),
        reason: reason.into(),
    }
}

/// The value of a constant or weight node.
pub fn leaf_value(g: &Graph, weights: &Weights, id: NodeId) -> Option<Tensor> {
    match &g.node(id).op {
        Op::Constant(c) => Some(c.value.clone()),
        Op::Weight(w) => weights.get(&w.name).cloned(),
        _ => None,
    }
}

/// Where one graph (the model or a subgraph body) lives in the buffer.
struct Layout {
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

fn operand(g: &Graph, lay: &Layout, v: Value) -> Result<Operand, PlanError> {
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

/// Nodes that become launches or control steps, in schedule order (views,
/// and splits whose outputs are views of their input, are none).
fn runs(g: &Graph, mem: &MemoryPlan) -> Vec<NodeId> {
    mem.order
        .iter()
        .copied()
        .filter(|&id| {
            let op = &g.node(id).op;
            !op.is_leaf() && !is_view(op) && !mem.in_place.contains(&id)
        })
        .collect()
}

struct Planner<'a, L: Lowering> {
    weights: &'a Weights,
    lowering: &'a mut L,
    end: u64,
    blocks: Vec<ConstBlock>,
    launches: Vec<Placed<L::Launch>>,
    scratch_at: u64,
    scratch_end: u64,
}

impl<L: Lowering> Planner<'_, L> {
    fn alloc(&mut self, bytes: u64) -> u64 {
        let offset = self.end.next_multiple_of(BLOCK_ALIGN);
        self.end = offset + bytes;
        offset
    }

    fn place_const(&mut self, g: &Graph, lay: &mut Layout, id: NodeId) -> Result<(), PlanError> {
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
    fn layout(&mut self, g: &Graph, mem: MemoryPlan) -> Result<Layout, PlanError> {
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
                    node_err(node, format!("its body cannot be planned statically: {e}"))
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

    fn push(&mut self, node: &Node, launch: L::Launch, steps: &mut Vec<Step>) {
        self.launches.push(Placed {
            node: node.name.clone(),
            origin: node.origin.clone(),
            launch,
        });
        steps.push(Step::Dispatch(self.launches.len() - 1));
    }

    /// The steps of `g`: its nodes' launches and control steps, in order.
    fn lower_graph(&mut self, g: &Graph, lay: &Layout) -> Result<Vec<Step>, PlanError> {
        let mut steps = Vec::new();
        let graph_outputs: std::collections::HashSet<Value> =
            g.outputs().iter().map(|o| o.value).collect();
        for id in runs(g, &lay.mem) {
            let node = g.node(id);
            if let Some(ctl) = lay.controls.get(&id) {
                self.lower_control(g, id, lay, ctl, &mut steps)?;
                continue;
            }
            let ins = g.inputs_of(id);
            let io = NodeIo {
                ins: ins
                    .iter()
                    .map(|v| operand(g, lay, *v))
                    .collect::<Result<_, _>>()?,
                outs: (0..node.outputs.len())
                    .map(|p| operand(g, lay, Value::new(id, p as u16)))
                    .collect::<Result<_, _>>()?,
                read: (0..node.outputs.len())
                    .map(|p| {
                        let v = Value::new(id, p as u16);
                        graph_outputs.contains(&v) || !g.users_of(v).is_empty()
                    })
                    .collect(),
                values: ins
                    .iter()
                    .map(|v| leaf_value(g, self.weights, v.node))
                    .collect(),
                scratch_at: self.scratch_at,
                consts_at: self.scratch_end.next_multiple_of(BLOCK_ALIGN),
            };
            let lowered = self
                .lowering
                .node(node, io)
                .map_err(|reason| node_err(node, reason))?;
            self.scratch_end = self.scratch_end.max(lowered.scratch_end);
            if !lowered.consts.is_empty() {
                self.scratch_at = self.scratch_end.next_multiple_of(BLOCK_ALIGN);
                self.blocks.extend(lowered.consts);
            }
            for l in lowered.launches {
                self.push(node, l, &mut steps);
            }
        }
        Ok(steps)
    }

    fn emit_copy(
        &mut self,
        node: &Node,
        copy: LResult<Option<SlabCopy>>,
        steps: &mut Vec<Step>,
    ) -> Result<(), PlanError> {
        if let Some(c) = copy.map_err(|r| node_err(node, r))? {
            let l = self.lowering.slab_copy(c).map_err(|r| node_err(node, r))?;
            self.push(node, l, steps);
        }
        Ok(())
    }

    /// A whole-value copy (skipped when empty); sizes must agree.
    fn copy(
        &mut self,
        node: &Node,
        dst: &Operand,
        src: &Operand,
        steps: &mut Vec<Step>,
    ) -> Result<(), PlanError> {
        if dst.bytes != src.bytes || dst.dtype != src.dtype {
            return Err(internal(format!(
                "`{}`: a body value of {} ({} bytes) meets one of {} ({} bytes)",
                node.name, src.dtype, src.bytes, dst.dtype, dst.bytes
            )));
        }
        let c = slab_copy(
            Side::dense(dst.range()),
            Side::dense(src.range()),
            1,
            dst.bytes,
            None,
        );
        self.emit_copy(node, c, steps)
    }

    fn counter(
        &mut self,
        node: &Node,
        counter: Range,
        increment: bool,
        steps: &mut Vec<Step>,
    ) -> Result<(), PlanError> {
        let l = self
            .lowering
            .counter(counter, increment)
            .map_err(|r| node_err(node, r))?;
        self.push(node, l, steps);
        Ok(())
    }

    /// A copy into a body input; unused inputs (`None`) take none.
    fn copy_in(
        &mut self,
        node: &Node,
        dst: &Option<Operand>,
        src: &Operand,
        steps: &mut Vec<Step>,
    ) -> Result<(), PlanError> {
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
    ) -> Result<(Vec<Option<Operand>>, Vec<Operand>), PlanError> {
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
    ) -> Result<(), PlanError> {
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
                    dtype: DType::Bool,
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
                let cond = ins
                    .first()
                    .ok_or_else(|| internal("an if without a condition"))?;
                steps.push(Step::If {
                    node: node.name.clone(),
                    origin: node.origin.clone(),
                    cond: cond.range(),
                    then,
                    otherwise,
                });
            }
            Op::Loop(op) => {
                let (counter, cond) = state.ok_or_else(|| internal("a loop without state"))?;
                let (sub, sl) = (&op.body, &ctl.bodies[0]);
                let (b_ins, b_outs) = Self::body_io(sub, sl)?;
                let k = usize::try_from(op.num_carried)
                    .map_err(|_| node_err(node, "a negative count of carried values"))?;
                if ins.len() < 2 + k || b_ins.len() != ins.len() || b_outs.len() != 1 + outs.len() {
                    return Err(internal(format!(
                        "loop `{}` has a malformed body",
                        node.name
                    )));
                }
                // Init: counter, condition, carried values (kept in the outputs).
                self.counter(node, counter, false, steps)?;
                self.copy(node, &cond, &ins[1], steps)?;
                for c in 0..k {
                    self.copy(node, &outs[c], &ins[2 + c], steps)?;
                }
                let mut b = Vec::new();
                let counter_op = Operand {
                    at: counter.offset,
                    bytes: 8,
                    dtype: DType::I64,
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
                let index = Index {
                    counter,
                    reverse: None,
                };
                for (dst, src) in outs[k..].iter().zip(&b_outs[1 + k..]) {
                    self.scan_copy(node, dst, src, 0, true, index, &mut b)?;
                }
                self.counter(node, counter, true, &mut b)?;
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
                let (ns, ni) = match (
                    usize::try_from(op.num_state),
                    usize::try_from(op.num_scan_inputs),
                ) {
                    (Ok(s), Ok(i)) => (s, i),
                    _ => return Err(node_err(node, "a negative state or scan input count")),
                };
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
                let len = ins[ns]
                    .dims
                    .get(in_axes[0])
                    .copied()
                    .ok_or_else(|| node_err(node, "a scan input of rank 0"))?
                    as u64;
                self.counter(node, counter, false, steps)?;
                for s in 0..ns {
                    self.copy(node, &outs[s], &ins[s], steps)?;
                }
                let mut b = Vec::new();
                for s in 0..ns {
                    self.copy_in(node, &b_ins[s], &outs[s], &mut b)?;
                }
                for j in 0..ni {
                    let reverse = op.scan_input_directions.get(j).copied().unwrap_or(0) == 1;
                    let index = Index {
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
                    let index = Index {
                        counter,
                        reverse: reverse.then_some(len),
                    };
                    self.scan_copy(node, dst, &b_outs[ns + j], a, true, index, &mut b)?;
                }
                self.counter(node, counter, true, &mut b)?;
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
                    format!("`{}` has bodies the GPU planner does not know", op.name()),
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
        index: Index,
        steps: &mut Vec<Step>,
    ) -> Result<(), PlanError> {
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
        let sliced = Side::sliced(whole.range(), &whole.dims, axis, size);
        let dense = Side::dense(part.range());
        let (dst, src) = if into_whole {
            (sliced, dense)
        } else {
            (dense, sliced)
        };
        let c = slab_copy(dst, src, rows, inner, Some(index));
        self.emit_copy(node, c, steps)
    }
}

/// Plans a legalized, concrete graph: lays every graph out in the buffer
/// (arena, constants, bodies), then lowers nodes with `lowering`, the
/// scratch area last.
pub fn plan<L: Lowering>(
    g: &Graph,
    weights: &Weights,
    mem: &MemoryPlan,
    lowering: &mut L,
) -> Result<Planned<L::Launch>, PlanError> {
    let mut p = Planner {
        weights,
        lowering,
        end: 0,
        blocks: Vec::new(),
        launches: Vec::new(),
        scratch_at: 0,
        scratch_end: 0,
    };
    let top = p.layout(g, mem.clone())?;
    p.scratch_at = p.end.next_multiple_of(BLOCK_ALIGN);
    p.scratch_end = p.scratch_at;
    let steps = p.lower_graph(g, &top)?;
    let buffer_bytes = p.scratch_end.next_multiple_of(BLOCK_ALIGN).max(BLOCK_ALIGN);
    let slot = |name: &str, v: Value| -> Result<IoSlot, PlanError> {
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
    Ok(Planned {
        launches: p.launches,
        steps,
        consts: p.blocks,
        inputs,
        outputs,
        arena_bytes: mem.arena_bytes as u64,
        buffer_bytes,
    })
}
