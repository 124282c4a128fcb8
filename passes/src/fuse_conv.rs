//! Conv epilogue fusion (`fuse-conv`):
//!
//! - `add(conv(x, w, b?), d)` with a per-channel constant `d` ->
//!   `fused_conv(x, w, b+d) {activation=none}`;
//! - `add(conv(x, w, b?), r)` with `r` of the output's type ->
//!   `fused_conv(x, w, b, r) {activation=none}` (a ResNet's shortcut), where
//!   the target runs it (a zero bias where the conv had none);
//! - `act(conv(...))` / `act(fused_conv(...) {activation=none})` ->
//!   `fused_conv {activation=act}` (`relu`, `sigmoid`, `tanh`, `gelu`, SiLU,
//!   HardSwish, and ReLU6: a `clip` to constant bounds 0 and 6).

use rlx_ir::ops::{Activation, FusedConv};
use rlx_ir::{Graph, Node, Op, Tensor};

use crate::fold_batchnorm::{per_channel, rev};
use crate::fuse_matmul::{act_rules, relu6_rules, root_activation};
use crate::manager::{Pass, PassContext, PassError};
use crate::pattern::{any, apply_rules, leaf, op, op_if, Match, Rule};
use crate::rewrite::{const_of, constant, float_tensor, replace_root, union_origin};

pub struct FuseConv;

const NAME: &str = "fuse-conv";

fn is_conv(op: &Op) -> bool {
    matches!(op, Op::Conv(_)) || matches!(op, Op::FusedConv(f) if f.activation == Activation::None)
}

/// A `fused_conv` with a residual and no activation yet.
fn is_residual_conv(op: &Op) -> bool {
    matches!(op, Op::FusedConv(f) if f.activation == Activation::None)
}

/// The fused form of a `conv` or `fused_conv` with `act`.
fn fused(op: &Op, act: Activation) -> Option<FusedConv> {
    match op {
        Op::Conv(c) => Some(FusedConv {
            strides: c.strides.clone(),
            dilations: c.dilations.clone(),
            pads: c.pads.clone(),
            auto_pad: c.auto_pad,
            group: c.group,
            activation: act,
        }),
        Op::FusedConv(f) => Some(FusedConv {
            activation: act,
            ..f.clone()
        }),
        _ => None,
    }
}

impl Pass for FuseConv {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let c2 = op_if(is_conv, [any("x"), any("w")]).bind("p");
        let c3 = op_if(is_conv, [any("x"), any("w"), any("b")]).bind("p");
        let mut rules = vec![
            Rule {
                name: "fused_conv.bias",
                pattern: op("add", [c2.clone(), leaf("d")]).commutative(),
                rewrite: bias,
            },
            Rule {
                name: "fused_conv.bias",
                pattern: op("add", [c3.clone(), leaf("d")]).commutative(),
                rewrite: bias,
            },
        ];
        for c in [&c2, &c3] {
            rules.push(Rule {
                name: "fused_conv.residual",
                pattern: op("add", [c.clone(), any("r")]).commutative(),
                rewrite: residual,
            });
        }
        let c4 = op_if(is_residual_conv, [any("x"), any("w"), any("b"), any("r")]).bind("p");
        let prods = [c2, c3, c4];
        rules.extend(act_rules(&prods, activate, "fused_conv.activation"));
        rules.extend(relu6_rules(&prods, activate, "fused_conv.activation"));
        Ok(apply_rules(g, cx, NAME, &rules)? > 0)
    }
}

fn bias(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let p = m.n("p");
    let out = g.node(p).outputs[0].clone();
    if out != g.node(m.root()).outputs[0] || !out.dtype.is_float() {
        return Ok(false);
    }
    let Some(w) = const_of(g, cx.weights, m.v("w")) else {
        return Ok(false);
    };
    let Some(&c) = w.dims().first() else {
        return Ok(false);
    };
    let Some(d) = const_of(g, cx.weights, m.v("d")).and_then(|t| per_channel(&t, out.rank(), 1, c))
    else {
        return Ok(false);
    };
    let b = match m.values.get("b") {
        Some(b) => match const_of(g, cx.weights, *b).and_then(|t| t.to_f64_vec()) {
            Some(v) if v.len() == c => v,
            _ => return Ok(false),
        },
        None => vec![0.0; c],
    };
    let sum: Vec<f64> = b.iter().zip(&d).map(|(b, d)| b + d).collect();
    let Some(t) = float_tensor(out.dtype, &[c], &sum) else {
        return Ok(false);
    };
    let Some(op) = fused(&g.node(p).op, Activation::None) else {
        return Ok(false);
    };
    let origin = union_origin(g, &rev(g, m));
    let name = g.node(p).name.clone();
    let bv = constant(g, cx.weights, &format!("{name}.b"), origin.clone(), t);
    let ins = [m.v("x"), m.v("w"), bv];
    replace_root(g, cx.weights, m.root(), op, &ins, origin)?;
    Ok(true)
}

fn residual(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let (p, r) = (m.n("p"), m.v("r"));
    let out = g.node(p).outputs[0].clone();
    if out != g.node(m.root()).outputs[0] || !out.dtype.is_float() || *g.ty(r) != out {
        return Ok(false);
    }
    // A per-channel constant is a bias (the rule above).
    if const_of(g, cx.weights, r).is_some() {
        return Ok(false);
    }
    let Some(op) = fused(&g.node(p).op, Activation::None) else {
        return Ok(false);
    };
    let Some(c) = out.shape.0.get(1).and_then(|d| d.known()) else {
        return Ok(false);
    };
    let Ok(c) = usize::try_from(c) else {
        return Ok(false);
    };
    let (x, w) = (m.v("x"), m.v("w"));
    let bias_ty = match m.values.get("b") {
        Some(b) => g.ty(*b).clone(),
        None => rlx_ir::TensorType::new(out.dtype, rlx_ir::Shape::known(&[c])),
    };
    if let Some(backend) = cx.backend {
        let probe = Node::new(Op::from(op.clone()), g.node(p).name.clone(), vec![], vec![]);
        let types = [g.ty(x).clone(), g.ty(w).clone(), bias_ty, out.clone()];
        if backend.supports(&probe, &types).is_err() {
            return Ok(false);
        }
    }
    let origin = union_origin(g, &rev(g, m));
    let b = match m.values.get("b") {
        Some(b) => *b,
        None => {
            let zero = Tensor::zeros(out.dtype, &[c]).map_err(|e| e.to_string())?;
            let name = format!("{}.b", g.node(p).name);
            constant(g, cx.weights, &name, origin.clone(), zero)
        }
    };
    replace_root(g, cx.weights, m.root(), op, &[x, w, b, r], origin)?;
    Ok(true)
}

fn activate(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let Some(act) = root_activation(g, cx.weights, m) else {
        return Ok(false);
    };
    let p = m.n("p");
    let out = &g.node(p).outputs[0];
    if !out.dtype.is_float() || *out != g.node(m.root()).outputs[0] {
        return Ok(false);
    }
    let Some(op) = fused(&g.node(p).op, act) else {
        return Ok(false);
    };
    let mut ins = vec![m.v("x"), m.v("w")];
    for k in ["b", "r"] {
        if let Some(v) = m.values.get(k) {
            ins.push(*v);
        }
    }
    let origin = union_origin(g, &rev(g, m));
    replace_root(g, cx.weights, m.root(), op, &ins, origin)?;
    Ok(true)
}
