//! Rotary embedding formation (`fuse-rope`): the split-half rotation that
//! PyTorch's exporters write for Llama-style models,
//!
//! ```text
//! y = x * cos + concat(neg(x[..., h:]), x[..., :h]) * sin      (h = D/2)
//! ```
//!
//! with `cos` and `sin` `[.., S, D]` whose two halves are equal, becomes one
//! `rotary_embedding` (ONNX opset 23, split-half pairs) over caches `[B, S,
//! h]`. Constant tables (`cat(freqs, freqs)` folded once the positions are
//! known) are checked value by value and halved at compile time; tables
//! computed at run time (a decode step's positions are an input) must be
//! elementwise functions of a `concat(f, f)` on the last axis, and their
//! first half is sliced off once (shared by every layer after `cse`). Where `x` is a head split `transpose(reshape(x3, [B,S,H,D]),
//! [0,2,1,3])` of a projection, the rotation runs on `x3` in its 3-D form
//! and the split moves after it, so `fuse-attention` can read the rotated Q
//! and K in place: no head transpose is left before attention.

use rlx_ir::ops::{
    Concat, Expand, Reshape, RotaryEmbedding, ShapeOf, Slice, Squeeze, Transpose, Unsqueeze,
};
use rlx_ir::{Dim, Graph, Op, Tensor, Value};

use crate::fold_batchnorm::rev;
use crate::manager::{Pass, PassContext, PassError};
use crate::pattern::{any, apply_rules, leaf, op, op_if, Match, Pat, Rule};
use crate::rewrite::{
    add_op, const_f64s, const_of, constant, float_tensor, replace_root, union_origin,
};

pub struct FuseRope;

const NAME: &str = "fuse-rope";

fn is_last_concat(op: &Op) -> bool {
    matches!(op, Op::Concat(c) if c.axis == -1 || c.axis == 3)
}

/// `x[..., from..to]` on the last axis, with or without steps.
fn half(name: &'static str) -> Vec<Pat> {
    let bound = |s: &'static str| leaf(s);
    let (s, e, a, st) = match name {
        "lo" => ("lo_s", "lo_e", "lo_a", "lo_st"),
        _ => ("hi_s", "hi_e", "hi_a", "hi_st"),
    };
    vec![
        op("slice", [any("x"), bound(s), bound(e), bound(a), bound(st)]).bind(name),
        op("slice", [any("x"), bound(s), bound(e), bound(a)]).bind(name),
    ]
}

fn patterns() -> Vec<Pat> {
    let mut v = Vec::new();
    for hi in half("hi") {
        for lo in half("lo") {
            let rot = op_if(is_last_concat, [op("neg", [hi.clone()]), lo.clone()]);
            let a = op("mul", [any("x"), any("cos")]).commutative();
            let b = op("mul", [rot, any("sin")]).commutative();
            v.push(op("add", [a, b]).commutative());
        }
    }
    v
}

impl Pass for FuseRope {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let rules: Vec<Rule> = patterns()
            .into_iter()
            .map(|pattern| Rule {
                name: "rope.split-half",
                pattern,
                rewrite,
            })
            .collect();
        Ok(apply_rules(g, cx, NAME, &rules)? > 0)
    }
}

/// Whether slice `which` (`lo` or `hi`) takes `[0, h)` or `[h, d)` of the
/// last axis with step 1.
fn is_half(g: &Graph, cx: &PassContext, m: &Match, which: &str, h: usize, d: usize) -> bool {
    let get = |k: &str| {
        m.values
            .get(format!("{which}_{k}").as_str())
            .and_then(|v| const_f64s(g, cx.weights, *v))
    };
    let (Some(s), Some(e), Some(a)) = (get("s"), get("e"), get("a")) else {
        return false;
    };
    let steps_ok =
        m.values.get(format!("{which}_st").as_str()).is_none() || get("st") == Some(vec![1.0]);
    let axis_ok = a == [-1.0] || a == [3.0];
    let (from, to) = if which == "lo" { (0, h) } else { (h, d) };
    let end_ok = e.len() == 1 && (e[0] as usize == to || (which == "hi" && e[0] >= d as f64));
    steps_ok && axis_ok && s == [from as f64] && end_ok
}

/// A `[B, S, h]` cache from a constant `[.., S, D]` (leading dims 1, or B
/// then 1s before S) whose halves are equal along D.
fn cache(g: &Graph, cx: &PassContext, v: Value, b: usize, s: usize, d: usize) -> Option<Tensor> {
    let t = const_of(g, cx.weights, v)?;
    let dims = t.dims().to_vec();
    let vals = t.to_f64_vec()?;
    let n = dims.len();
    if n < 2 || dims[n - 1] != d || dims[n - 2] != s {
        return None;
    }
    let lead = &dims[..n - 2];
    let cb = lead.iter().product::<usize>();
    // The batch dim, if any, must lead ([B, 1, S, D] as HF writes it).
    if cb != 1 && !(cb == b && lead.first() == Some(&b)) {
        return None;
    }
    let h = d / 2;
    let mut out = Vec::with_capacity(b * s * h);
    for bi in 0..b {
        let base = if cb == 1 { 0 } else { bi * s * d };
        for si in 0..s {
            let row = &vals[base + si * d..base + (si + 1) * d];
            if row[..h] != row[h..] {
                return None;
            }
            out.extend_from_slice(&row[..h]);
        }
    }
    float_tensor(t.dtype(), &[b, s, h], &out)
}

/// Whether `v`, a table computed at run time for `x [B, H, S, D]`, is `[b,
/// 1.., S, D]` or `[S, D]` with halves along D equal by construction
/// ([`equal_halves`]). Dims may be symbolic (a decode step's tables come
/// from its positions, through shapes the exporter computes): the table's
/// batch `b` is `B` or 1, and its last dim `D`, as the broadcasting product
/// `x * table` that this replaces requires; the rotation's kernel checks
/// the last dim and [`first_half`] expands the batch.
fn computed_table(g: &Graph, v: Value, x: &[Dim]) -> bool {
    let dims = g.ty(v).shape.dims();
    let n = dims.len();
    if n < 2 || dims[n - 2] != x[2] {
        return false;
    }
    let last_ok = dims[n - 1] == x[3] || matches!(dims[n - 1], Dim::Expr(_));
    let one = Dim::Known(1);
    let batch_ok = match dims[..n - 2].split_first() {
        None => true,
        Some((first, rest)) => {
            let first_ok = match (first, &x[0]) {
                (Dim::Known(a), Dim::Known(b)) => *a == 1 || a == b,
                _ => true,
            };
            first_ok && rest.iter().all(|d| *d == one)
        }
    };
    last_ok && batch_ok && equal_halves(g, v, 0)
}

/// Whether `v`'s two halves along its last axis are equal by construction:
/// it is `concat(f, f)` on that axis, or an elementwise function of such
/// values (operands of last dim 1 broadcast alike over both halves), or a
/// reshape that keeps the last dim.
fn equal_halves(g: &Graph, v: Value, depth: usize) -> bool {
    const DEPTH: usize = 8;
    let last = |v: Value| {
        let dims = g.ty(v).shape.dims();
        dims.last().cloned().unwrap_or(Dim::Known(1))
    };
    let ins = g.inputs_of(v.node);
    if depth > DEPTH || ins.is_empty() {
        return false;
    }
    match &g.node(v.node).op {
        Op::Concat(c) => {
            let rank = g.ty(v).shape.rank() as i64;
            (c.axis == -1 || c.axis == rank - 1) && ins.len() == 2 && ins[0] == ins[1]
        }
        Op::Unary(_) | Op::Cast(_) => equal_halves(g, ins[0], depth + 1),
        Op::Reshape(_) | Op::Unsqueeze(_) | Op::Squeeze(_) | Op::Flatten(_) => {
            last(ins[0]) == last(v) && equal_halves(g, ins[0], depth + 1)
        }
        Op::Binary(_) => ins
            .iter()
            .all(|&i| last(i) == Dim::Known(1) || equal_halves(g, i, depth + 1)),
        _ => false,
    }
}

/// The `[B, S, D/2]` cache of a [`computed_table`] `v` for the rotation of
/// `x` (batch first): the table's first half along D, sliced at run time,
/// its leading 1s after the batch squeezed away (or a batch axis added),
/// expanded to `x`'s batch where that is not the table's by its type (an
/// expansion that `simplify` removes once the shapes are known equal).
fn first_half(
    g: &mut Graph,
    cx: &mut PassContext,
    v: Value,
    x: Value,
    d: usize,
    name: &str,
    origin: &[String],
) -> Result<Value, String> {
    let mut ints = |g: &mut Graph, what: &str, vals: &[i64]| -> Result<Value, String> {
        let t = Tensor::from_i64(&[vals.len()], vals).map_err(|e| e.to_string())?;
        Ok(constant(
            g,
            cx.weights,
            &format!("{name}.{what}"),
            origin.to_vec(),
            t,
        ))
    };
    let starts = ints(g, "starts", &[0])?;
    let ends = ints(g, "ends", &[(d / 2) as i64])?;
    let axes = ints(g, "axes", &[-1])?;
    let rank = g.ty(v).shape.rank();
    let to_rank_3: Option<(Op, Value)> = match rank {
        2 => Some((Unsqueeze {}.into(), ints(g, "batch", &[0])?)),
        3 => None,
        _ => {
            let lead: Vec<i64> = (1..rank as i64 - 2).collect();
            Some((Squeeze {}.into(), ints(g, "lead", &lead)?))
        }
    };
    let ones = ints(g, "ones", &[1, 1])?;
    let origin = origin.to_vec();
    let node = |g: &mut Graph, op: Op, what: &str, ins: &[Value]| {
        let name = format!("{name}.{what}");
        add_op(g, cx.weights, op, &name, origin.clone(), ins).map(Value::of)
    };
    let mut rows = node(g, Slice {}.into(), "half", &[v, starts, ends, axes])?;
    if let Some((op, axes)) = to_rank_3 {
        rows = node(g, op, "rows", &[rows, axes])?;
    }
    if g.ty(rows).shape.dims()[0] == g.ty(x).shape.dims()[0] {
        return Ok(rows);
    }
    let batch = ShapeOf {
        start: 0,
        end: Some(1),
    };
    let batch = node(g, batch.into(), "batch_of", &[x])?;
    let shape = node(g, Concat { axis: 0 }.into(), "batch_shape", &[batch, ones])?;
    node(g, Expand {}.into(), "expand", &[rows, shape])
}

fn rewrite(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let x = m.v("x");
    let xt = g.ty(x).clone();
    let xd = xt.shape.dims().to_vec();
    let (4, Some(&Dim::Known(d))) = (xd.len(), xd.last()) else {
        return Ok(false);
    };
    let d = d as usize;
    if !xt.dtype.is_float() || d % 2 != 0 || !same_as_x(&g.node(m.root()).outputs[0], &xt) {
        return Ok(false);
    }
    if !is_half(g, cx, m, "lo", d / 2, d) || !is_half(g, cx, m, "hi", d / 2, d) {
        return Ok(false);
    }
    for c in ["cos", "sin"] {
        if g.ty(m.v(c)).dtype != xt.dtype {
            return Ok(false);
        }
    }
    let name = g.node(m.root()).name.clone();
    let origin = union_origin(g, &rev(g, m));
    // The nodes made on the way stand for none of the matched ONNX outputs
    // alone: one origin naming them all (`compare` maps a step to its
    // latest origin's output, which only the root computes).
    let inner = vec![origin.join(", ")];
    // A head split of [B,S,H*D]: rotate in 3-D, split after.
    let split = match &xd[1] {
        Dim::Known(_) => head_split(g, x, &xd),
        Dim::Expr(_) => None,
    };
    let tables = match xt.shape.as_known().as_deref() {
        Some(&[b, _, s, _]) => {
            cache(g, cx, m.v("cos"), b, s, d).zip(cache(g, cx, m.v("sin"), b, s, d))
        }
        _ => None,
    };
    let (cos, sin) = match tables {
        Some((cos, sin)) => (
            constant(g, cx.weights, &format!("{name}.cos"), origin.clone(), cos),
            constant(g, cx.weights, &format!("{name}.sin"), origin.clone(), sin),
        ),
        None => {
            if !computed_table(g, m.v("cos"), &xd) || !computed_table(g, m.v("sin"), &xd) {
                return Ok(false);
            }
            let input = split.unwrap_or(x);
            (
                first_half(g, cx, m.v("cos"), input, d, &format!("{name}.cos"), &inner)?,
                first_half(g, cx, m.v("sin"), input, d, &format!("{name}.sin"), &inner)?,
            )
        }
    };
    let mut op = RotaryEmbedding {
        interleaved: false,
        rotary_embedding_dim: 0,
        num_heads: 0,
    };
    if let (Some(x3), Dim::Known(heads)) = (split, &xd[1]) {
        op.num_heads = *heads;
        let r = add_op(
            g,
            cx.weights,
            op,
            &format!("{name}.rotary"),
            inner.clone(),
            &[x3, cos, sin],
        )?;
        // [B, S, H, D], 0 keeping the (maybe symbolic) B and S.
        let t = Tensor::from_i64(&[4], &[0, 0, *heads, d as i64]).map_err(|e| e.to_string())?;
        let shape = constant(g, cx.weights, &format!("{name}.heads"), inner.clone(), t);
        let split = add_op(
            g,
            cx.weights,
            Reshape { allowzero: false },
            &format!("{name}.split"),
            inner.clone(),
            &[Value::of(r), shape],
        )?;
        let perm = Transpose {
            perm: vec![0, 2, 1, 3],
        };
        replace_root(g, cx.weights, m.root(), perm, &[Value::of(split)], origin)?;
        return Ok(true);
    }
    replace_root(g, cx.weights, m.root(), op, &[x, cos, sin], origin)?;
    Ok(true)
}

/// Whether the rotation's result type `y` is `x`'s: the same dtype and
/// rank, each dim `x`'s or a symbol the broadcasting product made of `x`'s
/// and the table's (which a table broadcasting over `x` leaves `x`'s).
fn same_as_x(y: &rlx_ir::TensorType, x: &rlx_ir::TensorType) -> bool {
    let (yd, xd) = (y.shape.dims(), x.shape.dims());
    y.dtype == x.dtype
        && yd.len() == xd.len()
        && yd
            .iter()
            .zip(xd)
            .all(|(a, b)| a == b || matches!(a, Dim::Expr(_)))
}

/// `x3 [B,S,H*D]` when `x [B,H,S,D]` is `transpose(reshape(x3, [B,S,H,D]),
/// [0,2,1,3])`.
fn head_split(g: &Graph, x: Value, xd: &[Dim]) -> Option<Value> {
    if !matches!(&g.node(x.node).op, Op::Transpose(t) if t.perm == [0, 2, 1, 3]) {
        return None;
    }
    let r = g.inputs_of(x.node)[0];
    if !matches!(g.node(r.node).op, Op::Reshape(_)) {
        return None;
    }
    let x3 = g.inputs_of(r.node)[0];
    let (Dim::Known(h), Dim::Known(d)) = (&xd[1], &xd[3]) else {
        return None;
    };
    let want = [xd[0].clone(), xd[2].clone(), Dim::Known(h * d)];
    (g.ty(x3).shape.dims() == want).then_some(x3)
}
