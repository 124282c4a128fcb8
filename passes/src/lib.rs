//! rlx-passes: the pass pipeline of rlx-onnx.
//!
//! A [`Pass`] rewrites a graph in place and says whether it changed anything. The
//! [`PassManager`] runs a named pipeline per opt level, verifies after each pass
//! when asked, and can dump the IR after any pass. The memory planner
//! ([`memory`]) turns a concrete graph and a schedule order into arena offsets.
//!
//! Pipeline (in order): `infer` -> `fold-shapes` -> `fold-constants` -> `dce`.

pub mod dce;
pub mod fold;
pub mod manager;
pub mod memory;
pub mod target;

pub use manager::{OptLevel, Pass, PassContext, PassError, PassManager};
pub use memory::{plan_memory, MemoryPlan, Slot};
pub use target::{Evaluator, Reason};
