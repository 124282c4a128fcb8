//! Resource limits from Python: a dict of `rlx_onnx::Limits`' fields, the
//! ones not given left at their defaults.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use rlx_onnx::Limits;

use crate::errors::invalid;

/// `Limits` read from a dict such as `{"max_tensor_elements": 1 << 28}`.
pub struct PyLimits(pub Limits);

impl<'a, 'py> FromPyObject<'a, 'py> for PyLimits {
    type Error = PyErr;

    fn extract(ob: Borrowed<'a, 'py, PyAny>) -> PyResult<PyLimits> {
        let mut l = Limits::default();
        if ob.is_none() {
            return Ok(PyLimits(l));
        }
        let dict = ob
            .cast::<PyDict>()
            .map_err(|_| invalid("limits must be a dict of limit name to value"))?;
        for (k, v) in dict.iter() {
            let name: String = k.extract()?;
            let value: u64 = v
                .extract()
                .map_err(|_| invalid(format!("limit `{name}` must be a non-negative integer")))?;
            let field = match name.as_str() {
                "max_tensor_elements" => &mut l.max_tensor_elements,
                "max_loop_iterations" => &mut l.max_loop_iterations,
                "max_nodes" => &mut l.max_nodes,
                "max_nesting" => &mut l.max_nesting,
                "max_arena_bytes" => &mut l.max_arena_bytes,
                "max_specializations" => &mut l.max_specializations,
                _ => {
                    return Err(invalid(format!(
                        "unknown limit `{name}`; the limits are max_tensor_elements, max_loop_iterations, max_nodes, max_nesting, max_arena_bytes, max_specializations"
                    )))
                }
            };
            *field = value;
        }
        Ok(PyLimits(l))
    }
}
