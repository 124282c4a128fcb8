//! rlx-importer: reads ONNX models into RLX graphs.
//!
//! [`import_file`] decodes a model (prost types generated from the vendored
//! `onnx.proto`), maps every node through the [`Registry`] of per-family mappers
//! in [`ops`], and returns the graph with its weights. Errors name the ONNX node.

#[rustfmt::skip]
mod arity_table;
mod ctx;
pub mod error;
mod metadata;
mod model;
mod ops;
pub mod registry;
pub mod tensor;

/// The ONNX protobuf schema, generated from the vendored `onnx.proto`.
#[allow(clippy::all, missing_docs)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
}

pub use ctx::NodeCtx;
pub use error::{ImportError, MapError, NodeIssue, TensorError};
pub use metadata::{DeclaredDim, Metadata};
pub use model::{
    decode_model, import_bytes, import_file, import_model, onnx_node_name, ImportedModel,
    LATEST_OPSET,
};
pub use registry::Registry;
