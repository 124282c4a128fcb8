//! The `elementwise` kernel family: unary, binary, compare, logical, where,
//! cast, clip, gelu and whole `elementwise_region` programs, as one typed
//! expression tree per node ([`Elementwise`], built by [`build`]) that each
//! kernel language prints ([`wgsl`], [`cuda`]) through the [`Lang`] trait.
//! A fused region is written once and printed per language; what a language
//! cannot express comes back as an error naming the op and dtype.
//!
//! Every kernel reads its inputs through broadcast strides over the output's
//! collapsed dims: parameters [`params`] (`n`, `dims`, one stride array `s<j>`
//! per input, region literals `lits`), operands [`operands`] (`out`, `x0`..).

pub mod cuda;
pub mod wgsl;

use rlx_ir::ops::{
    Activation, BinaryKind, CompareKind, GeluApprox, LogicalKind, Operand as RegionOperand,
    RegionFn, UnaryKind,
};
use rlx_ir::{DType, Op};

use crate::geometry::{broadcast_strides, collapse, u32_of, LResult};
use crate::params::{LayoutBuilder, ParamBlock};

/// One element-wise value. Operand dtypes are the storage dtypes of the
/// values the function applies to (a language computes narrow ones wider).
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// Input `j`, loaded at the element's broadcast position.
    Input(usize),
    /// The value of region instruction `i` (earlier in the program).
    Temp(usize),
    /// Region literal `k`, a value of `dtype` (parameter `lits[k]`).
    Lit { k: usize, dtype: DType },
    Unary {
        kind: UnaryKind,
        dtype: DType,
        x: Box<Expr>,
    },
    Binary {
        kind: BinaryKind,
        dtype: DType,
        a: Box<Expr>,
        b: Box<Expr>,
    },
    Compare {
        kind: CompareKind,
        dtype: DType,
        a: Box<Expr>,
        b: Box<Expr>,
    },
    Logical {
        kind: LogicalKind,
        a: Box<Expr>,
        b: Box<Expr>,
    },
    /// `cond ? a : b`, `a` and `b` of `dtype`.
    Where {
        dtype: DType,
        cond: Box<Expr>,
        a: Box<Expr>,
        b: Box<Expr>,
    },
    Cast {
        from: DType,
        to: DType,
        x: Box<Expr>,
    },
    /// `min(max(x, lo), hi)`: `hi` wins when the bounds cross.
    Clip {
        dtype: DType,
        x: Box<Expr>,
        lo: Box<Expr>,
        hi: Box<Expr>,
    },
    Gelu {
        approx: GeluApprox,
        dtype: DType,
        x: Box<Expr>,
    },
}

fn bx(e: Expr) -> Box<Expr> {
    Box::new(e)
}

/// A node's element-wise kernel: input and output dtypes, the region's
/// temporaries (in order), the result and the literals.
#[derive(Debug, Clone, PartialEq)]
pub struct Elementwise {
    /// The op's name (kernel names).
    pub op: &'static str,
    pub inputs: Vec<DType>,
    pub out: DType,
    /// Region instructions: `temps[i]` is [`Expr::Temp`]`(i)`.
    pub temps: Vec<Expr>,
    pub result: Expr,
    pub lits: Vec<f32>,
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

fn no(what: &str, d: DType) -> String {
    format!("`{what}` on {d} has no element-wise kernel")
}

/// A fused product's epilogue activation of input 0 (f32), as the
/// element-wise nodes `legalize` would decompose it into compute it; `None`
/// for the activations whose bounds are literals (hard swish, ReLU6), which
/// an epilogue does not carry.
pub fn activation(act: Activation) -> Option<Expr> {
    let f = DType::F32;
    let unary = |kind, x| Expr::Unary {
        kind,
        dtype: f,
        x: bx(x),
    };
    let gelu = |approx| Expr::Gelu {
        approx,
        dtype: f,
        x: bx(Expr::Input(0)),
    };
    Some(match act {
        Activation::None => Expr::Input(0),
        Activation::Relu => unary(UnaryKind::Relu, Expr::Input(0)),
        Activation::Sigmoid => unary(UnaryKind::Sigmoid, Expr::Input(0)),
        Activation::Tanh => unary(UnaryKind::Tanh, Expr::Input(0)),
        Activation::GeluErf => gelu(GeluApprox::None),
        Activation::GeluTanh => gelu(GeluApprox::Tanh),
        Activation::Silu => Expr::Binary {
            kind: BinaryKind::Mul,
            dtype: f,
            a: bx(Expr::Input(0)),
            b: bx(unary(UnaryKind::Sigmoid, Expr::Input(0))),
        },
        Activation::HardSwish | Activation::Relu6 => return None,
    })
}

/// The expression tree of an element-wise node with inputs of `inputs`.
/// Refuses ops that are not element-wise and operand dtypes that do not
/// fit the op (mixed dtypes, except a float `pow` base with any exponent).
pub fn build(op: &Op, inputs: &[DType]) -> LResult<Elementwise> {
    let d = |i: usize| {
        inputs
            .get(i)
            .copied()
            .ok_or_else(|| format!("input {i} is missing"))
    };
    let d0 = d(0)?;
    let x = |j: usize| bx(Expr::Input(j));
    let mut temps = Vec::new();
    let mut lits = Vec::new();
    let (result, out) = match op {
        Op::Unary(u) => {
            use UnaryKind::*;
            let out = match u.kind {
                IsNan | IsInf | IsPosInf | IsNegInf => DType::Bool,
                _ => d0,
            };
            let e = Expr::Unary {
                kind: u.kind,
                dtype: d0,
                x: x(0),
            };
            (e, out)
        }
        Op::Binary(b) => {
            let d1 = d(1)?;
            let rhs = if d1 == d0 {
                x(1)
            } else if b.kind == BinaryKind::Pow && matches!(class(d0), DType::F32 | DType::F64) {
                // A float base takes an exponent of any number dtype.
                bx(Expr::Cast {
                    from: d1,
                    to: class(d0),
                    x: x(1),
                })
            } else {
                return Err(format!(
                    "`{}` on {d0} and {d1} (mixed dtypes) has no element-wise kernel",
                    b.kind.name()
                ));
            };
            let e = Expr::Binary {
                kind: b.kind,
                dtype: d0,
                a: x(0),
                b: rhs,
            };
            (e, d0)
        }
        Op::Compare(c) => {
            let e = Expr::Compare {
                kind: c.kind,
                dtype: d0,
                a: x(0),
                b: x(1),
            };
            (e, DType::Bool)
        }
        Op::Logical(l) => {
            let e = Expr::Logical {
                kind: l.kind,
                a: x(0),
                b: x(1),
            };
            (e, DType::Bool)
        }
        Op::Where(_) => {
            let dt = d(1)?;
            let e = Expr::Where {
                dtype: dt,
                cond: x(0),
                a: x(1),
                b: x(2),
            };
            (e, dt)
        }
        Op::Cast(c) => {
            let e = Expr::Cast {
                from: d0,
                to: c.to,
                x: x(0),
            };
            (e, c.to)
        }
        Op::Clip(_) => {
            let e = Expr::Clip {
                dtype: d0,
                x: x(0),
                lo: x(1),
                hi: x(2),
            };
            (e, d0)
        }
        Op::Gelu(g) => {
            let e = Expr::Gelu {
                approx: g.approximate,
                dtype: d0,
                x: x(0),
            };
            (e, d0)
        }
        Op::ElementwiseRegion(r) => {
            let mut arg = |a: &RegionOperand| match *a {
                RegionOperand::Input(k) => Expr::Input(k as usize),
                RegionOperand::Temp(k) => Expr::Temp(k as usize),
                RegionOperand::Const(c) => {
                    lits.push(c as f32);
                    Expr::Lit {
                        k: lits.len() - 1,
                        dtype: d0,
                    }
                }
            };
            for ins in &r.program.0 {
                let mut a: Vec<Expr> = ins.args.iter().map(&mut arg).collect();
                let e = match (ins.f, a.len()) {
                    (RegionFn::Unary(kind), 1) => Expr::Unary {
                        kind,
                        dtype: d0,
                        x: bx(a.remove(0)),
                    },
                    (RegionFn::Binary(kind), 2) => {
                        let rhs = a.remove(1);
                        Expr::Binary {
                            kind,
                            dtype: d0,
                            a: bx(a.remove(0)),
                            b: bx(rhs),
                        }
                    }
                    _ => {
                        return Err(format!(
                            "region function `{}` has the wrong number of operands",
                            ins.f.name()
                        ))
                    }
                };
                temps.push(e);
            }
            if temps.is_empty() {
                return Err("an empty elementwise_region".into());
            }
            (Expr::Temp(temps.len() - 1), d0)
        }
        op => return Err(no(op.name(), d0)),
    };
    Ok(Elementwise {
        op: op.name(),
        inputs: inputs.to_vec(),
        out,
        temps,
        result,
        lits,
    })
}

/// A kernel language's spelling of each element-wise function, on operands
/// already printed; `None` where the language has no form for the dtype.
pub trait Lang {
    /// The target named in refusals ("wgpu", "cuda").
    const TARGET: &'static str;
    fn input(&self, j: usize) -> String {
        format!("x{j}")
    }
    fn temp(&self, i: usize) -> String {
        format!("t{i}")
    }
    fn lit(&self, k: usize, d: DType) -> Option<String>;
    fn unary(&self, kind: UnaryKind, d: DType, x: &str) -> Option<String>;
    fn binary(&self, kind: BinaryKind, d: DType, a: &str, b: &str) -> Option<String>;
    fn compare(&self, kind: CompareKind, d: DType, a: &str, b: &str) -> Option<String>;
    fn logical(&self, kind: LogicalKind, a: &str, b: &str) -> String;
    fn select(&self, d: DType, cond: &str, a: &str, b: &str) -> Option<String>;
    fn cast(&self, from: DType, to: DType, x: &str) -> Option<String>;
    fn clip(&self, d: DType, x: &str, lo: &str, hi: &str) -> Option<String>;
    fn gelu(&self, approx: GeluApprox, d: DType, x: &str) -> Option<String>;
}

/// `e` in language `l`, or why `l` cannot express it.
pub fn print<L: Lang>(l: &L, e: &Expr) -> LResult<String> {
    let refuse = |what: &str, d: DType| format!("`{what}` on {d} has no {} kernel", L::TARGET);
    Ok(match e {
        Expr::Input(j) => l.input(*j),
        Expr::Temp(i) => l.temp(*i),
        Expr::Lit { k, dtype } => l
            .lit(*k, *dtype)
            .ok_or_else(|| refuse("elementwise_region", *dtype))?,
        Expr::Unary { kind, dtype, x } => l
            .unary(*kind, *dtype, &print(l, x)?)
            .ok_or_else(|| refuse(kind.name(), *dtype))?,
        Expr::Binary { kind, dtype, a, b } => l
            .binary(*kind, *dtype, &print(l, a)?, &print(l, b)?)
            .ok_or_else(|| refuse(kind.name(), *dtype))?,
        Expr::Compare { kind, dtype, a, b } => l
            .compare(*kind, *dtype, &print(l, a)?, &print(l, b)?)
            .ok_or_else(|| refuse(kind.name(), *dtype))?,
        Expr::Logical { kind, a, b } => l.logical(*kind, &print(l, a)?, &print(l, b)?),
        Expr::Where { dtype, cond, a, b } => l
            .select(*dtype, &print(l, cond)?, &print(l, a)?, &print(l, b)?)
            .ok_or_else(|| refuse("where", *dtype))?,
        Expr::Cast { from, to, x } => l
            .cast(*from, *to, &print(l, x)?)
            .ok_or_else(|| format!("cast from {from} to {to} has no {} kernel", L::TARGET))?,
        Expr::Clip { dtype, x, lo, hi } => l
            .clip(*dtype, &print(l, x)?, &print(l, lo)?, &print(l, hi)?)
            .ok_or_else(|| refuse("clip", *dtype))?,
        Expr::Gelu { approx, dtype, x } => l
            .gelu(*approx, *dtype, &print(l, x)?)
            .ok_or_else(|| refuse("gelu", *dtype))?,
    })
}

/// The temporaries' and the result's text in language `l`.
pub fn print_body<L: Lang>(l: &L, e: &Elementwise) -> LResult<(Vec<String>, String)> {
    let temps = e
        .temps
        .iter()
        .map(|t| print(l, t))
        .collect::<LResult<Vec<_>>>()?;
    Ok((temps, print(l, &e.result)?))
}

/// The operand names of a kernel with `inputs` inputs, in launch order.
pub fn operands(inputs: usize) -> Vec<String> {
    let mut v = vec!["out".to_string()];
    v.extend((0..inputs).map(|j| format!("x{j}")));
    v
}

/// The launch geometry of an element-wise kernel: the output's collapsed
/// dims and each input's element strides over them (0 = broadcast).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Geometry {
    pub n: usize,
    pub dims: Vec<usize>,
    pub strides: Vec<Vec<usize>>,
}

impl Geometry {
    pub fn new(out: &[usize], inputs: &[&[usize]]) -> LResult<Geometry> {
        let bs = inputs
            .iter()
            .map(|d| broadcast_strides(d, out))
            .collect::<LResult<Vec<_>>>()?;
        let (dims, strides) = collapse(out, &bs);
        Ok(Geometry {
            n: out.iter().product(),
            dims,
            strides,
        })
    }

    pub fn rank(&self) -> usize {
        self.dims.len()
    }
}

/// The parameters of an element-wise launch (struct `ElementwiseParams`):
/// `n` (output elements), `dims` (collapsed output dims), `s<j>` (input
/// `j`'s element strides over them), `lits` (region literals). Empty arrays
/// are left out (rank 0, no literals).
pub fn params(g: &Geometry, lits: &[f32]) -> LResult<ParamBlock> {
    let words = |v: &[usize], what: &str| -> LResult<Vec<u32>> {
        v.iter().map(|&x| u32_of(x, what)).collect()
    };
    let dims: Vec<u32> = words(&g.dims, "a dim")?;
    let mut b = LayoutBuilder::new()
        .u32("n", u32_of(g.n, "output size")?)
        .u32s("dims", &dims);
    for (j, s) in g.strides.iter().enumerate() {
        let s: Vec<u32> = words(s, "a stride")?;
        b = b.u32s(format!("s{j}"), &s);
    }
    Ok(b.f32s("lits", lits).build("ElementwiseParams"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::ops::{Binary, Cast, ElementwiseRegion, Instr, Program, RoundMode, Unary};

    fn region() -> Op {
        // sigmoid(x0 * 0.5 + x1)
        Op::ElementwiseRegion(ElementwiseRegion {
            program: Program(vec![
                Instr {
                    f: RegionFn::Binary(BinaryKind::Mul),
                    args: vec![RegionOperand::Input(0), RegionOperand::Const(0.5)],
                },
                Instr {
                    f: RegionFn::Binary(BinaryKind::Add),
                    args: vec![RegionOperand::Temp(0), RegionOperand::Input(1)],
                },
                Instr {
                    f: RegionFn::Unary(UnaryKind::Sigmoid),
                    args: vec![RegionOperand::Temp(1)],
                },
            ]),
        })
    }

    fn binary(kind: BinaryKind) -> Op {
        Op::Binary(Binary { kind })
    }

    #[test]
    fn regions_become_temps_and_literals() {
        let e = build(&region(), &[DType::F32, DType::F32]).unwrap();
        assert_eq!(e.temps.len(), 3);
        assert_eq!(e.result, Expr::Temp(2));
        assert_eq!(e.lits, vec![0.5]);
        assert_eq!(e.out, DType::F32);
        let (t, r) = print_body(&wgsl::Wgsl, &e).unwrap();
        assert_eq!(t, ["(x0 * p.lits[0])", "(t0 + x1)", "ew_sigmoid(t1)"]);
        assert_eq!(r, "t2");
        let (t, _) = print_body(&cuda::Cuda, &e).unwrap();
        assert_eq!(t, ["(x0 * p.lits[0])", "(t0 + x1)", "ew_sigmoid(t1)"]);
    }

    #[test]
    fn nodes_print_per_language() {
        let e = build(&binary(BinaryKind::Div), &[DType::I64, DType::I64]).unwrap();
        assert_eq!(print(&wgsl::Wgsl, &e.result).unwrap(), "i64_div(x0, x1)");
        assert_eq!(print(&cuda::Cuda, &e.result).unwrap(), "ew_div(x0, x1)");
        let e = build(&binary(BinaryKind::Pow), &[DType::F16, DType::I32]).unwrap();
        assert_eq!(
            print(&wgsl::Wgsl, &e.result).unwrap(),
            "ew_pow(x0, f32(x1))"
        );
        assert_eq!(
            print(&cuda::Cuda, &e.result).unwrap(),
            "powf(x0, ((float)x1))"
        );
        let cast = Op::Cast(Cast {
            to: DType::U8,
            saturate: true,
            round_mode: RoundMode::Nearest,
        });
        let e = build(&cast, &[DType::F32]).unwrap();
        assert_eq!(
            print(&wgsl::Wgsl, &e.result).unwrap(),
            "u32(clamp(x0, 0.0, 255.0))"
        );
        assert_eq!(
            print(&cuda::Cuda, &e.result).unwrap(),
            "ew_f2u_in(x0, 255.0f)"
        );
        let e = build(&binary(BinaryKind::ShiftLeft), &[DType::I8, DType::I8]).unwrap();
        assert_eq!(print(&cuda::Cuda, &e.result).unwrap(), "ew_shl(x0, x1, 8)");
    }

    #[test]
    fn what_a_language_lacks_is_refused_by_name() {
        let e = build(&binary(BinaryKind::Pow), &[DType::I32, DType::I32]).unwrap();
        assert_eq!(
            print(&wgsl::Wgsl, &e.result).unwrap_err(),
            "`pow` on i32 has no WGSL kernel"
        );
        assert_eq!(print(&cuda::Cuda, &e.result).unwrap(), "ew_pow(x0, x1)");
        let neg = Op::Unary(Unary {
            kind: UnaryKind::Sin,
        });
        let e = build(&neg, &[DType::I64]).unwrap();
        assert!(print(&cuda::Cuda, &e.result)
            .unwrap_err()
            .contains("`sin` on i64"));
        assert!(build(&binary(BinaryKind::Add), &[DType::F32, DType::I32])
            .unwrap_err()
            .contains("mixed dtypes"));
    }

    #[test]
    fn params_by_name() {
        let g = Geometry::new(&[2, 3, 4], &[&[2, 3, 4], &[4]]).unwrap();
        assert_eq!(g.dims, vec![6, 4]);
        let p = params(&g, &[0.5]).unwrap();
        assert_eq!(
            p.to_string(),
            "n=24 dims=[6,4] s0=[4,1] s1=[0,1] lits=[0.5]"
        );
        let g = Geometry::new(&[], &[&[]]).unwrap();
        assert_eq!(params(&g, &[]).unwrap().to_string(), "n=1");
        assert_eq!(operands(2), ["out", "x0", "x1"]);
    }
}
