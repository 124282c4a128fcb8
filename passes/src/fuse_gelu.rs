//! GELU formation (`fuse-gelu`): the formulas exporters write out become one
//! `gelu` node.
//!
//! - Erf form: `0.5 * x * (1 + erf(x / sqrt(2)))` (also `x * 0.7071...`);
//! - Tanh form: `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))` with
//!   `x^3` as `pow(x, 3)` or `x*x*x`.
//!
//! The three factors may associate in any order, and `* 0.5` may be `/ 2`.

use std::f64::consts::{FRAC_1_SQRT_2, PI, SQRT_2};

use rlx_ir::ops::{Gelu, GeluApprox};
use rlx_ir::Graph;

use crate::fold_batchnorm::rev;
use crate::manager::{Pass, PassContext, PassError};
use crate::pattern::{any, apply_rules, leaf, op, Match, Pat, Rule};
use crate::rewrite::{replace_root, splat_near, union_origin};

pub struct FuseGelu;

const NAME: &str = "fuse-gelu";

/// Relative tolerance of the formula constants (exporters round them).
const TOL: f64 = 1e-4;

fn mul(a: Pat, b: Pat) -> Pat {
    op("mul", [a, b]).commutative()
}

/// `x * e * 0.5` in every association, and `x * e / 2`.
fn products(e: Pat) -> Vec<Pat> {
    let x = || any("x");
    vec![
        mul(mul(x(), e.clone()), leaf("half")),
        mul(mul(x(), leaf("half")), e.clone()),
        mul(x(), mul(e.clone(), leaf("half"))),
        op("div", [mul(x(), e), leaf("two")]),
    ]
}

fn erf_forms() -> Vec<Pat> {
    let scaled = [
        op("div", [any("x"), leaf("sqrt2")]),
        mul(any("x"), leaf("isqrt2")),
    ];
    scaled
        .into_iter()
        .flat_map(|s| products(op("add", [op("erf", [s]), leaf("one")]).commutative()))
        .collect()
}

fn tanh_forms() -> Vec<Pat> {
    let x = || any("x");
    let cubes = [
        op("pow", [x(), leaf("three")]),
        mul(x(), mul(x(), x())),
        mul(mul(x(), x()), x()),
    ];
    cubes
        .into_iter()
        .flat_map(|cube| {
            let inner = op("add", [x(), mul(leaf("c"), cube)]).commutative();
            let t = op("add", [op("tanh", [mul(leaf("k"), inner)]), leaf("one")]).commutative();
            products(t)
        })
        .collect()
}

impl Pass for FuseGelu {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let mut rules: Vec<Rule> = erf_forms()
            .into_iter()
            .map(|pattern| Rule {
                name: "gelu.erf",
                pattern,
                rewrite: erf,
            })
            .collect();
        rules.extend(tanh_forms().into_iter().map(|pattern| Rule {
            name: "gelu.tanh",
            pattern,
            rewrite: tanh,
        }));
        Ok(apply_rules(g, cx, NAME, &rules)? > 0)
    }
}

/// Checks the bound constants against their expected values.
fn constants_ok(g: &Graph, cx: &PassContext, m: &Match, want: &[(&str, f64)]) -> bool {
    want.iter().all(|(name, v)| match m.values.get(name) {
        Some(c) => splat_near(g, cx.weights, *c, *v, TOL),
        None => true,
    })
}

fn finish(
    g: &mut Graph,
    cx: &mut PassContext,
    m: &Match,
    approximate: GeluApprox,
) -> Result<bool, String> {
    let x = m.v("x");
    if *g.ty(x) != g.node(m.root()).outputs[0] || !g.ty(x).dtype.is_float() {
        return Ok(false);
    }
    let origin = union_origin(g, &rev(g, m));
    replace_root(g, cx.weights, m.root(), Gelu { approximate }, &[x], origin)?;
    Ok(true)
}

fn common() -> [(&'static str, f64); 3] {
    [("one", 1.0), ("half", 0.5), ("two", 2.0)]
}

fn erf(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let want = [("sqrt2", SQRT_2), ("isqrt2", FRAC_1_SQRT_2)];
    if !constants_ok(g, cx, m, &common()) || !constants_ok(g, cx, m, &want) {
        return Ok(false);
    }
    finish(g, cx, m, GeluApprox::None)
}

fn tanh(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let want = [("k", (2.0 / PI).sqrt()), ("c", 0.044715), ("three", 3.0)];
    if !constants_ok(g, cx, m, &common()) || !constants_ok(g, cx, m, &want) {
        return Ok(false);
    }
    finish(g, cx, m, GeluApprox::Tanh)
}
