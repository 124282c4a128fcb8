//! ElementwiseRegion: a chain of elementwise ops fused into one node that holds a
//! small expression program. Every input broadcasts to the output shape; each
//! instruction reads inputs (`x0`, `x1`, ...), earlier results (`t0`, `t1`, ...)
//! or float literals, and the last instruction is the output:
//!
//! ```text
//! %5 = elementwise_region(%2, %3) {program=[mul(x0, x1), add(t0, 0.5), relu(t1)]} : f32[N,8]
//! ```

use super::{broadcast_all, BinaryKind, InferCx, InferError, OpDef, UnaryKind};
use crate::dtype::DType;
use crate::op_attrs;
use crate::shape::TensorType;
use crate::text::{AttrValue, ParseError, Parser, Writer};

/// Float dtypes a region computes in.
pub const REGION_DTYPES: &[DType] = &[DType::F32, DType::F64, DType::F16, DType::BF16];

/// One operand of an instruction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Operand {
    /// Region input `i` (port `i` of the node).
    Input(u16),
    /// Result of instruction `i` (earlier in the program).
    Temp(u16),
    /// A literal, converted to the region's dtype.
    Const(f64),
}

/// The function an instruction applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegionFn {
    Unary(UnaryKind),
    Binary(BinaryKind),
}

impl RegionFn {
    pub fn name(self) -> &'static str {
        match self {
            RegionFn::Unary(k) => k.name(),
            RegionFn::Binary(k) => k.name(),
        }
    }

    pub fn arity(self) -> usize {
        match self {
            RegionFn::Unary(_) => 1,
            RegionFn::Binary(_) => 2,
        }
    }

    /// True for the functions a region may hold: float-valued ones.
    pub fn allowed(self) -> bool {
        use BinaryKind as B;
        use UnaryKind as U;
        match self {
            RegionFn::Unary(k) => !matches!(
                k,
                U::Not | U::BitwiseNot | U::IsNan | U::IsInf | U::IsPosInf | U::IsNegInf
            ),
            RegionFn::Binary(k) => matches!(
                k,
                B::Add | B::Sub | B::Mul | B::Div | B::Pow | B::Max | B::Min
            ),
        }
    }

    pub fn from_name(s: &str) -> Option<RegionFn> {
        UnaryKind::from_name(s)
            .map(RegionFn::Unary)
            .or_else(|| BinaryKind::from_name(s).map(RegionFn::Binary))
            .filter(|f| f.allowed())
    }
}

/// One instruction: `f(args)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Instr {
    pub f: RegionFn,
    pub args: Vec<Operand>,
}

/// The program of a region; the last instruction's result is the output.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Program(pub Vec<Instr>);

impl Program {
    /// Checks operand ranges and arities for a region of `inputs` inputs.
    pub fn check(&self, inputs: usize) -> Result<(), String> {
        if self.0.is_empty() {
            return Err("the program is empty".into());
        }
        for (i, ins) in self.0.iter().enumerate() {
            if !ins.f.allowed() {
                return Err(format!("`{}` cannot be in a region", ins.f.name()));
            }
            if ins.args.len() != ins.f.arity() {
                return Err(format!(
                    "t{i}: `{}` takes {} operands, got {}",
                    ins.f.name(),
                    ins.f.arity(),
                    ins.args.len()
                ));
            }
            for a in &ins.args {
                match *a {
                    Operand::Input(k) if usize::from(k) >= inputs => {
                        return Err(format!(
                            "t{i}: x{k} is not an input (the region has {inputs})"
                        ))
                    }
                    Operand::Temp(k) if usize::from(k) >= i => {
                        return Err(format!("t{i}: t{k} is not computed before it"))
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }
}

impl AttrValue for Program {
    fn write_attr(&self, w: &mut Writer) {
        w.push("[");
        for (i, ins) in self.0.iter().enumerate() {
            if i > 0 {
                w.push(", ");
            }
            w.push(ins.f.name());
            w.push("(");
            for (j, a) in ins.args.iter().enumerate() {
                if j > 0 {
                    w.push(", ");
                }
                match *a {
                    Operand::Input(k) => w.push(&format!("x{k}")),
                    Operand::Temp(k) => w.push(&format!("t{k}")),
                    Operand::Const(v) => v.write_attr(w),
                }
            }
            w.push(")");
        }
        w.push("]");
    }

    fn read_attr(p: &mut Parser) -> Result<Self, ParseError> {
        p.list(|p| {
            let (off, name) = p.ident()?;
            let f = RegionFn::from_name(&name)
                .ok_or_else(|| p.error_at(off, format!("`{name}` is not a region function")))?;
            p.expect('(')?;
            let mut args = Vec::new();
            loop {
                args.push(operand(p)?);
                if p.eat(')') {
                    break;
                }
                p.expect(',')?;
            }
            Ok(Instr { f, args })
        })
        .map(Program)
    }
}

fn operand(p: &mut Parser) -> Result<Operand, ParseError> {
    if let Ok((off, w)) = p.ident() {
        let bad = || p.error_at(off, format!("expected x<N>, t<N> or a number, found `{w}`"));
        let (kind, num) = w.split_at(1.min(w.len()));
        let k: u16 = num.parse().map_err(|_| bad())?;
        return match kind {
            "x" => Ok(Operand::Input(k)),
            "t" => Ok(Operand::Temp(k)),
            _ => Err(bad()),
        };
    }
    f64::read_attr(p).map(Operand::Const)
}

op_attrs! {
    /// A fused chain of elementwise ops over broadcast inputs of one float dtype.
    pub struct ElementwiseRegion {
        pub program: Program,
    }
}

impl OpDef for ElementwiseRegion {
    fn arity(&self) -> (usize, usize) {
        (1, usize::MAX)
    }
    fn infer(&self, cx: &InferCx) -> Result<Vec<TensorType>, InferError> {
        let d = cx.expect_dtype(0, REGION_DTYPES)?;
        for i in 1..cx.inputs.len() {
            cx.expect_same_dtype(i, 0)?;
        }
        self.program
            .check(cx.inputs.len())
            .map_err(|r| super::attr_err("program", r))?;
        let s = broadcast_all(cx.inputs.iter().map(|t| &t.shape))?;
        Ok(vec![TensorType::new(d, s)])
    }
}

#[cfg(test)]
mod tests {
    use crate::text::{parse_graph, print_graph};

    #[test]
    fn region_round_trips() {
        let src = "rlx-ir 2\ngraph {\n  %0 = input \"x\" : f32[N,8]\n  %1 = input \"b\" : f32[8]\n  %2 = elementwise_region(%0, %1) {program=[mul(x0, x1), add(t0, -0.5), relu(t1), pow(t2, 3.0), max(t3, 1e-7)]} : f32[N,8]  # Mul_0, Add_1\n  output \"y\" = %2\n}\n";
        let g = parse_graph(src).unwrap();
        assert_eq!(print_graph(&g), src);
    }

    #[test]
    fn bad_programs_are_errors() {
        let bad = |p: &str| {
            let src = format!("rlx-ir 2\ngraph {{\n  %0 = input \"x\" : f32[4]\n  %1 = elementwise_region(%0) {{program={p}}} : f32[4]\n  output \"y\" = %1\n}}\n");
            let mut g = parse_graph(&src).map_err(|e| e.to_string())?;
            crate::analysis::infer_graph(&mut g, None).map_err(|e| e.to_string())?;
            Ok::<(), String>(())
        };
        assert!(bad("[relu(x0)]").is_ok());
        assert!(bad("[relu(x1)]")
            .unwrap_err()
            .contains("x1 is not an input"));
        assert!(bad("[relu(t0)]")
            .unwrap_err()
            .contains("t0 is not computed"));
        assert!(bad("[add(x0)]").unwrap_err().contains("takes 2 operands"));
        assert!(bad("[]").unwrap_err().contains("empty"));
        assert!(bad("[not(x0)]").is_err());
        assert!(bad("[relu(y0)]").is_err());
    }
}
