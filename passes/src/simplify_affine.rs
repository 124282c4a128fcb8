//! Constant affine chains, part of `simplify`: `(x*a)*c -> x*(a*c)`,
//! `(x+a)+c -> x+(a+c)` and `(x*a0+a)*c -> x*(a0*c) + a*c`, for float constants `a`,
//! `c` that do not grow when combined. A BatchNormalization exported as two
//! scale/shift pairs (`(x*a + b)*c + d`) so becomes one multiply-add.

use rlx_ir::ops::{Binary, BinaryKind};
use rlx_ir::{DType, Graph, NodeId, Op, Tensor, Value};

use crate::manager::PassContext;
use crate::rewrite::{
    add_op, const_of, constant, float_tensor, remove_dead, replace_root, union_origin,
};

/// A binary node with one constant operand: (kind, the other operand, the constant).
fn split(g: &Graph, cx: &PassContext, id: NodeId) -> Option<(BinaryKind, Value, Tensor)> {
    let Op::Binary(b) = &g.node(id).op else {
        return None;
    };
    if !matches!(b.kind, BinaryKind::Add | BinaryKind::Mul) {
        return None;
    }
    let ins = g.inputs_of(id);
    let [p, q] = ins[..] else { return None };
    match (const_of(g, cx.weights, p), const_of(g, cx.weights, q)) {
        (None, Some(t)) => Some((b.kind, p, t)),
        (Some(t), None) => Some((b.kind, q, t)),
        _ => None,
    }
}

/// Numpy-broadcast `f(a, c)` of two constants, computed in f64.
fn combine_consts(a: &Tensor, c: &Tensor, f: impl Fn(f64, f64) -> f64) -> Option<Tensor> {
    let (ad, cd) = (a.dims(), c.dims());
    let rank = ad.len().max(cd.len());
    let pad = |d: &[usize]| -> Vec<usize> {
        let mut v = vec![1; rank - d.len()];
        v.extend_from_slice(d);
        v
    };
    let (ap, cp) = (pad(ad), pad(cd));
    let dims: Vec<usize> = ap
        .iter()
        .zip(&cp)
        .map(|(&x, &y)| match (x, y) {
            _ if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let (av, cv) = (a.to_f64_vec()?, c.to_f64_vec()?);
    let n: usize = dims.iter().product();
    if n > av.len().max(cv.len()) {
        return None;
    }
    let index = |i: usize, d: &[usize]| -> usize {
        let (mut rem, mut off, mut stride) = (i, 0, 1);
        for k in (0..rank).rev() {
            let coord = rem % dims[k];
            rem /= dims[k];
            if d[k] != 1 {
                off += coord * stride;
            }
            stride *= d[k];
        }
        off
    };
    let v: Vec<f64> = (0..n)
        .map(|i| f(av[index(i, &ap)], cv[index(i, &cp)]))
        .collect();
    float_tensor(a.dtype(), &dims, &v)
}

/// Rewrites `id` if it closes a constant affine chain; returns the rule name.
pub fn combine(
    g: &mut Graph,
    cx: &mut PassContext,
    id: NodeId,
) -> Result<Option<&'static str>, String> {
    use BinaryKind::{Add, Mul};
    let Some((outer, y, c)) = split(g, cx, id) else {
        return Ok(None);
    };
    let dtype = g.node(id).outputs[0].dtype;
    if !matches!(dtype, DType::F32 | DType::F64) || c.dtype() != dtype {
        return Ok(None);
    }
    let inner_id = y.node;
    let single_use = g.users_of(y).len() == 1 && !g.outputs().iter().any(|o| o.value == y);
    if !single_use {
        return Ok(None);
    }
    let Some((inner, x, a)) = split(g, cx, inner_id) else {
        return Ok(None);
    };
    if a.dtype() != dtype {
        return Ok(None);
    }
    let origin = union_origin(g, &[inner_id, id]);
    let name = g.node(id).name.clone();
    let rule = match (inner, outer) {
        (Mul, Mul) | (Add, Add) => {
            let f = if inner == Mul {
                |p: f64, q: f64| p * q
            } else {
                |p: f64, q: f64| p + q
            };
            let Some(t) = combine_consts(&a, &c, f) else {
                return Ok(None);
            };
            let k = constant(g, cx.weights, &format!("{name}.c"), origin.clone(), t);
            replace_root(g, cx.weights, id, Binary { kind: outer }, &[x, k], origin)?;
            "simplify.affine-chain"
        }
        (Add, Mul) => {
            // Only where it collapses: x = x0 * a0 gives x0*(a0*c) + a*c.
            let x_single = g.users_of(x).len() == 1 && !g.outputs().iter().any(|o| o.value == x);
            let Some((Mul, x0, a0)) = split(g, cx, x.node).filter(|_| x_single) else {
                return Ok(None);
            };
            let (Some(scale), Some(shift)) = (
                combine_consts(&a0, &c, |p, q| p * q),
                combine_consts(&a, &c, |p, q| p * q),
            ) else {
                return Ok(None);
            };
            if a0.dtype() != dtype {
                return Ok(None);
            }
            let origin = union_origin(g, &[x.node, inner_id, id]);
            let sv = constant(
                g,
                cx.weights,
                &format!("{name}.scale"),
                origin.clone(),
                scale,
            );
            let m = add_op(
                g,
                cx.weights,
                Binary { kind: Mul },
                &name,
                origin.clone(),
                &[x0, sv],
            )?;
            let k = constant(
                g,
                cx.weights,
                &format!("{name}.shift"),
                origin.clone(),
                shift,
            );
            replace_root(
                g,
                cx.weights,
                id,
                Binary { kind: Add },
                &[Value::of(m), k],
                origin,
            )?;
            remove_dead(g, &[inner_id, x.node]);
            return Ok(Some("simplify.affine-chain"));
        }
        _ => return Ok(None),
    };
    remove_dead(g, &[inner_id]);
    Ok(Some(rule))
}
