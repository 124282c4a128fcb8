//! The `ai.onnx.ml` ops that are elementwise, linear or lookups, as RLX ops:
//! Scaler, Binarizer, Normalizer, Imputer, LinearRegressor, LinearClassifier
//! (integer labels), ArrayFeatureExtractor, OneHotEncoder (integer
//! categories), LabelEncoder (integer and float keys and values) and
//! FeatureVectorizer. The tree ensembles are in `trees.rs`.

use rlx_ir::ops::{
    ArgReduce, ArgReduceKind, BinaryKind as B, Compare, CompareKind, Concat, Gather, MatMul, Pad,
    PadMode, Reduce, ReduceKind, Slice, Softmax, SoftmaxKind, Unary, UnaryKind, Where,
};
use rlx_ir::{DType, Tensor, Value};

use super::labels::Labels;
use super::{binary, cast, unsqueeze};
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

const ML: &str = "ai.onnx.ml";

pub fn register(r: &mut Registry) {
    r.add_in(ML, "Scaler", 1, scaler);
    r.add_in(ML, "Binarizer", 1, binarizer);
    r.add_in(ML, "Normalizer", 1, normalizer);
    r.add_in(ML, "Imputer", 1, imputer);
    r.add_in(ML, "LinearRegressor", 1, linear_regressor);
    r.add_in(ML, "LinearClassifier", 1, linear_classifier);
    r.add_in(ML, "ArrayFeatureExtractor", 1, array_feature_extractor);
    r.add_in(ML, "OneHotEncoder", 1, one_hot_encoder);
    r.add_in(ML, "LabelEncoder", 2, label_encoder);
    r.add_in(ML, "FeatureVectorizer", 1, feature_vectorizer);
    r.add_in(ML, "CategoryMapper", 1, category_mapper);
    r.add_in(ML, "ZipMap", 1, zip_map);
}

fn err(cx: &NodeCtx, reason: impl Into<String>) -> MapError {
    let _ = cx;
    MapError::Unsupported(reason.into())
}

fn floats(cx: &mut NodeCtx, v: &[f32]) -> Result<Value, MapError> {
    let t = Tensor::from_f32(&[v.len()], v).map_err(|e| err(cx, e.to_string()))?;
    Ok(cx.constant(t))
}

fn ints(cx: &mut NodeCtx, v: &[i64]) -> Value {
    cx.const_i64(v)
}

/// The node's input as a 2-D `[N, C]` f32 matrix (a 1-D input is one row).
fn rows_f32(cx: &mut NodeCtx) -> Result<Value, MapError> {
    let x = cx.req(0)?;
    let x = cast(cx, x, DType::F32)?;
    match cx.rank(x) {
        1 => unsqueeze(cx, x, &[0]),
        2 => Ok(x),
        r => Err(err(
            cx,
            format!("an input of rank {r} (expected [N, C] or [C])"),
        )),
    }
}

/// `(x - offset) * scale`, per feature or for all, in f32.
fn scaler(cx: &mut NodeCtx) -> Result<(), MapError> {
    let offset = cx.attr_floats("offset")?.unwrap_or_else(|| vec![0.0]);
    let scale = cx.attr_floats("scale")?.unwrap_or_else(|| vec![1.0]);
    let x = cx.req(0)?;
    let x = cast(cx, x, DType::F32)?;
    let (o, s) = (floats(cx, &offset)?, floats(cx, &scale)?);
    let d = binary(cx, B::Sub, x, o)?;
    let y = binary(cx, B::Mul, d, s)?;
    cx.set_output(0, y);
    Ok(())
}

/// `x > threshold ? 1 : 0`, in x's dtype.
fn binarizer(cx: &mut NodeCtx) -> Result<(), MapError> {
    let threshold = cx.attr_f("threshold", 0.0)?;
    let x = cx.req(0)?;
    let d = cx.dtype(x);
    let t = cx.scalar(d, threshold as f64)?;
    let gt = cx.add1(
        Compare {
            kind: CompareKind::Greater,
        },
        &[x, t],
    )?;
    let y = cast(cx, gt, d)?;
    cx.set_output(0, y);
    Ok(())
}

fn reduce(cx: &mut NodeCtx, kind: ReduceKind, x: Value, axis: i64) -> Result<Value, MapError> {
    let axes = ints(cx, &[axis]);
    cx.add1(
        Reduce {
            kind,
            keepdims: true,
            noop_with_empty_axes: false,
        },
        &[x, axes],
    )
}

/// Each row divided by its max, its L1 norm or its L2 norm.
fn normalizer(cx: &mut NodeCtx) -> Result<(), MapError> {
    let norm = cx.attr_choice("norm", "MAX", &["MAX", "L1", "L2"])?;
    let x = rows_f32(cx)?;
    let n = match norm.as_str() {
        "MAX" => reduce(cx, ReduceKind::Max, x, 1)?,
        "L1" => reduce(cx, ReduceKind::L1, x, 1)?,
        _ => reduce(cx, ReduceKind::L2, x, 1)?,
    };
    // A row whose norm is 0 stays as it is (ONNX Runtime divides only by
    // a non-zero norm), not 0/0.
    let zero = cx.scalar(DType::F32, 0.0)?;
    let one = cx.scalar(DType::F32, 1.0)?;
    let is_zero = cx.add1(
        Compare {
            kind: CompareKind::Equal,
        },
        &[n, zero],
    )?;
    let n = cx.add1(Where {}, &[is_zero, one, n])?;
    let y = binary(cx, B::Div, x, n)?;
    cx.set_output(0, y);
    Ok(())
}

/// Replaces `replaced_value` (NaN by default for floats) by the imputed
/// value of its feature.
fn imputer(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let d = cx.dtype(x);
    let (hole, fill) = if d.is_float() {
        let v = cx.attr_floats("imputed_value_floats")?.unwrap_or_default();
        let r = cx.attr_f("replaced_value_float", 0.0)?;
        let fill = floats(cx, &v)?;
        let fill = cast(cx, fill, d)?;
        let hole = if r.is_nan() {
            cx.add1(
                Unary {
                    kind: UnaryKind::IsNan,
                },
                &[x],
            )?
        } else {
            let r = cx.scalar(d, r as f64)?;
            cx.add1(
                Compare {
                    kind: CompareKind::Equal,
                },
                &[x, r],
            )?
        };
        (hole, fill)
    } else {
        let v = cx.attr_ints("imputed_value_int64s")?.unwrap_or_default();
        let r = cx.attr_i("replaced_value_int64", 0)?;
        let fill = ints(cx, &v);
        let fill = cast(cx, fill, d)?;
        let r = cx.scalar(d, r as f64)?;
        let hole = cx.add1(
            Compare {
                kind: CompareKind::Equal,
            },
            &[x, r],
        )?;
        (hole, fill)
    };
    if cx.ty(fill).shape.numel().known() == Some(0) {
        return Err(MapError::Attr {
            name: "imputed_value_floats".into(),
            reason: "is required".into(),
        });
    }
    let y = cx.add1(Where {}, &[hole, fill, x])?;
    cx.set_output(0, y);
    Ok(())
}

/// `x · coefficientsᵀ + intercepts` as `[N, E]` f32 scores.
fn linear_scores(cx: &mut NodeCtx, targets: usize) -> Result<Value, MapError> {
    let coef = cx
        .attr_floats("coefficients")?
        .ok_or_else(|| MapError::Attr {
            name: "coefficients".into(),
            reason: "is required".into(),
        })?;
    let intercepts = cx.attr_floats("intercepts")?;
    if targets == 0 || coef.len() % targets != 0 {
        return Err(MapError::Attr {
            name: "coefficients".into(),
            reason: format!("{} values do not split into {targets} rows", coef.len()),
        });
    }
    let c = coef.len() / targets;
    let x = rows_f32(cx)?;
    let w = Tensor::from_f32(&[targets, c], &coef).map_err(|e| err(cx, e.to_string()))?;
    let w = cx.constant(w);
    let wt = cx.add1(rlx_ir::ops::Transpose { perm: vec![1, 0] }, &[w])?;
    let mut y = cx.add1(MatMul {}, &[x, wt])?;
    if let Some(b) = intercepts {
        if b.len() != targets {
            return Err(MapError::Attr {
                name: "intercepts".into(),
                reason: format!("{} values for {targets} targets", b.len()),
            });
        }
        let b = floats(cx, &b)?;
        y = binary(cx, B::Add, y, b)?;
    }
    Ok(y)
}

fn linear_regressor(cx: &mut NodeCtx) -> Result<(), MapError> {
    let targets = cx.attr_i("targets", 1)?.max(0) as usize;
    let post = post_transform_attr(cx)?;
    if post != "NONE" {
        return cx.unsupported(format!("post_transform {post}"));
    }
    let y = linear_scores(cx, targets)?;
    cx.set_output(0, y);
    Ok(())
}

/// Scores after `post_transform` (NONE, LOGISTIC, SOFTMAX).
/// The `post_transform` attribute of the ml ops (`NONE` when absent).
pub(super) fn post_transform_attr(cx: &mut NodeCtx) -> Result<String, MapError> {
    cx.attr_choice(
        "post_transform",
        "NONE",
        &["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"],
    )
}

/// A float list given as `name` (floats) or `name_as_tensor` (any float
/// tensor), widened to f64.
pub(super) fn floats_f64(cx: &mut NodeCtx, name: &str) -> Result<Option<Vec<f64>>, MapError> {
    let plain = cx.attr_floats(name)?;
    let tensor = cx.attr_t(&format!("{name}_as_tensor"))?;
    match (plain, tensor) {
        (Some(_), Some(_)) => Err(MapError::Attr {
            name: name.into(),
            reason: format!("is given both as floats and as `{name}_as_tensor`"),
        }),
        (Some(v), None) => Ok(Some(v.into_iter().map(f64::from).collect())),
        (None, Some(t)) => t.to_f64_vec().map(Some).ok_or_else(|| {
            MapError::Unsupported(format!("`{name}_as_tensor` is not a float tensor"))
        }),
        (None, None) => Ok(None),
    }
}

/// ONNX-ML's `post_transform` over the last axis of `z` (f32).
pub(super) fn post_transform(cx: &mut NodeCtx, z: Value, post: &str) -> Result<Value, MapError> {
    match post {
        "NONE" => Ok(z),
        "LOGISTIC" => cx.add1(
            Unary {
                kind: UnaryKind::Sigmoid,
            },
            &[z],
        ),
        "SOFTMAX" => cx.add1(
            Softmax {
                kind: SoftmaxKind::Softmax,
                axis: -1,
            },
            &[z],
        ),
        "SOFTMAX_ZERO" => softmax_zero(cx, z),
        "PROBIT" => cx.unsupported("post_transform PROBIT (it needs an inverse erf)"),
        other => cx.unsupported(format!("post_transform {other}")),
    }
}

/// Softmax over the entries that are not (near) zero, as ONNX Runtime
/// computes it: `exp(z - max)` where `|z| > 1e-7`, `z * exp(-max)` elsewhere,
/// over the sum of the exponentials.
fn softmax_zero(cx: &mut NodeCtx, z: Value) -> Result<Value, MapError> {
    let un = |cx: &mut NodeCtx, kind, v| cx.add1(Unary { kind }, &[v]);
    let m = reduce(cx, ReduceKind::Max, z, -1)?;
    let shifted = binary(cx, B::Sub, z, m)?;
    let e = un(cx, UnaryKind::Exp, shifted)?;
    let a = un(cx, UnaryKind::Abs, z)?;
    let eps = cx.scalar(DType::F32, 1e-7)?;
    let live = cx.add1(
        Compare {
            kind: CompareKind::Greater,
        },
        &[a, eps],
    )?;
    let zero = cx.scalar(DType::F32, 0.0)?;
    let counted = cx.add1(Where {}, &[live, e, zero])?;
    let sum = reduce(cx, ReduceKind::Sum, counted, -1)?;
    let neg_m = un(cx, UnaryKind::Neg, m)?;
    let scale = un(cx, UnaryKind::Exp, neg_m)?;
    let small = binary(cx, B::Mul, z, scale)?;
    let num = cx.add1(Where {}, &[live, e, small])?;
    binary(cx, B::Div, num, sum)
}

/// Labels (integer or string classes) and scores. With one coefficient row and two
/// classes the model is binary: the scores are `[1-s, s]` (as ORT gives them,
/// with or without LOGISTIC) and the label is the second class when `s > 0`
/// (`p > 0.5` after LOGISTIC).
fn linear_classifier(cx: &mut NodeCtx) -> Result<(), MapError> {
    let labels = Labels::read(cx, "classlabels_ints")?;
    let post = post_transform_attr(cx)?;
    // ONNX Runtime gives the same scores whatever multi_class says (skl2onnx
    // writes 1 for multinomial logistic regression): read and not used.
    cx.attr_i("multi_class", 0)?;
    let n_coef = cx.attr_floats("coefficients")?.map_or(0, |c| c.len());
    let e = if labels.len() == 2 && cx.attr_floats("intercepts")?.is_some_and(|b| b.len() == 1) {
        1
    } else {
        labels.len()
    };
    if e == 0 || n_coef % e != 0 {
        return cx.unsupported(format!(
            "{n_coef} coefficients for {} classes",
            labels.len()
        ));
    }
    let z = linear_scores(cx, e)?;
    let (scores, winner) = if e == 1 {
        let s = post_transform(cx, z, &post)?;
        let threshold = if post == "LOGISTIC" { 0.5 } else { 0.0 };
        let one = cx.scalar(DType::F32, 1.0)?;
        let low = binary(cx, B::Sub, one, s)?;
        let scores = cx.add1(rlx_ir::ops::Concat { axis: 1 }, &[low, s])?;
        let t = cx.scalar(DType::F32, threshold)?;
        let pos = cx.add1(
            Compare {
                kind: CompareKind::Greater,
            },
            &[s, t],
        )?;
        let pos = cast(cx, pos, DType::I64)?;
        let flat = cx.const_i64(&[-1]);
        let pos = cx.add1(rlx_ir::ops::Reshape { allowzero: false }, &[pos, flat])?;
        (scores, pos)
    } else {
        let s = post_transform(cx, z, &post)?;
        let w = cx.add1(
            ArgReduce {
                kind: ArgReduceKind::Max,
                axis: 1,
                keepdims: false,
                select_last_index: false,
            },
            &[s],
        )?;
        (s, w)
    };
    let label = labels.pick(cx, winner)?;
    cx.set_output(0, label);
    cx.set_output(1, scores);
    Ok(())
}

/// The inputs side by side as f32 columns `[N, sum(inputdimensions)]`: each
/// `[N, C]` (or `[C]`, one row) input gives its first `inputdimensions[i]`
/// columns, zeros after its last one, as ONNX Runtime copies them.
fn feature_vectorizer(cx: &mut NodeCtx) -> Result<(), MapError> {
    let n = cx.num_inputs();
    let dims = cx
        .attr_ints("inputdimensions")?
        .ok_or_else(|| MapError::Attr {
            name: "inputdimensions".into(),
            reason: "is required".into(),
        })?;
    if dims.len() != n || dims.iter().any(|&d| d < 0) {
        return Err(MapError::Attr {
            name: "inputdimensions".into(),
            reason: format!("{dims:?} for {n} inputs"),
        });
    }
    let mut cols = Vec::with_capacity(n);
    for (i, &want) in dims.iter().enumerate() {
        let x = cx.req(i)?;
        let x = cast(cx, x, DType::F32)?;
        let x = match cx.rank(x) {
            1 => unsqueeze(cx, x, &[0])?,
            2 => x,
            r => {
                return Err(err(
                    cx,
                    format!("input {i} of rank {r} (expected [N, C] or [C])"),
                ))
            }
        };
        let Some(have) = cx.ty(x).shape.0[1].known() else {
            return Err(err(cx, format!("input {i} has a symbolic column count")));
        };
        let x = if have > want {
            let (s, e, a) = (ints(cx, &[0]), ints(cx, &[want]), ints(cx, &[1]));
            cx.add1(Slice {}, &[x, s, e, a])?
        } else if have < want {
            let pads = ints(cx, &[0, 0, 0, want - have]);
            let zero = cx.scalar(DType::F32, 0.0)?;
            cx.add1(
                Pad {
                    mode: PadMode::Constant,
                },
                &[x, pads, zero],
            )?
        } else {
            x
        };
        cols.push(x);
    }
    let y = if cols.len() == 1 {
        cols[0]
    } else {
        cx.add1(Concat { axis: 1 }, &cols)?
    };
    cx.set_output(0, y);
    Ok(())
}

/// `x[..., indices]`; a 1-D `x` gives `[1, k]`.
fn array_feature_extractor(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (x, i) = (cx.req(0)?, cx.req(1)?);
    let flat = cx.const_i64(&[-1]);
    let i = cx.add1(rlx_ir::ops::Reshape { allowzero: false }, &[i, flat])?;
    let x = if cx.rank(x) == 1 {
        unsqueeze(cx, x, &[0])?
    } else {
        x
    };
    let y = cx.add1(Gather { axis: -1 }, &[x, i])?;
    cx.set_output(0, y);
    Ok(())
}

/// One f32 column per category: `[..., C]`; a value in no category gives a
/// zero row (`zeros=1`, the default) or is refused at import (`zeros=0`
/// needs run-time checking, not supported).
fn one_hot_encoder(cx: &mut NodeCtx) -> Result<(), MapError> {
    if cx.attr_strings("cats_strings")?.is_some() {
        return cx.unsupported("string categories (string tensors)");
    }
    let cats = cx.attr_ints("cats_int64s")?.ok_or_else(|| MapError::Attr {
        name: "cats_int64s".into(),
        reason: "is required".into(),
    })?;
    if cx.attr_i("zeros", 1)? == 0 {
        return cx.unsupported("zeros=0 (an error for unknown categories at run time)");
    }
    let x = cx.req(0)?;
    let x = cast(cx, x, DType::I64)?;
    let r = cx.rank(x) as i64;
    let x = unsqueeze(cx, x, &[r])?;
    let c = ints(cx, &cats);
    let eq = cx.add1(
        Compare {
            kind: CompareKind::Equal,
        },
        &[x, c],
    )?;
    let y = cast(cx, eq, DType::F32)?;
    cx.set_output(0, y);
    Ok(())
}

/// Maps each key to its value by an equality table (`[..., K]`), the default
/// where no key matches. Integer and float keys and values.
fn label_encoder(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let strings = [
        "keys_strings",
        "values_strings",
        "keys_tensor",
        "values_tensor",
    ]
    .iter()
    .any(|a| cx.has_attr(a));
    if strings || cx.dtype(x) == DType::Str {
        return label_map(cx, x);
    }
    let keys: Vec<f64> = if let Some(k) = cx.attr_ints("keys_int64s")? {
        k.iter().map(|&v| v as f64).collect()
    } else if let Some(k) = cx.attr_floats("keys_floats")? {
        k.iter().map(|&v| v as f64).collect()
    } else {
        return cx.unsupported("keys other than keys_int64s or keys_floats (strings, tensors)");
    };
    let (values, out, default) = if let Some(v) = cx.attr_ints("values_int64s")? {
        let d = cx.attr_i("default_int64", -1)? as f64;
        (
            v.iter().map(|&x| x as f64).collect::<Vec<f64>>(),
            DType::I64,
            d,
        )
    } else if let Some(v) = cx.attr_floats("values_floats")? {
        let d = cx.attr_f("default_float", -0.0)? as f64;
        (v.iter().map(|&x| x as f64).collect(), DType::F32, d)
    } else {
        return cx
            .unsupported("values other than values_int64s or values_floats (strings, tensors)");
    };
    if keys.len() != values.len() || keys.is_empty() {
        return Err(MapError::Attr {
            name: "values".into(),
            reason: format!("{} values for {} keys", values.len(), keys.len()),
        });
    }
    let kd = cx.dtype(x);
    let keys = rlx_ir::ops::values::float_tensor(DType::F64, &[keys.len()], &keys)
        .ok_or_else(|| err(cx, "keys"))?;
    let keys = cx.constant(keys);
    let keys = cast(cx, keys, kd)?;
    let r = cx.rank(x) as i64;
    let xe = unsqueeze(cx, x, &[r])?;
    let eq = cx.add1(
        Compare {
            kind: CompareKind::Equal,
        },
        &[xe, keys],
    )?;
    let eqi = cast(cx, eq, DType::I32)?;
    let at = cx.add1(
        ArgReduce {
            kind: ArgReduceKind::Max,
            axis: -1,
            keepdims: false,
            select_last_index: false,
        },
        &[eqi],
    )?;
    let axes = cx.const_i64(&[-1]);
    let hit = cx.add1(
        Reduce {
            kind: ReduceKind::Max,
            keepdims: false,
            noop_with_empty_axes: false,
        },
        &[eqi, axes],
    )?;
    let hit = cast(cx, hit, DType::Bool)?;
    let table = rlx_ir::ops::values::float_tensor(DType::F64, &[values.len()], &values)
        .ok_or_else(|| err(cx, "values"))?;
    let table = cx.constant(table);
    let table = cast(cx, table, out)?;
    let mapped = cx.add1(Gather { axis: 0 }, &[table, at])?;
    let default = cx.scalar(out, default)?;
    let y = cx.add1(Where {}, &[hit, mapped, default])?;
    cx.set_output(0, y);
    Ok(())
}

/// LabelEncoder with string keys or values, or with its table as tensors
/// (opset 4): a [`StringMap`] lookup, run node by node.
fn label_map(cx: &mut NodeCtx, x: rlx_ir::Value) -> Result<(), MapError> {
    let table = |cx: &mut NodeCtx, side: &str| -> Result<Tensor, MapError> {
        if let Some(t) = cx.attr_t(&format!("{side}s_tensor"))? {
            return Ok(t);
        }
        let made = if let Some(v) = cx.attr_strings(&format!("{side}s_strings"))? {
            Tensor::from_strings(&[v.len()], v)
        } else if let Some(v) = cx.attr_ints(&format!("{side}s_int64s"))? {
            Tensor::from_i64(&[v.len()], &v)
        } else if let Some(v) = cx.attr_floats(&format!("{side}s_floats"))? {
            Tensor::from_f32(&[v.len()], &v)
        } else {
            return Err(MapError::Attr {
                name: format!("{side}s_*"),
                reason: "is required".into(),
            });
        };
        made.map_err(|e| MapError::Unsupported(e.to_string()))
    };
    let keys = table(cx, "key")?;
    let values = table(cx, "value")?;
    let default = match cx.attr_t("default_tensor")? {
        Some(t) => t
            .reshaped(Vec::new())
            .map_err(|e| MapError::Unsupported(e.to_string()))?,
        None => match values.dtype() {
            DType::Str => Tensor::from_strings(
                &[],
                vec![cx
                    .attr_s("default_string")?
                    .unwrap_or_else(|| "_Unused".into())],
            ),
            DType::I64 => Tensor::from_i64(&[], &[cx.attr_i("default_int64", -1)?]),
            DType::F32 => Tensor::from_f32(&[], &[cx.attr_f("default_float", -0.0)?]),
            d => return cx.unsupported(format!("LabelEncoder values of {d} need default_tensor")),
        }
        .map_err(|e| MapError::Unsupported(e.to_string()))?,
    };
    for a in ["default_string", "default_int64", "default_float"] {
        cx.ignore_attr(a);
    }
    let y = cx.add1(
        rlx_ir::ops::StringMap {
            keys,
            values,
            default,
        },
        &[x],
    )?;
    cx.set_output(0, y);
    Ok(())
}

/// Strings to integers or integers to strings, by the pairs
/// (`cats_strings[i]`, `cats_int64s[i]`); anything else maps to
/// `default_int64` / `default_string`.
fn category_mapper(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let (Some(strings), Some(ints)) = (
        cx.attr_strings("cats_strings")?,
        cx.attr_ints("cats_int64s")?,
    ) else {
        return cx.unsupported("CategoryMapper needs cats_strings and cats_int64s");
    };
    let n = strings.len();
    if ints.len() != n {
        return Err(MapError::Attr {
            name: "cats_int64s".into(),
            reason: format!("{} values for {n} strings", ints.len()),
        });
    }
    let default_int = cx.attr_i("default_int64", -1)?;
    let default_string = cx
        .attr_s("default_string")?
        .unwrap_or_else(|| "_Unused".into());
    let bad = |e: rlx_ir::tensor::TensorError| MapError::Unsupported(e.to_string());
    let s = Tensor::from_strings(&[n], strings).map_err(bad)?;
    let i = Tensor::from_i64(&[n], &ints).map_err(bad)?;
    let map = match cx.dtype(x) {
        DType::Str => rlx_ir::ops::StringMap {
            keys: s,
            values: i,
            default: Tensor::from_i64(&[], &[default_int]).map_err(bad)?,
        },
        DType::I64 => rlx_ir::ops::StringMap {
            keys: i,
            values: s,
            default: Tensor::from_strings(&[], vec![default_string]).map_err(bad)?,
        },
        d => return cx.unsupported(format!("CategoryMapper input of {d} (strings or i64)")),
    };
    let y = cx.add1(map, &[x])?;
    cx.set_output(0, y);
    Ok(())
}

/// Each row of class scores as a map from the class labels to the scores
/// (skl2onnx's default classifier output).
fn zip_map(cx: &mut NodeCtx) -> Result<(), MapError> {
    let bad = |e: rlx_ir::tensor::TensorError| MapError::Unsupported(e.to_string());
    let labels = match (
        cx.attr_strings("classlabels_strings")?,
        cx.attr_ints("classlabels_int64s")?,
    ) {
        (Some(s), None) => Tensor::from_strings(&[s.len()], s).map_err(bad)?,
        (None, Some(i)) => Tensor::from_i64(&[i.len()], &i).map_err(bad)?,
        _ => {
            return cx.unsupported(
                "ZipMap needs exactly one of classlabels_strings and classlabels_int64s",
            )
        }
    };
    let x = cx.req(0)?;
    let y = cx.add1(rlx_ir::ops::ZipMap { labels }, &[x])?;
    cx.set_output(0, y);
    Ok(())
}
