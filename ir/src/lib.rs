//! rlx-ir: the RLX intermediate representation.
//!
//! - [`Graph`]: a petgraph `StableDiGraph` of [`Node`]s with port-labelled edges,
//!   ordered named inputs and outputs, and nested subgraphs for control flow.
//! - [`Op`]: the closed RLX op set, one attribute struct per op, grouped by family
//!   in [`ops`], each with its type and shape inference.
//! - [`DType`], [`Dim`] (known or symbolic), [`Shape`], [`TensorType`], [`Tensor`]
//!   and the [`Weights`] store.
//! - [`text`]: the IR text form, printed deterministically and parsed back exactly.
//! - [`analysis`]: whole-graph inference, specialization to dim bindings, `verify`.
//! - [`Element`]: the Rust type of each dtype, for typed tensor reads and
//!   writes; with the `ndarray` feature, arrays convert to and from tensors.

pub mod analysis;
pub mod dim;
pub mod dtype;
pub mod element;
pub mod graph;
pub mod lend;
#[cfg(feature = "ndarray")]
mod ndarray;
pub mod ops;
pub mod shape;
pub mod slice;
pub mod tensor;
pub mod text;
pub mod weights;

pub use analysis::{infer_graph, specialize, verify, NodeError, VerifyError};
pub use dim::{Bindings, Dim};
pub use dtype::DType;
pub use element::Element;
pub use graph::{Edge, Graph, GraphOutput, Node, NodeId, Value};
pub use ops::{InferError, KnownValue, Op};
pub use shape::{Shape, TensorType, ValueKind};
pub use tensor::{Bytes, Tensor};
pub use weights::Weights;
