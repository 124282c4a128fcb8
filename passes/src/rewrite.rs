//! Graph-editing helpers shared by the rewriting passes: constant inspection,
//! typed node creation, in-place replacement with the union of origins, and
//! clean-up of what a rewrite left dead.

use std::collections::HashSet;

use rlx_ir::analysis::{infer_graph, infer_node, record_values, Values};
use rlx_ir::{DType, Graph, Node, NodeId, Op, Tensor, TensorType, Value, Weights};

use crate::fold::leaf_tensor;
use crate::manager::{PassContext, PassError};

/// The constant tensor behind `v`, if it is a constant or weight.
pub fn const_of(g: &Graph, w: &Weights, v: Value) -> Option<Tensor> {
    leaf_tensor(g, w, v.node)
}

/// The float (or integer) elements of a constant value, widened to f64.
pub fn const_f64s(g: &Graph, w: &Weights, v: Value) -> Option<Vec<f64>> {
    let t = const_of(g, w, v)?;
    t.to_f64_vec()
        .or_else(|| Some(t.to_i64_vec()?.into_iter().map(|x| x as f64).collect()))
}

/// The value of a constant whose elements are all equal (a splat), as f64.
pub fn splat(g: &Graph, w: &Weights, v: Value) -> Option<f64> {
    let vals = const_f64s(g, w, v)?;
    let first = *vals.first()?;
    vals.iter()
        .all(|x| x.to_bits() == first.to_bits())
        .then_some(first)
}

/// True if `v` is a constant splat within `rel` (relative) of `want`.
pub fn splat_near(g: &Graph, w: &Weights, v: Value, want: f64, rel: f64) -> bool {
    splat(g, w, v).is_some_and(|x| (x - want).abs() <= rel * want.abs().max(1e-30))
}

/// Origins of `nodes` (in the given order), de-duplicated: the union a fused
/// node keeps.
pub fn union_origin(g: &Graph, nodes: &[NodeId]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for &n in nodes {
        if let Some(node) = g.get(n) {
            for o in &node.origin {
                if !out.contains(o) {
                    out.push(o.clone());
                }
            }
        }
    }
    out
}

/// Known values of the leaf inputs of `id` (enough to type most new nodes).
fn leaf_values(g: &Graph, id: NodeId, w: &Weights) -> Values {
    let mut values = Values::new();
    for v in g.inputs_of(id) {
        if g.node(v.node).op.is_leaf() {
            record_values(g, v.node, &mut values, Some(w));
        }
    }
    values
}

/// Re-infers the output types of `id` from its inputs.
pub fn retype(g: &mut Graph, w: &Weights, id: NodeId) -> Result<(), String> {
    let values = leaf_values(g, id, w);
    let t = infer_node(g, id, &values, Some(w))
        .map_err(|e| format!("node `{}` ({}): {e}", g.node(id).name, g.node(id).op.name()))?;
    g.node_mut(id).outputs = t;
    Ok(())
}

/// Adds a node computing `op` on `inputs`, typed by inference; its name derives
/// from `base`.
pub fn add_op(
    g: &mut Graph,
    w: &Weights,
    op: impl Into<Op>,
    base: &str,
    origin: Vec<String>,
    inputs: &[Value],
) -> Result<NodeId, String> {
    let op = op.into();
    let name = g.unique_name(base);
    // Provisional types (one per output) so the edit is well-formed; retyped below.
    let n_out = match &op {
        Op::ResidualNorm(_) => 2,
        _ => 1,
    };
    let placeholder = vec![TensorType::new(DType::F32, rlx_ir::Shape::scalar()); n_out];
    let id = g
        .add_node(Node::new(op, name, origin, placeholder), inputs)
        .map_err(|e| e.to_string())?;
    if let Err(e) = retype(g, w, id) {
        g.remove_node(id);
        return Err(e);
    }
    Ok(id)
}

/// Turns `root` into `op` on `inputs` with `origin`, in place: its users and
/// name stay. Retypes it.
pub fn replace_root(
    g: &mut Graph,
    w: &Weights,
    root: NodeId,
    op: impl Into<Op>,
    inputs: &[Value],
    origin: Vec<String>,
) -> Result<(), String> {
    let saved = (g.node(root).clone(), g.inputs_of(root));
    let n_out = match &saved.0.op {
        _ if saved.0.outputs.is_empty() => 1,
        _ => saved.0.outputs.len(),
    };
    let op = op.into();
    let want_out = match &op {
        Op::ResidualNorm(_) => 2,
        _ => 1,
    };
    g.set_inputs(root, inputs).map_err(|e| e.to_string())?;
    {
        let n = g.node_mut(root);
        n.op = op;
        n.origin = origin;
        if want_out > n_out {
            let t = n.outputs[0].clone();
            n.outputs.resize(want_out, t);
        }
    }
    if let Err(e) = retype(g, w, root) {
        // Restore the node as it was.
        let (node, ins) = saved;
        let _ = g.set_inputs(root, &ins);
        *g.node_mut(root) = node;
        return Err(e);
    }
    Ok(())
}

/// Removes the nodes of `candidates` that nothing reads any more, and then
/// their producers that became dead, transitively (graph inputs stay).
pub fn remove_dead(g: &mut Graph, candidates: &[NodeId]) {
    let mut work: Vec<NodeId> = candidates.to_vec();
    let inputs: HashSet<NodeId> = g.inputs().iter().copied().collect();
    while let Some(n) = work.pop() {
        if !g.contains(n) || inputs.contains(&n) {
            continue;
        }
        let used = (0..g.node(n).outputs.len()).any(|p| g.is_used(Value::new(n, p as u16)));
        if used {
            continue;
        }
        let producers: Vec<NodeId> = g.inputs_of(n).into_iter().map(|v| v.node).collect();
        g.remove_node(n);
        work.extend(producers);
    }
}

/// Runs `fuse` on every node that `wanted` picks, naming a failing node in
/// the error; counts each rewrite as `counted` and finishes the graph when
/// one changed it. Returns whether any did.
pub fn rewrite_each(
    g: &mut Graph,
    cx: &mut PassContext,
    pass: &'static str,
    counted: &'static str,
    wanted: impl Fn(&Node) -> bool,
    mut fuse: impl FnMut(&mut Graph, &mut PassContext, NodeId) -> Result<bool, String>,
) -> Result<bool, PassError> {
    let mut changed = false;
    for id in g.node_ids() {
        if !g.contains(id) || !wanted(g.node(id)) {
            continue;
        }
        if fuse(g, cx, id).map_err(|reason| PassError::Node {
            pass,
            node: g.node(id).name.clone(),
            origin: g.node(id).origin_text(),
            reason,
        })? {
            changed = true;
            cx.count(counted);
        }
    }
    if changed {
        finish(g, cx, pass)?;
    }
    Ok(changed)
}

/// After a pass changed the graph: drops dead nodes and weights and re-infers
/// every type, so later passes see exact types.
pub fn finish(g: &mut Graph, cx: &mut PassContext, pass: &'static str) -> Result<(), PassError> {
    crate::dce::dce(g);
    crate::dce::gc_weights(g, cx.weights);
    infer_graph(g, Some(cx.weights)).map_err(|source| PassError::Infer { pass, source })?;
    Ok(())
}

/// True if every output of the nodes in `inner` is read only by nodes in `set`
/// and none is a graph output: the pattern may swallow them.
pub fn only_used_within(g: &Graph, inner: &[NodeId], set: &HashSet<NodeId>) -> bool {
    inner.iter().all(|&n| {
        (0..g.node(n).outputs.len()).all(|p| {
            let v = Value::new(n, p as u16);
            !g.outputs().iter().any(|o| o.value == v)
                && g.users_of(v).iter().all(|(u, _)| set.contains(u))
        })
    })
}

/// A float tensor of `dtype` and `dims` from f64 values.
pub fn float_tensor(dtype: DType, dims: &[usize], v: &[f64]) -> Option<Tensor> {
    rlx_ir::ops::values::float_tensor(dtype, dims, v)
}

/// Adds a constant (inline or a weight) and returns its value.
pub fn constant(
    g: &mut Graph,
    w: &mut Weights,
    base: &str,
    origin: Vec<String>,
    t: Tensor,
) -> Value {
    crate::fold::add_constant(g, w, base, origin, t)
}
