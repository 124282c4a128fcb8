//! Legalization (`legalize`): every node the target's [`Backend::supports`]
//! rejects is decomposed ([`crate::decompose`]) into nodes it runs; the new
//! nodes are checked in turn. Whatever remains is reported as one error listing
//! every node with its reason, never dropped; with [`PassContext::fallback`]
//! (the user asked for a CPU fallback) it stays in the graph for the session
//! to run on the CPU, counted as `fallback.<op>`. Subgraphs are legalized too, but
//! what stays unsupported in a body fails when (if) it runs.
//! Without a backend in the context the pass does nothing.
//!
//! On a graph whose dims are still symbolic, a rejected node whose value
//! follows from shapes, constants and shape-determining inputs alone (`shape`,
//! arithmetic on it, `constant_of_shape`, `range` of input scalars) is left
//! alone: specialization binds the dims and those inputs' values, and folding
//! then removes it before the target's schedule is planned.

use std::collections::HashSet;

use rlx_ir::{Graph, NodeId, Op, TensorType, Value, Weights};

use crate::decompose::decompose;
use crate::manager::{Pass, PassContext, PassError, UnsupportedNode};
use crate::rewrite::finish;
use crate::target::Backend;

pub struct Legalize;

const NAME: &str = "legalize";

impl Pass for Legalize {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let Some(backend) = cx.backend else {
            return Ok(false);
        };
        let mut bad = Vec::new();
        let mut counts = Vec::new();
        let changed = legalize(g, cx.weights, backend, &mut bad, &mut counts)
            .map_err(|e| PassError::graph(NAME, e))?;
        for c in counts {
            cx.count(&format!("decomposed.{c}"));
        }
        if cx.fallback {
            for n in &bad {
                cx.count(&format!("fallback.{}", n.op));
            }
        } else if !bad.is_empty() {
            return Err(PassError::Unsupported {
                target: backend.name().to_string(),
                nodes: bad,
            });
        }
        if changed {
            finish(g, cx, NAME)?;
        }
        Ok(changed)
    }
}

fn input_types(g: &Graph, id: NodeId) -> Vec<TensorType> {
    g.inputs_of(id).iter().map(|v| g.ty(*v).clone()).collect()
}

fn unsupported(g: &Graph, id: NodeId, reason: String) -> UnsupportedNode {
    let n = g.node(id);
    UnsupportedNode {
        node: n.name.clone(),
        op: n.op.name().to_string(),
        origin: n.origin_text(),
        reason,
    }
}

/// Legalizes `g` (and its subgraphs); unsupported nodes go to `bad`, the op
/// names of decomposed nodes to `done`.
fn legalize(
    g: &mut Graph,
    w: &mut Weights,
    backend: &dyn Backend,
    bad: &mut Vec<UnsupportedNode>,
    done: &mut Vec<&'static str>,
) -> Result<bool, String> {
    let mut changed = false;
    let reported = bad.len();
    for id in g.node_ids() {
        if g.node(id).op.subgraphs().is_empty() {
            continue;
        }
        let mut op = g.node(id).op.clone();
        let mut sub_changed = false;
        // A body node that stays unsupported fails only if it runs (a branch
        // may never be taken), as before legalization existed.
        let mut ignored = Vec::new();
        for sub in op.subgraphs_mut() {
            sub_changed |= legalize(sub, w, backend, &mut ignored, done)?;
        }
        if sub_changed {
            g.node_mut(id).op = op;
            changed = true;
        }
    }
    // Decompositions may produce nodes that need decomposing in turn; the
    // last round's rejections are the nodes that stay unsupported.
    for _ in 0..8 {
        bad.truncate(reported);
        let mut round = false;
        let later = foldable_after_binding(g).map_err(|e| e.to_string())?;
        for id in g.topo_order().map_err(|e| e.to_string())? {
            let node = g.node(id);
            if node.op.is_leaf() {
                continue;
            }
            let Err(reason) = backend.supports(node, &input_types(g, id)) else {
                continue;
            };
            if later.contains(&id) {
                continue;
            }
            let op = node.op.name();
            match decompose(g, w, id) {
                Ok(values) => {
                    for (p, v) in values.into_iter().enumerate() {
                        g.replace_uses(Value::new(id, p as u16), v)
                            .map_err(|e| e.to_string())?;
                    }
                    g.remove_node(id);
                    done.push(op);
                    round = true;
                }
                Err(why) => {
                    let r = if why.starts_with("no decomposition") {
                        reason.to_string()
                    } else {
                        format!("{reason}; {why}")
                    };
                    bad.push(unsupported(g, id, r));
                }
            }
        }
        changed |= round;
        if !round {
            break;
        }
    }
    Ok(changed)
}

/// On a graph with symbolic dims, the nodes whose values depend on shapes,
/// constants and the inputs that determine shapes (bound per run before
/// planning) only; empty once every dim is known.
fn foldable_after_binding(g: &Graph) -> Result<HashSet<NodeId>, rlx_ir::graph::GraphError> {
    let mut set = HashSet::new();
    let symbolic = g
        .node_ids()
        .into_iter()
        .any(|id| g.node(id).outputs.iter().any(|t| !t.shape.is_known()));
    if !symbolic {
        return Ok(set);
    }
    let bound: HashSet<NodeId> = rlx_ir::analysis::value_inputs(g)
        .into_iter()
        .filter_map(|i| g.inputs().get(i).copied())
        .collect();
    for id in g.topo_order()? {
        let node = g.node(id);
        let yes = match node.op {
            Op::Constant(_) | Op::Weight(_) | Op::ShapeOf(_) | Op::Size(_) => true,
            Op::Input(_) => bound.contains(&id),
            _ => {
                let ins = g.inputs_of(id);
                !ins.is_empty()
                    && node.op.subgraphs().is_empty()
                    && ins.iter().all(|v| set.contains(&v.node))
            }
        };
        if yes {
            set.insert(id);
        }
    }
    Ok(set)
}

/// How a target runs one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    Native,
    /// Runs after decomposition into these ops.
    Decomposed(Vec<String>),
    /// Not run by the target, and need not be: its value follows from
    /// shapes and shape-determining inputs, so it folds to a constant once
    /// a run's input shapes bind the symbolic dims (as `legalize` allows).
    FoldsWhenBound,
    Unsupported(String),
}

/// Per node of `g` (top level, topological order): name, op, origin and how
/// `backend` runs it.
pub fn classify(
    g: &Graph,
    w: &Weights,
    backend: &dyn Backend,
) -> Vec<(String, String, String, Support)> {
    let mut out = Vec::new();
    let foldable = foldable_after_binding(g).unwrap_or_default();
    for id in g.topo_order().unwrap_or_else(|_| g.node_ids()) {
        let node = g.node(id);
        if node.op.is_leaf() {
            continue;
        }
        let status = match backend.supports(node, &input_types(g, id)) {
            Ok(()) => Support::Native,
            Err(_) if foldable.contains(&id) => Support::FoldsWhenBound,
            Err(reason) => {
                let (mut g2, mut w2) = (g.clone(), w.clone());
                let before: std::collections::HashSet<NodeId> = g2.node_ids().into_iter().collect();
                match decompose(&mut g2, &mut w2, id) {
                    Err(why) => Support::Unsupported(format!("{reason}; {why}")),
                    Ok(_) => {
                        let new: Vec<NodeId> = g2
                            .node_ids()
                            .into_iter()
                            .filter(|n| !before.contains(n))
                            .collect();
                        let mut ops = Vec::new();
                        let mut missing = None;
                        for n in new {
                            let nn = g2.node(n);
                            if nn.op.is_leaf() {
                                continue;
                            }
                            if let Err(r) = backend.supports(nn, &input_types(&g2, n)) {
                                missing = Some(format!(
                                    "{reason}; its part `{}` is unsupported too: {r}",
                                    nn.op.name()
                                ));
                            }
                            ops.push(nn.op.name().to_string());
                        }
                        match missing {
                            Some(m) => Support::Unsupported(m),
                            None => Support::Decomposed(ops),
                        }
                    }
                }
            }
        };
        out.push((
            node.name.clone(),
            node.op.name().to_string(),
            node.origin_text(),
            status,
        ));
    }
    out
}
