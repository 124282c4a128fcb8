//! rlx-onnx: an ONNX compiler toolchain.
//!
//! The crates behind this facade: [`ir`] (graph, op set, text form),
//! [`importer`] (ONNX -> IR). The command-line tool is `rlx-onnx`.

pub mod conformance;
pub mod testdata;

pub use rlx_importer as importer;
pub use rlx_ir as ir;
