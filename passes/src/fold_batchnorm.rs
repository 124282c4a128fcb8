//! BatchNormalization folding (`fold-batchnorm`). The importer turns a
//! BatchNormalization into `x * a + b` with per-channel constants; after
//! constant folding these are leaves, and here they fold into the weights and
//! bias of the conv (or the columns of the constant matmul operand) before them:
//!
//! - `mul(conv(x, w, b?), a)` -> `conv(x, w*a, b*a)`
//! - `add(conv(x, w, b?), d)` -> `conv(x, w, b+d)`
//! - `mul(matmul(x, W), a)` -> `matmul(x, W*a)` (columns scaled)
//! - `mul(add(matmul(x, W), c), a)` -> `add(matmul(x, W*a), c*a)`
//! - `add(add(matmul(x, W), c), d)` -> `add(matmul(x, W), c+d)`
//!
//! Constants must be per channel (the conv's axis 1, the matmul's last axis)
//! and must not widen the output by broadcasting.

use rlx_ir::ops::{Binary, BinaryKind, MatMul};
use rlx_ir::{DType, Graph, Op, Tensor};

use crate::manager::{Pass, PassContext, PassError};
use crate::pattern::{any, apply_rules, leaf, op, Match, Rule};
use crate::rewrite::{const_of, constant, float_tensor, replace_root, union_origin};

pub struct FoldBatchNorm;

const NAME: &str = "fold-batchnorm";

impl Pass for FoldBatchNorm {
    fn name(&self) -> &'static str {
        NAME
    }

    fn run(&self, g: &mut Graph, cx: &mut PassContext) -> Result<bool, PassError> {
        let conv2 = || op("conv", [any("x"), leaf("w")]).bind("conv");
        let conv3 = || op("conv", [any("x"), leaf("w"), leaf("b")]).bind("conv");
        let mm = || op("matmul", [any("x"), leaf("w")]).bind("mm");
        let rules = [
            Rule {
                name: "fold-batchnorm.conv-scale",
                pattern: op("mul", [conv2(), leaf("a")]).commutative(),
                rewrite: conv_scale,
            },
            Rule {
                name: "fold-batchnorm.conv-scale",
                pattern: op("mul", [conv3(), leaf("a")]).commutative(),
                rewrite: conv_scale,
            },
            Rule {
                name: "fold-batchnorm.conv-shift",
                pattern: op("add", [conv2(), leaf("d")]).commutative(),
                rewrite: conv_shift,
            },
            Rule {
                name: "fold-batchnorm.conv-shift",
                pattern: op("add", [conv3(), leaf("d")]).commutative(),
                rewrite: conv_shift,
            },
            Rule {
                name: "fold-batchnorm.matmul-scale",
                pattern: op("mul", [mm(), leaf("a")]).commutative(),
                rewrite: matmul_scale,
            },
            Rule {
                name: "fold-batchnorm.matmul-scale",
                pattern: op(
                    "mul",
                    [
                        op("add", [mm(), leaf("c")]).commutative().bind("add"),
                        leaf("a"),
                    ],
                )
                .commutative(),
                rewrite: matmul_scale,
            },
            Rule {
                name: "fold-batchnorm.matmul-shift",
                pattern: op(
                    "add",
                    [
                        op("add", [mm(), leaf("c")]).commutative().bind("add"),
                        leaf("d"),
                    ],
                )
                .commutative(),
                rewrite: matmul_shift,
            },
        ];
        Ok(apply_rules(g, cx, NAME, &rules)? > 0)
    }
}

/// The per-channel values of constant `t` against an output of `rank` dims whose
/// channel axis is `axis` with `c` channels: `t` must broadcast along every other
/// axis. Returns `c` values.
pub fn per_channel(t: &Tensor, rank: usize, axis: usize, c: usize) -> Option<Vec<f64>> {
    let dims = t.dims();
    if dims.len() > rank {
        return None;
    }
    let pad = rank - dims.len();
    for (i, &d) in dims.iter().enumerate() {
        let a = pad + i;
        if d != 1 && !(a == axis && d == c) {
            return None;
        }
    }
    let v = t.to_f64_vec()?;
    match v.len() {
        1 => Some(vec![v[0]; c]),
        n if n == c => Some(v),
        _ => None,
    }
}

/// `t` with each of its `s.len()` leading-axis blocks scaled by `s[i]`
/// (`cols`: the trailing axis instead).
fn scale(t: &Tensor, s: &[f64], cols: bool) -> Option<Tensor> {
    let n = t.numel();
    let c = s.len();
    if c == 0 || n % c != 0 {
        return None;
    }
    let block = n / c;
    let f = |i: usize| if cols { s[i % c] } else { s[i / block] };
    match t.dtype() {
        DType::F32 => {
            let v: Vec<f32> = t
                .as_slice::<f32>()
                .ok()?
                .iter()
                .enumerate()
                .map(|(i, x)| (f64::from(*x) * f(i)) as f32)
                .collect();
            Tensor::from_slice(t.dtype(), t.dims(), &v).ok()
        }
        DType::F64 => {
            let v: Vec<f64> = t
                .as_slice::<f64>()
                .ok()?
                .iter()
                .enumerate()
                .map(|(i, x)| x * f(i))
                .collect();
            Tensor::from_slice(t.dtype(), t.dims(), &v).ok()
        }
        _ => None,
    }
}

fn float_dtype_ok(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64)
}

/// Channels and rank of the conv in the match, if its output type is the root's.
fn conv_geom(g: &Graph, cx: &PassContext, m: &Match) -> Option<(usize, usize, Tensor)> {
    let conv = m.n("conv");
    let w = const_of(g, cx.weights, m.v("w"))?;
    let out = &g.node(conv).outputs[0];
    if *out != g.node(m.root()).outputs[0] || !float_dtype_ok(out.dtype) {
        return None;
    }
    Some((*w.dims().first()?, out.rank(), w))
}

fn bias_of(g: &Graph, cx: &PassContext, m: &Match, c: usize) -> Option<Vec<f64>> {
    match m.values.get("b") {
        Some(b) => {
            let v = const_of(g, cx.weights, *b)?.to_f64_vec()?;
            (v.len() == c).then_some(v)
        }
        None => Some(vec![0.0; c]),
    }
}

fn conv_op(g: &Graph, m: &Match) -> Op {
    g.node(m.n("conv")).op.clone()
}

fn conv_scale(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let Some((c, rank, w)) = conv_geom(g, cx, m) else {
        return Ok(false);
    };
    let Some(a) = const_of(g, cx.weights, m.v("a")).and_then(|t| per_channel(&t, rank, 1, c))
    else {
        return Ok(false);
    };
    let (Some(w2), Some(b)) = (scale(&w, &a, false), bias_of(g, cx, m, c)) else {
        return Ok(false);
    };
    let b2: Vec<f64> = b.iter().zip(&a).map(|(b, a)| b * a).collect();
    finish_conv(g, cx, m, Kernel::Scaled(w2), m.values.get("b").map(|_| b2))
}

fn conv_shift(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let Some((c, rank, _)) = conv_geom(g, cx, m) else {
        return Ok(false);
    };
    let Some(d) = const_of(g, cx.weights, m.v("d")).and_then(|t| per_channel(&t, rank, 1, c))
    else {
        return Ok(false);
    };
    let Some(b) = bias_of(g, cx, m, c) else {
        return Ok(false);
    };
    let b2: Vec<f64> = b.iter().zip(&d).map(|(b, d)| b + d).collect();
    finish_conv(g, cx, m, Kernel::Keep, Some(b2))
}

/// The conv's new weights: rescaled, or the matched weights kept as they are.
enum Kernel {
    Scaled(Tensor),
    Keep,
}

fn finish_conv(
    g: &mut Graph,
    cx: &mut PassContext,
    m: &Match,
    kernel: Kernel,
    bias: Option<Vec<f64>>,
) -> Result<bool, String> {
    let dtype = g.ty(m.v("w")).dtype;
    let origin = union_origin(g, &rev(g, m));
    let conv_name = g.node(m.n("conv")).name.clone();
    let mut ins = vec![m.v("x")];
    ins.push(match kernel {
        Kernel::Scaled(w) => constant(g, cx.weights, &format!("{conv_name}.w"), origin.clone(), w),
        Kernel::Keep => m.v("w"),
    });
    if let Some(b) = bias {
        let Some(t) = float_tensor(dtype, &[b.len()], &b) else {
            return Ok(false);
        };
        ins.push(constant(
            g,
            cx.weights,
            &format!("{conv_name}.b"),
            origin.clone(),
            t,
        ));
    }
    let op = conv_op(g, m);
    replace_root(g, cx.weights, m.root(), op, &ins, origin)?;
    Ok(true)
}

/// Matched nodes, producers first (the order origins are listed in): a
/// post-order from the root over the matched nodes, inputs by port.
pub fn rev(g: &Graph, m: &Match) -> Vec<rlx_ir::NodeId> {
    let set: std::collections::HashSet<rlx_ir::NodeId> = m.inner.iter().copied().collect();
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    fn visit(
        g: &Graph,
        n: rlx_ir::NodeId,
        set: &std::collections::HashSet<rlx_ir::NodeId>,
        seen: &mut std::collections::HashSet<rlx_ir::NodeId>,
        out: &mut Vec<rlx_ir::NodeId>,
    ) {
        if !set.contains(&n) || !seen.insert(n) {
            return;
        }
        for v in g.inputs_of(n) {
            visit(g, v.node, set, seen, out);
        }
        out.push(n);
    }
    visit(g, m.root(), &set, &mut seen, &mut out);
    out
}

/// Columns and rank of the matmul in the match, when `W` is a 2-D float constant.
fn mm_geom(g: &Graph, cx: &PassContext, m: &Match) -> Option<(usize, usize, Tensor)> {
    let w = const_of(g, cx.weights, m.v("w"))?;
    let out = &g.node(m.n("mm")).outputs[0];
    if w.dims().len() != 2 || *out != g.node(m.root()).outputs[0] || !float_dtype_ok(out.dtype) {
        return None;
    }
    Some((w.dims()[1], out.rank(), w))
}

fn matmul_scale(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let Some((n, rank, w)) = mm_geom(g, cx, m) else {
        return Ok(false);
    };
    let Some(a) =
        const_of(g, cx.weights, m.v("a")).and_then(|t| per_channel(&t, rank, rank - 1, n))
    else {
        return Ok(false);
    };
    let Some(w2) = scale(&w, &a, true) else {
        return Ok(false);
    };
    let shift = match m.values.get("c") {
        Some(c) => {
            let Some(c) =
                const_of(g, cx.weights, *c).and_then(|t| per_channel(&t, rank, rank - 1, n))
            else {
                return Ok(false);
            };
            Some(c.iter().zip(&a).map(|(c, a)| c * a).collect::<Vec<f64>>())
        }
        None => None,
    };
    let origin = union_origin(g, &rev(g, m));
    let mm = m.n("mm");
    let name = g.node(mm).name.clone();
    let dtype = w2.dtype();
    let wv = constant(g, cx.weights, &format!("{name}.w"), origin.clone(), w2);
    match shift {
        None => replace_root(g, cx.weights, m.root(), MatMul {}, &[m.v("x"), wv], origin)?,
        Some(c) => {
            let Some(t) = float_tensor(dtype, &[n], &c) else {
                return Ok(false);
            };
            let cv = constant(g, cx.weights, &format!("{name}.b"), origin.clone(), t);
            g.set_inputs(mm, &[m.v("x"), wv])
                .map_err(|e| e.to_string())?;
            let mmv = rlx_ir::Value::of(mm);
            replace_root(g, cx.weights, m.root(), add(), &[mmv, cv], origin)?;
        }
    }
    Ok(true)
}

fn add() -> Binary {
    Binary {
        kind: BinaryKind::Add,
    }
}

fn matmul_shift(g: &mut Graph, cx: &mut PassContext, m: &Match) -> Result<bool, String> {
    let Some((n, rank, _)) = mm_geom(g, cx, m) else {
        return Ok(false);
    };
    let get =
        |k: &str| const_of(g, cx.weights, m.v(k)).and_then(|t| per_channel(&t, rank, rank - 1, n));
    let (Some(c), Some(d)) = (get("c"), get("d")) else {
        return Ok(false);
    };
    let Some(dtype) = const_of(g, cx.weights, m.v("c")).map(|t| t.dtype()) else {
        return Ok(false);
    };
    let sum: Vec<f64> = c.iter().zip(&d).map(|(c, d)| c + d).collect();
    let Some(t) = float_tensor(dtype, &[n], &sum) else {
        return Ok(false);
    };
    let origin = union_origin(g, &rev(g, m));
    let name = g.node(m.n("mm")).name.clone();
    let cv = constant(g, cx.weights, &format!("{name}.b"), origin.clone(), t);
    let mmv = rlx_ir::Value::of(m.n("mm"));
    replace_root(g, cx.weights, m.root(), add(), &[mmv, cv], origin)?;
    Ok(true)
}
