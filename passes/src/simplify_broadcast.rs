//! Broadcasts moved late, part of `simplify`. An identity whose constant only
//! broadcasts (`and(true, x)` with a larger all-true constant, `x * 1` with a
//! larger one) becomes an `expand` of `x`; an `expand` feeding an elementwise
//! op is dropped where the op's own broadcasting gives the same shape, and
//! otherwise moves past the op, so that the op runs on the smaller tensor.
//!
//! Exported attention masks are the case in point: `torch.export` writes a
//! padding mask as `and(ones[1, 1, queries, 1], pad[batch, 1, 1, keys])`,
//! then `where(mask, 0, -max)` over `[batch, 1, queries, keys]` and an add to
//! the scores. After these rules the bias is `[batch, 1, 1, keys]` (one value
//! a key, as the TorchScript exporter writes it), the attention kernel reads
//! one bias per key, and no `queries x keys` tensor is built each run.

use rlx_ir::ops::{BinaryKind, Expand, LogicalKind};
use rlx_ir::{Graph, NodeId, Op, Tensor, Value};

use crate::manager::PassContext;
use crate::rewrite::{add_op, constant, remove_dead, replace_root, splat, union_origin};

/// The operand a two-input node passes through unchanged, its other operand
/// being the op's identity (a constant splat of the output's dtype):
/// `x + 0`, `0 + x`, `x - 0`, `x * 1`, `1 * x`, `x / 1`, `and(true, x)`,
/// `or(false, x)`, `xor(false, x)`. The operand may be smaller than the
/// output (the constant broadcasts it).
pub(crate) fn identity_operand(g: &Graph, cx: &PassContext, id: NodeId) -> Option<Value> {
    let node = g.node(id);
    let ins = g.inputs_of(id);
    let [a, c] = ins[..] else { return None };
    let out = node.outputs.first()?.dtype;
    let w = &*cx.weights;
    let is = |v: Value, k: f64| g.ty(v).dtype == out && splat(g, w, v) == Some(k);
    let keep = match &node.op {
        Op::Binary(b) => match b.kind {
            BinaryKind::Add if is(c, 0.0) => a,
            BinaryKind::Add if is(a, 0.0) => c,
            BinaryKind::Sub if is(c, 0.0) => a,
            BinaryKind::Mul if is(c, 1.0) => a,
            BinaryKind::Mul if is(a, 1.0) => c,
            BinaryKind::Div if is(c, 1.0) => a,
            _ => return None,
        },
        Op::Logical(l) => {
            let unit = if l.kind == LogicalKind::And { 1.0 } else { 0.0 };
            if is(c, unit) {
                a
            } else if is(a, unit) {
                c
            } else {
                return None;
            }
        }
        _ => return None,
    };
    (g.ty(keep).dtype == out).then_some(keep)
}

/// `x` broadcast to the known shape of `id`'s output: `id` becomes
/// `expand(x, shape)`. False where the shape is not known.
pub(crate) fn expand_in_place(
    g: &mut Graph,
    cx: &mut PassContext,
    id: NodeId,
    x: Value,
) -> Result<bool, String> {
    let Some(dims) = g.node(id).outputs[0].shape.as_known() else {
        return Ok(false);
    };
    let shape = shape_value(g, cx, id, &dims)?;
    let origin = g.node(id).origin.clone();
    replace_root(g, cx.weights, id, Expand {}, &[x, shape], origin)?;
    Ok(true)
}

fn shape_value(
    g: &mut Graph,
    cx: &mut PassContext,
    id: NodeId,
    dims: &[usize],
) -> Result<Value, String> {
    let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    let t = Tensor::from_i64(&[dims.len()], &dims).map_err(|e| e.to_string())?;
    let name = format!("{}.shape", g.node(id).name);
    let origin = g.node(id).origin.clone();
    Ok(constant(g, cx.weights, &name, origin, t))
}

/// Ops that compute each output element from the broadcast elements of
/// their inputs at the same index, and nothing else.
fn elementwise(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Logical(_) | Op::Where(_) | Op::Cast(_)
    )
}

/// Numpy broadcasting of known shapes; `None` where they do not broadcast.
fn broadcast(shapes: &[Vec<usize>]) -> Option<Vec<usize>> {
    let rank = shapes.iter().map(Vec::len).max()?;
    let mut out = vec![1usize; rank];
    for s in shapes {
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + i];
            match (*o, d) {
                (a, b) if a == b => {}
                (1, b) => *o = b,
                (_, 1) => {}
                _ => return None,
            }
        }
    }
    Some(out)
}

/// An elementwise node reading an `expand`: the expand's input read instead
/// where the node's broadcasting gives its output shape anyway
/// (`simplify.absorb-expand`); else the node computed on the unexpanded
/// operands and its result expanded (`simplify.sink-expand`), when that is
/// fewer elements. Known shapes only.
pub(crate) fn sink_expand(
    g: &mut Graph,
    cx: &mut PassContext,
    id: NodeId,
) -> Result<Option<&'static str>, String> {
    let node = g.node(id);
    if !elementwise(&node.op) || node.outputs.len() != 1 {
        return Ok(None);
    }
    let Some(out) = node.outputs[0].shape.as_known() else {
        return Ok(None);
    };
    let ins = g.inputs_of(id);
    let source = |v: Value| match g.node(v.node).op {
        Op::Expand(_) => Some(g.inputs_of(v.node)[0]),
        _ => None,
    };
    if ins.iter().all(|&v| source(v).is_none()) {
        return Ok(None);
    }
    let known = |vals: &[Value]| -> Option<Vec<Vec<usize>>> {
        vals.iter().map(|&v| g.ty(v).shape.as_known()).collect()
    };
    if known(&ins).is_none() {
        return Ok(None);
    }
    // Drop each expand the node's own broadcasting makes up for.
    let mut kept = ins.clone();
    let mut absorbed = Vec::new();
    for (i, &v) in ins.iter().enumerate() {
        let Some(x) = source(v) else { continue };
        let Some(xs) = g.ty(x).shape.as_known() else {
            continue;
        };
        let mut trial: Vec<Vec<usize>> = kept
            .iter()
            .map(|&k| g.ty(k).shape.as_known().unwrap_or_default())
            .collect();
        trial[i] = xs;
        if broadcast(&trial).as_deref() == Some(&out[..]) && g.ty(x).dtype == g.ty(v).dtype {
            kept[i] = x;
            absorbed.push(v.node);
        }
    }
    if !absorbed.is_empty() {
        for (port, (&k, &v)) in kept.iter().zip(&ins).enumerate() {
            if k != v {
                g.set_input(id, port, k).map_err(|e| e.to_string())?;
            }
        }
        remove_dead(g, &absorbed);
        return Ok(Some("simplify.absorb-expand"));
    }
    // Every expand's input in its place: the node on fewer elements, then
    // one expand of its result.
    let small: Vec<Value> = ins.iter().map(|&v| source(v).unwrap_or(v)).collect();
    let Some(small_shapes) = known(&small) else {
        return Ok(None);
    };
    let Some(shape) = broadcast(&small_shapes) else {
        return Ok(None);
    };
    let numel = |d: &[usize]| d.iter().try_fold(1usize, |n, &x| n.checked_mul(x));
    let smaller = matches!((numel(&shape), numel(&out)), (Some(a), Some(b)) if a < b);
    if !smaller || broadcast(&[shape.clone(), out.clone()]) != Some(out) {
        return Ok(None);
    }
    let (op, name, origin) = (node.op.clone(), node.name.clone(), node.origin.clone());
    let expands: Vec<NodeId> = ins
        .iter()
        .filter(|v| source(**v).is_some())
        .map(|v| v.node)
        .collect();
    let inner = add_op(g, cx.weights, op, &name, origin, &small)?;
    // The expand that now ends the chain stands for the ones it replaces.
    let mut merged = expands.clone();
    merged.push(id);
    g.node_mut(id).origin = union_origin(g, &merged);
    if !expand_in_place(g, cx, id, Value::of(inner))? {
        remove_dead(g, &[inner]);
        return Ok(None);
    }
    remove_dead(g, &expands);
    Ok(Some("simplify.sink-expand"))
}
