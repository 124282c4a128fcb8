//! Recurrent layers RNN, GRU, LSTM (opset 7; `layout` from opset 14) and the
//! stateful depthwise CausalConvWithState (opset 27).
//!
//! `activation_alpha` / `activation_beta` are consumed in order by the
//! activations that take them (Affine, LeakyRelu, ThresholdedRelu, ScaledTanh,
//! HardSigmoid, Elu), as ONNX Runtime does; the others take none. Missing
//! values take the defaults of the ONNX operators of the same name (Affine
//! 1/0, LeakyRelu 0.01, ThresholdedRelu 1, HardSigmoid 0.2/0.5, Elu 1);
//! ScaledTanh has none, so its values are required. Each activation's values
//! are resolved here.

use rlx_ir::ops::{
    CausalConvActivation, CausalConvWithState, Recurrent, RecurrentKind, RnnActivation,
    RnnDirection,
};

use rlx_ir::Value;

use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    r.add("RNN", 7, rnn);
    r.add("GRU", 7, gru);
    r.add("LSTM", 7, lstm);
    r.add("CausalConvWithState", 27, causal_conv_with_state);
}

fn rnn(cx: &mut NodeCtx) -> Result<(), MapError> {
    recurrent(cx, RecurrentKind::Rnn)
}

fn gru(cx: &mut NodeCtx) -> Result<(), MapError> {
    recurrent(cx, RecurrentKind::Gru)
}

fn lstm(cx: &mut NodeCtx) -> Result<(), MapError> {
    recurrent(cx, RecurrentKind::Lstm)
}

fn attr_error(name: &str, reason: impl Into<String>) -> MapError {
    MapError::Attr {
        name: name.to_string(),
        reason: reason.into(),
    }
}

/// How an activation takes `alpha` or `beta`.
#[derive(Clone, Copy)]
enum Param {
    Unused,
    /// Taken, with the default of the ONNX operator of that name.
    Default(f32),
    /// Taken, and the ONNX operator has no default.
    Required,
}

/// An activation by its ONNX name (any case), with how it takes alpha and beta.
fn activation(name: &str) -> Option<(RnnActivation, Param, Param)> {
    use Param::*;
    use RnnActivation::*;
    Some(match name.to_ascii_lowercase().as_str() {
        "relu" => (Relu, Unused, Unused),
        "tanh" => (Tanh, Unused, Unused),
        "sigmoid" => (Sigmoid, Unused, Unused),
        "affine" => (Affine, Default(1.0), Default(0.0)),
        "leakyrelu" => (LeakyRelu, Default(0.01), Unused),
        "thresholdedrelu" => (ThresholdedRelu, Default(1.0), Unused),
        "scaledtanh" => (ScaledTanh, Required, Required),
        "hardsigmoid" => (HardSigmoid, Default(0.2), Default(0.5)),
        "elu" => (Elu, Default(1.0), Unused),
        "softsign" => (Softsign, Unused, Unused),
        "softplus" => (Softplus, Unused, Unused),
        _ => return None,
    })
}

/// The activations of every direction with their alpha and beta values.
type Activations = (Vec<RnnActivation>, Vec<f32>, Vec<f32>);

/// The next value of `attr` for an activation that takes it as `p`.
fn take(
    p: Param,
    values: &mut std::slice::Iter<f32>,
    attr: &str,
    act: &str,
) -> Result<f32, MapError> {
    match (p, values.next()) {
        (Param::Unused, _) => Ok(0.0),
        (_, Some(&v)) => Ok(v),
        (Param::Default(d), None) => Ok(d),
        (Param::Required, None) => Err(attr_error(attr, format!("{act} needs a value"))),
    }
}

fn activations(
    cx: &mut NodeCtx,
    kind: RecurrentKind,
    dirs: usize,
) -> Result<Activations, MapError> {
    let names = match cx.attr_strings("activations")? {
        Some(v) => v,
        None => {
            let per_dir: &[&str] = match kind {
                RecurrentKind::Rnn => &["Tanh"],
                RecurrentKind::Gru => &["Sigmoid", "Tanh"],
                RecurrentKind::Lstm => &["Sigmoid", "Tanh", "Tanh"],
            };
            per_dir.repeat(dirs).iter().map(|s| s.to_string()).collect()
        }
    };
    let want = kind.activations() * dirs;
    if names.len() != want {
        return Err(attr_error(
            "activations",
            format!("{} given, {want} expected", names.len()),
        ));
    }
    let alphas = cx.attr_floats("activation_alpha")?.unwrap_or_default();
    let betas = cx.attr_floats("activation_beta")?.unwrap_or_default();
    let (mut a_next, mut b_next) = (alphas.iter(), betas.iter());
    let (mut acts, mut a_out, mut b_out) = (Vec::new(), Vec::new(), Vec::new());
    for n in &names {
        let (act, pa, pb) = activation(n)
            .ok_or_else(|| attr_error("activations", format!("`{n}` is not supported")))?;
        acts.push(act);
        a_out.push(take(pa, &mut a_next, "activation_alpha", n)?);
        b_out.push(take(pb, &mut b_next, "activation_beta", n)?);
    }
    if a_next.next().is_some() || b_next.next().is_some() {
        return Err(attr_error(
            "activation_alpha",
            "has more alpha or beta values than the activations take",
        ));
    }
    Ok((acts, a_out, b_out))
}

fn recurrent(cx: &mut NodeCtx, kind: RecurrentKind) -> Result<(), MapError> {
    let (w, r) = (cx.req(1)?, cx.req(2)?);
    layer(cx, kind, w, r, None)
}

/// A layer of `kind` over the node's inputs, with weights `w` and `r` in the
/// ONNX layout (`[directions, gates*hidden, *]`); `quant`: the scales and
/// zero points of a quantized layer (inputs 8 to 11 of DynamicQuantizeLSTM),
/// each `[directions, gates*hidden]`.
pub(crate) fn layer(
    cx: &mut NodeCtx,
    kind: RecurrentKind,
    w: Value,
    r: Value,
    quant: Option<[Value; 4]>,
) -> Result<(), MapError> {
    let dir = cx.attr_choice(
        "direction",
        "forward",
        &["forward", "reverse", "bidirectional"],
    )?;
    let direction = RnnDirection::from_name(&dir).unwrap_or(RnnDirection::Forward);
    let (activations, activation_alpha, activation_beta) =
        activations(cx, kind, direction.count())?;
    let clip = cx.attr_f_opt("clip")?;
    let layout = if cx.opset >= 14 {
        cx.attr_i("layout", 0)?
    } else {
        0
    };
    let linear_before_reset = if kind == RecurrentKind::Gru {
        cx.attr_bool("linear_before_reset", false)?
    } else {
        false
    };
    let input_forget = if kind == RecurrentKind::Lstm {
        cx.attr_bool("input_forget", false)?
    } else {
        false
    };
    let x = cx.req(0)?;
    let hidden_size = match cx.attr_i_opt("hidden_size")? {
        Some(h) => h,
        None => match cx.ty(r).shape.0.get(2).and_then(|d| d.known()) {
            Some(h) => h,
            None => return cx.unsupported("hidden_size is absent and R's last dim is unknown"),
        },
    };
    let lstm = kind == RecurrentKind::Lstm;
    let bias = cx.input(3)?;
    let seq_lens = cx.input(4)?;
    let initial_h = cx.input(5)?;
    let initial_c = if lstm { cx.input(6)? } else { None };
    let peepholes = if lstm { cx.input(7)? } else { None };
    let max_inputs = match (lstm, quant.is_some()) {
        (_, true) => 12,
        (true, false) => 8,
        (false, false) => 6,
    };
    if cx.num_inputs() > max_inputs {
        return cx.unsupported(format!("{} inputs, at most {max_inputs}", cx.num_inputs()));
    }
    let mut ins = vec![x, w, r];
    for v in [bias, seq_lens, initial_h, initial_c, peepholes] {
        ins.extend(v);
    }
    ins.extend(quant.into_iter().flatten());
    let num_outputs = (0..cx.num_outputs())
        .rev()
        .find(|&i| cx.output_used(i))
        .map_or(1, |i| i + 1) as i64;
    let op = Recurrent {
        kind,
        hidden_size,
        direction,
        activations,
        activation_alpha,
        activation_beta,
        clip,
        layout,
        linear_before_reset,
        input_forget,
        has_bias: bias.is_some(),
        has_seq_lens: seq_lens.is_some(),
        has_initial_h: initial_h.is_some(),
        has_initial_c: initial_c.is_some(),
        has_peepholes: peepholes.is_some(),
        num_outputs,
        quantized: quant.is_some(),
    };
    let ys = cx.add(op, &ins)?;
    cx.set_outputs(&ys);
    Ok(())
}

fn causal_conv_with_state(cx: &mut NodeCtx) -> Result<(), MapError> {
    let act = cx.attr_choice("activation", "none", &["none", "silu", "swish"])?;
    let activation = if act == "none" {
        CausalConvActivation::None
    } else {
        CausalConvActivation::Silu
    };
    let (x, w) = (cx.req(0)?, cx.req(1)?);
    let bias = cx.input(2)?;
    let past = cx.input(3)?;
    let mut ins = vec![x, w];
    ins.extend(bias);
    ins.extend(past);
    let op = CausalConvWithState {
        activation,
        has_bias: bias.is_some(),
        has_past: past.is_some(),
    };
    let ys = cx.add(op, &ins)?;
    cx.set_outputs(&ys);
    Ok(())
}
