//! The `ai.onnx.preview.training` optimizers (Adagrad, Adam, Momentum), as the
//! elementwise update rules they define. Each takes the learning rate `R`, the
//! step count `T` and then groups of per-tensor inputs (X..., G..., state...),
//! and yields the updated tensors group by group.

use rlx_ir::ops::{BinaryKind as B, CompareKind as C, UnaryKind as U, Where};
use rlx_ir::Value;

use super::elementwise::un;
use super::{binary, cast};
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

const DOMAIN: &str = "ai.onnx.preview.training";

pub fn register(r: &mut Registry) {
    r.add_in(DOMAIN, "Adagrad", 1, adagrad);
    r.add_in(DOMAIN, "Adam", 1, adam);
    r.add_in(DOMAIN, "Momentum", 1, momentum);
}

/// The per-tensor input groups after `R` and `T`: `G` lists of `n` values.
fn groups<const G: usize>(cx: &mut NodeCtx) -> Result<[Vec<Value>; G], MapError> {
    let rest = cx.num_inputs().saturating_sub(2);
    if rest == 0 || rest % G != 0 {
        return cx.unsupported(format!(
            "expected R, T and {G} groups of equally many tensors, got {} inputs",
            cx.num_inputs()
        ));
    }
    let n = rest / G;
    let mut out: [Vec<Value>; G] = std::array::from_fn(|_| Vec::with_capacity(n));
    for (g, group) in out.iter_mut().enumerate() {
        for i in 0..n {
            group.push(cx.req(2 + g * n + i)?);
        }
    }
    Ok(out)
}

/// `R` and `T` as scalars of the tensors' dtype, and the update's float type.
fn rate_and_step(cx: &mut NodeCtx, x: Value) -> Result<(Value, Value), MapError> {
    let d = cx.dtype(x);
    if !d.is_float() {
        return cx.unsupported(format!("optimizer tensors must be floats, got {d}"));
    }
    let (r, t) = (cx.req(0)?, cx.req(1)?);
    Ok((cast(cx, r, d)?, cast(cx, t, d)?))
}

/// A scalar constant of `like`'s dtype.
fn k(cx: &mut NodeCtx, like: Value, v: f32) -> Result<Value, MapError> {
    cx.scalar(cx.dtype(like), v as f64)
}

/// `norm_coefficient * x + g`.
fn regularized(cx: &mut NodeCtx, x: Value, g: Value, norm: f32) -> Result<Value, MapError> {
    let c = k(cx, x, norm)?;
    let cx_ = binary(cx, B::Mul, c, x)?;
    binary(cx, B::Add, cx_, g)
}

/// `t > 0 ? a : b`, with `t` the step count.
fn if_started(cx: &mut NodeCtx, t: Value, a: Value, b: Value) -> Result<Value, MapError> {
    let zero = k(cx, t, 0.0)?;
    let started = cx.add1(rlx_ir::ops::Compare { kind: C::Greater }, &[t, zero])?;
    cx.add1(Where {}, &[started, a, b])
}

fn adagrad(cx: &mut NodeCtx) -> Result<(), MapError> {
    let decay = cx.attr_f("decay_factor", 0.0)?;
    let eps = cx.attr_f("epsilon", 0.0)?;
    let norm = cx.attr_f("norm_coefficient", 0.0)?;
    let [xs, gs, hs] = groups::<3>(cx)?;
    let n = xs.len();
    for i in 0..n {
        let (x, g, h) = (xs[i], gs[i], hs[i]);
        let (r, t) = rate_and_step(cx, x)?;
        // r / (1 + t * decay_factor)
        let dk = k(cx, t, decay)?;
        let td = binary(cx, B::Mul, t, dk)?;
        let one = k(cx, t, 1.0)?;
        let den = binary(cx, B::Add, one, td)?;
        let rate = binary(cx, B::Div, r, den)?;
        let gr = regularized(cx, x, g, norm)?;
        let g2 = binary(cx, B::Mul, gr, gr)?;
        let h_new = binary(cx, B::Add, h, g2)?;
        let sq = un(cx, U::Sqrt, h_new)?;
        let e = k(cx, x, eps)?;
        let scale = binary(cx, B::Add, sq, e)?;
        let step = binary(cx, B::Mul, rate, gr)?;
        let step = binary(cx, B::Div, step, scale)?;
        let x_new = binary(cx, B::Sub, x, step)?;
        cx.set_output(i, x_new);
        cx.set_output(n + i, h_new);
    }
    Ok(())
}

fn adam(cx: &mut NodeCtx) -> Result<(), MapError> {
    let alpha = cx.attr_f("alpha", 0.9)?;
    let beta = cx.attr_f("beta", 0.999)?;
    let eps = cx.attr_f("epsilon", 0.0)?;
    let norm = cx.attr_f("norm_coefficient", 0.0)?;
    let norm_post = cx.attr_f("norm_coefficient_post", 0.0)?;
    let [xs, gs, vs, hs] = groups::<4>(cx)?;
    let n = xs.len();
    for i in 0..n {
        let (x, g, v, h) = (xs[i], gs[i], vs[i], hs[i]);
        let (r, t) = rate_and_step(cx, x)?;
        let gr = regularized(cx, x, g, norm)?;
        // v' = alpha v + (1 - alpha) g; h' = beta h + (1 - beta) g²
        let a = k(cx, x, alpha)?;
        let a1 = k(cx, x, 1.0 - alpha)?;
        let av = binary(cx, B::Mul, a, v)?;
        let ag = binary(cx, B::Mul, a1, gr)?;
        let v_new = binary(cx, B::Add, av, ag)?;
        let b = k(cx, x, beta)?;
        let b1 = k(cx, x, 1.0 - beta)?;
        let bh = binary(cx, B::Mul, b, h)?;
        let g2 = binary(cx, B::Mul, gr, gr)?;
        let bg = binary(cx, B::Mul, b1, g2)?;
        let h_new = binary(cx, B::Add, bh, bg)?;
        let sq = un(cx, U::Sqrt, h_new)?;
        let e = k(cx, x, eps)?;
        let den = binary(cx, B::Add, sq, e)?;
        // With t > 0 the rate is bias-corrected: r * sqrt(1 - beta^t) / (1 - alpha^t).
        let one = k(cx, t, 1.0)?;
        let bt = k(cx, t, beta)?;
        let bt = binary(cx, B::Pow, bt, t)?;
        let bt = binary(cx, B::Sub, one, bt)?;
        let bt = un(cx, U::Sqrt, bt)?;
        let at = k(cx, t, alpha)?;
        let at = binary(cx, B::Pow, at, t)?;
        let at = binary(cx, B::Sub, one, at)?;
        let corrected = binary(cx, B::Mul, r, bt)?;
        let corrected = binary(cx, B::Div, corrected, at)?;
        let rate = if_started(cx, t, corrected, r)?;
        let ratio = binary(cx, B::Div, v_new, den)?;
        let step = binary(cx, B::Mul, rate, ratio)?;
        let x_new = binary(cx, B::Sub, x, step)?;
        let keep = k(cx, x, 1.0 - norm_post)?;
        let x_final = binary(cx, B::Mul, keep, x_new)?;
        cx.set_output(i, x_final);
        cx.set_output(n + i, v_new);
        cx.set_output(2 * n + i, h_new);
    }
    Ok(())
}

fn momentum(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (Some(alpha), Some(beta), Some(norm)) = (
        cx.attr_f_opt("alpha")?,
        cx.attr_f_opt("beta")?,
        cx.attr_f_opt("norm_coefficient")?,
    ) else {
        return cx.unsupported("Momentum needs the attributes alpha, beta and norm_coefficient");
    };
    // `mode` has no default: a missing one is an error naming the choices.
    let nesterov = cx.attr_choice("mode", "", &["standard", "nesterov"])? == "nesterov";
    let [xs, gs, vs] = groups::<3>(cx)?;
    let n = xs.len();
    for i in 0..n {
        let (x, g, v) = (xs[i], gs[i], vs[i]);
        let (r, t) = rate_and_step(cx, x)?;
        let gr = regularized(cx, x, g, norm)?;
        // The gradient's coefficient is 1 on the first step.
        let b = k(cx, t, beta)?;
        let one = k(cx, t, 1.0)?;
        let b = if_started(cx, t, b, one)?;
        let a = k(cx, x, alpha)?;
        let av = binary(cx, B::Mul, a, v)?;
        let bg = binary(cx, B::Mul, b, gr)?;
        let v_new = binary(cx, B::Add, av, bg)?;
        let dir = if nesterov {
            let av_new = binary(cx, B::Mul, a, v_new)?;
            binary(cx, B::Add, gr, av_new)?
        } else {
            v_new
        };
        let step = binary(cx, B::Mul, r, dir)?;
        let x_new = binary(cx, B::Sub, x, step)?;
        cx.set_output(i, x_new);
        cx.set_output(n + i, v_new);
    }
    Ok(())
}
