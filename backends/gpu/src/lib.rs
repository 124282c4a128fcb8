//! rlx-gpu: what every GPU backend of rlx-onnx plans the same way.
//!
//! - [`params`]: typed kernel parameters, one `#[repr(C)]` struct per kernel
//!   entry point ([`kernel_params!`]), printed by field name and mirrored into
//!   each kernel language from one definition.
//! - [`schedule`]: the step tree (dispatch / if / loop) with each step's node
//!   and ONNX origin, byte ranges, constants and input/output slots.
//! - [`plan`]: buffer layout (arena, constants, subgraph bodies, loop state,
//!   scratch) and control-flow lowering, generic over a backend's
//!   [`Lowering`] (its launches for a node, a slab copy and a loop counter).
//! - [`control`]: the slab-copy and counter launches control flow needs.
//! - [`geometry`]: strides, broadcasting, dim collapsing, grid folding.
//! - [`io`]: device-resident run inputs and outputs, partial readback spans.
//! - [`support`]: the support check of control-flow bodies.
//! - [`walk`]: the host's walk over the step tree, for every device half.
//! - [`kernels`]: per kernel family, the parameter structs and the planning
//!   every backend shares.
//!
//! A backend adds its kernels (in its language), its lowering choices where
//! the hardware differs, and its device half.

pub mod control;
pub mod geometry;
pub mod io;
pub mod kernels;
pub mod params;
pub mod plan;
pub mod schedule;
pub mod support;
pub mod walk;

pub use geometry::LResult;
pub use params::{Layout, LayoutBuilder, ParamBlock, Params};
pub use plan::{plan, Lowered, Lowering, NodeIo, Operand, Placed, Planned};
pub use schedule::{ConstBlock, IoSlot, Range, Step, Trip};

/// Why planning failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// A node the backend cannot lower, with the reason.
    #[error("node `{node}` (from ONNX {}): {reason}", .origin.join(", "))]
    Node {
        node: String,
        origin: Vec<String>,
        reason: String,
    },
    #[error("internal error: {0}")]
    Internal(String),
}
