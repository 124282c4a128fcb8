//! Dead-code elimination: removes nodes no graph output depends on (graph
//! inputs stay), recursively in subgraphs, and drops unreferenced weights.
//! A split some of whose pieces nobody reads, over more than one row (its
//! pieces strided: copies, not views), becomes slices of the pieces read (a
//! packed QKV projection's split after attention reads Q in place: the Q
//! piece was copied for nothing).

use std::collections::HashSet;

use rlx_ir::{Graph, NodeId, Op, Tensor, Value, Weights};

use crate::manager::{Pass, PassContext, PassError};
use crate::rewrite::{add_op, constant};

pub struct Dce;

impl Pass for Dce {
    fn name(&self) -> &'static str {
        "dce"
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let mut changed = dce(g);
        changed |= narrow_splits(g, cx.weights);
        changed |= dce(g);
        gc_weights(g, cx.weights);
        Ok(changed)
    }
}

/// Replaces each split some of whose pieces no node and no graph output
/// reads by one `slice` a piece read (static sizes along the axis only);
/// returns whether any was replaced.
fn narrow_splits(g: &mut Graph, w: &mut Weights) -> bool {
    let outputs: HashSet<Value> = g.outputs().iter().map(|o| o.value).collect();
    let mut changed = false;
    for id in g.node_ids() {
        let Op::Split(sp) = &g.node(id).op else {
            continue;
        };
        let node = g.node(id);
        let n = node.outputs.len();
        let read: Vec<bool> = (0..n)
            .map(|i| {
                let v = Value::new(id, i as u16);
                outputs.contains(&v) || !g.users_of(v).is_empty()
            })
            .collect();
        if read.iter().all(|r| *r) || !read.iter().any(|r| *r) {
            continue;
        }
        let Some(x) = g.input(id, 0) else {
            continue;
        };
        let dims = g.node(x.node).outputs[x.port as usize]
            .shape
            .dims()
            .to_vec();
        let axis = if sp.axis < 0 {
            sp.axis + dims.len() as i64
        } else {
            sp.axis
        };
        let Ok(a) = usize::try_from(axis) else {
            continue;
        };
        // Pieces of one run each (a single row before the axis) can be views
        // of the input (the memory plan's `split_in_place`): left as they are.
        let outer: Option<i64> = dims.get(..a).and_then(|d| {
            d.iter().try_fold(1i64, |p, d| match d {
                rlx_ir::Dim::Known(d) => p.checked_mul(*d),
                _ => None,
            })
        });
        if outer.is_none_or(|o| o <= 1) {
            continue;
        }
        let sizes: Option<Vec<i64>> = node
            .outputs
            .iter()
            .map(|t| match t.shape.dims().get(a) {
                Some(rlx_ir::Dim::Known(d)) => Some(*d),
                _ => None,
            })
            .collect();
        let Some(sizes) = sizes else {
            continue;
        };
        let (name, origin) = (node.name.clone(), node.origin.clone());
        let mut start = 0i64;
        let mut done = true;
        let mut pieces = Vec::new();
        for (i, &len) in sizes.iter().enumerate() {
            if read[i] {
                pieces.push((i, start, start + len));
            }
            start += len;
        }
        let mut made = Vec::new();
        for (i, from, to) in pieces {
            let ints = |v: i64| Tensor::from_i64(&[1], &[v]).ok();
            let (Some(s0), Some(e0), Some(ax)) = (ints(from), ints(to), ints(axis)) else {
                done = false;
                break;
            };
            let base = format!("{name}.piece{i}");
            let s0 = constant(g, w, &format!("{base}.starts"), origin.clone(), s0);
            let e0 = constant(g, w, &format!("{base}.ends"), origin.clone(), e0);
            let ax = constant(g, w, &format!("{base}.axes"), origin.clone(), ax);
            match add_op(
                g,
                w,
                rlx_ir::ops::Slice {},
                &base,
                origin.clone(),
                &[x, s0, e0, ax],
            ) {
                Ok(s) if g.node(s).outputs[0] == g.node(id).outputs[i] => made.push((i, s)),
                Ok(s) => {
                    g.remove_node(s);
                    done = false;
                    break;
                }
                Err(_) => {
                    done = false;
                    break;
                }
            }
        }
        if !done {
            for (_, s) in made {
                g.remove_node(s);
            }
            continue;
        }
        for (i, s) in made {
            if g.replace_uses(Value::new(id, i as u16), Value::new(s, 0))
                .is_ok()
            {
                changed = true;
            }
        }
    }
    changed
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
