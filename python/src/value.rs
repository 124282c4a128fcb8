//! Values that may live on a device: what `rlx_onnx.OrtValue` holds, the
//! inputs and outputs of `run_with_iobinding`, and DLPack's producer side.

use numpy::PyArrayDescr;
use pyo3::prelude::*;
use rlx_onnx::Value;

use crate::arrays;
use crate::errors::{invalid, to_py};
use crate::session::type_string;

/// A tensor on the host or on a session's device.
#[pyclass(name = "Value", module = "rlx_onnx._native", frozen)]
pub struct PyValue {
    pub(crate) value: Value,
}

#[pymethods]
impl PyValue {
    /// A host value holding (a lent view of) the array `array`.
    #[staticmethod]
    fn from_array(array: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        Ok(PyValue {
            value: Value::Host(arrays::to_tensor("value", array)?),
        })
    }

    /// The value of a DLPack producer's tensor or capsule: a CUDA tensor
    /// taken without a copy (read in place while the value lives), a host
    /// tensor copied. `is_bool`: unsigned bytes that are booleans.
    #[staticmethod]
    #[pyo3(signature = (data, is_bool=false))]
    fn from_dlpack(py: Python<'_>, data: &Bound<'_, PyAny>, is_bool: bool) -> PyResult<PyValue> {
        Ok(PyValue {
            value: crate::dlpack::import(py, data, is_bool)?,
        })
    }

    /// A value reading the CUDA memory at `ptr` of device `device_id` in
    /// place (`dtype`: a numpy dtype; ONNX Runtime's `bind_input` with a
    /// `buffer_ptr`: the caller vouches for the memory).
    #[staticmethod]
    fn from_cuda_pointer(
        py: Python<'_>,
        name: &str,
        ptr: u64,
        dtype: &Bound<'_, PyArrayDescr>,
        shape: Vec<usize>,
        device_id: usize,
    ) -> PyResult<PyValue> {
        let dtype = arrays::number_dtype(name, dtype)?;
        Ok(PyValue {
            value: crate::pointers::lend(py, name, ptr, dtype, shape, device_id)?,
        })
    }

    /// Copies this CUDA value to the memory at `ptr` of device `device_id`,
    /// which holds `shape` elements of `dtype` (`bind_output` with a
    /// `buffer_ptr`).
    fn copy_to_cuda_pointer(
        &self,
        py: Python<'_>,
        name: &str,
        ptr: u64,
        dtype: &Bound<'_, PyArrayDescr>,
        shape: Vec<usize>,
        device_id: usize,
    ) -> PyResult<()> {
        let dtype = arrays::number_dtype(name, dtype)?;
        crate::pointers::copy_into(py, name, &self.value, ptr, dtype, &shape, device_id)
    }

    /// The dims.
    fn shape(&self) -> Vec<usize> {
        self.value.dims().to_vec()
    }

    /// ONNX Runtime's type string (`tensor(float)`).
    fn data_type(&self) -> String {
        let kind = match &self.value {
            Value::Host(t) => t.kind(),
            Value::Device(_) => rlx_onnx::ir::ValueKind::Tensor,
        };
        type_string(self.value.dtype(), kind)
    }

    /// ONNX's element type code (`1` for float), ONNX Runtime's `element_type()`.
    fn element_type(&self) -> i32 {
        self.value.dtype().onnx_code()
    }

    /// Where the value is: `cpu`, `cuda`, `wgpu` or `vulkan`.
    fn device_name(&self) -> &'static str {
        match &self.value {
            Value::Host(_) => "cpu",
            Value::Device(d) => d.target().name(),
        }
    }

    /// The device in words (`cuda: NVIDIA H200`; `cpu` on the host).
    fn device(&self) -> String {
        match &self.value {
            Value::Host(_) => "cpu".to_string(),
            Value::Device(d) => d.device(),
        }
    }

    fn is_on_device(&self) -> bool {
        self.value.is_on_device()
    }

    /// A numpy copy of the value (read back from its device).
    fn numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let t = py.detach(|| self.value.to_host()).map_err(to_py)?;
        arrays::to_python(py, &t)
    }

    /// The address of the first element: a host pointer, or a CUDA device
    /// pointer. wgpu and Vulkan memory has no address to give.
    fn data_ptr(&self) -> PyResult<u64> {
        match &self.value {
            Value::Host(t) => Ok(t.bytes().as_ptr() as u64),
            Value::Device(d) => match d.as_cuda() {
                Some(c) => Ok(c.buffer().device_ptr()),
                None => Err(invalid(format!(
                    "a {} tensor has no address to give; read it with numpy()",
                    d.target().name()
                ))),
            },
        }
    }

    /// DLPack's device of the value: (1, 0) for the host, (2, ordinal)
    /// for CUDA.
    fn __dlpack_device__(&self) -> PyResult<(i32, i32)> {
        match &self.value {
            Value::Host(_) => Ok((crate::dlpack::DEVICE_CPU, 0)),
            Value::Device(d) => match d.as_cuda() {
                Some(c) => Ok((
                    crate::dlpack::DEVICE_CUDA,
                    c.buffer().context().ordinal() as i32,
                )),
                None => Err(invalid(format!(
                    "DLPack has no device for {} memory; read it with numpy()",
                    d.target().name()
                ))),
            },
        }
    }

    /// A DLPack capsule viewing the value without a copy (the tensor is
    /// kept alive until the consumer frees the capsule). The CUDA
    /// executable's stream is synchronized at the end of every run, so no
    /// stream wait is needed: `stream` is accepted and ignored.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = stream;
        if copy == Some(true) {
            return Err(invalid(
                "__dlpack__(copy=True) is not supported: export, then copy in the consumer",
            ));
        }
        if let Some(want) = dl_device {
            if want != self.__dlpack_device__()? {
                return Err(invalid(format!(
                    "the value is on DLPack device {:?}, not {want:?}",
                    self.__dlpack_device__()?
                )));
            }
        }
        crate::dlpack::export(py, &self.value, max_version)
    }

    fn __repr__(&self) -> String {
        format!(
            "Value({}, shape={:?}, device={})",
            self.data_type(),
            self.value.dims(),
            self.device_name()
        )
    }
}
