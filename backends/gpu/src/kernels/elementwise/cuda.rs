//! The CUDA printer of element-wise kernels (CUDA C++ for NVRTC, helpers in
//! `kernels/cuda/elementwise.cuh`), with the CPU backend's semantics: i64
//! and u64 are native `long long` / `unsigned long long`, narrow integers
//! compute in 32 bits and wrap when stored, f16 (`rlx_half`) and bf16
//! (`rlx_bf16`, both from the backend's prelude) compute in `float`, bool loads from and stores to
//! `unsigned char`.
//!
//! f64 computes in `double`.
//!
//! The kernel is `extern "C" __global__ void NAME(OUT* out, const X0* in0,
//! ..., const ElementwiseParams p)`: one typed element pointer per operand
//! of [`super::operands`] (already at the operand's first element), then
//! the parameter struct by value (the layout of [`super::params`]). The
//! node's function of its loaded inputs is `ew_body`; a grid-stride loop
//! over output elements (64-bit index) loads each input through broadcast
//! strides ([`Indexing::Strided`]) or at the output's index
//! ([`Indexing::Contiguous`], with a `float4` path when every operand is
//! f32).

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
        DType::F64 => "double",
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
        DType::F64 => "double",
        DType::F16 => "rlx_half",
        DType::BF16 => "rlx_bf16",
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

/// The C math-function suffix of a float class (`f` for float, none for
/// double), `None` for the rest.
fn fsuf(c: DType) -> Option<&'static str> {
    match c {
        DType::F32 => Some("f"),
        DType::F64 => Some(""),
        _ => None,
    }
}

/// A float constant in the class's type.
fn flit(c: DType, v: &str) -> String {
    if c == DType::F64 {
        v.to_string()
    } else {
        format!("{v}f")
    }
}

impl Lang for Cuda {
    const TARGET: &'static str = "cuda";

    fn lit(&self, k: usize, d: DType) -> Option<String> {
        match class(d) {
            DType::F32 => Some(format!("p.lits[{k}]")),
            DType::F64 => Some(format!("((double)p.lits[{k}])")),
            _ => None,
        }
    }

    fn unary(&self, kind: UnaryKind, d: DType, x: &str) -> Option<String> {
        use UnaryKind::*;
        let c = class(d);
        if let Some(f) = fsuf(c) {
            let one = flit(c, "1.0");
            return Some(match kind {
                Abs => format!("fabs{f}({x})"),
                Neg => format!("(-{x})"),
                Sign => format!("ew_sign({x})"),
                Ceil => format!("ceil{f}({x})"),
                Floor => format!("floor{f}({x})"),
                Round => format!("rint{f}({x})"),
                Sqrt => format!("sqrt{f}({x})"),
                Reciprocal => format!("({one} / {x})"),
                Exp => format!("exp{f}({x})"),
                Log => format!("log{f}({x})"),
                Sin => format!("sin{f}({x})"),
                Cos => format!("cos{f}({x})"),
                Tan => format!("tan{f}({x})"),
                Asin => format!("asin{f}({x})"),
                Acos => format!("acos{f}({x})"),
                Atan => format!("atan{f}({x})"),
                Sinh => format!("sinh{f}({x})"),
                Cosh => format!("cosh{f}({x})"),
                Asinh => format!("asinh{f}({x})"),
                Acosh => format!("acosh{f}({x})"),
                Atanh => format!("atanh{f}({x})"),
                Tanh => format!("tanh{f}({x})"),
                Sigmoid => format!("ew_sigmoid({x})"),
                Relu => format!("ew_relu({x})"),
                Erf => format!("erf{f}({x})"),
                Softplus => format!("ew_softplus({x})"),
                Softsign => format!("({x} / ({one} + fabs{f}({x})))"),
                IsNan => format!("isnan({x})"),
                IsInf => format!("isinf({x})"),
                IsPosInf => format!("ew_is_pos_inf({x})"),
                IsNegInf => format!("ew_is_neg_inf({x})"),
                Not | BitwiseNot => return None,
            });
        }
        Some(match (c, kind) {
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
        let fl = fsuf(c);
        let float = fl.is_some();
        let f = fl.unwrap_or("");
        Some(match kind {
            Add | Sub | Mul if signed => {
                let f = match kind {
                    Add => "ew_add",
                    Sub => "ew_sub",
                    _ => "ew_mul",
                };
                format!("{f}({a}, {b})")
            }
            Add if int || float => format!("({a} + {b})"),
            Sub if int || float => format!("({a} - {b})"),
            Mul if int || float => format!("({a} * {b})"),
            Div if float => format!("({a} / {b})"),
            Pow if float => format!("pow{f}({a}, {b})"),
            Fmod if float => format!("fmod{f}({a}, {b})"),
            Mod if float || signed => format!("ew_mod({a}, {b})"),
            Mod | Fmod if int => format!("ew_fmod({a}, {b})"),
            Div if int => format!("ew_div({a}, {b})"),
            Pow if int => format!("ew_pow({a}, {b})"),
            Max if int || float => format!("ew_max({a}, {b})"),
            Min if int || float => format!("ew_min({a}, {b})"),
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
        let fl = |c: DType| matches!(c, F32 | F64);
        let lit = |v: &str| flit(cf, v);
        Some(match (cf, ct) {
            _ if cf == ct => x.to_string(),
            (F32, F64) | (F64, F32) => format!("(({ty}){x})"),
            (F32 | F64, I32) => match to {
                I8 => format!("ew_f2i_in({x}, {}, {})", lit("-128.0"), lit("127.0")),
                I16 => format!("ew_f2i_in({x}, {}, {})", lit("-32768.0"), lit("32767.0")),
                _ => format!("ew_f2i({x})"),
            },
            (F32 | F64, U32) => match to {
                U8 => format!("ew_f2u_in({x}, {})", lit("255.0")),
                U16 => format!("ew_f2u_in({x}, {})", lit("65535.0")),
                _ => format!("ew_f2u({x})"),
            },
            (F32 | F64, I64) => format!("ew_f2ll({x})"),
            (F32 | F64, U64) => format!("ew_f2ull({x})"),
            (F32 | F64, Bool) => format!("({x} != {})", lit("0.0")),
            // Through double, as the CPU backend converts (64-bit integers
            // round twice).
            (I64 | U64, F32) => format!("((float)(double){x})"),
            (_, Bool) => format!("({x} != 0)"),
            (Bool, c) if fl(c) => format!("({x} ? {} : {})", flit(c, "1.0"), flit(c, "0.0")),
            (Bool, _) => format!("(({ty})({x} ? 1 : 0))"),
            _ => format!("(({ty}){x})"),
        })
    }

    fn clip(&self, d: DType, x: &str, lo: &str, hi: &str) -> Option<String> {
        match class(d) {
            DType::F32 | DType::F64 | DType::I32 | DType::U32 | DType::I64 | DType::U64 => {
                Some(format!("ew_clip({x}, {lo}, {hi})"))
            }
            _ => None,
        }
    }

    fn gelu(&self, approx: GeluApprox, d: DType, x: &str) -> Option<String> {
        fsuf(class(d))?;
        Some(match approx {
            GeluApprox::None => format!("ew_gelu({x})"),
            GeluApprox::Tanh => format!("ew_gelu_tanh({x})"),
        })
    }
}

fn load(d: DType, at: &str) -> Option<String> {
    Some(match d {
        DType::F16 => format!("rlx_h2f({at})"),
        DType::BF16 => format!("rlx_b2f({at})"),
        DType::Bool => format!("({at} != 0)"),
        DType::I8 | DType::I16 => format!("(int){at}"),
        DType::U8 | DType::U16 => format!("(unsigned int){at}"),
        d => {
            storage_type(d)?;
            at.to_string()
        }
    })
}

fn store(d: DType, v: &str) -> Option<String> {
    Some(match d {
        DType::F16 => format!("rlx_f2h({v})"),
        DType::BF16 => format!("rlx_f2b({v})"),
        DType::Bool => format!("(unsigned char)({v} ? 1 : 0)"),
        d => format!("({}){v}", storage_type(d)?),
    })
}

/// How a kernel finds each input's element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indexing {
    /// Through `rank` collapsed dims and per-input strides.
    Strided(usize),
    /// Every input at the output's index (no broadcast).
    Contiguous,
}

/// Whether the contiguous kernel also gets a `float4` path (all f32).
fn vectorized(e: &Elementwise, ix: Indexing) -> bool {
    ix == Indexing::Contiguous && e.out == DType::F32 && e.inputs.iter().all(|&d| d == DType::F32)
}

/// Elements each thread of the kernel handles per step (4 with the
/// `float4` path, which runs when `n` is a multiple of 4 and every pointer
/// is 16-byte aligned).
pub fn elements_per_thread(e: &Elementwise, ix: Indexing) -> u64 {
    if vectorized(e, ix) {
        4
    } else {
        1
    }
}

/// The CUDA source of `e` as kernel `name`, parameters laid out by `layout`
/// (from [`super::params`]). The backend prepends its prelude, which
/// defines `rlx_thread()` and `rlx_threads()` (grid-stride indexing) and
/// the half types.
pub fn kernel(e: &Elementwise, ix: Indexing, layout: &Layout, name: &str) -> LResult<String> {
    let refuse = |d: DType| format!("element-wise kernels on cuda do not take {d}");
    let out_c = compute_type(e.out).ok_or_else(|| refuse(e.out))?;
    let out_s = storage_type(e.out).ok_or_else(|| refuse(e.out))?;
    let (temps, result) = print_body(&Cuda, e)?;
    let mut src = String::from(HELPERS);
    src.push('\n');
    src.push_str(&layout.cuda());
    src.push_str(&layout.cuda_checks());
    let pn = &layout.name;
    // The function of the loaded values.
    src.push_str(&format!(
        "\n__device__ __forceinline__ {out_c} ew_body(const {pn}& p"
    ));
    for (j, &d) in e.inputs.iter().enumerate() {
        let ty = compute_type(d).ok_or_else(|| refuse(d))?;
        src.push_str(&format!(", const {ty} x{j}"));
    }
    src.push_str(") {\n");
    for (i, (t, te)) in temps.iter().zip(&e.temps).enumerate() {
        let ty = match te {
            super::Expr::Compare { .. } | super::Expr::Logical { .. } => "bool",
            _ => compute_type(e.inputs.first().copied().unwrap_or(e.out)).unwrap_or("float"),
        };
        src.push_str(&format!("    const {ty} t{i} = {t};\n"));
    }
    src.push_str(&format!("    return (({out_c}){result});\n}}\n"));
    // The kernel: operand pointers, then the parameters.
    src.push_str(&format!(
        "\nextern \"C\" __global__ void {name}({out_s}* __restrict__ out"
    ));
    for (j, &d) in e.inputs.iter().enumerate() {
        let s = storage_type(d).ok_or_else(|| refuse(d))?;
        src.push_str(&format!(", const {s}* __restrict__ in{j}"));
    }
    // The wait first: a kernel launched before its predecessor ends
    // (prelude.cuh, rlx_grid_wait) reads and writes nothing before it.
    src.push_str(&format!(", const {pn} p) {{\n    rlx_grid_wait();\n"));
    let args = |f: &dyn Fn(usize) -> String| -> String {
        (0..e.inputs.len()).map(|j| format!(", {}", f(j))).collect()
    };
    if vectorized(e, ix) {
        let mut align = String::from("(unsigned long long)out");
        for j in 0..e.inputs.len() {
            align.push_str(&format!(" | (unsigned long long)in{j}"));
        }
        src.push_str(&format!(
            "    if ((p.n & 3u) == 0u && (({align}) & 15ull) == 0ull) {{\n        const unsigned long long n4 = p.n / 4u;\n        for (unsigned long long q = rlx_thread(); q < n4; q += rlx_threads()) {{\n"
        ));
        for j in 0..e.inputs.len() {
            src.push_str(&format!(
                "            const float4 v{j} = ((const float4*)in{j})[q];\n"
            ));
        }
        src.push_str("            float4 r;\n");
        for c in ["x", "y", "z", "w"] {
            src.push_str(&format!(
                "            r.{c} = ew_body(p{});\n",
                args(&|j| format!("v{j}.{c}"))
            ));
        }
        src.push_str("            ((float4*)out)[q] = r;\n        }\n        return;\n    }\n");
    }
    src.push_str("    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {\n");
    let at = |j: usize| match ix {
        Indexing::Contiguous => format!("in{j}[i]"),
        Indexing::Strided(_) => format!("in{j}[o{j}]"),
    };
    if let Indexing::Strided(rank) = ix {
        for j in 0..e.inputs.len() {
            src.push_str(&format!("        unsigned int o{j} = 0u;\n"));
        }
        if rank > 0 {
            src.push_str(&format!(
                "        unsigned int rem = (unsigned int)i;\n        #pragma unroll\n        for (int a = {}; a >= 0; a--) {{\n            const unsigned int c = rem % p.dims[a];\n            rem = rem / p.dims[a];\n",
                rank - 1
            ));
            for j in 0..e.inputs.len() {
                src.push_str(&format!("            o{j} += c * p.s{j}[a];\n"));
            }
            src.push_str("        }\n");
        }
    }
    let mut loads = Vec::new();
    for (j, &d) in e.inputs.iter().enumerate() {
        loads.push(load(d, &at(j)).ok_or_else(|| refuse(d))?);
    }
    let call = format!("ew_body(p{})", args(&|j| loads[j].clone()));
    let st = store(e.out, &call).ok_or_else(|| refuse(e.out))?;
    src.push_str(&format!("        out[i] = {st};\n    }}\n}}\n"));
    Ok(src)
}
