//! Loops of a few known iterations, unrolled (`unroll-loops`).
//!
//! A `Loop` whose trip count is a constant and whose body returns its
//! condition unchanged (or constant true; `loop-trips` makes tf2onnx's
//! while-loops so once their count is known) runs its body a fixed number
//! of times. Where that is small, the body is inlined once per iteration:
//! iteration `t` reads constant `t` and `true`, the carried values the last
//! one returned and the captures; the loop's final carried values are the
//! last iteration's, and each scan output is the iterations' values stacked
//! on a new first axis. The body's nodes then run as planned kernels, fused
//! with what surrounds them, instead of through the loop's evaluation (a
//! `tf.map_fn` over a batch of one: one copy of its body).
//!
//! Only where trips x body nodes stays within [`MAX_NODES`] and at least one
//! iteration runs (an empty scan output keeps the loop).

use rlx_ir::ops::{Concat, Unsqueeze};
use rlx_ir::{Bytes, DType, Graph, NodeId, Op, Tensor, Value};

use crate::fold::{add_constant, leaf_tensor};
use crate::manager::{Pass, PassContext, PassError};
use crate::rewrite::{add_op, finish};

pub struct UnrollLoops;

const NAME: &str = "unroll-loops";

/// The most body nodes an unrolled loop may add (trips x body nodes).
const MAX_NODES: usize = 1024;

impl Pass for UnrollLoops {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let mut changed = false;
        for id in g.node_ids() {
            if !g.contains(id) {
                continue;
            }
            let Some(trips) = unrollable(g, cx, id) else {
                continue;
            };
            unroll(g, cx, id, trips).map_err(|reason| PassError::Node {
                pass: NAME,
                node: g.node(id).name.clone(),
                origin: g.node(id).origin_text(),
                reason,
            })?;
            cx.count("loop.unrolled");
            changed = true;
        }
        if changed {
            finish(g, cx, NAME)?;
        }
        Ok(changed)
    }
}

/// The one integer of a constant scalar or one-element value.
fn one_int(t: &Tensor) -> Option<i64> {
    match t.to_i64_vec()?.as_slice() {
        [x] => Some(*x),
        _ => None,
    }
}

/// The trip count of loop `id` where it is known, at least 1 and small
/// enough to unroll.
fn unrollable(g: &Graph, cx: &PassContext, id: NodeId) -> Option<usize> {
    let Op::Loop(l) = &g.node(id).op else {
        return None;
    };
    if !l.runs_full_trip() {
        return None;
    }
    let ins = g.inputs_of(id);
    let trips = one_int(&leaf_tensor(g, cx.weights, ins.first()?.node)?)?;
    let cond = one_int(&leaf_tensor(g, cx.weights, ins.get(1)?.node)?)?;
    let body_nodes = l.body.node_count();
    let trips = usize::try_from(trips).ok()?;
    (cond != 0 && trips >= 1 && trips.checked_mul(body_nodes)? <= MAX_NODES).then_some(trips)
}

/// Inlines loop `id`'s body `trips` times in its place.
fn unroll(g: &mut Graph, cx: &mut PassContext, id: NodeId, trips: usize) -> Result<(), String> {
    let Op::Loop(l) = &g.node(id).op else {
        return Err("not a loop".into());
    };
    let body = l.body.clone();
    let k = usize::try_from(l.num_carried).map_err(|_| "a negative carried count")?;
    let ins = g.inputs_of(id);
    let n_out = g.node(id).outputs.len();
    let scans = n_out
        .checked_sub(k)
        .ok_or("fewer outputs than carried values")?;
    let (name, origin) = (g.node(id).name.clone(), g.node(id).origin.clone());
    let mut carried: Vec<Value> = ins
        .get(2..2 + k)
        .ok_or("fewer inputs than carried values")?
        .to_vec();
    let captures: Vec<Value> = ins[2 + k..].to_vec();
    let yes =
        Tensor::new(DType::Bool, vec![], Bytes::copy_from(&[1u8])).map_err(|e| e.to_string())?;
    let cond = add_constant(g, cx.weights, &format!("{name}.cond"), origin.clone(), yes);
    let mut stacked: Vec<Vec<Value>> = vec![Vec::with_capacity(trips); scans];
    for t in 0..trips {
        let i = add_constant(
            g,
            cx.weights,
            &format!("{name}.i{t}"),
            origin.clone(),
            Tensor::scalar_i64(t as i64),
        );
        let mut args = vec![i, cond];
        args.extend(&carried);
        args.extend(&captures);
        let outs = g.inline(&body, &args).map_err(|e| e.to_string())?;
        if outs.len() != 1 + k + scans {
            return Err(format!(
                "the body returns {} values, the loop {}",
                outs.len(),
                1 + k + scans
            ));
        }
        carried = outs[1..1 + k].to_vec();
        for (j, &v) in outs[1 + k..].iter().enumerate() {
            stacked[j].push(v);
        }
    }
    let axis0 = add_constant(
        g,
        cx.weights,
        &format!("{name}.axis0"),
        origin.clone(),
        Tensor::from_i64(&[1], &[0]).map_err(|e| e.to_string())?,
    );
    let mut finals = carried;
    for (j, parts) in stacked.into_iter().enumerate() {
        // Named for the loop's scan output, not the loop: `compare` takes a
        // step whose origin is a node for that node's first output.
        let origin: Vec<String> = origin
            .iter()
            .map(|o| format!("{o} (scan output {j})"))
            .collect();
        let mut rows = Vec::with_capacity(parts.len());
        for v in parts {
            let u = add_op(
                g,
                cx.weights,
                Unsqueeze {},
                &format!("{name}.scan"),
                origin.clone(),
                &[v, axis0],
            )?;
            rows.push(Value::new(u, 0));
        }
        let v = match rows.as_slice() {
            [one] => *one,
            _ => Value::new(
                add_op(
                    g,
                    cx.weights,
                    Concat { axis: 0 },
                    &format!("{name}.scan"),
                    origin.clone(),
                    &rows,
                )?,
                0,
            ),
        };
        finals.push(v);
    }
    for (p, v) in finals.into_iter().enumerate() {
        g.replace_uses(Value::new(id, p as u16), v)
            .map_err(|e| e.to_string())?;
    }
    g.remove_node(id);
    Ok(())
}
