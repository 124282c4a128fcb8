//! What a model needs and gives: its inputs' and outputs' names, dtypes and
//! shapes, with symbolic dims by name, so that a program can prepare its
//! tensors without reading the ONNX file.

use std::fmt;

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
    /// An expression of symbols (`2*seq`, `floordiv(height+31, 32)`).
    Expr(String),
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
                (d, None) => DimInfo::Expr(d.to_string()),
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
}
