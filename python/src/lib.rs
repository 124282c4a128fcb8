//! `rlx_onnx._native`: the Rust half of the `rlx_onnx` Python package.
//! The package's Python half (`python/rlx_onnx`) gives it ONNX Runtime's
//! names; see `python/README.md`.

mod arrays;
mod devices;
mod dlpack;
mod errors;
mod options;
mod pointers;
mod session;
mod value;

use pyo3::prelude::*;
use rlx_onnx::{artifact, Target};

use crate::errors::to_py;
use crate::options::PyLimits;

/// The targets whose device opens on this machine (the CPU always).
#[pyfunction]
fn available_targets(py: Python<'_>) -> Vec<&'static str> {
    py.detach(|| {
        let devices = rlx_onnx::Devices::new();
        Target::ALL
            .into_iter()
            .filter(|t| match t {
                Target::Cpu => true,
                Target::Cuda => devices.cuda().is_ok(),
                Target::Wgpu => devices.wgpu().is_ok(),
                Target::Vulkan => devices.vulkan().is_ok(),
            })
            .map(Target::name)
            .collect()
    })
}

/// Copies `array` to `target`'s device `device_id`, the one every session
/// on that device shares (on the CPU: the array, lent).
#[pyfunction]
fn upload(
    py: Python<'_>,
    array: &Bound<'_, PyAny>,
    target: &str,
    device_id: usize,
) -> PyResult<value::PyValue> {
    let target = Target::parse(target).map_err(to_py)?;
    let t = arrays::to_tensor("value", array)?;
    let value = py
        .detach(|| devices::of(target, device_id).upload(target, &t))
        .map_err(to_py)?;
    Ok(value::PyValue { value })
}

/// Compiles the ONNX model at `model` for `target` and writes the `.rlx`
/// artifact to `output` (refused if it exists, unless `force`).
#[pyfunction]
#[pyo3(signature = (model, output, *, target, opt_level, precision, fallback, bindings, force))]
#[allow(clippy::too_many_arguments)]
fn convert(
    py: Python<'_>,
    model: std::path::PathBuf,
    output: std::path::PathBuf,
    target: &str,
    opt_level: u8,
    precision: &str,
    fallback: &str,
    bindings: Vec<(String, i64)>,
    force: bool,
) -> PyResult<()> {
    let options = session::Options::parse(
        target,
        1,
        opt_level,
        precision,
        fallback,
        bindings,
        0,
        PyLimits(Default::default()),
    )?;
    if output.exists() && !force {
        return Err(errors::invalid(format!(
            "`{}` exists; pass force=True to replace it",
            output.display()
        )));
    }
    py.detach(|| {
        let m = session::compile(&session::Source::Path(model), &options)?;
        artifact::save(&m, &output)?;
        Ok(())
    })
    .map_err(to_py)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<session::PySession>()?;
    m.add_class::<value::PyValue>()?;
    m.add_function(wrap_pyfunction!(available_targets, m)?)?;
    m.add_function(wrap_pyfunction!(convert, m)?)?;
    m.add_function(wrap_pyfunction!(upload, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
