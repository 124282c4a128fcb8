//! Algebraic simplification (`simplify`): ops that change nothing go away,
//! chains collapse.
//!
//! - no-op `reshape`/`flatten`/`squeeze`/`unsqueeze`/`expand`/`cast`, identity
//!   `transpose`, one-input `concat`;
//! - `x*1`, `1*x`, `x/1`, `x+0`, `0+x`, `x-0`, `and(true, x)`, `or(false, x)`,
//!   `xor(false, x)`; where the constant broadcasts `x`, an `expand` of `x`;
//! - an `expand` into an elementwise op dropped where the op broadcasts anyway,
//!   else moved past the op (`simplify_broadcast`);
//! - `transpose(transpose(x))` -> one transpose (or `x`);
//! - a `transpose` that moves only dims of size 1 -> a `reshape` (a view);
//! - `reshape(transpose(reshape(x)))` where the inner reshape merges leading
//!   dims, the transpose keeps the merged dim first and the outer reshape
//!   splits it again -> `transpose(reshape(x))` with the reshape a view (the
//!   batched `[B*H, S, D]` transposes of exported attention become 4-D ones);
//! - chains of views (`reshape`, `flatten`, `squeeze`, `unsqueeze`) -> one
//!   `reshape`, or `x` when the shape comes back (a squeeze/unsqueeze pair);
//! - `cast(cast(x))` -> one cast when the inner cast loses nothing;
//! - constant affine chains -> one multiply-add (`simplify_affine`);
//! - a `gather`/`gather_nd` whose constant indices enumerate its data in
//!   order -> a `reshape` (`simplify_gather`);
//! - a `matmul` of a one-hot matrix (`cast(equal(ids, range))` or a
//!   `one_hot` op) with a constant table -> a `gather` of the table's rows
//!   (`simplify_one_hot`);
//! - `dequantize(quantize(x))` with one scale and zero point, where nothing
//!   else reads the quantized value -> the same rounding as f32 arithmetic
//!   that joins elementwise regions (`simplify_qdq`).

use rlx_ir::analysis::infer_graph;
use rlx_ir::ops::{Binary, BinaryKind, Reshape, Transpose};
use rlx_ir::{DType, Graph, NodeId, Op, Tensor, Value};

use crate::manager::{Pass, PassContext, PassError};
use crate::rewrite::{add_op, constant, remove_dead, replace_root, splat};
use crate::simplify_broadcast as broadcasts;

pub struct Simplify;

const NAME: &str = "simplify";

impl Pass for Simplify {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let changed = simplify_graph(g, cx)?;
        if changed {
            crate::dce::gc_weights(g, cx.weights);
            infer_graph(g, Some(cx.weights))
                .map_err(|source| PassError::Infer { pass: NAME, source })?;
        }
        Ok(changed)
    }
}

/// Simplifies `g`, then its bodies (whose identities may hide a loop-carried
/// value the body passes through). Weights are collected and types refreshed
/// by the caller.
fn simplify_graph(g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
    let mut changed = false;
    for _ in 0..8 {
        let mut round = false;
        for id in g.topo_order().map_err(|e| PassError::graph(NAME, e))? {
            if !g.contains(id) {
                continue;
            }
            let what = simplify_node(g, cx, id).map_err(|reason| PassError::Node {
                pass: NAME,
                node: g.get(id).map_or(String::new(), |n| n.name.clone()),
                origin: g.get(id).map_or(String::new(), |n| n.origin_text()),
                reason,
            })?;
            if let Some(what) = what {
                cx.count(what);
                round = true;
            }
        }
        changed |= round;
        if !round {
            break;
        }
    }
    if changed {
        crate::dce::dce(g);
    }
    Ok(crate::fold::in_bodies(g, cx, simplify_graph)? || changed)
}

/// Replaces every use of `id`'s output by `v` and drops `id` if dead.
fn forward(g: &mut Graph, id: NodeId, v: Value) -> Result<(), String> {
    g.replace_uses(Value::of(id), v)
        .map_err(|e| e.to_string())?;
    remove_dead(g, &[id]);
    Ok(())
}

fn is_view(op: &Op) -> bool {
    matches!(
        op,
        Op::Reshape(_) | Op::Flatten(_) | Op::Squeeze(_) | Op::Unsqueeze(_)
    )
}

/// Simplifies one node; returns the name of the rule that applied.
fn simplify_node(
    g: &mut Graph,
    cx: &mut PassContext,
    id: NodeId,
) -> Result<Option<&'static str>, String> {
    let node = g.node(id);
    if node.outputs.len() != 1 || node.op.is_leaf() {
        return Ok(None);
    }
    let ins = g.inputs_of(id);
    let Some(&x) = ins.first() else {
        return Ok(None);
    };
    let out = node.outputs[0].clone();
    let same_as_x = *g.ty(x) == out;
    if let Some(v) = broadcasts::identity_operand(g, cx, id) {
        if *g.ty(v) == out {
            forward(g, id, v)?;
            return Ok(Some("simplify.identity"));
        }
        if broadcasts::expand_in_place(g, cx, id, v)? {
            return Ok(Some("simplify.identity-broadcast"));
        }
    }
    if let Some(rule) = broadcasts::sink_expand(g, cx, id)? {
        return Ok(Some(rule));
    }
    let node = g.node(id);
    match &node.op {
        Op::Transpose(t) => {
            if t.perm.iter().enumerate().all(|(i, p)| *p == i as i64) && same_as_x {
                forward(g, id, x)?;
                return Ok(Some("simplify.identity-transpose"));
            }
            if let (Some(from), Some(to)) = (g.ty(x).shape.as_known(), out.shape.as_known()) {
                if moves_only_units(&from, &t.perm) {
                    let origin = g.node(id).origin.clone();
                    let name = g.node(id).name.clone();
                    let shape = shape_constant(g, cx, &name, origin.clone(), &to)?;
                    let op = Reshape { allowzero: false };
                    replace_root(g, cx.weights, id, op, &[x, shape], origin)?;
                    return Ok(Some("simplify.unit-transpose"));
                }
            }
            if let Op::Transpose(inner) = &g.node(x.node).op {
                let (p1, p2) = (inner.perm.clone(), t.perm.clone());
                let Some(perm) = p2
                    .iter()
                    .map(|&i| usize::try_from(i).ok().and_then(|i| p1.get(i).copied()))
                    .collect::<Option<Vec<i64>>>()
                else {
                    return Ok(None);
                };
                let src = g.inputs_of(x.node)[0];
                let origin = merged(g, &[x.node, id]);
                replace_root(g, cx.weights, id, Transpose { perm }, &[src], origin)?;
                remove_dead(g, &[x.node]);
                return Ok(Some("simplify.transpose-chain"));
            }
        }
        op if is_view(op) => {
            if same_as_x {
                forward(g, id, x)?;
                return Ok(Some("simplify.noop-view"));
            }
            if matches!(op, Op::Reshape(_)) && batched_transpose(g, cx, id, x)? {
                return Ok(Some("simplify.batched-transpose"));
            }
            let inner = g.node(x.node);
            if is_view(&inner.op) && inner.outputs.len() == 1 {
                let src = g.inputs_of(x.node)[0];
                if *g.ty(src) == out {
                    forward(g, id, src)?;
                    remove_dead(g, &[x.node]);
                    return Ok(Some("simplify.view-pair"));
                }
                if let Some(dims) = out.shape.as_known() {
                    let shape: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
                    let t = Tensor::from_i64(&[shape.len()], &shape).map_err(|e| e.to_string())?;
                    let origin = merged(g, &[x.node, id]);
                    let name = g.node(id).name.clone();
                    let s = constant(g, cx.weights, &format!("{name}.shape"), origin.clone(), t);
                    replace_root(
                        g,
                        cx.weights,
                        id,
                        Reshape { allowzero: false },
                        &[src, s],
                        origin,
                    )?;
                    remove_dead(g, &[x.node]);
                    return Ok(Some("simplify.view-chain"));
                }
            }
        }
        Op::Expand(_) if same_as_x => {
            forward(g, id, x)?;
            return Ok(Some("simplify.noop-expand"));
        }
        Op::Gather(_) | Op::GatherNd(_) => {
            return crate::simplify_gather::enumerating_gather(g, cx, id);
        }
        Op::MatMul(_) => {
            return crate::simplify_one_hot::one_hot_product(g, cx, id);
        }
        Op::DequantizeLinear(_) => {
            return crate::simplify_qdq::round_trip(g, cx, id);
        }
        Op::Concat(_) if ins.len() == 1 && same_as_x => {
            forward(g, id, x)?;
            return Ok(Some("simplify.single-concat"));
        }
        Op::Cast(c) => {
            if same_as_x {
                forward(g, id, x)?;
                return Ok(Some("simplify.noop-cast"));
            }
            if let Op::Cast(inner) = &g.node(x.node).op {
                let src = g.inputs_of(x.node)[0];
                if lossless(g.ty(src).dtype, inner.to) {
                    let (op, origin) = (Op::Cast(c.clone()), merged(g, &[x.node, id]));
                    replace_root(g, cx.weights, id, op, &[src], origin)?;
                    remove_dead(g, &[x.node]);
                    return Ok(Some("simplify.cast-chain"));
                }
            }
        }
        Op::Binary(b) if ins.len() == 2 => {
            let (a, c) = (ins[0], ins[1]);
            let is =
                |v: Value, k: f64| splat(g, cx.weights, v) == Some(k) && g.ty(v).dtype == out.dtype;
            // x^2 as x*x: correctly rounded (pow is within an ulp) and without
            // a pow call per element, as ONNX Runtime's Pow does it.
            if b.kind == BinaryKind::Pow && out.dtype.is_float() && *g.ty(a) == out && is(c, 2.0) {
                let origin = g.node(id).origin.clone();
                replace_root(
                    g,
                    cx.weights,
                    id,
                    Binary {
                        kind: BinaryKind::Mul,
                    },
                    &[a, a],
                    origin,
                )?;
                return Ok(Some("simplify.square"));
            }
            return crate::simplify_affine::combine(g, cx, id);
        }
        _ => {}
    }
    Ok(None)
}

/// True if `perm` keeps the order of the dims of `dims` larger than 1 (the
/// transpose then moves no element).
fn moves_only_units(dims: &[usize], perm: &[i64]) -> bool {
    let mut last = None;
    for &p in perm {
        let Some(&d) = usize::try_from(p).ok().and_then(|p| dims.get(p)) else {
            return false;
        };
        if d != 1 {
            if last.is_some_and(|l| l > p) {
                return false;
            }
            last = Some(p);
        }
    }
    true
}

/// A constant i64 vector of `dims`, for a reshape's shape.
fn shape_constant(
    g: &mut Graph,
    cx: &mut PassContext,
    name: &str,
    origin: Vec<String>,
    dims: &[usize],
) -> Result<Value, String> {
    let shape: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    let t = Tensor::from_i64(&[shape.len()], &shape).map_err(|e| e.to_string())?;
    Ok(constant(g, cx.weights, &format!("{name}.shape"), origin, t))
}

/// The number of leading dims of `src` that `merged` folds into its first
/// dim (the rest equal), if it does so.
fn merged_lead(src: &[usize], merged: &[usize]) -> Option<usize> {
    let (&first, rest) = merged.split_first()?;
    let k = src.len().checked_sub(rest.len())?;
    (k >= 1 && src[k..] == *rest && src[..k].iter().product::<usize>() == first).then_some(k)
}

/// `reshape(transpose(reshape(src)))` at reshape `id` over `x`, where the
/// inner reshape merges leading dims of `src`, the transpose keeps that dim
/// first and the outer reshape splits it again: rewritten to a transpose of
/// a view of `src`.
fn batched_transpose(
    g: &mut Graph,
    cx: &mut PassContext,
    id: NodeId,
    x: Value,
) -> Result<bool, String> {
    let Op::Transpose(t) = &g.node(x.node).op else {
        return Ok(false);
    };
    let perm = t.perm.clone();
    let y = g.inputs_of(x.node)[0];
    if perm.first() != Some(&0) || !matches!(g.node(y.node).op, Op::Reshape(_)) {
        return Ok(false);
    }
    let src = g.inputs_of(y.node)[0];
    let dims = |v: Value| g.ty(v).shape.as_known();
    let (Some(s), Some(yd), Some(xd), Some(out)) = (
        dims(src),
        dims(y),
        dims(x),
        g.node(id).outputs[0].shape.as_known(),
    ) else {
        return Ok(false);
    };
    // src = [a.., tail], y = [prod(a), tail], out = [l.., perm(tail)].
    let (Some(k), Some(l)) = (merged_lead(&s, &yd), merged_lead(&out, &xd)) else {
        return Ok(false);
    };
    let mut view: Vec<usize> = out[..l].to_vec();
    view.extend_from_slice(&s[k..]);
    let new_perm: Vec<i64> = (0..l as i64)
        .chain(perm[1..].iter().map(|p| p + l as i64 - 1))
        .collect();
    let origin = merged(g, &[y.node, x.node, id]);
    let name = g.node(id).name.clone();
    let shape = shape_constant(g, cx, &name, origin.clone(), &view)?;
    let v = add_op(
        g,
        cx.weights,
        Reshape { allowzero: false },
        &format!("{name}.view"),
        origin.clone(),
        &[src, shape],
    )?;
    let op = Transpose { perm: new_perm };
    replace_root(g, cx.weights, id, op, &[Value::of(v)], origin)?;
    remove_dead(g, &[x.node, y.node]);
    Ok(true)
}

fn merged(g: &Graph, nodes: &[NodeId]) -> Vec<String> {
    crate::rewrite::union_origin(g, nodes)
}

/// True if casting `from` -> `to` keeps every value exactly (so a following
/// cast may read the original instead).
pub fn lossless(from: DType, to: DType) -> bool {
    use DType::*;
    if from == to || from == Bool {
        return from == to || to.is_standard();
    }
    let bits = |d: DType| d.size() * 8;
    match (from.is_float(), to.is_float()) {
        (true, true) => matches!(
            (from, to),
            (F16, F32) | (F16, F64) | (BF16, F32) | (BF16, F64) | (F32, F64)
        ),
        (false, false) if from.is_int() && to.is_int() => {
            let (fs, ts) = (from.is_signed(), to.is_signed());
            (fs == ts && bits(to) >= bits(from)) || (!fs && ts && bits(to) > bits(from))
        }
        (false, true) if from.is_int() => {
            let mantissa = match to {
                F64 => 53,
                F32 => 24,
                _ => 0,
            };
            bits(from) < mantissa
        }
        _ => false,
    }
}
