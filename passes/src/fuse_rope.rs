//! Rotary embedding formation (`fuse-rope`): the split-half rotation that
//! PyTorch's exporters write for Llama-style models,
//!
//! ```text
//! y = x * cos + concat(neg(x[..., h:]), x[..., :h]) * sin      (h = D/2)
//! ```
//!
//! with `cos` and `sin` constants `[.., S, D]` whose two halves are equal
//! (`cat(freqs, freqs)` folded once the positions are known), becomes one
//! `rotary_embedding` (ONNX opset 23, split-half pairs) over caches `[B, S,
//! h]`. Where `x` is a head split `transpose(reshape(x3, [B,S,H,D]),
//! [0,2,1,3])` of a projection, the rotation runs on `x3` in its 3-D form
//! and the split moves after it, so `fuse-attention` can read the rotated Q
//! and K in place: no head transpose is left before attention.

use rlx_ir::ops::{Reshape, RotaryEmbedding, Transpose};
use rlx_ir::{Graph, Op, Tensor, Value};

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
            let a = op("mul", [any("x"), leaf("cos")]).commutative();
            let b = op("mul", [rot, leaf("sin")]).commutative();
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

fn rewrite(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let x = m.v("x");
    let xt = g.ty(x).clone();
    let Some(dims) = xt.shape.as_known() else {
        return Ok(false);
    };
    let [b, heads, s, d] = dims[..] else {
        return Ok(false);
    };
    if !xt.dtype.is_float() || d % 2 != 0 || g.node(m.root()).outputs[0] != xt {
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
    let (Some(cos), Some(sin)) = (
        cache(g, cx, m.v("cos"), b, s, d),
        cache(g, cx, m.v("sin"), b, s, d),
    ) else {
        return Ok(false);
    };
    let name = g.node(m.root()).name.clone();
    let origin = union_origin(g, &rev(g, m));
    let cos = constant(g, cx.weights, &format!("{name}.cos"), origin.clone(), cos);
    let sin = constant(g, cx.weights, &format!("{name}.sin"), origin.clone(), sin);
    let mut op = RotaryEmbedding {
        interleaved: false,
        rotary_embedding_dim: 0,
        num_heads: 0,
    };
    // A head split of [B,S,H*D]: rotate in 3-D, split after.
    if let Some(x3) = head_split(g, x, b, s, heads, d) {
        op.num_heads = heads as i64;
        let r = add_op(
            g,
            cx.weights,
            op,
            &format!("{name}.rotary"),
            origin.clone(),
            &[x3, cos, sin],
        )?;
        let shape: Vec<i64> = [b, s, heads, d].iter().map(|&v| v as i64).collect();
        let t = Tensor::from_i64(&[4], &shape).map_err(|e| e.to_string())?;
        let shape = constant(g, cx.weights, &format!("{name}.heads"), origin.clone(), t);
        let split = add_op(
            g,
            cx.weights,
            Reshape { allowzero: false },
            &format!("{name}.split"),
            origin.clone(),
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

/// `x3 [B,S,H*D]` when `x` is `transpose(reshape(x3, [B,S,H,D]), [0,2,1,3])`.
fn head_split(g: &Graph, x: Value, b: usize, s: usize, h: usize, d: usize) -> Option<Value> {
    if !matches!(&g.node(x.node).op, Op::Transpose(t) if t.perm == [0, 2, 1, 3]) {
        return None;
    }
    let r = g.inputs_of(x.node)[0];
    if !matches!(g.node(r.node).op, Op::Reshape(_)) {
        return None;
    }
    let x3 = g.inputs_of(r.node)[0];
    (g.ty(x3).shape.as_known()? == [b, s, h * d]).then_some(x3)
}
