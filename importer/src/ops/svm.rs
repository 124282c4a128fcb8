//! The `ai.onnx.ml` support vector machines: SVMRegressor and SVMClassifier
//! (libsvm's one-against-one voting, integer or string labels), as matrix products in
//! f64 over the kernel values `K(x, sv)`.

use rlx_ir::ops::{
    ArgReduce, ArgReduceKind, BinaryKind as B, Compare, CompareKind, Concat, MatMul, Unary,
    UnaryKind,
};
use rlx_ir::{DType, Tensor, Value};

use super::labels::Labels;
use super::ml::{floats_f64, post_transform_attr};
use super::{binary, cast, unsqueeze};
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

const ML: &str = "ai.onnx.ml";

pub fn register(r: &mut Registry) {
    r.add_in(ML, "SVMRegressor", 1, regressor);
    r.add_in(ML, "SVMClassifier", 1, classifier);
}

fn bad(reason: impl Into<String>) -> MapError {
    MapError::Unsupported(reason.into())
}

fn floats(cx: &mut NodeCtx, name: &str) -> Result<Vec<f64>, MapError> {
    Ok(floats_f64(cx, name)?.unwrap_or_default())
}

/// An f64 constant `[rows, cols]`.
fn matrix(cx: &mut NodeCtx, rows: usize, cols: usize, v: &[f64]) -> Result<Value, MapError> {
    let t = Tensor::from_slice(DType::F64, &[rows, cols], v).map_err(|e| bad(e.to_string()))?;
    Ok(cx.constant(t))
}

/// The input as f64 rows `[N, F]` (a 1-D input is one row) and `F`.
fn rows(cx: &mut NodeCtx) -> Result<(Value, usize), MapError> {
    let x = cx.req(0)?;
    let x = cast(cx, x, DType::F64)?;
    let x = match cx.rank(x) {
        1 => unsqueeze(cx, x, &[0])?,
        2 => x,
        r => {
            return Err(bad(format!(
                "an input of rank {r} (expected [N, F] or [F])"
            )))
        }
    };
    match cx.ty(x).shape.0[1].known() {
        Some(f) if f > 0 => Ok((x, f as usize)),
        _ => Err(bad("the feature count must be known")),
    }
}

/// `K(x, sv)` for every row and support vector: `[N, n_sv]`.
fn kernel(cx: &mut NodeCtx, x: Value, f: usize) -> Result<(Value, usize), MapError> {
    let sv = floats(cx, "support_vectors")?;
    if sv.is_empty() || sv.len() % f != 0 {
        return Err(bad(format!(
            "{} support vector values for {f} features",
            sv.len()
        )));
    }
    let n = sv.len() / f;
    let kind = cx.attr_choice(
        "kernel_type",
        "LINEAR",
        &["LINEAR", "POLY", "RBF", "SIGMOID"],
    )?;
    let params = floats(cx, "kernel_params")?;
    let (gamma, coef0, degree) = match params[..] {
        [] => (0.0, 0.0, 0.0),
        [g, c, d] => (g, c, d),
        _ => return Err(bad(format!("{} kernel_params (expected 3)", params.len()))),
    };
    // svᵀ `[F, n]`.
    let mut t = vec![0.0; f * n];
    for (i, row) in sv.chunks(f).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            t[j * n + i] = v;
        }
    }
    let svt = matrix(cx, f, n, &t)?;
    let dot = cx.add1(MatMul {}, &[x, svt])?;
    let scalar = |cx: &mut NodeCtx, v: f64| cx.scalar(DType::F64, v);
    let affine = |cx: &mut NodeCtx, v: Value| -> Result<Value, MapError> {
        let g = scalar(cx, gamma)?;
        let c = scalar(cx, coef0)?;
        let gv = binary(cx, B::Mul, v, g)?;
        binary(cx, B::Add, gv, c)
    };
    let k = match kind.as_str() {
        "LINEAR" => dot,
        "POLY" => {
            let a = affine(cx, dot)?;
            let d = scalar(cx, degree)?;
            binary(cx, B::Pow, a, d)?
        }
        "SIGMOID" => {
            let a = affine(cx, dot)?;
            cx.add1(
                Unary {
                    kind: UnaryKind::Tanh,
                },
                &[a],
            )?
        }
        _ => {
            // exp(-gamma * |x - sv|²), with |x - sv|² = |x|² - 2 x·sv + |sv|².
            let x2 = binary(cx, B::Mul, x, x)?;
            let ones = matrix(cx, f, 1, &vec![1.0; f])?;
            let xx = cx.add1(MatMul {}, &[x2, ones])?;
            let sv2: Vec<f64> = sv
                .chunks(f)
                .map(|r| r.iter().map(|v| v * v).sum())
                .collect();
            let ss = matrix(cx, 1, n, &sv2)?;
            let two = scalar(cx, -2.0)?;
            let cross = binary(cx, B::Mul, dot, two)?;
            let d = binary(cx, B::Add, xx, cross)?;
            let d = binary(cx, B::Add, d, ss)?;
            let g = scalar(cx, -gamma)?;
            let e = binary(cx, B::Mul, d, g)?;
            cx.add1(
                Unary {
                    kind: UnaryKind::Exp,
                },
                &[e],
            )?
        }
    };
    Ok((k, n))
}

fn no_post_transform(cx: &mut NodeCtx) -> Result<(), MapError> {
    let post = post_transform_attr(cx)?;
    if post != "NONE" {
        return cx.unsupported(format!("post_transform {post} on a support vector machine"));
    }
    Ok(())
}

/// SVMRegressor: `Σ coef_i K(x, sv_i) + rho` (f32 `[N, 1]`), or `x · coef +
/// rho` without support vectors; with `one_class`, 1 where that is
/// positive, else -1.
fn regressor(cx: &mut NodeCtx) -> Result<(), MapError> {
    no_post_transform(cx)?;
    let one_class = cx.attr_bool("one_class", false)?;
    let coef = floats(cx, "coefficients")?;
    let rho = floats(cx, "rho")?;
    let supports = cx.attr_i("n_supports", 0)?;
    let (x, f) = rows(cx)?;
    let (k, n) = if cx
        .attr_floats("support_vectors")?
        .is_none_or(|v| v.is_empty())
    {
        cx.ignore_attr("kernel_type");
        cx.ignore_attr("kernel_params");
        (x, f)
    } else {
        kernel(cx, x, f)?
    };
    if supports > 0 && supports as usize != n {
        return Err(bad(format!(
            "n_supports {supports} for {n} support vectors"
        )));
    }
    if coef.len() != n || rho.len() != 1 {
        return Err(bad(format!(
            "{} coefficients and {} rho for {n} support vectors (expected {n} and 1)",
            coef.len(),
            rho.len()
        )));
    }
    let c = matrix(cx, n, 1, &coef)?;
    let y = cx.add1(MatMul {}, &[k, c])?;
    let r = cx.scalar(DType::F64, rho[0])?;
    let mut y = binary(cx, B::Add, y, r)?;
    if one_class {
        let zero = cx.scalar(DType::F64, 0.0)?;
        let pos = cx.add1(
            Compare {
                kind: CompareKind::Greater,
            },
            &[y, zero],
        )?;
        let pos = cast(cx, pos, DType::F64)?;
        // 2 * pos - 1
        let two = cx.scalar(DType::F64, 2.0)?;
        let one = cx.scalar(DType::F64, 1.0)?;
        let p2 = binary(cx, B::Mul, pos, two)?;
        y = binary(cx, B::Sub, p2, one)?;
    }
    let y = cast(cx, y, DType::F32)?;
    cx.set_output(0, y);
    Ok(())
}

/// SVMClassifier with support vectors and without probabilities, as ONNX
/// Runtime runs it: for each class pair `(i, j)` the decision value
/// `Σ_{sv of i} coef[j-1][sv] K + Σ_{sv of j} coef[i][sv] K + rho[k]` votes
/// for `i` when positive, else for `j`; the label is the first class with the
/// most votes. Scores: the pair values (`[-s, s]` for two classes).
fn classifier(cx: &mut NodeCtx) -> Result<(), MapError> {
    no_post_transform(cx)?;
    if cx.attr_floats("prob_a")?.is_some() || cx.attr_floats("prob_b")?.is_some() {
        return cx.unsupported("probability estimates (prob_a/prob_b: libsvm's pairwise coupling)");
    }
    let labels = Labels::read(cx, "classlabels_ints")?;
    let per_class = cx.attr_ints("vectors_per_class")?.unwrap_or_default();
    let c = labels.len();
    if c < 2 || per_class.len() != c || per_class.iter().any(|&v| v < 0) {
        return Err(bad(format!(
            "{c} classes with vectors_per_class {per_class:?} (a classifier without support vectors is not supported)"
        )));
    }
    let coef = floats(cx, "coefficients")?;
    let rho = floats(cx, "rho")?;
    let (x, f) = rows(cx)?;
    let (k, n) = kernel(cx, x, f)?;
    let pairs = c * (c - 1) / 2;
    let counts: Vec<usize> = per_class.iter().map(|&v| v as usize).collect();
    if counts.iter().sum::<usize>() != n || coef.len() != (c - 1) * n || rho.len() != pairs {
        return Err(bad(format!(
            "{n} support vectors, {} coefficients and {} rho do not fit {c} classes",
            coef.len(),
            rho.len()
        )));
    }
    // The pair matrices are dense: bound them before allocating.
    const MAX_CELLS: usize = 1 << 26;
    if n.saturating_mul(pairs) > MAX_CELLS || pairs.saturating_mul(c) > MAX_CELLS {
        return Err(bad(format!(
            "{c} classes over {n} support vectors need pair matrices past {MAX_CELLS} values"
        )));
    }
    let start: Vec<usize> = counts
        .iter()
        .scan(0, |s, &v| {
            let at = *s;
            *s += v;
            Some(at)
        })
        .collect();
    // Pair weights `[n, pairs]` and the one-hot of each pair's two classes.
    let (mut w, mut first, mut second) = (
        vec![0.0; n * pairs],
        vec![0.0; pairs * c],
        vec![0.0; pairs * c],
    );
    let mut p = 0;
    for i in 0..c {
        for j in i + 1..c {
            for m in 0..counts[i] {
                w[(start[i] + m) * pairs + p] = coef[(j - 1) * n + start[i] + m];
            }
            for m in 0..counts[j] {
                w[(start[j] + m) * pairs + p] = coef[i * n + start[j] + m];
            }
            first[p * c + i] = 1.0;
            second[p * c + j] = 1.0;
            p += 1;
        }
    }
    let wm = matrix(cx, n, pairs, &w)?;
    let s = cx.add1(MatMul {}, &[k, wm])?;
    let r = matrix(cx, 1, pairs, &rho)?;
    let s = binary(cx, B::Add, s, r)?;
    // Votes: pair k goes to its first class when s > 0, else to its second.
    let zero = cx.scalar(DType::F64, 0.0)?;
    let pos = cx.add1(
        Compare {
            kind: CompareKind::Greater,
        },
        &[s, zero],
    )?;
    let pos = cast(cx, pos, DType::F64)?;
    let one = cx.scalar(DType::F64, 1.0)?;
    let neg = binary(cx, B::Sub, one, pos)?;
    let (fi, se) = (
        matrix(cx, pairs, c, &first)?,
        matrix(cx, pairs, c, &second)?,
    );
    let va = cx.add1(MatMul {}, &[pos, fi])?;
    let vb = cx.add1(MatMul {}, &[neg, se])?;
    let votes = binary(cx, B::Add, va, vb)?;
    let winner = cx.add1(
        ArgReduce {
            kind: ArgReduceKind::Max,
            axis: 1,
            keepdims: false,
            select_last_index: false,
        },
        &[votes],
    )?;
    let label = labels.pick(cx, winner)?;
    let s = cast(cx, s, DType::F32)?;
    let scores = if c == 2 {
        let minus = cx.add1(
            Unary {
                kind: UnaryKind::Neg,
            },
            &[s],
        )?;
        cx.add1(Concat { axis: 1 }, &[minus, s])?
    } else {
        s
    };
    cx.set_output(0, label);
    cx.set_output(1, scores);
    Ok(())
}
