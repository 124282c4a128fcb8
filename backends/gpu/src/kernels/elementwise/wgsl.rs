//! The WGSL printer of element-wise kernels: i64 and u64 compute on
//! `vec2<u32>` (low, high word) with the emulation helpers of
//! `kernels/wgsl/int64.wgsl`, narrow integers in 32 bits (wrapping when
//! stored), f16 and bf16 in f32, bool as `bool`. Other helpers are in
//! `kernels/wgsl/elementwise.wgsl`. Every snippet comes from the fixed
//! tables below; operands are generated names (`x0`, `t3`, `p.lits[1]`),
//! never model data.

use rlx_ir::ops::{Activation, BinaryKind, CompareKind, GeluApprox, LogicalKind, UnaryKind};
use rlx_ir::DType;

use super::{activation, class, print, print_body, Elementwise, Lang};
use crate::geometry::LResult;

const HELPERS: &str = include_str!("../../../../../kernels/wgsl/elementwise.wgsl");
const INT64: &str = include_str!("../../../../../kernels/wgsl/int64.wgsl");

/// The WGSL language.
pub struct Wgsl;

impl Lang for Wgsl {
    const TARGET: &'static str = "WGSL";

    fn lit(&self, k: usize, d: DType) -> Option<String> {
        (class(d) == DType::F32).then(|| format!("p.lits[{k}]"))
    }

    fn unary(&self, kind: UnaryKind, d: DType, x: &str) -> Option<String> {
        unary(kind, d, x)
    }

    fn binary(&self, kind: BinaryKind, d: DType, a: &str, b: &str) -> Option<String> {
        binary(kind, d, a, b)
    }

    fn compare(&self, kind: CompareKind, d: DType, a: &str, b: &str) -> Option<String> {
        compare(kind, d, a, b)
    }

    fn logical(&self, kind: LogicalKind, a: &str, b: &str) -> String {
        logical(kind, a, b)
    }

    fn select(&self, d: DType, cond: &str, a: &str, b: &str) -> Option<String> {
        wgsl_type(d).map(|_| format!("select({b}, {a}, {cond})"))
    }

    fn cast(&self, from: DType, to: DType, x: &str) -> Option<String> {
        cast(from, to, x)
    }

    fn clip(&self, d: DType, x: &str, lo: &str, hi: &str) -> Option<String> {
        clip(d, x, lo, hi)
    }

    fn gelu(&self, approx: GeluApprox, d: DType, x: &str) -> Option<String> {
        (class(d) == DType::F32).then(|| gelu(approx, x))
    }
}

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

fn unary(kind: UnaryKind, d: DType, x: &str) -> Option<String> {
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

fn binary(kind: BinaryKind, d: DType, a: &str, b: &str) -> Option<String> {
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
        (DType::F32, Div) => format!("fdiv({a}, {b})"),
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

fn compare(kind: CompareKind, d: DType, a: &str, b: &str) -> Option<String> {
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
fn clip(d: DType, x: &str, lo: &str, hi: &str) -> Option<String> {
    match class(d) {
        DType::F32 | DType::I32 | DType::U32 => Some(format!("min(max({x}, {lo}), {hi})")),
        DType::I64 => Some(format!("i64_min(i64_max({x}, {lo}), {hi})")),
        DType::U64 => Some(format!("u64_min(u64_max({x}, {lo}), {hi})")),
        _ => None,
    }
}

fn logical(kind: LogicalKind, a: &str, b: &str) -> String {
    match kind {
        LogicalKind::And => format!("({a} && {b})"),
        LogicalKind::Or => format!("({a} || {b})"),
        LogicalKind::Xor => format!("({a} != {b})"),
    }
}

fn gelu(approx: GeluApprox, x: &str) -> String {
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
fn cast(from: DType, to: DType, x: &str) -> Option<String> {
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

/// The load of element `o<j>` of input `j` of `d`, in its compute type.
fn load(d: DType, j: usize) -> Option<String> {
    let b = format!("p.x{j}");
    Some(match d {
        DType::F32 => format!("ldf({b}, o{j})"),
        DType::I32 => format!("ldi({b}, o{j})"),
        DType::U32 => format!("ldw({b}, o{j})"),
        DType::I8 => format!("ew_ld8s({b}, o{j})"),
        DType::U8 => format!("ldb({b}, o{j})"),
        DType::I16 => format!("ew_ld16s({b}, o{j})"),
        DType::U16 => format!("ew_ld16({b}, o{j})"),
        DType::F16 => format!("ew_ldh({b}, o{j})"),
        DType::BF16 => format!("ew_ldbf({b}, o{j})"),
        DType::Bool => format!("(ldb({b}, o{j}) != 0u)"),
        DType::I64 | DType::U64 => format!("ew_ld64({b}, o{j})"),
        _ => return None,
    })
}

/// How many invocations cover `n` output elements of `out`: one per
/// element, or one per 32-bit word for 1- and 2-byte outputs (an
/// invocation packs the elements of one word).
pub fn items(out: DType, n: u64) -> u64 {
    match out.size() {
        s @ (1 | 2) => n.div_ceil(4 / s as u64),
        _ => n,
    }
}

/// `fn epilogue(x0: f32) -> f32`, a fused product's activation (with the
/// helpers it calls), for kernels whose epilogue applies it; `None` for an
/// activation [`activation`] does not express.
pub fn epilogue(act: Activation) -> Option<String> {
    let body = print(&Wgsl, &activation(act)?).ok()?;
    let helpers = if act == Activation::None { "" } else { HELPERS };
    Some(format!(
        "{helpers}\nfn epilogue(x0: f32) -> f32 {{\n    return {body};\n}}\n"
    ))
}

/// The WGSL of `e` over `rank` collapsed dims: the helpers, `ev` (the
/// value of one output element) and `main` (one invocation per element, or
/// per word of a 1- or 2-byte output). Parameters as [`super::params`] lays
/// them out, after the handles of [`super::operands`].
pub fn kernel(e: &Elementwise, rank: usize) -> LResult<String> {
    let d0 = e.inputs.first().copied().unwrap_or(DType::F32);
    if !e.temps.is_empty() && class(d0) != DType::F32 {
        return Err(format!(
            "elementwise_region on {d0} has no WGSL kernel (f32 only)"
        ));
    }
    let out_ty = wgsl_type(e.out)
        .ok_or_else(|| format!("element-wise output {} has no WGSL kernel", e.out))?;
    let (temps, result) = print_body(&Wgsl, e)?;
    let k = e.inputs.len();
    let mut src = String::from(HELPERS);
    if wide(e.out) || e.inputs.iter().any(|&d| wide(d)) {
        src.push('\n');
        src.push_str(INT64);
    }
    src.push_str(&format!(
        "\nfn ev(e: u32) -> {out_ty} {{\n    var rem = e;\n"
    ));
    for j in 0..k {
        src.push_str(&format!("    var o{j} = 0u;\n"));
    }
    if rank > 0 {
        src.push_str(&format!(
            "    for (var d = 0u; d < {rank}u; d++) {{\n        let a = {}u - d;\n        let c = rem % p.dims[a];\n        rem = rem / p.dims[a];\n",
            rank - 1
        ));
        for j in 0..k {
            src.push_str(&format!("        o{j} += c * p.s{j}[a];\n"));
        }
        src.push_str("    }\n");
    }
    for (j, &d) in e.inputs.iter().enumerate() {
        let l = load(d, j).ok_or_else(|| format!("element-wise kernels do not take {d}"))?;
        src.push_str(&format!("    let x{j} = {l};\n"));
    }
    for (i, t) in temps.iter().enumerate() {
        src.push_str(&format!("    let t{i} = {t};\n"));
    }
    src.push_str(&format!("    return {result};\n}}\n\n"));
    src.push_str("@compute @workgroup_size(64)\nfn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {\n    let t = wg_linear(wid, nwg) * 64u + li;\n    let n = p.n;\n");
    match (e.out, e.out.size()) {
        (DType::F32 | DType::I32 | DType::U32 | DType::I64 | DType::U64, _) => {
            let st = match e.out {
                DType::F32 => "stf",
                DType::I32 => "sti",
                DType::U32 => "stw",
                _ => "ew_st64",
            };
            src.push_str(&format!(
                "    if (t >= n) {{\n        return;\n    }}\n    {st}(p.out, t, ev(t));\n}}\n"
            ));
        }
        (dt, size @ (1 | 2)) => {
            let per = 4 / size;
            let bits = size * 8;
            let word = match dt {
                DType::Bool => "select(0u, 1u, ev(e))",
                DType::U8 | DType::U16 => "ev(e)",
                DType::F16 => "pack2x16float(vec2<f32>(ev(e), 0.0))",
                DType::BF16 => "ew_bf16(ev(e))",
                _ => "bitcast<u32>(ev(e))",
            };
            let mask = if size == 1 { "0xffu" } else { "0xffffu" };
            src.push_str(&format!(
                "    if (t * {per}u >= n) {{\n        return;\n    }}\n    var w = 0u;\n    for (var j = 0u; j < {per}u; j++) {{\n        let e = t * {per}u + j;\n        if (e < n) {{\n            w |= ({word} & {mask}) << (j * {bits}u);\n        }}\n    }}\n    stw(p.out, t, w);\n}}\n"
            ));
        }
        (dt, _) => return Err(format!("element-wise output {dt} has no WGSL kernel")),
    }
    Ok(src)
}
