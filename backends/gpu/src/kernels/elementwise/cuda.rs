//! The CUDA printer of element-wise kernels (CUDA C++ for NVRTC, helpers in
//! `kernels/cuda/elementwise.cuh`), with the CPU backend's semantics: i64
//! and u64 are native `long long` / `unsigned long long`, narrow integers
//! compute in 32 bits and wrap when stored, f16 (`__half`) and bf16
//! (`__nv_bfloat16`) compute in `float`, bool loads from and stores to
//! `unsigned char`.
//!
//! The kernel is `extern "C" __global__ void NAME(const ElementwiseParams p,
//! OUT* out, const X0* x0, ...)`: the parameter struct by value (the layout
//! of [`super::params`]), then one typed element pointer per operand of
//! [`super::operands`], already at the operand's first element. One thread
//! per output element, in a 1-D grid.

use rlx_ir::ops::{BinaryKind, CompareKind, GeluApprox, LogicalKind, UnaryKind};
use rlx_ir::DType;

use super::{class, print_body, Elementwise, Lang};
use crate::geometry::LResult;
use crate::params::Layout;

/// The helpers every generated kernel starts with.
pub const HELPERS: &str = include_str!("../../../../../kernels/cuda/elementwise.cuh");

/// The CUDA language.
pub struct Cuda;

/// The C type a value of `d` computes in.
pub fn compute_type(d: DType) -> Option<&'static str> {
    Some(match class(d) {
        DType::F32 => "float",
        DType::I32 => "int",
        DType::U32 => "unsigned int",
        DType::I64 => "long long",
        DType::U64 => "unsigned long long",
        DType::Bool => "bool",
        _ => return None,
    })
}

/// The C type an element of `d` is stored as.
pub fn storage_type(d: DType) -> Option<&'static str> {
    Some(match d {
        DType::F32 => "float",
        DType::F16 => "__half",
        DType::BF16 => "__nv_bfloat16",
        DType::I8 => "signed char",
        DType::U8 | DType::Bool => "unsigned char",
        DType::I16 => "short",
        DType::U16 => "unsigned short",
        DType::I32 => "int",
        DType::U32 => "unsigned int",
        DType::I64 => "long long",
        DType::U64 => "unsigned long long",
        _ => return None,
    })
}

fn bits(d: DType) -> usize {
    d.size() * 8
}

impl Lang for Cuda {
    const TARGET: &'static str = "cuda";

    fn lit(&self, k: usize, d: DType) -> Option<String> {
        (class(d) == DType::F32).then(|| format!("p.lits[{k}]"))
    }

    fn unary(&self, kind: UnaryKind, d: DType, x: &str) -> Option<String> {
        use UnaryKind::*;
        Some(match (class(d), kind) {
            (DType::F32, k) => match k {
                Abs => format!("fabsf({x})"),
                Neg => format!("(-{x})"),
                Sign => format!("ew_sign({x})"),
                Ceil => format!("ceilf({x})"),
                Floor => format!("floorf({x})"),
                Round => format!("rintf({x})"),
                Sqrt => format!("sqrtf({x})"),
                Reciprocal => format!("(1.0f / {x})"),
                Exp => format!("expf({x})"),
                Log => format!("logf({x})"),
                Sin => format!("sinf({x})"),
                Cos => format!("cosf({x})"),
                Tan => format!("tanf({x})"),
                Asin => format!("asinf({x})"),
                Acos => format!("acosf({x})"),
                Atan => format!("atanf({x})"),
                Sinh => format!("sinhf({x})"),
                Cosh => format!("coshf({x})"),
                Asinh => format!("asinhf({x})"),
                Acosh => format!("acoshf({x})"),
                Atanh => format!("atanhf({x})"),
                Tanh => format!("tanhf({x})"),
                Sigmoid => format!("ew_sigmoid({x})"),
                Relu => format!("ew_relu({x})"),
                Erf => format!("erff({x})"),
                Softplus => format!("ew_softplus({x})"),
                Softsign => format!("({x} / (1.0f + fabsf({x})))"),
                IsNan => format!("isnan({x})"),
                IsInf => format!("isinf({x})"),
                IsPosInf => format!("ew_is_pos_inf({x})"),
                IsNegInf => format!("ew_is_neg_inf({x})"),
                Not | BitwiseNot => return None,
            },
            (DType::I32 | DType::I64, k) => match k {
                Abs => format!("ew_abs({x})"),
                Neg => format!("ew_neg({x})"),
                Sign => format!("ew_sign({x})"),
                Relu => format!("ew_relu({x})"),
                BitwiseNot => format!("(~{x})"),
                _ => return None,
            },
            (DType::U32 | DType::U64, k) => match k {
                Abs | Relu => x.to_string(),
                Neg => format!("ew_neg({x})"),
                Sign => format!("ew_sign({x})"),
                BitwiseNot => format!("(~{x})"),
                _ => return None,
            },
            (DType::Bool, Not) => format!("(!{x})"),
            _ => return None,
        })
    }

    fn binary(&self, kind: BinaryKind, d: DType, a: &str, b: &str) -> Option<String> {
        use BinaryKind::*;
        let c = class(d);
        let signed = matches!(c, DType::I32 | DType::I64);
        let int = signed || matches!(c, DType::U32 | DType::U64);
        let w = bits(d);
        Some(match kind {
            Add | Sub | Mul if signed => {
                let f = match kind {
                    Add => "ew_add",
                    Sub => "ew_sub",
                    _ => "ew_mul",
                };
                format!("{f}({a}, {b})")
            }
            Add if int || c == DType::F32 => format!("({a} + {b})"),
            Sub if int || c == DType::F32 => format!("({a} - {b})"),
            Mul if int || c == DType::F32 => format!("({a} * {b})"),
            Div if c == DType::F32 => format!("({a} / {b})"),
            Pow if c == DType::F32 => format!("powf({a}, {b})"),
            Fmod if c == DType::F32 => format!("fmodf({a}, {b})"),
            Mod if c == DType::F32 || signed => format!("ew_mod({a}, {b})"),
            Mod | Fmod if int => format!("ew_fmod({a}, {b})"),
            Div if int => format!("ew_div({a}, {b})"),
            Pow if int => format!("ew_pow({a}, {b})"),
            Max if int || c == DType::F32 => format!("ew_max({a}, {b})"),
            Min if int || c == DType::F32 => format!("ew_min({a}, {b})"),
            BitwiseAnd if int => format!("({a} & {b})"),
            BitwiseOr if int => format!("({a} | {b})"),
            BitwiseXor if int => format!("({a} ^ {b})"),
            ShiftLeft if int => format!("ew_shl({a}, {b}, {w})"),
            ShiftRight if int => format!("ew_shr({a}, {b}, {w})"),
            _ => return None,
        })
    }

    fn compare(&self, kind: CompareKind, d: DType, a: &str, b: &str) -> Option<String> {
        compute_type(d)?;
        let op = match kind {
            CompareKind::Equal => "==",
            CompareKind::Less => "<",
            CompareKind::LessOrEqual => "<=",
            CompareKind::Greater => ">",
            CompareKind::GreaterOrEqual => ">=",
        };
        Some(format!("({a} {op} {b})"))
    }

    fn logical(&self, kind: LogicalKind, a: &str, b: &str) -> String {
        match kind {
            LogicalKind::And => format!("({a} && {b})"),
            LogicalKind::Or => format!("({a} || {b})"),
            LogicalKind::Xor => format!("({a} != {b})"),
        }
    }

    fn select(&self, d: DType, cond: &str, a: &str, b: &str) -> Option<String> {
        compute_type(d).map(|_| format!("({cond} ? {a} : {b})"))
    }

    fn cast(&self, from: DType, to: DType, x: &str) -> Option<String> {
        use DType::*;
        let (cf, ct) = (class(from), class(to));
        let ty = compute_type(to)?;
        compute_type(from)?;
        Some(match (cf, ct) {
            _ if cf == ct => x.to_string(),
            (F32, I32) => match to {
                I8 => format!("ew_f2i_in({x}, -128.0f, 127.0f)"),
                I16 => format!("ew_f2i_in({x}, -32768.0f, 32767.0f)"),
                _ => format!("ew_f2i({x})"),
            },
            (F32, U32) => match to {
                U8 => format!("ew_f2u_in({x}, 255.0f)"),
                U16 => format!("ew_f2u_in({x}, 65535.0f)"),
                _ => format!("ew_f2u({x})"),
            },
            (F32, I64) => format!("ew_f2ll({x})"),
            (F32, U64) => format!("ew_f2ull({x})"),
            (F32, Bool) => format!("({x} != 0.0f)"),
            // Through double, as the CPU backend converts (64-bit integers
            // round twice).
            (I64 | U64, F32) => format!("((float)(double){x})"),
            (_, Bool) => format!("({x} != 0)"),
            (Bool, F32) => format!("({x} ? 1.0f : 0.0f)"),
            (Bool, _) => format!("(({ty})({x} ? 1 : 0))"),
            _ => format!("(({ty}){x})"),
        })
    }

    fn clip(&self, d: DType, x: &str, lo: &str, hi: &str) -> Option<String> {
        match class(d) {
            DType::F32 | DType::I32 | DType::U32 | DType::I64 | DType::U64 => {
                Some(format!("ew_clip({x}, {lo}, {hi})"))
            }
            _ => None,
        }
    }

    fn gelu(&self, approx: GeluApprox, d: DType, x: &str) -> Option<String> {
        (class(d) == DType::F32).then(|| match approx {
            GeluApprox::None => format!("ew_gelu({x})"),
            GeluApprox::Tanh => format!("ew_gelu_tanh({x})"),
        })
    }
}

fn load(d: DType, j: usize) -> Option<String> {
    let at = format!("x{j}[o{j}]");
    Some(match d {
        DType::F16 => format!("__half2float({at})"),
        DType::BF16 => format!("__bfloat162float({at})"),
        DType::Bool => format!("({at} != 0)"),
        DType::I8 | DType::I16 => format!("(int){at}"),
        DType::U8 | DType::U16 => format!("(unsigned int){at}"),
        d => {
            storage_type(d)?;
            at
        }
    })
}

fn store(d: DType, v: &str) -> Option<String> {
    Some(match d {
        DType::F16 => format!("__float2half_rn({v})"),
        DType::BF16 => format!("__float2bfloat16_rn({v})"),
        DType::Bool => format!("(unsigned char)({v} ? 1 : 0)"),
        d => format!("({}){v}", storage_type(d)?),
    })
}

/// The CUDA source of `e` over `rank` collapsed dims as kernel `name`,
/// parameters laid out by `layout` (from [`super::params`]).
pub fn kernel(e: &Elementwise, rank: usize, layout: &Layout, name: &str) -> LResult<String> {
    let refuse = |d: DType| format!("element-wise kernels on cuda do not take {d}");
    let out_c = compute_type(e.out).ok_or_else(|| refuse(e.out))?;
    let out_s = storage_type(e.out).ok_or_else(|| refuse(e.out))?;
    let (temps, result) = print_body(&Cuda, e)?;
    let all = || e.inputs.iter().chain([&e.out]);
    let mut src = String::new();
    if all().any(|&d| d == DType::F16) {
        src.push_str("#include <cuda_fp16.h>\n");
    }
    if all().any(|&d| d == DType::BF16) {
        src.push_str("#include <cuda_bf16.h>\n");
    }
    src.push_str(HELPERS);
    src.push('\n');
    src.push_str(&layout.cuda());
    src.push_str(&format!(
        "\nextern \"C\" __global__ void {name}(const {} p, {out_s}* __restrict__ out",
        layout.name
    ));
    for (j, &d) in e.inputs.iter().enumerate() {
        let s = storage_type(d).ok_or_else(|| refuse(d))?;
        src.push_str(&format!(", const {s}* __restrict__ x{j}"));
    }
    src.push_str(") {\n    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= p.n) {\n        return;\n    }\n    unsigned int rem = (unsigned int)i;\n");
    for j in 0..e.inputs.len() {
        src.push_str(&format!("    unsigned int o{j} = 0u;\n"));
    }
    if rank > 0 {
        src.push_str(&format!(
            "    for (int a = {}; a >= 0; a--) {{\n        unsigned int c = rem % p.dims[a];\n        rem = rem / p.dims[a];\n",
            rank - 1
        ));
        for j in 0..e.inputs.len() {
            src.push_str(&format!("        o{j} += c * p.s{j}[a];\n"));
        }
        src.push_str("    }\n");
    }
    for (j, &d) in e.inputs.iter().enumerate() {
        let ty = compute_type(d).ok_or_else(|| refuse(d))?;
        let l = load(d, j).ok_or_else(|| refuse(d))?;
        src.push_str(&format!("    const {ty} x{j} = {l};\n"));
    }
    for (i, (t, te)) in temps.iter().zip(&e.temps).enumerate() {
        let ty = match te {
            super::Expr::Compare { .. } | super::Expr::Logical { .. } => "bool",
            _ => compute_type(e.inputs.first().copied().unwrap_or(e.out)).unwrap_or("float"),
        };
        src.push_str(&format!("    const {ty} t{i} = {t};\n"));
    }
    let r = format!("(({out_c}){result})");
    let st = store(e.out, &r).ok_or_else(|| refuse(e.out))?;
    src.push_str(&format!("    out[i] = {st};\n}}\n"));
    Ok(src)
}
