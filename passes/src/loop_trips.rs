//! While-loops with a trip count known at compile time (`loop-trips`).
//!
//! tf2onnx writes `tf.map_fn` and `tf.while_loop` as an ONNX `Loop` whose
//! body computes its own condition: `counter + 1 < n`, with the counters
//! carried and `n` a shape (the batch). The loop's scan outputs then have a
//! first dimension no type knows, so everything after the loop has
//! data-dependent shapes and the model runs node by node. Once the shapes
//! are bound, the condition usually depends on nothing but constants, the
//! iteration number and carried counters: the part of the body that
//! computes it (and the carried values it reads, and what computes those) is
//! run here, on the evaluator, iteration by iteration, until the condition
//! turns false or the trip limit `M` is reached. With the count `T` known,
//! the loop becomes `M = T` started with `cond = true` and a body returning
//! constant true: the same iterations (the body's condition held for every
//! one but the last, after which `M` stops it), and a trip count inference
//! knows.
//!
//! Only small values (at most [`MAX_ELEMENTS`] elements each) and at most
//! [`MAX_TRIPS`] iterations are simulated; a loop that needs more, reads a
//! value not known here, or holds a subgraph in its condition's part stays
//! as it is.

use std::collections::{HashMap, HashSet};

use rlx_ir::analysis::infer_graph;
use rlx_ir::{Bytes, DType, Graph, NodeId, Op, Tensor, Value, Weights};

use crate::fold::{add_constant, leaf_tensor};
use crate::manager::{Pass, PassContext, PassError};
use crate::target::Evaluator;

pub struct LoopTrips;

const NAME: &str = "loop-trips";

/// The most iterations simulated.
const MAX_TRIPS: i64 = 1 << 16;
/// The most elements of any value the simulation computes.
const MAX_ELEMENTS: usize = 4096;

impl Pass for LoopTrips {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let Some(eval) = cx.evaluator else {
            return Ok(false);
        };
        let values = infer_graph(g, Some(cx.weights))
            .map_err(|source| PassError::Infer { pass: NAME, source })?;
        let known = |g: &Graph, v: Value| -> Option<Tensor> {
            values
                .get(&v)
                .and_then(|k| k.to_tensor())
                .or_else(|| leaf_tensor(g, cx.weights, v.node))
        };
        let mut found = Vec::new();
        for id in g.node_ids() {
            let Op::Loop(l) = &g.node(id).op else {
                continue;
            };
            if l.runs_full_trip() {
                continue;
            }
            let ins = g.inputs_of(id);
            let outer: Vec<Option<Tensor>> = ins.iter().map(|&v| known(g, v)).collect();
            let carried = usize::try_from(l.num_carried).unwrap_or(usize::MAX);
            if let Some(trips) = trip_count(&l.body, carried, &outer, cx.weights, eval) {
                found.push((id, trips));
            }
        }
        if found.is_empty() {
            return Ok(false);
        }
        for (id, trips) in found {
            fix_trips(g, cx, id, trips).map_err(|reason| PassError::Node {
                pass: NAME,
                node: g.node(id).name.clone(),
                origin: g.node(id).origin_text(),
                reason,
            })?;
            cx.count("loop.trips");
        }
        crate::dce::dce(g);
        infer_graph(g, Some(cx.weights))
            .map_err(|source| PassError::Infer { pass: NAME, source })?;
        Ok(true)
    }
}

/// A scalar bool.
fn boolean(v: bool) -> Option<Tensor> {
    Tensor::new(DType::Bool, vec![], Bytes::copy_from(&[u8::from(v)])).ok()
}

/// Whether a one-element tensor is non-zero.
fn truth(t: &Tensor) -> Option<bool> {
    match t.to_i64_vec()?.as_slice() {
        [x] => Some(*x != 0),
        _ => None,
    }
}

/// The iterations a loop with `body` runs, given what is known of its
/// outer inputs `(M, cond, carried..., captures...)`; `None` where the
/// condition cannot be computed here.
fn trip_count(
    body: &Graph,
    carried: usize,
    outer: &[Option<Tensor>],
    weights: &Weights,
    eval: &dyn Evaluator,
) -> Option<i64> {
    let body_ins = body.inputs();
    let outs = body.outputs();
    if outs.len() < 1 + carried || body_ins.len() < 2 + carried {
        return None;
    }
    // The body's nodes the condition needs, and the carried values those
    // read (whose next values the body computes too), to a fixed point.
    let position: HashMap<NodeId, usize> =
        body_ins.iter().enumerate().map(|(k, &n)| (n, k)).collect();
    let mut needed: HashSet<NodeId> = HashSet::new();
    let mut roots = vec![outs.first()?.value.node];
    let mut carried_read: HashSet<usize> = HashSet::new();
    while let Some(n) = roots.pop() {
        if !needed.insert(n) {
            continue;
        }
        if let Some(&k) = position.get(&n) {
            if (2..2 + carried).contains(&k) && carried_read.insert(k - 2) {
                roots.push(outs[1 + k - 2].value.node);
            }
            continue;
        }
        if !body.node(n).op.subgraphs().is_empty() {
            return None;
        }
        roots.extend(body.inputs_of(n).into_iter().map(|v| v.node));
    }
    let order: Vec<NodeId> = body
        .topo_order()
        .ok()?
        .into_iter()
        .filter(|n| needed.contains(n) && !position.contains_key(n))
        .collect();
    // The body's inputs: 0 the iteration, 1 the condition, then carried
    // values and captures as the outer inputs give them.
    let max = match outer.first()? {
        None => None,
        Some(m) => match m.to_i64_vec()?.as_slice() {
            [m] => Some((*m).max(0)),
            _ => return None,
        },
    };
    let limit = max.map_or(MAX_TRIPS, |m| m.min(MAX_TRIPS));
    let mut state: HashMap<usize, Tensor> = HashMap::new();
    for k in 1..body_ins.len() {
        let is_read = k == 1 || (k >= 2 + carried) || carried_read.contains(&(k - 2));
        if k == 1 || (is_read && needed.contains(&body_ins[k])) {
            let t = outer.get(k)?.clone()?;
            if t.numel() > MAX_ELEMENTS {
                return None;
            }
            state.insert(k, t);
        }
    }
    let mut cond = truth(state.get(&1)?)?;
    let mut i = 0i64;
    while cond {
        if i >= limit {
            // M stops it; past the simulation's limit nothing is known.
            return (max == Some(limit)).then_some(limit);
        }
        let mut vals: HashMap<Value, Tensor> = HashMap::new();
        vals.insert(Value::of(body_ins[0]), Tensor::scalar_i64(i));
        for (&k, t) in &state {
            vals.insert(Value::of(body_ins[k]), t.clone());
        }
        for &n in &order {
            let node = body.node(n);
            let ins: Vec<Tensor> = body
                .inputs_of(n)
                .iter()
                .map(|v| vals.get(v).cloned())
                .collect::<Option<_>>()?;
            let outs = if node.op.is_leaf() {
                vec![leaf_tensor(body, weights, n)?]
            } else {
                eval.eval(node, &ins).ok()?
            };
            if outs.iter().any(|t| t.numel() > MAX_ELEMENTS) {
                return None;
            }
            for (p, t) in outs.into_iter().enumerate() {
                vals.insert(Value::new(n, p as u16), t);
            }
        }
        cond = truth(vals.get(&outs.first()?.value)?)?;
        for &c in &carried_read {
            let next = vals.get(&outs[1 + c].value)?.clone();
            state.insert(2 + c, next);
        }
        i += 1;
    }
    Some(i)
}

/// Makes the loop `id` run `trips` times: `M = trips`, `cond = true` and a
/// body that returns constant true.
fn fix_trips(g: &mut Graph, cx: &mut PassContext, id: NodeId, trips: i64) -> Result<(), String> {
    let (name, origin) = (g.node(id).name.clone(), g.node(id).origin.clone());
    let m = add_constant(
        g,
        cx.weights,
        &format!("{name}.trips"),
        origin.clone(),
        Tensor::scalar_i64(trips),
    );
    let yes = boolean(true).ok_or("a bool constant")?;
    let c = add_constant(
        g,
        cx.weights,
        &format!("{name}.cond"),
        origin.clone(),
        yes.clone(),
    );
    g.set_input(id, 0, m).map_err(|e| e.to_string())?;
    g.set_input(id, 1, c).map_err(|e| e.to_string())?;
    let Op::Loop(l) = &mut g.node_mut(id).op else {
        return Err("not a loop".into());
    };
    let body = &mut l.body;
    let t = add_constant(body, cx.weights, "cond.true", origin, yes);
    let first = body
        .outputs_mut()
        .first_mut()
        .ok_or("a loop body without outputs")?;
    first.value = t;
    crate::dce::dce(body);
    Ok(())
}
