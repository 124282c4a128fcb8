//! HardSigmoid / HardSwish formation (`fuse-hard-activations`). The importer
//! writes HardSigmoid as `clip(x * alpha + beta, 0, 1)` and HardSwish as
//! `x * hardsigmoid(x)` with alpha 1/6, beta 1/2; PyTorch exports also write
//! `clip(x + 3, 0, 6) / 6`. Each chain becomes one `elementwise_region` with the
//! canonical program
//!
//! ```text
//! [mul(x0, alpha), add(t0, beta), max(t1, 0.0), min(t2, 1.0)]   (+ mul(x0, t3) for HardSwish)
//! ```

use rlx_ir::ops::{BinaryKind, ElementwiseRegion, Instr, Operand, Program, RegionFn};
use rlx_ir::Graph;

use crate::fold_batchnorm::rev;
use crate::manager::{Pass, PassContext, PassError};
use crate::pattern::{any, apply_rules, leaf, op, Match, Pat, Rule};
use crate::rewrite::{replace_root, splat, union_origin};

pub struct FuseHard;

const NAME: &str = "fuse-hard-activations";

/// The HardSigmoid forms over `x`: importer's and PyTorch's (`/ 6` or `* 1/6`).
fn hard_sigmoids() -> Vec<Pat> {
    let x = || any("x");
    let affine = op(
        "add",
        [op("mul", [x(), leaf("alpha")]).commutative(), leaf("beta")],
    )
    .commutative();
    let shifted = || op("add", [x(), leaf("three")]).commutative();
    let relu6 = || op("clip", [shifted(), leaf("lo"), leaf("six")]);
    vec![
        op("clip", [affine, leaf("lo"), leaf("hi")]),
        op("div", [relu6(), leaf("six_div")]),
        op("mul", [relu6(), leaf("sixth")]).commutative(),
    ]
}

impl Pass for FuseHard {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let mut rules = Vec::new();
        for h in hard_sigmoids() {
            rules.push(Rule {
                name: "hard_swish",
                pattern: op("mul", [any("x"), h.clone()]).commutative(),
                rewrite: swish,
            });
            // PyTorch: x * clip(x + 3, 0, 6) / 6 associates the other way.
            rules.push(Rule {
                name: "hard_sigmoid",
                pattern: h,
                rewrite: sigmoid,
            });
        }
        let x = || any("x");
        let relu6 = op(
            "clip",
            [
                op("add", [x(), leaf("three")]).commutative(),
                leaf("lo"),
                leaf("six"),
            ],
        );
        rules.insert(
            0,
            Rule {
                name: "hard_swish",
                pattern: op(
                    "div",
                    [op("mul", [x(), relu6]).commutative(), leaf("six_div")],
                ),
                rewrite: swish,
            },
        );
        Ok(apply_rules(g, cx, NAME, &rules)? > 0)
    }
}

/// (alpha, beta) of the matched HardSigmoid, if its constants are right.
fn params(g: &Graph, cx: &PassContext, m: &Match) -> Option<(f64, f64)> {
    let s = |k: &str| m.values.get(k).map(|v| splat(g, cx.weights, *v));
    if s("lo")? != Some(0.0) {
        return None;
    }
    if let Some(alpha) = s("alpha") {
        (s("hi")? == Some(1.0)).then_some(())?;
        return Some((alpha?, s("beta")??));
    }
    let six = s("six")?? == 6.0 && s("three")?? == 3.0;
    let scale = match (s("six_div"), s("sixth")) {
        (Some(Some(d)), _) if d == 6.0 => true,
        (_, Some(Some(k))) => (k - 1.0 / 6.0).abs() < 1e-6,
        _ => false,
    };
    (six && scale).then_some((1.0 / 6.0, 0.5))
}

fn program(alpha: f64, beta: f64, swish: bool) -> Program {
    let b = |k: BinaryKind, a: Operand, c: Operand| Instr {
        f: RegionFn::Binary(k),
        args: vec![a, c],
    };
    use Operand::{Const, Input, Temp};
    let mut v = vec![
        b(BinaryKind::Mul, Input(0), Const(alpha)),
        b(BinaryKind::Add, Temp(0), Const(beta)),
        b(BinaryKind::Max, Temp(1), Const(0.0)),
        b(BinaryKind::Min, Temp(2), Const(1.0)),
    ];
    if swish {
        v.push(b(BinaryKind::Mul, Input(0), Temp(3)));
    }
    Program(v)
}

/// HardSwish as the region this pass forms: `x * clip(x / 6 + 1/2, 0, 1)`.
pub fn hard_swish_program() -> Program {
    program(1.0 / 6.0, 0.5, true)
}

/// True if `p` is [`hard_swish_program`] (its constants as f32 values, as the
/// region computes them): what a conv or matmul can apply as its activation.
pub fn is_hard_swish(p: &Program) -> bool {
    let f32_eq = |a: f64, b: f64| a as f32 == b as f32;
    let want = hard_swish_program();
    p.0.len() == want.0.len()
        && p.0.iter().zip(&want.0).all(|(a, b)| {
            a.f == b.f
                && a.args.len() == b.args.len()
                && a.args.iter().zip(&b.args).all(|(x, y)| match (x, y) {
                    (Operand::Const(x), Operand::Const(y)) => f32_eq(*x, *y),
                    _ => x == y,
                })
        })
}

fn form(g: &mut Graph, cx: &mut PassContext, m: &Match, swish: bool) -> Result<bool, String> {
    let Some((alpha, beta)) = params(g, cx, m) else {
        return Ok(false);
    };
    let x = m.v("x");
    let t = g.ty(x).clone();
    if t != g.node(m.root()).outputs[0] || !rlx_ir::ops::REGION_DTYPES.contains(&t.dtype) {
        return Ok(false);
    }
    let op = ElementwiseRegion {
        program: program(alpha, beta, swish),
    };
    let origin = union_origin(g, &rev(g, m));
    replace_root(g, cx.weights, m.root(), op, &[x], origin)?;
    Ok(true)
}

fn sigmoid(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    form(g, cx, m, false)
}

fn swish(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    form(g, cx, m, true)
}
