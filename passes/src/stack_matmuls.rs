//! Products of one weight over independent rows, stacked (`stack-matmuls`).
//!
//! A recurrent layer unrolled by a tracing exporter (PyTorch's `LSTMCell` or
//! `GRUCell` in a Python loop) projects each step's input with its own
//! `Gemm` against the same weight: T products of a few rows each, and each
//! one streams the whole weight from memory (a 4096 x 400 input projection:
//! 6.5 MB a step for 3.3 MFLOP). None of those inputs depends on the
//! recurrence, so the T products are one product of T times the rows:
//! `concat` the inputs along the rows, one `matmul`/`fused_matmul`, and a
//! `split` back to each step's rows, which reads the weight once.
//!
//! Members: `matmul` or `fused_matmul` nodes with the same constant 2-D
//! weight, the same constant bias (or none) and the same activation, 2-D
//! inputs of the same type with at most [`MAX_ROWS`] rows each (more rows
//! already amortize the weight). A member that depends on another member
//! (the recurrent products, each reading the last step's state) stays
//! alone: the stacked product runs where all its inputs exist, so no member
//! may feed another.

use std::collections::{HashMap, HashSet};

use rlx_ir::ops::{Concat, Split};
use rlx_ir::{DType, Graph, NodeId, Op, Tensor, Value};

use crate::manager::{Pass, PassContext, PassError};
use crate::rewrite::{add_op, constant, finish, union_origin};

pub struct StackMatMuls;

const NAME: &str = "stack-matmuls";

/// Rows a member may have.
const MAX_ROWS: usize = 16;

impl Pass for StackMatMuls {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let order = g.topo_order().map_err(|e| PassError::graph(NAME, e))?;
        // Candidates by (weight, bias), in topological order.
        let mut groups: Vec<Vec<NodeId>> = Vec::new();
        let mut by_key: HashMap<(Value, Option<Value>), usize> = HashMap::new();
        for &id in &order {
            if let Some(key) = member_key(g, id) {
                let at = *by_key.entry(key).or_insert_with(|| {
                    groups.push(Vec::new());
                    groups.len() - 1
                });
                groups[at].push(id);
            }
        }
        let mut changed = false;
        for group in groups {
            for same in split_by_type(g, group) {
                let members = independent(g, &same);
                if members.len() >= 2 {
                    stack(g, cx, &members).map_err(|reason| PassError::Node {
                        pass: NAME,
                        node: g.node(members[0]).name.clone(),
                        origin: g.node(members[0]).origin_text(),
                        reason,
                    })?;
                    cx.count("matmul.stacked");
                    changed = true;
                }
            }
        }
        if changed {
            finish(g, cx, NAME)?;
        }
        Ok(changed)
    }
}

/// The (weight, bias) of a product that may be stacked.
fn member_key(g: &Graph, id: NodeId) -> Option<(Value, Option<Value>)> {
    let node = g.node(id);
    if !matches!(node.op, Op::MatMul(_) | Op::FusedMatMul(_)) || node.outputs.len() != 1 {
        return None;
    }
    let ins = g.inputs_of(id);
    let (a, w) = (*ins.first()?, *ins.get(1)?);
    let bias = ins.get(2).copied();
    let leaf = |v: Value| g.node(v.node).op.is_leaf() && !matches!(g.node(v.node).op, Op::Input(_));
    if !leaf(w) || bias.is_some_and(|b| !leaf(b)) {
        return None;
    }
    let (at, wt) = (g.ty(a), g.ty(w));
    let rows = at.shape.0.first().and_then(|d| d.known())?;
    let k = at.shape.0.get(1).and_then(|d| d.known())?;
    let wk = wt.shape.0.first().and_then(|d| d.known())?;
    let float = matches!(at.dtype, DType::F32 | DType::F16 | DType::BF16 | DType::F64);
    (at.shape.rank() == 2
        && wt.shape.rank() == 2
        && rows >= 1
        && rows <= MAX_ROWS as i64
        && k == wk
        && float)
        .then_some((w, bias))
}

/// `group` split into runs of the same op (activation) and input type.
fn split_by_type(g: &Graph, group: Vec<NodeId>) -> Vec<Vec<NodeId>> {
    let mut out: Vec<Vec<NodeId>> = Vec::new();
    for id in group {
        let same = |o: &Vec<NodeId>| {
            let f = o[0];
            g.node(f).op == g.node(id).op
                && g.ty(g.inputs_of(f)[0]).dtype == g.ty(g.inputs_of(id)[0]).dtype
                && g.ty(g.inputs_of(f)[0]).shape.0[1] == g.ty(g.inputs_of(id)[0]).shape.0[1]
        };
        match out.iter_mut().find(|o| same(o)) {
            Some(o) => o.push(id),
            None => out.push(vec![id]),
        }
    }
    out
}

/// The members of `group` (in topological order) that depend on no earlier
/// kept member: each kept one's descendants are marked once, so a later
/// member among them stays alone. Returned in graph order (the rows' order
/// in the stack).
fn independent(g: &Graph, group: &[NodeId]) -> Vec<NodeId> {
    let mut reached: HashSet<NodeId> = HashSet::new();
    let mut kept = Vec::new();
    for &id in group {
        if reached.contains(&id) {
            continue;
        }
        kept.push(id);
        let mut work = vec![id];
        while let Some(n) = work.pop() {
            for u in g.user_nodes(n) {
                if reached.insert(u) {
                    work.push(u);
                }
            }
        }
    }
    kept.sort();
    kept
}

/// Replaces `members` by concat -> one product -> split.
fn stack(g: &mut Graph, cx: &mut PassContext, members: &[NodeId]) -> Result<(), String> {
    let first = members[0];
    let op = g.node(first).op.clone();
    let ins = g.inputs_of(first);
    let rest = ins[1..].to_vec();
    let xs: Vec<Value> = members.iter().map(|&m| g.inputs_of(m)[0]).collect();
    let rows: Vec<i64> = xs
        .iter()
        .map(|&x| g.ty(x).shape.0[0].known().unwrap_or(0))
        .collect();
    // One origin naming every member: the stacked values stand for none of
    // their ONNX outputs alone (`compare` maps a step to its origin's output).
    let origin = vec![union_origin(g, members).join(", ")];
    let base = format!("{}_stacked", g.node(first).name);
    let cat = add_op(
        g,
        cx.weights,
        Concat { axis: 0 },
        &format!("{base}_rows"),
        origin.clone(),
        &xs,
    )?;
    let mut args = vec![Value::new(cat, 0)];
    args.extend(rest);
    let product = add_op(g, cx.weights, op, &base, origin.clone(), &args)?;
    let split = Split {
        axis: 0,
        num_outputs: members.len() as i64,
    };
    let mut split_ins = vec![Value::new(product, 0)];
    if rows.iter().any(|&r| r != rows[0]) {
        let sizes = Tensor::from_i64(&[rows.len()], &rows).map_err(|e| e.to_string())?;
        split_ins.push(constant(
            g,
            cx.weights,
            &format!("{base}_rows"),
            origin.clone(),
            sizes,
        ));
    }
    let parts = add_op(
        g,
        cx.weights,
        split,
        &format!("{base}_split"),
        origin,
        &split_ins,
    )?;
    for (i, &m) in members.iter().enumerate() {
        g.replace_uses(Value::new(m, 0), Value::new(parts, i as u16))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}
