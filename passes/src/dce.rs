//! Dead-code elimination: removes nodes no graph output depends on (graph
//! inputs stay), recursively in subgraphs, and drops unreferenced weights.

use std::collections::HashSet;

use rlx_ir::{Graph, NodeId, Op, Weights};

use crate::manager::{Pass, PassContext, PassError};

pub struct Dce;

impl Pass for Dce {
    fn name(&self) -> &'static str {
        "dce"
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let changed = dce(g);
        gc_weights(g, cx.weights);
        Ok(changed)
    }
}

/// Removes dead nodes; returns whether any were removed.
pub fn dce(g: &mut Graph) -> bool {
    let mut live: HashSet<NodeId> = HashSet::new();
    let mut work: Vec<NodeId> = g.outputs().iter().map(|o| o.value.node).collect();
    while let Some(n) = work.pop() {
        if live.insert(n) {
            work.extend(g.inputs_of(n).into_iter().map(|v| v.node));
        }
    }
    let inputs: HashSet<NodeId> = g.inputs().iter().copied().collect();
    let dead: Vec<NodeId> = g
        .node_ids()
        .into_iter()
        .filter(|n| !live.contains(n) && !inputs.contains(n))
        .collect();
    let mut changed = !dead.is_empty();
    for n in dead {
        g.remove_node(n);
    }
    for id in g.node_ids() {
        for sub in g.node_mut(id).op.subgraphs_mut() {
            changed |= dce(sub);
        }
    }
    changed
}

fn weight_names(g: &Graph, out: &mut HashSet<String>) {
    for id in g.node_ids() {
        let n = g.node(id);
        if let Op::Weight(w) = &n.op {
            out.insert(w.name.clone());
        }
        for sub in n.op.subgraphs() {
            weight_names(sub, out);
        }
    }
}

/// Drops weights no `weight` node refers to.
pub fn gc_weights(g: &Graph, weights: &mut Weights) {
    let mut used = HashSet::new();
    weight_names(g, &mut used);
    weights.retain(|n| used.contains(n));
}
