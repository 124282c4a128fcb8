//! LayerNorm formation (`fuse-layer-norm`): the decomposed LayerNorm of older
//! exporters becomes one `layer_norm`:
//!
//! ```text
//! m = reduce_mean(x, axes); d = sub(x, m)
//! v = reduce_mean(pow(d, 2) | mul(d, d), axes)
//! y = div(d, sqrt(add(v, eps))) [* gamma] [+ beta]
//! ```
//!
//! and the decomposed RMSNorm (Llama's and T5's, as both PyTorch exporters
//! write it) becomes one `rms_norm`:
//!
//! ```text
//! s = sqrt(add(reduce_mean(pow(x, 2) | mul(x, x), axes), eps))
//! y = mul(x, reciprocal(s) | div(1, s)) | div(x, s)   [* gamma]
//! ```
//!
//! The axes must be a trailing run of `x`'s dims, the means must keep dims,
//! and gamma/beta must cover trailing dims exactly (no widening).

use rlx_ir::ops::{LayerNorm, RmsNorm};
use rlx_ir::{Dim, Graph, Op, Shape, Value};

use crate::fold_batchnorm::rev;
use crate::manager::{Pass, PassContext, PassError};
use crate::pattern::{any, apply_rules, leaf, op, op_if, Match, Pat, Rule};
use crate::rewrite::{const_f64s, constant, float_tensor, replace_root, splat, union_origin};

pub struct FuseLayerNorm;

const NAME: &str = "fuse-layer-norm";

fn is_mean(op: &Op) -> bool {
    matches!(op, Op::Reduce(r) if r.kind == rlx_ir::ops::ReduceKind::Mean && r.keepdims)
}

/// `div(d, sqrt(add(reduce_mean(square(d)), eps)))` with `d = x - mean(x)`.
fn normalized(pow_form: bool) -> Pat {
    let d = || {
        let mean = op_if(is_mean, [any("x"), leaf("axes")]).bind("mean");
        op("sub", [any("x"), mean]).bind("d")
    };
    let sq = if pow_form {
        op("pow", [d(), leaf("two")])
    } else {
        op("mul", [d(), d()])
    };
    let var = op_if(is_mean, [sq, leaf("axes2")]).bind("var");
    let std = op("sqrt", [op("add", [var, leaf("eps")]).commutative()]);
    op("div", [d(), std])
}

/// `x / sqrt(mean(x^2) + eps)` in each of its written forms.
fn rms_normalized() -> Vec<Pat> {
    let std = || {
        let mut v = Vec::new();
        for sq in [
            op("pow", [any("x"), leaf("two")]),
            op("mul", [any("x"), any("x")]),
        ] {
            let var = op_if(is_mean, [sq, leaf("axes")]).bind("var");
            v.push(op("sqrt", [op("add", [var, leaf("eps")]).commutative()]));
        }
        v
    };
    let mut v = Vec::new();
    for s in std() {
        v.push(op("mul", [any("x"), op("reciprocal", [s.clone()])]).commutative());
        v.push(op("mul", [any("x"), op("div", [leaf("one"), s.clone()])]).commutative());
        v.push(op("div", [any("x"), s]));
    }
    v
}

fn affine(n: Pat) -> Vec<Pat> {
    let scaled = op("mul", [n.clone(), any("gamma")]).commutative();
    vec![
        op("add", [scaled.clone(), any("beta")]).commutative(),
        scaled,
        n,
    ]
}

impl Pass for FuseLayerNorm {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let mut rules: Vec<Rule> = [normalized(true), normalized(false)]
            .into_iter()
            .flat_map(affine)
            .map(|pattern| Rule {
                name: "layer_norm.decomposed",
                pattern,
                rewrite,
            })
            .collect();
        rules.extend(
            rms_normalized()
                .into_iter()
                .flat_map(|n| {
                    let scaled = op("mul", [n.clone(), any("gamma")]).commutative();
                    [scaled, n]
                })
                .map(|pattern| Rule {
                    name: "rms_norm.decomposed",
                    pattern,
                    rewrite,
                }),
        );
        Ok(apply_rules(g, cx, NAME, &rules)? > 0)
    }
}

/// True if a parameter of shape `p` covers the trailing `norm` dims exactly.
fn covers(p: &Shape, norm: &[Dim]) -> bool {
    let dims: Vec<&Dim> = p.0.iter().skip_while(|d| **d == Dim::Known(1)).collect();
    if dims.len() > norm.len() {
        return false;
    }
    let tail = &norm[norm.len() - dims.len()..];
    // Leading dims of the normalized block the parameter does not cover must be 1.
    let rest = &norm[..norm.len() - dims.len()];
    dims.iter().zip(tail).all(|(a, b)| *a == b) && rest.iter().all(|d| *d == Dim::Known(1))
}

fn rewrite(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let x = m.v("x");
    let xt = g.ty(x).clone();
    if xt != g.node(m.root()).outputs[0] || !xt.dtype.is_float() {
        return Ok(false);
    }
    let r = xt.rank();
    let axes_of = |v: Value| -> Option<Vec<usize>> {
        let mut a: Vec<usize> = const_f64s(g, cx.weights, v)?
            .into_iter()
            .map(|a| {
                if a < 0.0 {
                    a as i64 + r as i64
                } else {
                    a as i64
                }
            })
            .map(|a| usize::try_from(a).ok().filter(|a| *a < r))
            .collect::<Option<_>>()?;
        a.sort();
        a.dedup();
        Some(a)
    };
    let rms = !m.values.contains_key("axes2");
    let axes2 = m.values.get("axes2").copied().unwrap_or(m.v("axes"));
    let (Some(a1), Some(a2)) = (axes_of(m.v("axes")), axes_of(axes2)) else {
        return Ok(false);
    };
    if m.values
        .get("one")
        .is_some_and(|t| splat(g, cx.weights, *t) != Some(1.0))
    {
        return Ok(false);
    }
    let Some(&first) = a1.first() else {
        return Ok(false);
    };
    if a1 != a2 || a1 != (first..r).collect::<Vec<_>>() {
        return Ok(false);
    }
    if m.values
        .get("two")
        .is_some_and(|t| splat(g, cx.weights, *t) != Some(2.0))
    {
        return Ok(false);
    }
    let Some(eps) = splat(g, cx.weights, m.v("eps")).filter(|e| *e >= 0.0) else {
        return Ok(false);
    };
    let norm = &xt.shape.0[first..];
    let mut ins = vec![x];
    match m.values.get("gamma") {
        Some(gm) => {
            if g.ty(*gm).dtype != xt.dtype || !covers(&g.ty(*gm).shape, norm) {
                return Ok(false);
            }
            ins.push(*gm);
        }
        None => {
            let Some(dims) = Shape(norm.to_vec()).as_known() else {
                return Ok(false);
            };
            let n: usize = dims.iter().product();
            let Some(t) = float_tensor(xt.dtype, &dims, &vec![1.0; n]) else {
                return Ok(false);
            };
            let name = g.node(m.root()).name.clone();
            ins.push(constant(
                g,
                cx.weights,
                &format!("{name}.scale"),
                Vec::new(),
                t,
            ));
        }
    }
    if let Some(b) = m.values.get("beta") {
        if g.ty(*b).dtype != xt.dtype || !covers(&g.ty(*b).shape, norm) {
            return Ok(false);
        }
        ins.push(*b);
    }
    let axis = first as i64 - r as i64;
    let origin = union_origin(g, &rev(g, m));
    if rms {
        let op = RmsNorm {
            axis,
            epsilon: eps as f32,
        };
        replace_root(g, cx.weights, m.root(), op, &ins, origin)?;
        return Ok(true);
    }
    let op = LayerNorm {
        axis,
        epsilon: eps as f32,
        stats: false,
    };
    replace_root(g, cx.weights, m.root(), op, &ins, origin)?;
    Ok(true)
}
