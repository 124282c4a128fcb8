//! Inference and folding passes.
//!
//! - `infer` re-runs type and shape inference over the whole graph.
//! - `fold-shapes` replaces every node whose outputs inference already knows
//!   (shape arithmetic on known dims) with constants.
//! - `fold-constants` evaluates nodes whose inputs are all constants with the
//!   [`Evaluator`](crate::Evaluator), and inlines `if`s with a constant condition.

use std::collections::HashMap;

use rlx_ir::analysis::{infer_graph, infer_graph_seeded, Values};
use rlx_ir::ops::{Constant, Weight};
use rlx_ir::{Dim, Graph, KnownValue, Node, NodeId, Op, Shape, Tensor, Value, Weights};

use crate::manager::{Pass, PassContext, PassError};

/// Largest result (bytes) constant folding materializes.
const MAX_FOLD_BYTES: usize = 2 << 30;

pub struct Infer;

impl Pass for Infer {
    fn name(&self) -> &'static str {
        "infer"
    }
    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        infer_graph(g, Some(cx.weights)).map_err(|source| PassError::Infer {
            pass: self.name(),
            source,
        })?;
        Ok(false)
    }
}

/// Adds `t` as a constant node (inline when small, a weight otherwise).
pub fn add_constant(
    g: &mut Graph,
    weights: &mut Weights,
    base: &str,
    origin: Vec<String>,
    t: Tensor,
) -> Value {
    let inline = t.numel() <= 8 || (!t.dtype().is_float() && t.numel() <= 64);
    let ty = t.ty();
    let (op, name) = if inline {
        (Op::Constant(Constant { value: t }), g.unique_name(base))
    } else {
        let name = weights.unique_name(base);
        weights.insert(name.clone(), t);
        (Op::Weight(Weight { name: name.clone() }), name)
    };
    let id = g
        .add_node(Node::new(op, name, origin, vec![ty]), &[])
        .expect("a leaf has no inputs");
    Value::of(id)
}

/// The tensor of a constant or weight node.
pub fn leaf_tensor(g: &Graph, weights: &Weights, id: NodeId) -> Option<Tensor> {
    match &g.node(id).op {
        Op::Constant(c) => Some(c.value.clone()),
        Op::Weight(w) => weights.get(&w.name).cloned(),
        _ => None,
    }
}

pub struct FoldShapes;

impl Pass for FoldShapes {
    fn name(&self) -> &'static str {
        "fold-shapes"
    }
    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let values = infer_graph(g, Some(cx.weights)).map_err(|source| PassError::Infer {
            pass: self.name(),
            source,
        })?;
        let mut changed = fold_bodies(g, cx, &values)?;
        changed |= fold_known(g, cx, &values)?;
        if changed {
            // What the bodies now know can make the loops' types known.
            infer_graph(g, Some(cx.weights)).map_err(|source| PassError::Infer {
                pass: self.name(),
                source,
            })?;
            changed = true;
        }
        Ok(changed)
    }
}

fn graph_err(e: impl std::fmt::Display) -> PassError {
    PassError::Graph {
        pass: "fold-shapes",
        reason: e.to_string(),
    }
}

/// Replaces every node of `g` whose outputs `values` know by constants.
fn fold_known(g: &mut Graph, cx: &mut PassContext, values: &Values) -> Result<bool, PassError> {
    let mut changed = false;
    for id in g.topo_order().map_err(graph_err)? {
        let node = g.node(id);
        if node.op.is_leaf() {
            continue;
        }
        let n = node.outputs.len();
        let tensors: Option<Vec<Tensor>> = (0..n)
            .map(|p| {
                values
                    .get(&Value::new(id, p as u16))
                    .and_then(|v| v.to_tensor())
            })
            .collect();
        let Some(tensors) = tensors else { continue };
        let (name, origin) = (node.name.clone(), node.origin.clone());
        for (p, t) in tensors.into_iter().enumerate() {
            let c = add_constant(g, cx.weights, &name, origin.clone(), t);
            g.replace_uses(Value::new(id, p as u16), c)
                .map_err(graph_err)?;
        }
        changed = true;
    }
    if changed {
        crate::dce::dce(g);
    }
    Ok(changed)
}

/// Folds, in each branch and body, what its own inference knows from its
/// captures (the outer values' types, and their values where `values`, the
/// whole graph's inference, knows them). The inputs that change from one iteration to the
/// next (a loop's iteration number, condition and carried values, a scan's
/// states and slices) count as unknown whatever the body declares: a shape
/// read from one of them is not folded. A tf2onnx `map_fn` loop reads the
/// shape of its captured input to frame it; folded, the loop's types are
/// known and the model is planned ahead instead of run node by node.
/// One level deep: a nested body's captures may be such varying values.
fn fold_bodies(g: &mut Graph, cx: &mut PassContext, values: &Values) -> Result<bool, PassError> {
    let mut changed = false;
    for id in g.node_ids() {
        // Body inputs [0, varying) vary; body input k >= varying is outer
        // port k + offset.
        let (varying, offset) = match &g.node(id).op {
            Op::If(_) => (0, 1),
            Op::Loop(l) => (2 + usize::try_from(l.num_carried).unwrap_or(usize::MAX), 0),
            Op::Scan(s) => (
                usize::try_from(s.num_state.saturating_add(s.num_scan_inputs))
                    .unwrap_or(usize::MAX),
                0,
            ),
            _ => continue,
        };
        let seeds: HashMap<usize, KnownValue> = g
            .inputs_of(id)
            .into_iter()
            .enumerate()
            .filter_map(|(port, v)| {
                let k = port.checked_sub(offset)?;
                (k >= varying).then(|| values.get(&v).map(|kv| (k, kv.clone())))?
            })
            .collect();
        for sub in g.node_mut(id).op.subgraphs_mut() {
            let mut probe = sub.clone();
            let inputs = probe.inputs().to_vec();
            for (k, &i) in inputs.iter().enumerate().take(varying) {
                for t in &mut probe.node_mut(i).outputs {
                    let rank = t.shape.rank();
                    t.shape = Shape(
                        (0..rank)
                            .map(|d| Dim::sym(&format!("fold-shapes.varying.{k}.{d}")))
                            .collect(),
                    );
                }
            }
            // A body its own inference cannot type (the branch an `if` never
            // takes, say) keeps what it has.
            let Ok(values) = infer_graph_seeded(&mut probe, Some(cx.weights), &seeds) else {
                continue;
            };
            changed |= fold_known(sub, cx, &values)?;
        }
    }
    Ok(changed)
}

/// Runs `pass` over every subgraph of `g`'s nodes (branches and bodies,
/// which run the same kernels as the graph around them); true if any changed.
/// A body is not re-inferred on its own (that would lose what its captures'
/// known values say): the caller re-infers the whole graph, which refreshes
/// every body from its captures.
pub fn in_bodies(
    g: &mut Graph,
    cx: &mut PassContext,
    mut pass: impl FnMut(&mut Graph, &mut PassContext) -> Result<bool, PassError>,
) -> Result<bool, PassError> {
    let mut changed = false;
    for id in g.node_ids() {
        for sub in g.node_mut(id).op.subgraphs_mut() {
            changed |= pass(sub, cx)?;
        }
    }
    Ok(changed)
}

#[derive(Default)]
pub struct FoldConstants;

impl Pass for FoldConstants {
    fn name(&self) -> &'static str {
        "fold-constants"
    }
    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let changed = self.fold(g, cx)?;
        if changed {
            crate::dce::gc_weights(g, cx.weights);
            // Constant inputs can make data-dependent (`$`) dims known
            // downstream: refresh the stored types (bodies included).
            infer_graph(g, Some(cx.weights)).map_err(|source| PassError::Infer {
                pass: self.name(),
                source,
            })?;
        }
        Ok(changed)
    }
}

impl FoldConstants {
    /// Folds `g`, then its bodies. Weights are collected and types refreshed
    /// by the caller, which sees every graph.
    fn fold(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let mut changed = false;
        let order = g.topo_order().map_err(|e| PassError::Graph {
            pass: self.name(),
            reason: e.to_string(),
        })?;
        for id in order {
            if !g.contains(id) || g.node(id).op.is_leaf() {
                continue;
            }
            if let Op::If(_) = g.node(id).op {
                changed |=
                    inline_constant_if(g, cx.weights, id).map_err(|reason| PassError::Graph {
                        pass: self.name(),
                        reason,
                    })?;
                continue;
            }
            if !g.node(id).op.subgraphs().is_empty() {
                continue;
            }
            let Some(eval) = cx.evaluator else { continue };
            let ins = g.inputs_of(id);
            let tensors: Option<Vec<Tensor>> = ins
                .iter()
                .map(|v| leaf_tensor(g, cx.weights, v.node))
                .collect();
            let Some(tensors) = tensors else { continue };
            let out_bytes: Option<usize> = g.node(id).outputs.iter().map(|t| t.byte_size()).sum();
            if out_bytes.is_none_or(|b| b > MAX_FOLD_BYTES) {
                continue;
            }
            // A node the evaluator cannot run stays; running it fails the same way later.
            let Ok(outs) = eval.eval(g.node(id), &tensors) else {
                continue;
            };
            let (name, origin) = (g.node(id).name.clone(), g.node(id).origin.clone());
            for (p, t) in outs.into_iter().enumerate() {
                let c = add_constant(g, cx.weights, &name, origin.clone(), t);
                g.replace_uses(Value::new(id, p as u16), c)
                    .map_err(|e| PassError::Graph {
                        pass: self.name(),
                        reason: e.to_string(),
                    })?;
            }
            g.remove_node(id);
            changed = true;
        }
        if changed {
            crate::dce::dce(g);
        }
        Ok(in_bodies(g, cx, |sub, cx| self.fold(sub, cx))? || changed)
    }
}

/// Replaces an `if` whose condition is a constant by its taken branch.
fn inline_constant_if(g: &mut Graph, weights: &Weights, id: NodeId) -> Result<bool, String> {
    let ins = g.inputs_of(id);
    let Some(cond) = ins.first().and_then(|c| leaf_tensor(g, weights, c.node)) else {
        return Ok(false);
    };
    let Some([c]) = cond
        .to_i64_vec()
        .as_deref()
        .map(|v| <[i64; 1]>::try_from(v).ok())
        .flatten()
    else {
        return Ok(false);
    };
    let Op::If(op) = &g.node(id).op else {
        return Ok(false);
    };
    let branch = if c != 0 {
        op.then_branch.clone()
    } else {
        op.else_branch.clone()
    };
    let outs = g.inline(&branch, &ins[1..]).map_err(|e| e.to_string())?;
    let origin = g.node(id).origin.clone();
    for (p, v) in outs.into_iter().enumerate() {
        if g.get(v.node).is_some_and(|n| n.origin.is_empty()) {
            g.node_mut(v.node).origin = origin.clone();
        }
        g.replace_uses(Value::new(id, p as u16), v)
            .map_err(|e| e.to_string())?;
    }
    g.remove_node(id);
    Ok(true)
}
