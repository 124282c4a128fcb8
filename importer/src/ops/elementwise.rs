//! Elementwise ONNX ops: math functions, arithmetic, comparisons, logic, Where,
//! Cast/CastLike/BitCast, Clip, and the activations, which are decomposed into
//! RLX elementwise ops when they are sugar.
//!
//! Opsets 1-6 of the arithmetic, logic and comparison ops broadcast only with
//! `broadcast=1` (see [`legacy_broadcast`]).

use rlx_ir::ops::{
    BinaryKind as B, BitCast, Cast, Clip, Compare, CompareKind as C, Gelu, GeluApprox, Logical,
    LogicalKind as L, RoundMode, Unary, UnaryKind as U, Where,
};
use rlx_ir::{DType, Tensor, Value};

use super::{binary, legacy_broadcast};
use crate::ctx::NodeCtx;
use crate::error::MapError;
use crate::registry::Registry;

pub fn register(r: &mut Registry) {
    for op in [
        "Abs",
        "Neg",
        "Sign",
        "Ceil",
        "Floor",
        "Round",
        "Sqrt",
        "Reciprocal",
        "Exp",
        "Log",
        "Sin",
        "Cos",
        "Tan",
        "Asin",
        "Acos",
        "Atan",
        "Sinh",
        "Cosh",
        "Asinh",
        "Acosh",
        "Atanh",
        "Tanh",
        "Sigmoid",
        "Relu",
        "Erf",
        "Softplus",
        "Softsign",
        "Not",
        "BitwiseNot",
        "IsNaN",
    ] {
        r.add(op, 1, unary);
    }
    r.add("IsInf", 10, is_inf);
    for op in [
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Pow",
        "BitwiseAnd",
        "BitwiseOr",
        "BitwiseXor",
    ] {
        r.add(op, 1, arith);
    }
    r.add("Mod", 10, modulo);
    r.add("BitShift", 11, bit_shift);
    for op in ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"] {
        r.add(op, 1, compare);
    }
    for op in ["And", "Or", "Xor"] {
        r.add(op, 1, logical);
    }
    for op in ["Max", "Min", "Sum", "Mean"] {
        r.add(op, 1, variadic);
    }
    r.add("Where", 9, where_);
    r.add("Cast", 1, cast);
    r.add("CastLike", 15, cast_like);
    r.add("BitCast", 26, bitcast);
    r.add("Clip", 1, clip_attrs);
    r.add("Clip", 11, clip_inputs);
    r.add("Identity", 1, identity);
    r.add("Dropout", 1, dropout);
    r.add("PRelu", 1, prelu);
    r.add("LeakyRelu", 1, leaky_relu);
    r.add("Elu", 1, elu);
    r.add("Selu", 1, selu);
    r.add("Celu", 12, celu);
    r.add("ThresholdedRelu", 10, thresholded_relu);
    r.add("HardSigmoid", 1, hard_sigmoid);
    r.add("HardSwish", 14, hard_swish);
    r.add("Shrink", 9, shrink);
    r.add("Mish", 18, mish);
    r.add("Swish", 24, swish);
    r.add("SwiGLU", 28, swiglu);
    r.add("Gelu", 20, gelu);
}

fn unary_kind(op: &str) -> Option<U> {
    Some(match op {
        "Abs" => U::Abs,
        "Neg" => U::Neg,
        "Sign" => U::Sign,
        "Ceil" => U::Ceil,
        "Floor" => U::Floor,
        "Round" => U::Round,
        "Sqrt" => U::Sqrt,
        "Reciprocal" => U::Reciprocal,
        "Exp" => U::Exp,
        "Log" => U::Log,
        "Sin" => U::Sin,
        "Cos" => U::Cos,
        "Tan" => U::Tan,
        "Asin" => U::Asin,
        "Acos" => U::Acos,
        "Atan" => U::Atan,
        "Sinh" => U::Sinh,
        "Cosh" => U::Cosh,
        "Asinh" => U::Asinh,
        "Acosh" => U::Acosh,
        "Atanh" => U::Atanh,
        "Tanh" => U::Tanh,
        "Sigmoid" => U::Sigmoid,
        "Relu" => U::Relu,
        "Erf" => U::Erf,
        "Softplus" => U::Softplus,
        "Softsign" => U::Softsign,
        "Not" => U::Not,
        "BitwiseNot" => U::BitwiseNot,
        "IsNaN" => U::IsNan,
        _ => return None,
    })
}

/// `kind(x)`.
pub(crate) fn un(cx: &mut NodeCtx, kind: U, x: Value) -> Result<Value, MapError> {
    cx.add1(Unary { kind }, &[x])
}

fn unary(cx: &mut NodeCtx) -> Result<(), MapError> {
    let Some(kind) = unary_kind(cx.op_type()) else {
        return cx.unsupported("not a unary op");
    };
    cx.ignore_attr("consumed_inputs");
    let x = cx.req(0)?;
    let y = un(cx, kind, x)?;
    cx.set_output(0, y);
    Ok(())
}

fn is_inf(cx: &mut NodeCtx) -> Result<(), MapError> {
    let neg = cx.attr_bool("detect_negative", true)?;
    let pos = cx.attr_bool("detect_positive", true)?;
    let x = cx.req(0)?;
    let y = match (neg, pos) {
        (true, true) => un(cx, U::IsInf, x)?,
        (false, true) => un(cx, U::IsPosInf, x)?,
        (true, false) => un(cx, U::IsNegInf, x)?,
        (false, false) => {
            // Nothing is detected: all false.
            let f = un(cx, U::IsInf, x)?;
            let t = cx.constant(
                Tensor::from_slice(DType::Bool, &[], &[0u8])
                    .map_err(|e| MapError::Unsupported(e.to_string()))?,
            );
            cx.add1(Logical { kind: L::And }, &[f, t])?
        }
    };
    cx.set_output(0, y);
    Ok(())
}

fn arith(cx: &mut NodeCtx) -> Result<(), MapError> {
    let kind = match cx.op_type() {
        "Add" => B::Add,
        "Sub" => B::Sub,
        "Mul" => B::Mul,
        "Div" => B::Div,
        "Pow" => B::Pow,
        "BitwiseAnd" => B::BitwiseAnd,
        "BitwiseOr" => B::BitwiseOr,
        _ => B::BitwiseXor,
    };
    let a = cx.req(0)?;
    let b = cx.req(1)?;
    let b = legacy_broadcast(cx, a, b)?;
    let y = binary(cx, kind, a, b)?;
    cx.set_output(0, y);
    Ok(())
}

fn modulo(cx: &mut NodeCtx) -> Result<(), MapError> {
    let fmod = cx.attr_bool("fmod", false)?;
    let (a, b) = (cx.req(0)?, cx.req(1)?);
    let y = binary(cx, if fmod { B::Fmod } else { B::Mod }, a, b)?;
    cx.set_output(0, y);
    Ok(())
}

fn bit_shift(cx: &mut NodeCtx) -> Result<(), MapError> {
    let dir = cx.attr_choice("direction", "", &["LEFT", "RIGHT"])?;
    let (a, b) = (cx.req(0)?, cx.req(1)?);
    let y = binary(
        cx,
        if dir == "LEFT" {
            B::ShiftLeft
        } else {
            B::ShiftRight
        },
        a,
        b,
    )?;
    cx.set_output(0, y);
    Ok(())
}

fn compare(cx: &mut NodeCtx) -> Result<(), MapError> {
    let kind = match cx.op_type() {
        "Equal" => C::Equal,
        "Less" => C::Less,
        "Greater" => C::Greater,
        "LessOrEqual" => C::LessOrEqual,
        _ => C::GreaterOrEqual,
    };
    let a = cx.req(0)?;
    let b = cx.req(1)?;
    if kind == C::Equal && cx.dtype(a) == DType::Str {
        let y = cx.add1(rlx_ir::ops::StringEqual {}, &[a, b])?;
        cx.set_output(0, y);
        return Ok(());
    }
    let b = legacy_broadcast(cx, a, b)?;
    let y = cx.add1(Compare { kind }, &[a, b])?;
    cx.set_output(0, y);
    Ok(())
}

fn logical(cx: &mut NodeCtx) -> Result<(), MapError> {
    let kind = match cx.op_type() {
        "And" => L::And,
        "Or" => L::Or,
        _ => L::Xor,
    };
    let a = cx.req(0)?;
    let b = cx.req(1)?;
    let b = legacy_broadcast(cx, a, b)?;
    let y = cx.add1(Logical { kind }, &[a, b])?;
    cx.set_output(0, y);
    Ok(())
}

/// Max, Min, Sum and Mean over any number of broadcasting inputs.
fn variadic(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.ignore_attr("consumed_inputs");
    let xs = cx.all_inputs()?;
    let Some((&first, rest)) = xs.split_first() else {
        return cx.unsupported("needs at least one input");
    };
    let kind = match cx.op_type() {
        "Max" => B::Max,
        "Min" => B::Min,
        _ => B::Add,
    };
    let mut acc = first;
    for &x in rest {
        acc = binary(cx, kind, acc, x)?;
    }
    if cx.op_type() == "Mean" && !rest.is_empty() {
        let n = cx.scalar(cx.dtype(first), xs.len() as f64)?;
        acc = binary(cx, B::Div, acc, n)?;
    }
    cx.set_output(0, acc);
    Ok(())
}

fn where_(cx: &mut NodeCtx) -> Result<(), MapError> {
    let (c, x, y) = (cx.req(0)?, cx.req(1)?, cx.req(2)?);
    let out = cx.add1(Where {}, &[c, x, y])?;
    cx.set_output(0, out);
    Ok(())
}

fn round_mode(cx: &mut NodeCtx) -> Result<RoundMode, MapError> {
    let m = cx.attr_choice("round_mode", "up", &["up", "down", "nearest"])?;
    Ok(RoundMode::from_name(&m).unwrap_or(RoundMode::Up))
}

fn cast(cx: &mut NodeCtx) -> Result<(), MapError> {
    let to = if cx.opset < 6 {
        let s = cx.attr_s("to")?.unwrap_or_default();
        legacy_dtype(&s).ok_or_else(|| MapError::Attr {
            name: "to".into(),
            reason: format!("unknown type `{s}`"),
        })?
    } else {
        cx.attr_dtype("to")?.ok_or_else(|| MapError::Attr {
            name: "to".into(),
            reason: "is required".into(),
        })?
    };
    let saturate = cx.attr_bool("saturate", true)?;
    let round_mode = round_mode(cx)?;
    let x = cx.req(0)?;
    let y = cast_to(cx, x, to, saturate, round_mode)?;
    cx.set_output(0, y);
    Ok(())
}

/// `x` cast to `to`: a string on either side is a `string_cast`.
fn cast_to(
    cx: &mut NodeCtx,
    x: Value,
    to: DType,
    saturate: bool,
    round_mode: rlx_ir::ops::RoundMode,
) -> Result<Value, MapError> {
    if cx.dtype(x) == DType::Str || to == DType::Str {
        return cx.add1(rlx_ir::ops::StringCast { to }, &[x]);
    }
    cx.add1(
        Cast {
            to,
            saturate,
            round_mode,
        },
        &[x],
    )
}

/// Type names of Cast before opset 6.
fn legacy_dtype(s: &str) -> Option<DType> {
    Some(match s.to_ascii_uppercase().as_str() {
        "FLOAT" => DType::F32,
        "DOUBLE" => DType::F64,
        "FLOAT16" => DType::F16,
        "INT8" => DType::I8,
        "INT16" => DType::I16,
        "INT32" => DType::I32,
        "INT64" => DType::I64,
        "UINT8" => DType::U8,
        "UINT16" => DType::U16,
        "UINT32" => DType::U32,
        "UINT64" => DType::U64,
        "BOOL" => DType::Bool,
        _ => return None,
    })
}

fn cast_like(cx: &mut NodeCtx) -> Result<(), MapError> {
    let saturate = cx.attr_bool("saturate", true)?;
    let round_mode = round_mode(cx)?;
    let (x, like) = (cx.req(0)?, cx.req(1)?);
    let to = cx.dtype(like);
    let y = cast_to(cx, x, to, saturate, round_mode)?;
    cx.set_output(0, y);
    Ok(())
}

fn bitcast(cx: &mut NodeCtx) -> Result<(), MapError> {
    let to = cx.attr_dtype("to")?.ok_or_else(|| MapError::Attr {
        name: "to".into(),
        reason: "is required".into(),
    })?;
    let x = cx.req(0)?;
    let y = cx.add1(BitCast { to }, &[x])?;
    cx.set_output(0, y);
    Ok(())
}

/// The lowest and highest finite values of a dtype, as a constant of that dtype.
fn bound(cx: &mut NodeCtx, d: DType, high: bool) -> Result<Value, MapError> {
    let v = match d {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => {
            if high {
                f64::INFINITY
            } else {
                f64::NEG_INFINITY
            }
        }
        DType::I8 => {
            if high {
                i8::MAX as f64
            } else {
                i8::MIN as f64
            }
        }
        DType::I16 => {
            if high {
                i16::MAX as f64
            } else {
                i16::MIN as f64
            }
        }
        DType::I32 => {
            if high {
                i32::MAX as f64
            } else {
                i32::MIN as f64
            }
        }
        DType::U8 => {
            if high {
                u8::MAX as f64
            } else {
                0.0
            }
        }
        DType::U16 => {
            if high {
                u16::MAX as f64
            } else {
                0.0
            }
        }
        DType::U32 => {
            if high {
                u32::MAX as f64
            } else {
                0.0
            }
        }
        DType::I64 | DType::U64 => {
            let t = match (d, high) {
                (DType::I64, true) => rlx_ir::ops::values::int_tensor(d, &[], &[i64::MAX]),
                (DType::I64, false) => rlx_ir::ops::values::int_tensor(d, &[], &[i64::MIN]),
                (_, true) => Tensor::from_slice(d, &[], &[u64::MAX]).ok(),
                _ => Tensor::from_slice(d, &[], &[0u64]).ok(),
            };
            return t
                .map(|t| cx.constant(t))
                .ok_or_else(|| MapError::Unsupported(format!("Clip on {d}")));
        }
        _ => return cx.unsupported(format!("Clip is not defined on {d}")),
    };
    cx.scalar(d, v)
}

fn clip_attrs(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.ignore_attr("consumed_inputs");
    let x = cx.req(0)?;
    let d = cx.dtype(x);
    let lo = match cx.attr_f_opt("min")? {
        Some(v) => cx.scalar(d, v as f64)?,
        None => bound(cx, d, false)?,
    };
    let hi = match cx.attr_f_opt("max")? {
        Some(v) => cx.scalar(d, v as f64)?,
        None => bound(cx, d, true)?,
    };
    let y = cx.add1(Clip {}, &[x, lo, hi])?;
    cx.set_output(0, y);
    Ok(())
}

fn clip_inputs(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let d = cx.dtype(x);
    let lo = match cx.input(1)? {
        Some(v) => v,
        None => bound(cx, d, false)?,
    };
    let hi = match cx.input(2)? {
        Some(v) => v,
        None => bound(cx, d, true)?,
    };
    let y = cx.add1(Clip {}, &[x, lo, hi])?;
    cx.set_output(0, y);
    Ok(())
}

fn identity(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    cx.set_output(0, x);
    Ok(())
}

/// Dropout at inference is the identity; its mask is all true.
fn dropout(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.ignore_attr("seed");
    cx.ignore_attr("ratio");
    cx.ignore_attr("consumed_inputs");
    if cx.opset < 7 && cx.attr_i("is_test", 0)? == 0 {
        return cx.unsupported("Dropout in training mode (is_test=0) draws random numbers");
    }
    if let Some(t) = cx.input(2)? {
        match cx.known_ints(t) {
            Some(v) if v == [0] => {}
            // Training with a ratio of exactly 0 drops nothing (as ORT does).
            Some(_) if dropout_ratio_is_zero(cx)? => {}
            Some(_) => return cx.unsupported("Dropout in training mode draws random numbers"),
            None => return cx.unsupported("Dropout's training_mode must be a constant"),
        }
    }
    let x = cx.req(0)?;
    cx.set_output(0, x);
    if cx.output_used(1) {
        let mask_dtype = if cx.opset < 10 {
            cx.dtype(x)
        } else {
            DType::Bool
        };
        let one = cx.scalar(mask_dtype, 1.0)?;
        let shape = cx.add1(
            rlx_ir::ops::ShapeOf {
                start: 0,
                end: None,
            },
            &[x],
        )?;
        let mask = cx.add1(rlx_ir::ops::Expand {}, &[one, shape])?;
        cx.set_output(1, mask);
    }
    Ok(())
}

/// True when Dropout's ratio input (default 0.5) is the constant 0.
fn dropout_ratio_is_zero(cx: &mut NodeCtx) -> Result<bool, MapError> {
    let Some(r) = cx.input(1)? else {
        return Ok(false);
    };
    Ok(cx
        .known_tensor(r)
        .and_then(|t| t.to_f64_vec())
        .is_some_and(|v| v.len() == 1 && v[0] == 0.0))
}

/// `x < 0 ? neg : x`.
pub(crate) fn negative_branch(cx: &mut NodeCtx, x: Value, neg: Value) -> Result<Value, MapError> {
    let zero = cx.scalar(cx.dtype(x), 0.0)?;
    let lt = cx.add1(Compare { kind: C::Less }, &[x, zero])?;
    cx.add1(Where {}, &[lt, neg, x])
}

fn prelu(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.ignore_attr("consumed_inputs");
    let (x, mut slope) = (cx.req(0)?, cx.req(1)?);
    // Before opset 7 a 1-D slope applies per channel (axis 1).
    let rank = cx.rank(x);
    if cx.opset < 7
        && cx.rank(slope) == 1
        && cx.ty(slope).shape.numel().known() != Some(1)
        && rank > 2
    {
        let axes: Vec<i64> = (1..rank as i64 - 1).collect();
        slope = super::unsqueeze(cx, slope, &axes)?;
    }
    let y = sloped(cx, x, slope)?;
    cx.set_output(0, y);
    Ok(())
}

/// `x` where it is not negative, `slope * x` where it is (LeakyRelu, PRelu).
/// With a constant slope of finite non-zero values this is `max(x, 0) + slope
/// * min(x, 0)`, exact for every x (infinities and NaN included) and made of
/// element-wise arithmetic only, so it fuses into one region with its
/// neighbours; otherwise Less + Where.
fn sloped(cx: &mut NodeCtx, x: Value, slope: Value) -> Result<Value, MapError> {
    let arithmetic = cx
        .known_tensor(slope)
        .and_then(|t| t.to_f64_vec())
        .is_some_and(|v| v.iter().all(|s| s.is_finite() && *s != 0.0));
    if !arithmetic {
        let neg = binary(cx, B::Mul, x, slope)?;
        return negative_branch(cx, x, neg);
    }
    let zero = cx.scalar(cx.dtype(x), 0.0)?;
    let pos = binary(cx, B::Max, x, zero)?;
    let neg = binary(cx, B::Min, x, zero)?;
    let scaled = binary(cx, B::Mul, neg, slope)?;
    binary(cx, B::Add, pos, scaled)
}

fn leaky_relu(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.ignore_attr("consumed_inputs");
    let alpha = cx.attr_f("alpha", 0.01)?;
    let x = cx.req(0)?;
    let a = cx.scalar(cx.dtype(x), alpha as f64)?;
    let y = sloped(cx, x, a)?;
    cx.set_output(0, y);
    Ok(())
}

/// `alpha * (exp(x) - 1)`.
fn expm1_scaled(cx: &mut NodeCtx, x: Value, alpha: f32) -> Result<Value, MapError> {
    let d = cx.dtype(x);
    let e = un(cx, U::Exp, x)?;
    let one = cx.scalar(d, 1.0)?;
    let em1 = binary(cx, B::Sub, e, one)?;
    let a = cx.scalar(d, alpha as f64)?;
    binary(cx, B::Mul, em1, a)
}

fn elu(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.ignore_attr("consumed_inputs");
    let alpha = cx.attr_f("alpha", 1.0)?;
    let x = cx.req(0)?;
    let neg = expm1_scaled(cx, x, alpha)?;
    let y = negative_branch(cx, x, neg)?;
    cx.set_output(0, y);
    Ok(())
}

fn selu(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.ignore_attr("consumed_inputs");
    let alpha = cx.attr_f("alpha", 1.673_263_2)?;
    let gamma = cx.attr_f("gamma", 1.050_701)?;
    let x = cx.req(0)?;
    let d = cx.dtype(x);
    let neg = expm1_scaled(cx, x, alpha)?;
    let zero = cx.scalar(d, 0.0)?;
    let le = cx.add1(
        Compare {
            kind: C::LessOrEqual,
        },
        &[x, zero],
    )?;
    let inner = cx.add1(Where {}, &[le, neg, x])?;
    let g = cx.scalar(d, gamma as f64)?;
    let y = binary(cx, B::Mul, inner, g)?;
    cx.set_output(0, y);
    Ok(())
}

fn celu(cx: &mut NodeCtx) -> Result<(), MapError> {
    let alpha = cx.attr_f("alpha", 1.0)?;
    let x = cx.req(0)?;
    let d = cx.dtype(x);
    let a = cx.scalar(d, alpha as f64)?;
    let xa = binary(cx, B::Div, x, a)?;
    let neg = expm1_scaled(cx, xa, alpha)?;
    let zero = cx.scalar(d, 0.0)?;
    let pos = binary(cx, B::Max, x, zero)?;
    let negc = binary(cx, B::Min, neg, zero)?;
    let y = binary(cx, B::Add, pos, negc)?;
    cx.set_output(0, y);
    Ok(())
}

fn thresholded_relu(cx: &mut NodeCtx) -> Result<(), MapError> {
    let alpha = cx.attr_f("alpha", 1.0)?;
    let x = cx.req(0)?;
    let d = cx.dtype(x);
    let a = cx.scalar(d, alpha as f64)?;
    let gt = cx.add1(Compare { kind: C::Greater }, &[x, a])?;
    let zero = cx.scalar(d, 0.0)?;
    let y = cx.add1(Where {}, &[gt, x, zero])?;
    cx.set_output(0, y);
    Ok(())
}

/// `clip(alpha * x + beta, 0, 1)`.
pub(crate) fn hard_sigmoid_of(
    cx: &mut NodeCtx,
    x: Value,
    alpha: f32,
    beta: f32,
) -> Result<Value, MapError> {
    let d = cx.dtype(x);
    let a = cx.scalar(d, alpha as f64)?;
    let b = cx.scalar(d, beta as f64)?;
    let ax = binary(cx, B::Mul, x, a)?;
    let axb = binary(cx, B::Add, ax, b)?;
    let zero = cx.scalar(d, 0.0)?;
    let one = cx.scalar(d, 1.0)?;
    cx.add1(Clip {}, &[axb, zero, one])
}

fn hard_sigmoid(cx: &mut NodeCtx) -> Result<(), MapError> {
    cx.ignore_attr("consumed_inputs");
    let alpha = cx.attr_f("alpha", 0.2)?;
    let beta = cx.attr_f("beta", 0.5)?;
    let x = cx.req(0)?;
    let y = hard_sigmoid_of(cx, x, alpha, beta)?;
    cx.set_output(0, y);
    Ok(())
}

fn hard_swish(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let h = hard_sigmoid_of(cx, x, 1.0 / 6.0, 0.5)?;
    let y = binary(cx, B::Mul, x, h)?;
    cx.set_output(0, y);
    Ok(())
}

fn shrink(cx: &mut NodeCtx) -> Result<(), MapError> {
    let lambd = cx.attr_f("lambd", 0.5)?;
    let bias = cx.attr_f("bias", 0.0)?;
    let x = cx.req(0)?;
    let d = cx.dtype(x);
    let l = cx.scalar(d, lambd as f64)?;
    let nl = cx.scalar(d, -lambd as f64)?;
    let b = cx.scalar(d, bias as f64)?;
    let zero = cx.scalar(d, 0.0)?;
    let lo = cx.add1(Compare { kind: C::Less }, &[x, nl])?;
    let hi = cx.add1(Compare { kind: C::Greater }, &[x, l])?;
    let xpb = binary(cx, B::Add, x, b)?;
    let xmb = binary(cx, B::Sub, x, b)?;
    let upper = cx.add1(Where {}, &[hi, xmb, zero])?;
    let y = cx.add1(Where {}, &[lo, xpb, upper])?;
    cx.set_output(0, y);
    Ok(())
}

fn mish(cx: &mut NodeCtx) -> Result<(), MapError> {
    let x = cx.req(0)?;
    let sp = un(cx, U::Softplus, x)?;
    let t = un(cx, U::Tanh, sp)?;
    let y = binary(cx, B::Mul, x, t)?;
    cx.set_output(0, y);
    Ok(())
}

/// `x * sigmoid(alpha * x)`.
fn swish_of(cx: &mut NodeCtx, x: Value, alpha: f32) -> Result<Value, MapError> {
    let a = cx.scalar(cx.dtype(x), alpha as f64)?;
    let ax = binary(cx, B::Mul, x, a)?;
    let s = un(cx, U::Sigmoid, ax)?;
    binary(cx, B::Mul, x, s)
}

fn swish(cx: &mut NodeCtx) -> Result<(), MapError> {
    let alpha = cx.attr_f("alpha", 1.0)?;
    let x = cx.req(0)?;
    let y = swish_of(cx, x, alpha)?;
    cx.set_output(0, y);
    Ok(())
}

/// SwiGLU (opset 28): `Swish_alpha(A) * B` over inputs of one shape.
fn swiglu(cx: &mut NodeCtx) -> Result<(), MapError> {
    let alpha = cx.attr_f("alpha", 1.0)?;
    let (a, b) = (cx.req(0)?, cx.req(1)?);
    let (sa, sb) = (cx.ty(a).shape, cx.ty(b).shape);
    if sa.rank() != sb.rank()
        || sa
            .0
            .iter()
            .zip(&sb.0)
            .any(|(x, y)| x.known().zip(y.known()).is_some_and(|(x, y)| x != y))
    {
        return cx.unsupported(format!(
            "SwiGLU needs A and B of one shape (no broadcasting), got {sa} and {sb}"
        ));
    }
    let gate = swish_of(cx, a, alpha)?;
    let y = binary(cx, B::Mul, gate, b)?;
    cx.set_output(0, y);
    Ok(())
}

fn gelu(cx: &mut NodeCtx) -> Result<(), MapError> {
    let approx = cx.attr_choice("approximate", "none", &["none", "tanh"])?;
    let x = cx.req(0)?;
    let approximate = if approx == "tanh" {
        GeluApprox::Tanh
    } else {
        GeluApprox::None
    };
    let y = cx.add1(Gelu { approximate }, &[x])?;
    cx.set_output(0, y);
    Ok(())
}
