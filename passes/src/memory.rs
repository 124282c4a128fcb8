//! Liveness-based memory planning over one arena.
//!
//! Every value that a step writes gets a buffer; views (reshape, flatten,
//! squeeze, unsqueeze) share their input's buffer. A buffer lives from the step
//! that defines it to the last step that reads it (graph outputs to the end).
//! Offsets are assigned greedily, largest buffer first, at the lowest aligned
//! offset that no time-overlapping buffer occupies (the TFLite "greedy by size"
//! strategy). Constants and weights are not in the arena.
//!
//! With [`MemoryOptions::concat_in_place`], a concatenation whose inputs are
//! consecutive pieces of its output (everything before the axis of size 1,
//! as the channels of one image are) has its inputs written there by their
//! producers: each input is a piece of the concatenation's buffer, which
//! lives from the first piece's definition on, and the concatenation itself
//! is [`MemoryPlan::in_place`], no step. A piece may itself be such a
//! concatenation (DenseNet's growing blocks nest so), at the sum of offsets,
//! or the buffer of a split whose pieces come in order (YOLOv8's C2f blocks
//! concatenate both halves of a split again).
//!
//! With [`MemoryOptions::split_in_place`], the mirror image: a split whose
//! outputs are consecutive pieces of its input (everything before the axis
//! of size 1: a fused projection of one token split into Q, K and V) has
//! outputs that are views of its input at their offsets, which keeps the
//! input's buffer alive while any of them is read; the split is
//! [`MemoryPlan::in_place`] too. Only pieces at [`ALIGN`]ed offsets are
//! views, so every operand a kernel sees stays aligned.
//!
//! With [`MemoryOptions::scatter_in_place`], a `tensor_scatter` (a key/value
//! cache write) whose cache operand is read by nothing scheduled after it
//! writes its output over that operand: the two share one buffer, and the
//! step has only the update to write ([`MemoryPlan::updates_in_place`]).
//! A decode step's cache then moves once a run less.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use rlx_ir::{Graph, NodeId, Op, Value};

/// Alignment of arena offsets, in bytes.
pub const ALIGN: usize = 64;

/// Where a value's bytes live at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Slot {
    /// `bytes` bytes of the arena at `offset`.
    Arena { offset: usize, bytes: usize },
    /// The bytes of a constant or weight node (or a view of them).
    Const(NodeId),
}

/// A planned buffer: its slot and live interval in schedule steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buffer {
    pub offset: usize,
    pub bytes: usize,
    pub first: usize,
    pub last: usize,
}

/// What the planner may do beyond giving every written value a buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryOptions {
    /// Place a concatenation's inputs in its output where they are
    /// consecutive pieces of it, and list it in [`MemoryPlan::in_place`]: a
    /// backend that plans with this skips those nodes.
    pub concat_in_place: bool,
    /// Make a split's outputs views of its input where they are
    /// consecutive, aligned pieces of it, and list it in
    /// [`MemoryPlan::in_place`].
    pub split_in_place: bool,
    /// Give a `tensor_scatter` its cache operand's buffer where nothing
    /// scheduled after it reads that operand, and list it in
    /// [`MemoryPlan::updates_in_place`]: a backend that plans with this
    /// writes only the update there.
    pub scatter_in_place: bool,
}

/// The memory plan of a concrete graph in a given schedule order.
#[derive(Debug, Clone)]
pub struct MemoryPlan {
    pub order: Vec<NodeId>,
    pub slots: HashMap<Value, Slot>,
    /// The buffer each arena value lives in (named by the value the buffer
    /// was made for: itself, the root of a view, the concatenation a piece
    /// is written into, the cache an update is written over) and its byte
    /// offset there. Every value of one buffer shares its bytes, and no
    /// value of another buffer does while this one lives: an executor can
    /// move a whole buffer out of the arena (into a caller's input or
    /// output memory) without looking at any other.
    pub places: HashMap<Value, (Value, usize)>,
    pub buffers: Vec<Buffer>,
    /// Concatenations whose inputs their producers wrote in place and
    /// splits whose outputs are views of their input (see
    /// [`MemoryOptions`]): nothing is left to run for them.
    pub in_place: HashSet<NodeId>,
    /// Cache writes whose output shares their cache operand's buffer
    /// ([`MemoryOptions::scatter_in_place`]): their step writes only the
    /// update.
    pub updates_in_place: HashSet<NodeId>,
    /// Arena size: the peak of simultaneously live bytes after packing.
    pub arena_bytes: usize,
    /// Sum of all buffer sizes (what one slot per tensor would need).
    pub total_bytes: usize,
}

/// Why a graph cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("value of node `{0}` has no concrete size")]
    Symbolic(String),
    #[error("{0}")]
    Graph(String),
}

/// True for ops whose output is their first input reinterpreted (no copy).
pub fn is_view(op: &Op) -> bool {
    matches!(
        op,
        Op::Reshape(_) | Op::Flatten(_) | Op::Squeeze(_) | Op::Unsqueeze(_)
    )
}

/// Plans `g` in its canonical topological order.
pub fn plan_memory(g: &Graph) -> Result<MemoryPlan, PlanError> {
    let order = g
        .topo_order()
        .map_err(|e| PlanError::Graph(e.to_string()))?;
    plan_memory_in(g, order)
}

/// Plans `g` in its canonical topological order, with `opts`.
pub fn plan_memory_with(g: &Graph, opts: &MemoryOptions) -> Result<MemoryPlan, PlanError> {
    let order = g
        .topo_order()
        .map_err(|e| PlanError::Graph(e.to_string()))?;
    plan_memory_in_with(g, order, opts)
}

/// Plans `g` for the schedule `order` (every node once, inputs first).
pub fn plan_memory_in(g: &Graph, order: Vec<NodeId>) -> Result<MemoryPlan, PlanError> {
    plan_memory_in_with(g, order, &MemoryOptions::default())
}

/// The concatenations of `order` that can take their inputs in place, and
/// where: each piece's root buffer -> (the concatenation's value, byte
/// offset in it). A concatenation qualifies when the inputs are consecutive
/// in the output and each is either a distinct value with a buffer of its
/// own (not a constant, a view or a piece of another concatenation), or one
/// of a run of consecutive inputs that are views covering one such buffer
/// in order: the halves of a split concatenated again, as YOLOv8's C2f
/// blocks concatenate both halves of a split with what they computed from
/// the second. Then that buffer is the piece.
fn concat_pieces(
    g: &Graph,
    order: &[NodeId],
    root: &HashMap<Value, Value>,
    within_root: &HashMap<Value, usize>,
) -> (HashMap<Value, (Value, usize)>, HashSet<NodeId>) {
    let mut pieces: HashMap<Value, (Value, usize)> = HashMap::new();
    let mut in_place = HashSet::new();
    let outputs: HashSet<Value> = g.outputs().iter().map(|o| o.value).collect();
    // Buffers a graph output lives in (itself or a view of it): the run
    // hands those to the caller whole.
    let returned: HashSet<Value> = outputs
        .iter()
        .filter_map(|o| root.get(o))
        .copied()
        .collect();
    for &id in order {
        let node = g.node(id);
        let Op::Concat(c) = &node.op else { continue };
        let Some(dims) = node.outputs[0].shape.as_known() else {
            continue;
        };
        let rank = dims.len() as i64;
        let axis = if c.axis < 0 { c.axis + rank } else { c.axis };
        if !(0..rank).contains(&axis) || dims[..axis as usize].iter().product::<usize>() != 1 {
            continue;
        }
        let ins = g.inputs_of(id);
        let own = |v: &Value| {
            root.get(v) == Some(v)
                && !pieces.contains_key(v)
                && !outputs.contains(v)
                && !returned.contains(v)
                && !matches!(g.node(v.node).op, Op::Input(_))
        };
        let Some(sizes) = ins
            .iter()
            .map(|v| g.ty(*v).byte_size())
            .collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        // The buffers the inputs make, in order, with their offsets.
        let mut placed: Vec<(Value, usize)> = Vec::new();
        let (mut at, mut i) = (0, 0);
        while i < ins.len() {
            let v = ins[i];
            let r = match root.get(&v) {
                Some(&r) if own(&r) && placed.iter().all(|p| p.0 != r) => r,
                _ => break,
            };
            let (Some(whole), true) = (
                g.ty(r).byte_size(),
                within_root.get(&v).copied().unwrap_or(0) == 0,
            ) else {
                break;
            };
            // `v` itself, or the views from here on that cover `r` in order
            // (`v` taken first: an empty input still moves on).
            let mut covered = sizes[i];
            i += 1;
            while covered < whole
                && i < ins.len()
                && root.get(&ins[i]) == Some(&r)
                && within_root.get(&ins[i]).copied().unwrap_or(0) == covered
            {
                covered += sizes[i];
                i += 1;
            }
            if covered != whole {
                break;
            }
            placed.push((r, at));
            at += whole;
        }
        if i < ins.len() {
            continue;
        }
        for (r, at) in placed {
            pieces.insert(r, (Value::of(id), at));
        }
        in_place.insert(id);
    }
    (pieces, in_place)
}

/// The byte offsets of split `id`'s outputs in its input, when they are
/// consecutive pieces of it (every dim before the axis 1), each at an
/// [`ALIGN`]ed offset, and the input is not a constant.
fn split_pieces(g: &Graph, id: NodeId, consts: &HashMap<Value, NodeId>) -> Option<Vec<usize>> {
    let node = g.node(id);
    let Op::Split(s) = &node.op else {
        return None;
    };
    let src = g.input(id, 0)?;
    if consts.contains_key(&src) {
        return None;
    }
    let dims = g.ty(src).shape.as_known()?;
    let rank = dims.len() as i64;
    let axis = if s.axis < 0 { s.axis + rank } else { s.axis };
    if !(0..rank).contains(&axis) || dims[..axis as usize].iter().product::<usize>() != 1 {
        return None;
    }
    let mut at = 0;
    let mut offsets = Vec::with_capacity(node.outputs.len());
    for t in &node.outputs {
        if at % ALIGN != 0 {
            return None;
        }
        offsets.push(at);
        at += t.byte_size()?;
    }
    (at == g.ty(src).byte_size()?).then_some(offsets)
}

/// [`plan_memory_in`] with `opts`.
pub fn plan_memory_in_with(
    g: &Graph,
    order: Vec<NodeId>,
    opts: &MemoryOptions,
) -> Result<MemoryPlan, PlanError> {
    let step: HashMap<NodeId, usize> = order.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    // Root buffer of every value: views resolve to their input's root.
    let mut root: HashMap<Value, Value> = HashMap::new();
    // Byte offset of a view within its root (split pieces, and views of them).
    let mut within_root: HashMap<Value, usize> = HashMap::new();
    let mut consts: HashMap<Value, NodeId> = HashMap::new();
    let mut split_views = HashSet::new();
    for &id in &order {
        let node = g.node(id);
        if matches!(node.op, Op::Constant(_) | Op::Weight(_)) {
            consts.insert(Value::of(id), id);
            continue;
        }
        if is_view(&node.op) {
            let src = g
                .input(id, 0)
                .ok_or_else(|| PlanError::Graph(format!("view `{}` has no input", node.name)))?;
            if let Some(c) = consts.get(&src).copied() {
                consts.insert(Value::of(id), c);
            } else {
                let r = root.get(&src).copied().unwrap_or(src);
                root.insert(Value::of(id), r);
                if let Some(&o) = within_root.get(&src) {
                    within_root.insert(Value::of(id), o);
                }
            }
            continue;
        }
        if opts.split_in_place {
            if let Some(offsets) = split_pieces(g, id, &consts) {
                let src = g.inputs_of(id)[0];
                let r = root.get(&src).copied().unwrap_or(src);
                let base = within_root.get(&src).copied().unwrap_or(0);
                for (p, o) in offsets.into_iter().enumerate() {
                    let v = Value::new(id, p as u16);
                    root.insert(v, r);
                    within_root.insert(v, base + o);
                }
                split_views.insert(id);
                continue;
            }
        }
        for p in 0..node.outputs.len() {
            let v = Value::new(id, p as u16);
            root.insert(v, v);
        }
    }
    let updates_in_place = if opts.scatter_in_place {
        scatters_in_place(g, &order, &step, &mut root, &mut within_root)
    } else {
        HashSet::new()
    };
    // Live intervals of root buffers.
    let end = order.len();
    let mut interval: HashMap<Value, (usize, usize)> = HashMap::new();
    for (&v, &r) in &root {
        if v == r {
            let s = step[&v.node];
            interval.insert(r, (s, s));
        }
    }
    for &id in &order {
        for v in g.inputs_of(id) {
            if let Some(r) = root.get(&v) {
                if let Some(iv) = interval.get_mut(r) {
                    iv.1 = iv.1.max(step[&id]);
                }
            }
        }
    }
    for o in g.outputs() {
        if let Some(r) = root.get(&o.value) {
            if let Some(iv) = interval.get_mut(r) {
                iv.1 = end;
            }
        }
    }
    let (pieces, mut in_place) = if opts.concat_in_place {
        concat_pieces(g, &order, &root, &within_root)
    } else {
        Default::default()
    };
    in_place.extend(split_views);
    // The buffer a root lives in (itself, or a concatenation it is a piece
    // of), and its byte offset there.
    let place = |r: Value| {
        let (mut at, mut offset) = (r, 0);
        while let Some(&(c, o)) = pieces.get(&at) {
            at = c;
            offset += o;
        }
        (at, offset)
    };
    // A concatenation's buffer lives as long as any of its pieces.
    let mut lives: HashMap<Value, (usize, usize)> = HashMap::new();
    for (&r, &(first, last)) in &interval {
        let span = lives.entry(place(r).0).or_insert((first, last));
        *span = (span.0.min(first), span.1.max(last));
    }
    // Sizes.
    let mut roots: Vec<(Value, usize, usize, usize)> = Vec::new();
    for (&r, &(first, last)) in &lives {
        let node = g.node(r.node);
        let bytes = node.outputs[usize::from(r.port)]
            .byte_size()
            .ok_or_else(|| PlanError::Symbolic(node.name.clone()))?;
        roots.push((r, bytes, first, last));
    }
    // Largest first; ties broken by definition order for determinism.
    roots.sort_by(|a, b| b.1.cmp(&a.1).then(a.2.cmp(&b.2)).then(a.0.cmp(&b.0)));
    let mut placed: Vec<(usize, usize, usize, usize)> = Vec::new(); // offset, bytes, first, last
    let mut offsets: HashMap<Value, usize> = HashMap::new();
    for &(r, bytes, first, last) in &roots {
        let mut busy: Vec<(usize, usize)> = placed
            .iter()
            .filter(|p| p.2 <= last && first <= p.3 && p.1 > 0)
            .map(|p| (p.0, p.0 + p.1))
            .collect();
        busy.sort();
        let mut offset = 0;
        if bytes > 0 {
            for (s, e) in busy {
                if offset + bytes <= s {
                    break;
                }
                offset = offset.max(e.next_multiple_of(ALIGN));
            }
        }
        placed.push((offset, bytes, first, last));
        offsets.insert(r, offset);
    }
    let arena_bytes = placed.iter().map(|p| p.0 + p.1).max().unwrap_or(0);
    let total_bytes = roots.iter().map(|r| r.1).sum();
    let mut slots = HashMap::new();
    let mut places = HashMap::new();
    for (&v, &r) in &root {
        let bytes = g.node(v.node).outputs[usize::from(v.port)]
            .byte_size()
            .unwrap_or(0);
        let (buffer, within) = place(r);
        let piece = within_root.get(&v).copied().unwrap_or(0);
        places.insert(v, (buffer, within + piece));
        slots.insert(
            v,
            Slot::Arena {
                offset: offsets[&buffer] + within + piece,
                bytes,
            },
        );
    }
    for (&v, &c) in &consts {
        slots.insert(v, Slot::Const(c));
    }
    let buffers = placed
        .into_iter()
        .map(|(offset, bytes, first, last)| Buffer {
            offset,
            bytes,
            first,
            last,
        })
        .collect();
    Ok(MemoryPlan {
        order,
        slots,
        places,
        buffers,
        in_place,
        updates_in_place,
        arena_bytes,
        total_bytes,
    })
}

/// The cache writes of `order` that can write over their cache operand
/// (nothing after them reads a value of its buffer), with their outputs,
/// and the views of those, moved into that buffer in `root`.
fn scatters_in_place(
    g: &Graph,
    order: &[NodeId],
    step: &HashMap<NodeId, usize>,
    root: &mut HashMap<Value, Value>,
    within_root: &mut HashMap<Value, usize>,
) -> HashSet<NodeId> {
    // The steps reading each root buffer.
    let mut readers: HashMap<Value, Vec<usize>> = HashMap::new();
    for &id in order {
        for v in g.inputs_of(id) {
            if let Some(&r) = root.get(&v) {
                readers.entry(r).or_default().push(step[&id]);
            }
        }
    }
    let outputs: HashSet<Value> = g.outputs().iter().map(|o| o.value).collect();
    let mut done = HashSet::new();
    let mut claimed: HashSet<Value> = HashSet::new();
    for &id in order {
        if !matches!(g.node(id).op, Op::TensorScatter(_)) {
            continue;
        }
        let (Some(src), out) = (g.input(id, 0), Value::of(id)) else {
            continue;
        };
        let Some(&r) = root.get(&src) else { continue };
        // Not a buffer two writes share, not one the run returns as is, and
        // read by nothing after this step.
        let here = step[&id];
        let after = readers
            .get(&r)
            .is_some_and(|s| s.iter().any(|&at| at > here));
        if claimed.contains(&r)
            || outputs.iter().any(|o| root.get(o) == Some(&r))
            || after
            || root.get(&out) != Some(&out)
        {
            continue;
        }
        let at = within_root.get(&src).copied().unwrap_or(0);
        for (v, rv) in root.iter_mut() {
            if *rv == out {
                *rv = r;
                let piece = within_root.get(v).copied().unwrap_or(0);
                within_root.insert(*v, at + piece);
            }
        }
        claimed.insert(r);
        done.insert(id);
    }
    done
}

impl MemoryPlan {
    /// Checks that no two buffers live at the same time overlap in the arena.
    pub fn check_no_overlap(&self) -> Result<(), String> {
        for (i, a) in self.buffers.iter().enumerate() {
            if a.offset % ALIGN != 0 {
                return Err(format!(
                    "buffer at {} is not {ALIGN}-byte aligned",
                    a.offset
                ));
            }
            for b in &self.buffers[i + 1..] {
                let time = a.first <= b.last && b.first <= a.last;
                let space = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
                if time && space && a.bytes > 0 && b.bytes > 0 {
                    return Err(format!("buffers {a:?} and {b:?} overlap while both live"));
                }
            }
        }
        Ok(())
    }

    /// A readable summary: arena size and each buffer.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "arena {} bytes (sum of tensors {} bytes)\n",
            self.arena_bytes, self.total_bytes
        );
        let mut b = self.buffers.clone();
        b.sort_by_key(|x| (x.first, x.offset));
        for x in b {
            let _ = writeln!(
                s,
                "  [{:>8} +{:>8}) steps {}..={}",
                x.offset, x.bytes, x.first, x.last
            );
        }
        s
    }
}
