//! Import errors. Mapper errors are node-free; the importer wraps them with the
//! ONNX node's name, op type, domain and opset.

use std::fmt;
use std::path::PathBuf;

use rlx_ir::InferError;

/// Why one ONNX node could not be mapped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MapError {
    #[error("no mapper for this op at opset {opset}")]
    UnknownOp { opset: i64 },
    #[error("{0}")]
    Unsupported(String),
    #[error("attribute `{name}`: {reason}")]
    Attr { name: String, reason: String },
    #[error("attribute `{0}` is not supported by this importer")]
    UnhandledAttr(String),
    #[error("input {index} is required")]
    MissingInput { index: usize },
    /// More or fewer inputs or outputs than the op's schema allows.
    #[error("{0}")]
    Arity(String),
    #[error("input `{0}` is not defined by any earlier node, initializer or graph input")]
    UnknownName(String),
    /// The value's producer failed to import (and was reported already).
    #[error("input `{0}` comes from a node that could not be imported")]
    Poisoned(String),
    #[error(transparent)]
    Infer(#[from] InferError),
    #[error("in subgraph `{attr}`: {source}")]
    Subgraph {
        attr: String,
        #[source]
        source: Box<ImportError>,
    },
    #[error(transparent)]
    Tensor(#[from] TensorError),
}

/// An ONNX node and what went wrong with it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeIssue {
    pub name: String,
    pub op_type: String,
    pub domain: String,
    pub opset: i64,
    pub error: MapError,
}

impl fmt::Display for NodeIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let domain = if self.domain.is_empty() {
            "ai.onnx"
        } else {
            &self.domain
        };
        write!(
            f,
            "node `{}` ({} {domain} opset {}): {}",
            self.name, self.op_type, self.opset, self.error
        )
    }
}

/// Why a tensor in the model could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TensorError {
    #[error("tensor `{name}`: element type {code} is not supported")]
    DType { name: String, code: i32 },
    #[error("tensor `{name}`: {reason}")]
    Data { name: String, reason: String },
    #[error("tensor `{name}`: external data location `{location}` is refused: {reason}")]
    ExternalPath {
        name: String,
        location: String,
        reason: String,
    },
    #[error("tensor `{name}`: external data in `{path}`: {reason}")]
    ExternalData {
        name: String,
        path: PathBuf,
        reason: String,
    },
}

/// Why a model could not be imported.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read `{path}`: {reason}")]
    Io { path: PathBuf, reason: String },
    #[error("not a valid ONNX model (protobuf decode failed): {0}")]
    Decode(String),
    #[error("the model has no graph")]
    NoGraph,
    #[error("the file is empty: not an ONNX model")]
    Empty,
    #[error(
        "this is an .rlx artifact (a compiled model), not an ONNX model: `inspect`, `run` \
         and `bench` take it; this command needs the .onnx model it was converted from"
    )]
    Artifact,
    #[error("graph {what} `{name}`: {reason}")]
    Value {
        what: &'static str,
        name: String,
        reason: String,
    },
    #[error(transparent)]
    Tensor(#[from] TensorError),
    #[error("{} node(s) could not be imported:\n{}", .0.len(), list(.0))]
    Nodes(Vec<NodeIssue>),
    #[error("the ONNX nodes form a cycle through `{0}`")]
    Cycle(String),
}

fn list(issues: &[NodeIssue]) -> String {
    issues
        .iter()
        .map(|i| format!("  {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl ImportError {
    /// The per-node issues, if that is what this error is.
    pub fn issues(&self) -> &[NodeIssue] {
        match self {
            ImportError::Nodes(v) => v,
            _ => &[],
        }
    }
}
