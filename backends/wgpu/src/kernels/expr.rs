//! WGSL expressions of the element-wise functions, per operand type. Every
//! snippet comes from this fixed table; operands are generated names (`x0`,
//! `t3`, `pf(12u)`), never model data. i64 and u64 compute on `vec2<u32>`
//! (low, high word) with the emulation helpers of `wgsl/int64.wgsl`.

use rlx_ir::ops::{BinaryKind, CompareKind, GeluApprox, LogicalKind, UnaryKind};
use rlx_ir::DType;

/// The WGSL type an element of `d` computes in, if element-wise kernels take it.
/// Narrow integers compute in 32 bits and wrap when stored; 64-bit integers
/// are word pairs.
pub fn wgsl_type(d: DType) -> Option<&'static str> {
    match d {
        DType::F32 | DType::F16 | DType::BF16 => Some("f32"),
        DType::I8 | DType::I16 | DType::I32 => Some("i32"),
        DType::U8 | DType::U16 | DType::U32 => Some("u32"),
        DType::I64 | DType::U64 => Some("vec2<u32>"),
        DType::Bool => Some("bool"),
        _ => None,
    }
}

/// Whether `d` is a 64-bit integer (computed with the `int64.wgsl` helpers).
pub fn wide(d: DType) -> bool {
    matches!(d, DType::I64 | DType::U64)
}

/// The dtype whose rules `d` computes with: i32 for signed and u32 for
/// unsigned narrow integers, f32 for the half floats.
pub fn class(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        DType::I8 | DType::I16 => DType::I32,
        DType::U8 | DType::U16 => DType::U32,
        d => d,
    }
}

pub fn unary(kind: UnaryKind, d: DType, x: &str) -> Option<String> {
    use UnaryKind::*;
    let f = match (class(d), kind) {
        (DType::F32, k) => match k {
            Abs => format!("abs({x})"),
            Neg => format!("-{x}"),
            Sign => format!("sign({x})"),
            Ceil => format!("ceil({x})"),
            Floor => format!("floor({x})"),
            Round => format!("round({x})"),
            Sqrt => format!("sqrt({x})"),
            Reciprocal => format!("(1.0 / {x})"),
            Exp => format!("exp({x})"),
            Log => format!("log({x})"),
            Sin => format!("sin({x})"),
            Cos => format!("cos({x})"),
            Tan => format!("tan({x})"),
            Asin => format!("asin({x})"),
            Acos => format!("acos({x})"),
            Atan => format!("atan({x})"),
            Sinh => format!("sinh({x})"),
            Cosh => format!("cosh({x})"),
            Asinh => format!("asinh({x})"),
            Acosh => format!("acosh({x})"),
            Atanh => format!("atanh({x})"),
            Tanh => format!("ew_tanh({x})"),
            Sigmoid => format!("ew_sigmoid({x})"),
            Relu => format!("max({x}, 0.0)"),
            Erf => format!("ew_erf({x})"),
            Softplus => format!("ew_softplus({x})"),
            Softsign => format!("({x} / (1.0 + abs({x})))"),
            IsNan => format!("ew_is_nan({x})"),
            IsInf => format!("ew_is_inf({x})"),
            IsPosInf => format!("(ew_is_inf({x}) && {x} > 0.0)"),
            IsNegInf => format!("(ew_is_inf({x}) && {x} < 0.0)"),
            Not | BitwiseNot => return None,
        },
        (DType::I32, k) => match k {
            Abs => format!("abs({x})"),
            Neg => format!("-{x}"),
            Sign => format!("sign({x})"),
            Relu => format!("max({x}, 0)"),
            BitwiseNot => format!("~{x}"),
            _ => return None,
        },
        (DType::U32, k) => match k {
            Abs | Relu => x.to_string(),
            Sign => format!("select(0u, 1u, {x} > 0u)"),
            BitwiseNot => format!("~{x}"),
            _ => return None,
        },
        (DType::I64, k) => match k {
            Abs => format!("i64_abs({x})"),
            Neg => format!("i64_neg({x})"),
            Sign => format!("i64_sign({x})"),
            Relu => format!("i64_relu({x})"),
            BitwiseNot => format!("~{x}"),
            _ => return None,
        },
        (DType::U64, k) => match k {
            Abs | Relu => x.to_string(),
            Sign => format!("u64_sign({x})"),
            BitwiseNot => format!("~{x}"),
            _ => return None,
        },
        (DType::Bool, Not) => format!("!{x}"),
        _ => return None,
    };
    Some(f)
}

pub fn binary(kind: BinaryKind, d: DType, a: &str, b: &str) -> Option<String> {
    use BinaryKind::*;
    let f = match (class(d), kind) {
        (DType::U32, Add) => format!("({a} + {b})"),
        (DType::U32, Sub) => format!("({a} - {b})"),
        (DType::U32, Mul) => format!("({a} * {b})"),
        (DType::U32, Div) => format!("select({a} / max({b}, 1u), 0u, {b} == 0u)"),
        (DType::U32, Mod | Fmod) => format!("select({a} % max({b}, 1u), 0u, {b} == 0u)"),
        (DType::U32, Max) => format!("max({a}, {b})"),
        (DType::U32, Min) => format!("min({a}, {b})"),
        (DType::U32, BitwiseAnd) => format!("({a} & {b})"),
        (DType::U32, BitwiseOr) => format!("({a} | {b})"),
        (DType::U32, BitwiseXor) => format!("({a} ^ {b})"),
        (DType::U32, ShiftLeft) => format!("select(0u, {a} << {b}, {b} < 32u)"),
        (DType::U32, ShiftRight) => format!("select(0u, {a} >> {b}, {b} < 32u)"),
        (DType::F32 | DType::I32, Add) => format!("({a} + {b})"),
        (DType::F32 | DType::I32, Sub) => format!("({a} - {b})"),
        (DType::F32 | DType::I32, Mul) => format!("({a} * {b})"),
        (DType::F32, Div) => format!("({a} / {b})"),
        (DType::I32, Div) => format!("ew_idiv({a}, {b})"),
        (DType::F32, Pow) => format!("ew_pow({a}, {b})"),
        (DType::F32, Mod) => format!("ew_mod({a}, {b})"),
        (DType::F32, Fmod) => format!("ew_fmod({a}, {b})"),
        (DType::I32, Mod) => format!("ew_imod({a}, {b})"),
        (DType::I32, Fmod) => format!("ew_ifmod({a}, {b})"),
        (DType::F32 | DType::I32, Max) => format!("max({a}, {b})"),
        (DType::F32 | DType::I32, Min) => format!("min({a}, {b})"),
        (DType::I32, BitwiseAnd) => format!("({a} & {b})"),
        (DType::I32, BitwiseOr) => format!("({a} | {b})"),
        (DType::I32, BitwiseXor) => format!("({a} ^ {b})"),
        (DType::I64 | DType::U64, Add) => format!("i64_add({a}, {b})"),
        (DType::I64 | DType::U64, Sub) => format!("i64_sub({a}, {b})"),
        (DType::I64 | DType::U64, Mul) => format!("i64_mul({a}, {b})"),
        (DType::I64 | DType::U64, BitwiseAnd) => format!("({a} & {b})"),
        (DType::I64 | DType::U64, BitwiseOr) => format!("({a} | {b})"),
        (DType::I64 | DType::U64, BitwiseXor) => format!("({a} ^ {b})"),
        (DType::I64, Div) => format!("i64_div({a}, {b})"),
        (DType::I64, Mod) => format!("i64_mod({a}, {b})"),
        (DType::I64, Fmod) => format!("i64_fmod({a}, {b})"),
        (DType::I64, Max) => format!("i64_max({a}, {b})"),
        (DType::I64, Min) => format!("i64_min({a}, {b})"),
        (DType::U64, Div) => format!("u64_div({a}, {b})"),
        (DType::U64, Mod | Fmod) => format!("u64_rem({a}, {b})"),
        (DType::U64, Max) => format!("u64_max({a}, {b})"),
        (DType::U64, Min) => format!("u64_min({a}, {b})"),
        (DType::U64, ShiftLeft) => format!("u64_shl({a}, {b})"),
        (DType::U64, ShiftRight) => format!("u64_shr({a}, {b})"),
        _ => return None,
    };
    Some(f)
}

pub fn compare(kind: CompareKind, d: DType, a: &str, b: &str) -> Option<String> {
    use CompareKind::*;
    let op = match kind {
        Equal => "==",
        Less => "<",
        LessOrEqual => "<=",
        Greater => ">",
        GreaterOrEqual => ">=",
    };
    let lt = match class(d) {
        DType::F32 | DType::I32 | DType::U32 => return Some(format!("({a} {op} {b})")),
        DType::Bool if kind == Equal => return Some(format!("({a} == {b})")),
        DType::I64 => "i64_lt",
        DType::U64 => "u64_lt",
        _ => return None,
    };
    Some(match kind {
        Equal => format!("i64_eq({a}, {b})"),
        Less => format!("{lt}({a}, {b})"),
        LessOrEqual => format!("!{lt}({b}, {a})"),
        Greater => format!("{lt}({b}, {a})"),
        GreaterOrEqual => format!("!{lt}({a}, {b})"),
    })
}

/// `x` clamped to `[lo, hi]` (`hi` wins when the bounds cross).
pub fn clip(d: DType, x: &str, lo: &str, hi: &str) -> Option<String> {
    match class(d) {
        DType::F32 | DType::I32 | DType::U32 => Some(format!("min(max({x}, {lo}), {hi})")),
        DType::I64 => Some(format!("i64_min(i64_max({x}, {lo}), {hi})")),
        DType::U64 => Some(format!("u64_min(u64_max({x}, {lo}), {hi})")),
        _ => None,
    }
}

pub fn logical(kind: LogicalKind, a: &str, b: &str) -> String {
    match kind {
        LogicalKind::And => format!("({a} && {b})"),
        LogicalKind::Or => format!("({a} || {b})"),
        LogicalKind::Xor => format!("({a} != {b})"),
    }
}

pub fn gelu(approx: GeluApprox, x: &str) -> String {
    match approx {
        GeluApprox::None => format!("(0.5 * {x} * (1.0 + ew_erf({x} * 0.70710678118654752)))"),
        GeluApprox::Tanh => format!(
            "(0.5 * {x} * (1.0 + ew_tanh(0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x}))))"
        ),
    }
}

/// The value range of a narrow integer dtype, for saturating float casts.
fn int_range(d: DType) -> Option<(f64, f64)> {
    match d {
        DType::I8 => Some((-128.0, 127.0)),
        DType::I16 => Some((-32768.0, 32767.0)),
        DType::U8 => Some((0.0, 255.0)),
        DType::U16 => Some((0.0, 65535.0)),
        _ => None,
    }
}

/// A cast between the dtypes element-wise kernels carry; i64 and u64 are
/// `vec2<u32>` (low, high word). Integer to integer casts wrap (the store
/// masks narrow results); float to integer casts truncate and saturate like
/// Rust's `as`; 64-bit integers convert to f32 rounding to nearest.
pub fn cast(from: DType, to: DType, x: &str) -> Option<String> {
    use DType::*;
    let (cf, ct) = (class(from), class(to));
    let f = match (cf, ct) {
        _ if from == to => x.to_string(),
        (F32, I32 | U32) => match int_range(to) {
            Some((lo, hi)) => format!(
                "{}(clamp({x}, {lo:.1}, {hi:.1}))",
                if ct == I32 { "i32" } else { "u32" }
            ),
            None => format!("{}({x})", if ct == I32 { "i32" } else { "u32" }),
        },
        (F32, I64) => format!("i64_from_f32({x})"),
        (F32, U64) => format!("u64_from_f32({x})"),
        (I32 | U32, F32) => format!("f32({x})"),
        (F32, F32) | (I32, I32) | (U32, U32) => x.to_string(),
        (I32, U32) => format!("bitcast<u32>({x})"),
        (U32, I32) => format!("bitcast<i32>({x})"),
        (F32, Bool) => format!("({x} != 0.0)"),
        (I32, Bool) => format!("({x} != 0)"),
        (U32, Bool) => format!("({x} != 0u)"),
        (Bool, F32) => format!("select(0.0, 1.0, {x})"),
        (Bool, I32) => format!("select(0, 1, {x})"),
        (Bool, I64 | U64) => format!("vec2<u32>(select(0u, 1u, {x}), 0u)"),
        (Bool, U32) => format!("select(0u, 1u, {x})"),
        (I32, I64 | U64) => format!("vec2<u32>(bitcast<u32>({x}), bitcast<u32>({x} >> 31u))"),
        (U32, I64 | U64) => format!("vec2<u32>({x}, 0u)"),
        (I64, F32) => format!("i64_to_f32({x})"),
        (U64, F32) => format!("u64_to_f32({x})"),
        (I64 | U64, I32) => format!("bitcast<i32>({x}.x)"),
        (I64 | U64, U32) => format!("{x}.x"),
        (I64 | U64, I64 | U64) => x.to_string(),
        (I64 | U64, Bool) => format!("(({x}.x | {x}.y) != 0u)"),
        _ => return None,
    };
    Some(f)
}
