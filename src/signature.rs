//! What a model needs and gives: its inputs' and outputs' names, dtypes and
//! shapes, with symbolic dims by name, so that a program can prepare its
//! tensors without reading the ONNX file.

use std::fmt;

use rlx_ir::dim::Atom;
use rlx_ir::{DType, Dim, Graph, TensorType, ValueKind};

use crate::compile::CompiledModel;
use crate::session::Session;

/// One dim of an input or output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DimInfo {
    Fixed(usize),
    /// A symbol the caller chooses (`batch`, `seq`), bound by the shapes
    /// of the inputs given to a run.
    Symbol(String),
    /// An expression of symbols (`2*seq`, `floordiv(height+31, 32)`). A
    /// dim known only once a node has run is named by the ONNX node and
    /// its output: `/model.22/Range[0]` (dim 0 of its first output),
    /// `/TopK:1[0]` (of its second).
    Expr(String),
}

/// `d` as a user reads it: [`DimInfo::Expr`]'s naming of run-time dims.
pub fn readable(d: &Dim) -> String {
    let mut out = String::new();
    let _ = d.write_atoms(&mut out, &mut |a| match a {
        Atom::Sym(s) => runtime_name(s).unwrap_or_else(|| a.to_string()),
        a => a.render(&mut |d| readable(d)),
    });
    out
}

/// `NODE[A]` (or `NODE:K[A]`) for the run-time symbol of dim A of output K
/// of the node NODE.
fn runtime_name(s: &str) -> Option<String> {
    let rest = s.strip_prefix(rlx_ir::ops::RUNTIME_PREFIX)?;
    let (node, tail) = rest.rsplit_once(".o")?;
    let (k, a) = tail.split_once(".d")?;
    let (k, a): (usize, usize) = (k.parse().ok()?, a.parse().ok()?);
    Some(if k == 0 {
        format!("{node}[{a}]")
    } else {
        format!("{node}:{k}[{a}]")
    })
}

/// One input or output of a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoInfo {
    pub name: String,
    pub dtype: DType,
    pub dims: Vec<DimInfo>,
    /// A tensor, or a sequence / optional (whose `dims` are its elements').
    pub kind: ValueKind,
}

impl IoInfo {
    fn of(name: &str, t: &TensorType) -> IoInfo {
        let dims = t
            .shape
            .dims()
            .iter()
            .map(|d| match (d, d.as_symbol()) {
                (Dim::Known(n), _) => DimInfo::Fixed((*n).max(0) as usize),
                (_, Some(s)) => DimInfo::Symbol(s.to_string()),
                (d, None) => DimInfo::Expr(readable(d)),
            })
            .collect();
        IoInfo {
            name: name.to_string(),
            dtype: t.dtype,
            dims,
            kind: t.kind,
        }
    }

    /// The shape when every dim is fixed.
    pub fn fixed_shape(&self) -> Option<Vec<usize>> {
        self.dims
            .iter()
            .map(|d| match d {
                DimInfo::Fixed(n) => Some(*n),
                _ => None,
            })
            .collect()
    }
}

impl fmt::Display for DimInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DimInfo::Fixed(n) => write!(f, "{n}"),
            DimInfo::Symbol(s) | DimInfo::Expr(s) => f.write_str(s),
        }
    }
}

impl IoInfo {
    /// As [`fmt::Display`], with each dim expression longer than `max`
    /// characters cut, and its length said.
    pub fn brief(&self, max: usize) -> String {
        let dims: Vec<String> = self
            .dims
            .iter()
            .map(|d| match d {
                DimInfo::Expr(e) if e.chars().count() > max => format!(
                    "{}… ({} characters)",
                    e.chars().take(max).collect::<String>(),
                    e.chars().count()
                ),
                d => d.to_string(),
            })
            .collect();
        format!(
            "{}: {}{}[{}]",
            self.name,
            self.kind.prefix(),
            self.dtype,
            dims.join(",")
        )
    }
}

impl fmt::Display for IoInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.dims.iter().map(ToString::to_string).collect();
        write!(
            f,
            "{}: {}{}[{}]",
            self.name,
            self.kind.prefix(),
            self.dtype,
            dims.join(",")
        )
    }
}

fn inputs_of(g: &Graph) -> Vec<IoInfo> {
    g.inputs()
        .iter()
        .map(|&id| {
            let n = g.node(id);
            IoInfo::of(&n.name, &n.outputs[0])
        })
        .collect()
}

fn outputs_of(g: &Graph) -> Vec<IoInfo> {
    g.outputs()
        .iter()
        .map(|o| IoInfo::of(&o.name, g.ty(o.value)))
        .collect()
}

impl CompiledModel {
    /// The inputs a run takes, in order.
    pub fn inputs(&self) -> Vec<IoInfo> {
        inputs_of(&self.graph)
    }

    /// The outputs a run returns, in order.
    pub fn outputs(&self) -> Vec<IoInfo> {
        outputs_of(&self.graph)
    }
}

impl Session {
    /// The inputs [`Session::run`] takes, in order.
    pub fn inputs(&self) -> Vec<IoInfo> {
        self.model().inputs()
    }

    /// The outputs [`Session::run`] returns, in order.
    pub fn outputs(&self) -> Vec<IoInfo> {
        self.model().outputs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_says_what_it_needs() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let model = crate::Compiler::new(crate::Target::Cpu)
            .compile_file(&root.join("golden/transformer/model.onnx"))
            .unwrap();
        let ins: Vec<String> = model.inputs().iter().map(ToString::to_string).collect();
        assert_eq!(ins, ["x: f32[batch,seq,16]", "mask: f32[batch,1,1,seq]"]);
        let outs = model.outputs();
        assert_eq!(outs[0].dims[0], DimInfo::Symbol("batch".into()));
        assert_eq!(outs[0].fixed_shape(), None);
        let bound = crate::Compiler::new(crate::Target::Cpu)
            .bind("batch", 1)
            .bind("seq", 4)
            .compile_file(&root.join("golden/transformer/model.onnx"))
            .unwrap();
        assert_eq!(bound.inputs()[0].fixed_shape(), Some(vec![1, 4, 16]));
    }

    #[test]
    fn run_time_dims_are_named_by_their_onnx_node() {
        let d = Dim::sym("$/model.22/Range.o0.d0")
            .add(&Dim::Known(31))
            .floor_div(&Dim::Known(32))
            .unwrap();
        assert_eq!(readable(&d), "floordiv(/model.22/Range[0]+31, 32)");
        assert_eq!(readable(&Dim::sym("$/TopK.o1.d0")), "/TopK:1[0]");
        assert_eq!(readable(&Dim::sym("seq").mul(&Dim::Known(2))), "2*seq");
        let io = IoInfo {
            name: "y".into(),
            dtype: DType::F32,
            dims: vec![DimInfo::Expr("x".repeat(50)), DimInfo::Fixed(3)],
            kind: ValueKind::Tensor,
        };
        assert_eq!(io.brief(10), "y: f32[xxxxxxxxxx… (50 characters),3]");
    }
}
