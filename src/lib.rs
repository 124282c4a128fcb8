//! rlx-onnx: an ONNX compiler toolchain.
//!
//! ```no_run
//! use rlx_onnx::{Compiler, Session, SessionOptions, Target};
//! # fn main() -> rlx_onnx::Result<()> {
//! let model = Compiler::new(Target::Cpu).compile_file("model.onnx".as_ref())?;
//! rlx_onnx::artifact::save(&model, "model.rlx".as_ref())?;
//! let session = Session::new(model, SessionOptions::default())?;
//! let x = rlx_onnx::ir::Tensor::from_f32(&[1, 4], &[1.0, 2.0, 3.0, 4.0])?;
//! let outputs = session.run(&[("x", &x)])?;
//! # Ok(()) }
//! ```
//!
//! An application can embed an artifact with
//! `rlx_onnx::artifact::from_static(include_bytes!("model.rlx"))`.
//!
//! The crates behind this facade: [`ir`] (graph, op set, text form),
//! [`importer`] (ONNX -> IR), [`passes`], [`cpu`] (the CPU backend).

pub mod artifact;
mod backend;
pub mod build;
pub mod compare;
pub mod compile;
pub mod conformance;
pub mod debug;
mod device_io;
pub mod dot;
pub mod equivalence;
pub mod error;
pub mod files;
pub mod generate;
mod kept;
pub mod limits;
pub mod narrow;
pub mod npy;
pub mod partition;
mod prebuild;
pub mod session;
pub mod signature;
pub mod svg;
pub mod testdata;
pub mod trace;
pub mod value;

pub use compile::{CompiledModel, Compiler, Fallback, Precision, Target};
pub use debug::{DebugOptions, DebugRun, Intermediate};
pub use error::{Error, InputError, Result};
pub use kept::RunState;
pub use limits::Limits;
pub use rlx_cpu as cpu;
pub use rlx_cuda as cuda;
pub use rlx_gpu as gpu;
pub use rlx_importer as importer;
pub use rlx_ir as ir;
pub use rlx_passes as passes;
pub use rlx_passes::OptLevel;
pub use rlx_vulkan as vulkan;
pub use rlx_wgpu as wgpu;
pub use rlx_wgsl as wgsl;
pub use session::{Devices, PlanInfo, Session, SessionOptions};
pub use signature::{DimInfo, IoInfo};
pub use value::{DeviceTensor, Outputs, Value};

/// The README's Rust examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
