//! CUDA memory by its raw device address, as ONNX Runtime's `IOBinding`
//! takes it (`bind_input(..., buffer_ptr=tensor.data_ptr())`,
//! `bind_output(..., buffer_ptr=...)`). As in ONNX Runtime the address
//! cannot be checked: the caller vouches that it is the device's memory of
//! the size its dtype and shape say, allocated (and, for an input,
//! unwritten) while the binding is used. A null address is refused.

use pyo3::prelude::*;
use rlx_onnx::ir::DType;
use rlx_onnx::{DeviceTensor, Target, Value};

use crate::devices;
use crate::errors::{invalid, to_py};

/// The bytes of `dims` elements of `dtype`.
fn bytes_of(name: &str, dtype: DType, dims: &[usize]) -> PyResult<usize> {
    dims.iter()
        .try_fold(dtype.size(), |a, &d| a.checked_mul(d))
        .ok_or_else(|| invalid(format!("`{name}`: a tensor of {dims:?} is too large")))
}

fn context(py: Python<'_>, id: usize) -> PyResult<std::sync::Arc<rlx_onnx::cuda::Context>> {
    py.detach(|| devices::of(Target::Cuda, id).cuda())
        .map_err(to_py)
}

/// A value reading `ptr` on CUDA device `device_id` in place.
pub fn lend(
    py: Python<'_>,
    name: &str,
    ptr: u64,
    dtype: DType,
    dims: Vec<usize>,
    device_id: usize,
) -> PyResult<Value> {
    let bytes = bytes_of(name, dtype, &dims)?;
    if ptr == 0 && bytes > 0 {
        return Err(invalid(format!("`{name}`: buffer_ptr is null")));
    }
    let ctx = context(py, device_id)?;
    // SAFETY: the caller vouches for the memory (module docs), as ONNX
    // Runtime's callers do; nothing is owned, so nothing is freed.
    let buffer = unsafe { rlx_onnx::cuda::Buffer::lend(&ctx, ptr, bytes, Box::new(())) };
    Ok(Value::Device(DeviceTensor::from_cuda(
        rlx_onnx::cuda::DeviceTensor::new(dtype, dims, buffer),
    )))
}

/// Copies `value` (a CUDA output) to `ptr` on CUDA device `device_id`,
/// memory of `dtype` and `dims` that must be the value's.
pub fn copy_into(
    py: Python<'_>,
    name: &str,
    value: &Value,
    ptr: u64,
    dtype: DType,
    dims: &[usize],
    device_id: usize,
) -> PyResult<()> {
    let Some(t) = (match value {
        Value::Device(d) => d.as_cuda(),
        Value::Host(_) => None,
    }) else {
        return Err(invalid(format!("output `{name}` is not in CUDA memory")));
    };
    if t.dtype() != dtype || t.dims() != dims {
        return Err(invalid(format!(
            "output `{name}` is {}{:?}, but the buffer bound to it is {dtype}{dims:?}",
            t.dtype(),
            t.dims()
        )));
    }
    if t.buffer().context().ordinal() != device_id {
        return Err(invalid(format!(
            "output `{name}` is on CUDA device {}, its buffer on device {device_id}",
            t.buffer().context().ordinal()
        )));
    }
    let bytes = bytes_of(name, dtype, dims)?;
    if ptr == 0 && bytes > 0 {
        return Err(invalid(format!("output `{name}`: buffer_ptr is null")));
    }
    // SAFETY: the caller vouches for the memory (module docs).
    py.detach(|| unsafe { t.buffer().copy_to(ptr, bytes) })
        .map_err(|e| to_py(e.into()))
}
