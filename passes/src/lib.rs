//! rlx-passes: the pass pipeline of rlx-onnx.
//!
//! A [`Pass`] rewrites a graph in place and says whether it changed anything.
//! The [`PassManager`] runs a named pipeline per target and opt level
//! ([`pipeline`]), verifies after each pass when asked, and can dump the IR after
//! any pass. Fusions are named declarative patterns ([`pattern`]) that keep the
//! union of the fused nodes' `origin`. Legalization asks a [`Backend`] trait
//! object per node and decomposes what it cannot run. The memory planner
//! ([`memory`]) turns a concrete graph and a schedule order into arena offsets.

pub mod causal_mask;
pub mod cse;
pub mod dce;
pub mod decompose;
pub mod fold;
pub mod fold_attention_layout;
pub mod fold_batchnorm;
pub mod fuse_attention;
pub mod fuse_conv;
pub mod fuse_elementwise;
pub mod fuse_gelu;
pub mod fuse_hard;
pub mod fuse_int8_matmul;
pub mod fuse_layer_norm;
pub mod fuse_matmul;
pub mod fuse_matmul_integer;
pub mod fuse_qdq_matmul;
pub mod fuse_residual_norm;
pub mod fuse_rope;
pub mod kv_cache;
pub mod legalize;
pub mod loop_invariant;
pub mod loop_trips;
pub mod manager;
pub mod memory;
pub mod merge_projections;
pub mod pattern;
pub mod pipeline;
pub mod rewrite;
pub mod simplify;
pub mod simplify_affine;
pub mod simplify_broadcast;
pub mod simplify_gather;
pub mod simplify_one_hot;
pub mod simplify_qdq;
pub mod stack_matmuls;
pub mod target;
pub mod to_f16;
pub mod unroll_loops;

#[cfg(test)]
mod tests;

pub use manager::{
    verify_by_default, OptLevel, Pass, PassContext, PassError, PassManager, UnsupportedNode,
};
pub use memory::{plan_memory, plan_memory_with, MemoryOptions, MemoryPlan, Slot, ALIGN};
pub use target::{Backend, Evaluator, Reason};
