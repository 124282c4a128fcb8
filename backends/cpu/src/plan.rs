//! The CPU plan: a graph with a memory plan becomes a [`Schedule`] of steps,
//! each a compiled kernel with resolved operand locations. Pure: no threads, no
//! allocation of the arena; it prints for snapshot tests.

use std::collections::HashMap;
use std::fmt;

use rlx_ir::{DType, Graph, NodeId, Op, Tensor, TensorType, Weights};
use rlx_passes::memory::{is_view, MemoryPlan};
use rlx_passes::Slot;

use crate::homes::{self, Bound, Home};
use crate::kernel::{build, Kernel, Spec};
use crate::scratch::PerThread;
use crate::RunError;

/// One operand of a step: where it lives and what it is.
#[derive(Debug, Clone)]
pub struct StepIo {
    pub slot: Slot,
    pub dtype: DType,
    pub dims: Vec<usize>,
    pub ty_bytes: usize,
    /// Where the operand is when its buffer lives in the caller's memory
    /// ([`crate::homes`]).
    pub bound: Option<Bound>,
}

/// One kernel launch.
pub struct Step {
    pub name: String,
    pub origin: Vec<String>,
    pub kernel: Box<dyn Kernel>,
    pub inputs: Vec<StepIo>,
    pub outputs: Vec<StepIo>,
    /// How much work the step does, for deciding whether to split it.
    pub work: Work,
}

/// A step's work, as far as the plan knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Multiply-adds (a GEMM or convolution).
    Products(u64),
    /// Bytes read and written (data movement, elementwise, reductions).
    Bytes(usize),
    /// Not shown by the operands (control flow, recurrent layers).
    Unknown,
}

impl Work {
    fn of(node: &rlx_ir::Node, kernel: &dyn Kernel, ios: &[&StepIo]) -> Work {
        if !node.op.subgraphs().is_empty() || matches!(node.op, Op::Recurrent(_)) {
            return Work::Unknown;
        }
        match kernel.flops() {
            Some(f) => Work::Products(f / 2),
            None => Work::Bytes(ios.iter().map(|io| io.ty_bytes).sum()),
        }
    }

    /// Whether the step is too small to split over `threads`: below 64K
    /// multiply-adds or 64 KiB moved, handing out tasks (a microsecond or
    /// two to the pool's spinning workers, see [`crate::par`]) and the
    /// cache lines the threads then share cost more than they save. The bar
    /// does not grow with the thread count: the workers are awake.
    pub fn serial(self, threads: usize) -> bool {
        threads <= 1
            || match self {
                Work::Products(p) => p < 1 << 16,
                Work::Bytes(b) => b < 1 << 16,
                Work::Unknown => false,
            }
    }
}

impl Schedule {
    /// Whether every step is too small for `threads` (see [`Work::serial`]):
    /// a whole run then stays on the calling thread, without handing it to a
    /// pool (two thread wake-ups, tens of microseconds on a large pool).
    pub fn serial(&self, threads: usize) -> bool {
        self.steps.iter().all(|s| s.work.serial(threads))
    }
}

/// A complete CPU schedule.
pub struct Schedule {
    pub steps: Vec<Step>,
    /// Concatenations whose inputs were written in place and splits whose
    /// outputs are views of their input (see [`rlx_passes::MemoryOptions`]):
    /// no step runs them. Each is printed as it is listed here.
    pub in_place: Vec<String>,
    /// Arena slot of each graph input (in input order).
    pub input_slots: Vec<Option<Slot>>,
    /// Whether a plain run may read each graph input where the caller's
    /// tensor lies ([`crate::homes`]).
    pub inputs_in_place: Vec<bool>,
    pub output_names: Vec<String>,
    pub outputs: Vec<StepIo>,
    pub consts: HashMap<NodeId, Tensor>,
    pub arena_bytes: usize,
    pub scratch_bytes: usize,
    /// The most any step takes on each thread ([`crate::scratch`]).
    pub per_thread: PerThread,
    /// Sum of all planned tensor sizes (for reporting reuse).
    pub total_bytes: usize,
}

fn io(
    g: &Graph,
    mem: &MemoryPlan,
    homes: &HashMap<rlx_ir::Value, Home>,
    v: rlx_ir::Value,
) -> Result<StepIo, RunError> {
    let t = g.ty(v);
    let dims = t
        .shape
        .as_known()
        .ok_or_else(|| RunError::Internal(format!("symbolic shape {t} in a planned graph")))?;
    let slot = *mem
        .slots
        .get(&v)
        .ok_or_else(|| RunError::Internal("a value without a slot".into()))?;
    Ok(StepIo {
        slot,
        dtype: t.dtype,
        ty_bytes: t.byte_size().unwrap_or(0),
        dims,
        bound: homes::bound(mem, homes, v),
    })
}

/// Builds the schedule of a concrete graph.
pub fn plan(g: &Graph, weights: &Weights, mem: &MemoryPlan) -> Result<Schedule, RunError> {
    let packs = crate::packs::Packs::new();
    plan_with(g, weights, mem, crate::kernel::RunLimits::default(), &packs)
}

/// [`plan`] with the limits its control-flow kernels enforce, its kernels'
/// prepared constants (packed weights) taken from `packs` where an earlier
/// plan made them and kept there for later ones.
pub fn plan_with(
    g: &Graph,
    weights: &Weights,
    mem: &MemoryPlan,
    limits: crate::kernel::RunLimits,
    packs: &crate::packs::Packs,
) -> Result<Schedule, RunError> {
    let mut consts = HashMap::new();
    let mut steps = Vec::new();
    let mut in_place = Vec::new();
    let homes = homes::homes(g, mem, |v| {
        let op = &g.node(v.node).op;
        !matches!(op, Op::Input(_) | Op::Constant(_) | Op::Weight(_))
            && !is_view(op)
            && !mem.in_place.contains(&v.node)
    });
    for &id in &mem.order {
        let node = g.node(id);
        match &node.op {
            Op::Input(_) => continue,
            Op::Constant(c) => {
                consts.insert(id, c.value.clone());
                continue;
            }
            Op::Weight(w) => {
                let t = weights
                    .get(&w.name)
                    .ok_or_else(|| RunError::Internal(format!("weight `{}` is missing", w.name)))?;
                consts.insert(id, t.clone());
                continue;
            }
            op if is_view(op) => continue,
            _ if mem.in_place.contains(&id) => {
                in_place.push(match node.op {
                    Op::Split(_) => format!("split {}: outputs are views of its input", node.name),
                    _ => format!("concat {}: inputs written in place", node.name),
                });
                continue;
            }
            _ => {}
        }
        let ins = g.inputs_of(id);
        let in_types: Vec<TensorType> = ins.iter().map(|v| g.ty(*v).clone()).collect();
        let const_vals: Vec<Option<Tensor>> =
            ins.iter().map(|v| leaf(g, weights, v.node)).collect();
        let spec = Spec {
            node,
            inputs: &in_types,
            outputs: &node.outputs,
            consts: &const_vals,
            weights,
            limits,
            packs,
        };
        // A cache write over its own cache reads only the update (and
        // the indices): its output already holds the cache.
        let over_cache = mem.updates_in_place.contains(&id);
        let kernel = if over_cache {
            crate::kernels::tensor_scatter::build_update(&spec)
        } else {
            build(&spec)
        }
        .map_err(|source| RunError::Node {
            node: node.name.clone(),
            origin: node.origin.clone(),
            source,
        })?;
        let inputs: Vec<StepIo> = ins
            .iter()
            .skip(usize::from(over_cache))
            .map(|v| io(g, mem, &homes, *v))
            .collect::<Result<_, _>>()?;
        let outputs: Vec<StepIo> = (0..node.outputs.len())
            .map(|p| io(g, mem, &homes, rlx_ir::Value::new(id, p as u16)))
            .collect::<Result<_, _>>()?;
        let ios: Vec<&StepIo> = inputs.iter().chain(&outputs).collect();
        let work = Work::of(node, kernel.as_ref(), &ios);
        steps.push(Step {
            name: node.name.clone(),
            origin: node.origin.clone(),
            kernel,
            inputs,
            outputs,
            work,
        });
    }
    let input_slots = g
        .inputs()
        .iter()
        .map(|i| mem.slots.get(&rlx_ir::Value::of(*i)).copied())
        .collect();
    let inputs_in_place = g
        .inputs()
        .iter()
        .map(|i| homes.contains_key(&rlx_ir::Value::of(*i)))
        .collect();
    let outputs = g
        .outputs()
        .iter()
        .map(|o| io(g, mem, &homes, o.value))
        .collect::<Result<_, _>>()?;
    let output_names = g.outputs().iter().map(|o| o.name.clone()).collect();
    let scratch_bytes = steps
        .iter()
        .map(|s| s.kernel.scratch_bytes())
        .max()
        .unwrap_or(0);
    let per_thread = steps
        .iter()
        .fold(PerThread::NONE, |p, s| p.max(s.kernel.per_thread()));
    Ok(Schedule {
        steps,
        in_place,
        input_slots,
        inputs_in_place,
        output_names,
        outputs,
        consts,
        arena_bytes: mem.arena_bytes,
        scratch_bytes,
        per_thread,
        total_bytes: mem.total_bytes,
    })
}

fn leaf(g: &Graph, weights: &Weights, id: NodeId) -> Option<Tensor> {
    match &g.node(id).op {
        Op::Constant(c) => Some(c.value.clone()),
        Op::Weight(w) => weights.get(&w.name).cloned(),
        _ => None,
    }
}

impl fmt::Display for StepIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.dims.iter().map(|d| d.to_string()).collect();
        match self.slot {
            Slot::Arena { offset, .. } => write!(f, "{}[{}]@{offset}", self.dtype, dims.join(",")),
            Slot::Const(_) => write!(f, "{}[{}]@const", self.dtype, dims.join(",")),
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cpu schedule: {} steps, arena {} bytes, scratch {} bytes",
            self.steps.len(),
            self.arena_bytes,
            self.scratch_bytes
        )?;
        let PerThread { caller, each } = self.per_thread;
        match (caller, each) {
            (0, 0) => writeln!(f)?,
            (0, each) => writeln!(f, ", {each} bytes a thread")?,
            (caller, each) => {
                writeln!(f, ", {each} bytes a thread (+{caller} on the calling one)")?
            }
        }
        for (i, s) in self.steps.iter().enumerate() {
            let ins: Vec<String> = s.inputs.iter().map(|x| x.to_string()).collect();
            let outs: Vec<String> = s.outputs.iter().map(|x| x.to_string()).collect();
            writeln!(
                f,
                "  {i:>3} {} ({}) -> ({})  # {}",
                s.kernel.label(),
                ins.join(", "),
                outs.join(", "),
                s.origin.join(", ")
            )?;
        }
        for line in &self.in_place {
            writeln!(f, "  {line}")?;
        }
        for (n, o) in self.output_names.iter().zip(&self.outputs) {
            writeln!(f, "  output {n:?} = {o}")?;
        }
        Ok(())
    }
}
