//! Errors as ONNX Runtime's Python API raises them: the exception classes of
//! `onnxruntime.capi.onnxruntime_pybind11_state` (`InvalidArgument` for a
//! wrong input, `NoSuchFile`, `InvalidProtobuf`, `NotImplemented` for an op
//! without a kernel, ...), all subclasses of `RlxError` so that one `except`
//! catches any of them. The message is rlx-onnx's own, naming the ONNX node.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use rlx_onnx::artifact::ArtifactError;
use rlx_onnx::cpu::{KernelError, RunError};
use rlx_onnx::importer::ImportError;
use rlx_onnx::Error;

create_exception!(_native, RlxError, PyException, "Any error of rlx_onnx.");
create_exception!(
    _native,
    Fail,
    RlxError,
    "A failure with no more specific class."
);
create_exception!(
    _native,
    InvalidArgument,
    RlxError,
    "A wrong input, output name, option or provider."
);
create_exception!(
    _native,
    NoSuchFile,
    RlxError,
    "The model file does not exist."
);
create_exception!(_native, NoModel, RlxError, "No model was given.");
create_exception!(
    _native,
    InvalidProtobuf,
    RlxError,
    "The bytes are not a valid ONNX model or rlx artifact."
);
create_exception!(
    _native,
    InvalidGraph,
    RlxError,
    "The model's graph is not valid."
);
create_exception!(
    _native,
    NotImplemented,
    RlxError,
    "The model uses an op or dtype rlx-onnx cannot run."
);
create_exception!(_native, RuntimeException, RlxError, "A run failed.");
create_exception!(
    _native,
    EPFail,
    RlxError,
    "The execution provider's device failed or is missing."
);

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("RlxError", py.get_type::<RlxError>())?;
    m.add("Fail", py.get_type::<Fail>())?;
    m.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    m.add("NoSuchFile", py.get_type::<NoSuchFile>())?;
    m.add("NoModel", py.get_type::<NoModel>())?;
    m.add("InvalidProtobuf", py.get_type::<InvalidProtobuf>())?;
    m.add("InvalidGraph", py.get_type::<InvalidGraph>())?;
    m.add("NotImplemented", py.get_type::<NotImplemented>())?;
    m.add("RuntimeException", py.get_type::<RuntimeException>())?;
    m.add("EPFail", py.get_type::<EPFail>())?;
    Ok(())
}

/// The Python exception of a library error.
pub fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    if rlx_onnx::conformance::run_error_unsupported(&e) {
        return NotImplemented::new_err(msg);
    }
    let missing = |p: &std::path::Path| !p.exists();
    match &e {
        Error::Input(_) | Error::Target(_) => InvalidArgument::new_err(msg),
        Error::Io { path, .. } if missing(path) => NoSuchFile::new_err(msg),
        Error::Import(ImportError::Io { path, .. }) if missing(path) => NoSuchFile::new_err(msg),
        Error::Import(
            ImportError::Decode(_)
            | ImportError::NoGraph
            | ImportError::Empty
            | ImportError::Artifact,
        ) => InvalidProtobuf::new_err(msg),
        Error::Import(_) | Error::Pass(_) | Error::Infer(_) | Error::Graph(_) => {
            InvalidGraph::new_err(msg)
        }
        Error::Artifact(ArtifactError::Io { path, .. }) if missing(path.as_ref()) => {
            NoSuchFile::new_err(msg)
        }
        Error::Artifact(_) => InvalidProtobuf::new_err(msg),
        Error::Wgpu(_) | Error::Vulkan(_) | Error::Cuda(_) => EPFail::new_err(msg),
        // A kernel that finds its inputs invalid (shapes that do not
        // broadcast, an index out of range): ORT's InvalidArgument.
        Error::Run(RunError::Node {
            source: KernelError::Value(_),
            ..
        }) => InvalidArgument::new_err(msg),
        Error::Run(_) | Error::Limit(_) => RuntimeException::new_err(msg),
        _ => Fail::new_err(msg),
    }
}

/// `InvalidArgument` with `msg`.
pub fn invalid(msg: impl Into<String>) -> PyErr {
    InvalidArgument::new_err(msg.into())
}
