//! MatMul epilogue fusion (`fuse-matmul`):
//!
//! - `add(matmul(a, b), bias)` -> `fused_matmul(a, b, bias) {activation=none}`
//!   when the bias broadcasts into the product without widening it;
//! - `act(matmul(...))` / `act(fused_matmul(...) {activation=none})` ->
//!   `fused_matmul {activation=act}` for `relu`, `sigmoid`, `tanh`, `gelu`
//!   (erf or tanh), SiLU written as `mul(x, sigmoid(x))`, HardSwish (the
//!   region `fuse-hard-activations` forms) and ReLU6 (`clip` to constant
//!   bounds 0 and 6);
//! - `act(view(p))` for a product `p` seen through a reshape (the
//!   TorchScript exporter writes GPT-2's `Conv1D` as `view(gemm(view(x)))`)
//!   -> `view(fused_matmul {activation=act})`: an elementwise activation
//!   commutes with a view;
//! - the same epilogue of an 8-bit product, `act(mul(cast(matmul_integer),
//!   scale) + bias)` -> `fused_matmul_integer` ([`crate::fuse_matmul_integer`]).

use rlx_ir::ops::{Activation, FusedMatMul, GeluApprox, UnaryKind};
use rlx_ir::{Graph, Op, Value, Weights};

use crate::fold_batchnorm::rev;
use crate::manager::{Pass, PassContext, PassError};
use crate::pattern::{any, apply_rules, leaf, op, op_if, Match, Pat, Rule};
use crate::rewrite::{add_op, const_of, replace_root, union_origin};

pub struct FuseMatMul;

const NAME: &str = "fuse-matmul";

/// The fused activation an op computes on its single input, if any.
pub fn activation_of(op: &Op) -> Option<Activation> {
    Some(match op {
        Op::Unary(u) => match u.kind {
            UnaryKind::Relu => Activation::Relu,
            UnaryKind::Sigmoid => Activation::Sigmoid,
            UnaryKind::Tanh => Activation::Tanh,
            _ => return None,
        },
        Op::Gelu(g) => match g.approximate {
            GeluApprox::None => Activation::GeluErf,
            GeluApprox::Tanh => Activation::GeluTanh,
        },
        Op::ElementwiseRegion(r) if crate::fuse_hard::is_hard_swish(&r.program) => {
            Activation::HardSwish
        }
        _ => return None,
    })
}

fn is_act(op: &Op) -> bool {
    activation_of(op).is_some()
}

fn is_plain_fused_mm(op: &Op) -> bool {
    matches!(op, Op::FusedMatMul(f) if f.activation == Activation::None)
}

/// The rules for ReLU6, `clip(p, 0, 6)` with constant bounds, over
/// producer patterns `prods` (each binding `p`); [`root_activation`]
/// checks the bounds.
pub fn relu6_rules(
    prods: &[Pat],
    rewrite: crate::pattern::RewriteFn,
    name: &'static str,
) -> Vec<Rule> {
    prods
        .iter()
        .map(|p| Rule {
            name,
            pattern: op("clip", [p.clone(), leaf("lo"), leaf("hi")]),
            rewrite,
        })
        .collect()
}

/// The activation rules over producer patterns `prods` (each binding `p`).
pub fn act_rules(
    prods: &[Pat],
    rewrite: crate::pattern::RewriteFn,
    name: &'static str,
) -> Vec<Rule> {
    let mut v = Vec::new();
    for p in prods {
        v.push(Rule {
            name,
            pattern: op_if(is_act, [p.clone()]),
            rewrite,
        });
        v.push(Rule {
            name,
            pattern: op("mul", [p.clone(), op("sigmoid", [p.clone()])]).commutative(),
            rewrite,
        });
    }
    v
}

/// The activation the root of `m` applies (SiLU for the `mul` form, ReLU6
/// for a `clip` to constant bounds 0 and 6).
pub fn root_activation(g: &Graph, w: &Weights, m: &Match) -> Option<Activation> {
    let root = &g.node(m.root()).op;
    match root.name() {
        "mul" => Some(Activation::Silu),
        "clip" => {
            let bound = |k: &str| {
                let t = const_of(g, w, *m.values.get(k)?)?;
                match t.to_f64_vec()?.as_slice() {
                    [v] => Some(*v),
                    _ => None,
                }
            };
            (bound("lo")? == 0.0 && bound("hi")? == 6.0).then_some(Activation::Relu6)
        }
        _ => activation_of(root),
    }
}

impl Pass for FuseMatMul {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let mm = op("matmul", [any("a"), any("b")]).bind("p");
        let plain2 = op_if(is_plain_fused_mm, [any("a"), any("b")]).bind("p");
        let plain3 = op_if(is_plain_fused_mm, [any("a"), any("b"), any("bias")]).bind("p");
        let mut rules = vec![Rule {
            name: "fused_matmul.bias",
            pattern: op("add", [mm.clone(), any("bias")]).commutative(),
            rewrite: bias,
        }];
        let prods = [mm, plain2, plain3];
        rules.extend(act_rules(&prods, activate, "fused_matmul.activation"));
        for p in &prods {
            for view in [
                op_if(is_view, [p.clone()]).bind("view"),
                op_if(is_view, [p.clone(), any("view_arg")]).bind("view"),
            ] {
                rules.push(Rule {
                    name: "fused_matmul.activation_through_view",
                    pattern: op_if(is_act, [view]),
                    rewrite: activate_through_view,
                });
            }
        }
        rules.extend(relu6_rules(&prods, activate, "fused_matmul.activation"));
        rules.extend(crate::fuse_matmul_integer::rules());
        Ok(apply_rules(g, cx, NAME, &rules)? > 0)
    }
}

fn is_view(op: &Op) -> bool {
    crate::memory::is_view(op)
}

/// `act(view(p))` -> `view(fused_matmul {activation=act})` over `p`'s inputs.
fn activate_through_view(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let Some(act) = activation_of(&g.node(m.root()).op) else {
        return Ok(false);
    };
    let (p, view) = (m.n("p"), m.n("view"));
    let out = &g.node(p).outputs[0];
    let root = &g.node(m.root()).outputs[0];
    if !out.dtype.is_float() || root != &g.node(view).outputs[0] {
        return Ok(false);
    }
    let mut ins = vec![m.v("a"), m.v("b")];
    if let Some(b) = m.values.get("bias") {
        ins.push(*b);
    }
    let origin = union_origin(g, &rev(g, m));
    let name = g.node(m.root()).name.clone();
    let fused = add_op(
        g,
        cx.weights,
        FusedMatMul { activation: act },
        &format!("{name}.product"),
        origin.clone(),
        &ins,
    )?;
    let mut view_ins = vec![Value::of(fused)];
    view_ins.extend(m.values.get("view_arg").copied());
    let view_op = g.node(view).op.clone();
    replace_root(g, cx.weights, m.root(), view_op, &view_ins, origin)?;
    Ok(true)
}

fn bias(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let p = m.n("p");
    let (mm_ty, root_ty) = (&g.node(p).outputs[0], &g.node(m.root()).outputs[0]);
    if mm_ty != root_ty || g.ty(m.v("bias")).dtype != mm_ty.dtype {
        return Ok(false);
    }
    let origin = union_origin(g, &rev(g, m));
    let op = FusedMatMul {
        activation: Activation::None,
    };
    let ins = [m.v("a"), m.v("b"), m.v("bias")];
    replace_root(g, cx.weights, m.root(), op, &ins, origin)?;
    Ok(true)
}

fn activate(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let Some(act) = root_activation(g, cx.weights, m) else {
        return Ok(false);
    };
    let p = m.n("p");
    if !g.node(p).outputs[0].dtype.is_float() || g.node(p).outputs[0] != g.node(m.root()).outputs[0]
    {
        return Ok(false);
    }
    let mut ins = vec![m.v("a"), m.v("b")];
    if let Some(b) = m.values.get("bias") {
        ins.push(*b);
    }
    let origin = union_origin(g, &rev(g, m));
    replace_root(
        g,
        cx.weights,
        m.root(),
        FusedMatMul { activation: act },
        &ins,
        origin,
    )?;
    Ok(true)
}
