//! Common subexpression elimination (`cse`): two nodes with equal ops
//! (attributes included) on the same inputs become one, which keeps the union of
//! both origins. Equal constants and weight nodes of the same weight merge too.
//! Ops with subgraphs are left alone, and so are ops that are not functions of
//! their inputs (none in the op set today; the list is [`is_pure`]).

use std::collections::HashMap;

use rlx_ir::{Graph, NodeId, Op, Value};

use crate::manager::{Pass, PassContext, PassError};
use crate::rewrite::{finish, union_origin};

pub struct Cse;

const NAME: &str = "cse";

impl Pass for Cse {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let mut changed = false;
        for id in g.node_ids() {
            for sub in g.node_mut(id).op.subgraphs_mut() {
                changed |= cse(sub).map_err(|e| PassError::graph(NAME, e))? > 0;
            }
        }
        let n = cse(g).map_err(|e| PassError::graph(NAME, e))?;
        for _ in 0..n {
            cx.count("cse.merged");
        }
        if changed || n > 0 {
            finish(g, cx, NAME)?;
        }
        Ok(changed || n > 0)
    }
}

/// True for ops whose outputs depend only on their inputs and attributes.
pub fn is_pure(op: &Op) -> bool {
    !matches!(op, Op::Input(_)) && op.subgraphs().is_empty()
}

/// The hash key of a node: its op name and inputs (attributes compare exactly
/// among nodes with the same key).
type Key = (&'static str, Vec<Value>, String);

fn key(g: &Graph, id: NodeId) -> Key {
    let node = g.node(id);
    let extra = match &node.op {
        Op::Weight(w) => w.name.clone(),
        Op::Constant(c) => format!("{}", c.value.ty()),
        _ => String::new(),
    };
    (node.op.name(), g.inputs_of(id), extra)
}

fn same(g: &Graph, a: NodeId, b: NodeId) -> bool {
    let (x, y) = (g.node(a), g.node(b));
    if x.outputs != y.outputs {
        return false;
    }
    match (&x.op, &y.op) {
        (Op::Constant(p), Op::Constant(q)) => p.value.bit_eq(&q.value),
        (p, q) => p == q,
    }
}

/// Merges duplicates in topological order; returns how many nodes went away.
pub fn cse(g: &mut Graph) -> Result<usize, String> {
    let mut seen: HashMap<Key, Vec<NodeId>> = HashMap::new();
    let mut merged = 0;
    for id in g.topo_order().map_err(|e| e.to_string())? {
        if !is_pure(&g.node(id).op) {
            continue;
        }
        let k = key(g, id);
        let found = seen
            .get(&k)
            .and_then(|c| c.iter().copied().find(|&c| same(g, c, id)));
        match found {
            Some(keep) => {
                let origin = union_origin(g, &[keep, id]);
                g.node_mut(keep).origin = origin;
                for p in 0..g.node(id).outputs.len() {
                    g.replace_uses(Value::new(id, p as u16), Value::new(keep, p as u16))
                        .map_err(|e| e.to_string())?;
                }
                g.remove_node(id);
                merged += 1;
            }
            None => seen.entry(k).or_default().push(id),
        }
    }
    Ok(merged)
}
