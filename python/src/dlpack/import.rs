//! DLPack's consumer side: another library's tensor (a `torch.Tensor`, a
//! CuPy or JAX array, or a capsule from `torch.utils.dlpack.to_dlpack`) as
//! a value.
//!
//! A CUDA tensor is taken without a copy: the value holds the producer's
//! tensor until its last clone goes (then the producer's deleter runs), and
//! a session reads it in place. Asked through the protocol, the producer
//! orders its pending writes before the stream the device's sessions run
//! on (`__dlpack__(stream=...)`); a bare capsule carries no such promise,
//! as with ONNX Runtime, so its writes must be complete. Host memory is
//! copied: a value's host bytes must outlive any producer.

use std::ffi::c_void;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};
use rlx_onnx::ir::{Bytes, DType, Tensor};
use rlx_onnx::{DeviceTensor, Target, Value};

use super::{
    dtype_of, DLManagedTensor, DLManagedTensorVersioned, DLTensor, DEVICE_CPU, DEVICE_CUDA,
    DEVICE_CUDA_HOST, LEGACY, USED_LEGACY, USED_VERSIONED, VERSIONED,
};
use crate::devices;
use crate::errors::{invalid, to_py, NotImplemented};

/// The most dims a DLPack tensor may claim (ONNX's own limit is lower).
const MAX_RANK: i32 = 64;

/// The value of `data`, a DLPack producer or capsule. `is_bool`: its
/// unsigned bytes are booleans (producers older than DLPack's bool type).
pub fn import(py: Python<'_>, data: &Bound<'_, PyAny>, is_bool: bool) -> PyResult<Value> {
    let capsule = if data.cast::<PyCapsule>().is_ok() {
        data.clone()
    } else {
        request(py, data)?
    };
    let taken = Taken::from_capsule(py, &capsule)?;
    let t = taken.tensor();
    let dtype = match dtype_of(t.dtype) {
        Some(DType::U8) if is_bool => DType::Bool,
        Some(d) => d,
        None => {
            return Err(NotImplemented::new_err(format!(
                "from_dlpack: DLPack type (code {}, {} bits, {} lanes) has no rlx-onnx dtype",
                t.dtype.code, t.dtype.bits, t.dtype.lanes
            )))
        }
    };
    let dims = dims_of(t)?;
    let bytes = dims
        .iter()
        .try_fold(dtype.size(), |a, &d| a.checked_mul(d))
        .ok_or_else(|| invalid(format!("from_dlpack: a tensor of {dims:?} is too large")))?;
    let at = (t.data as u64)
        .checked_add(t.byte_offset)
        .ok_or_else(|| invalid("from_dlpack: the tensor's byte offset overflows"))?;
    if bytes > 0 && t.data.is_null() {
        return Err(invalid("from_dlpack: a non-empty tensor with no data"));
    }
    match t.device.device_type {
        DEVICE_CUDA => {
            let ctx = cuda_context(py, t.device.device_id)?;
            // SAFETY: the producer lends `bytes` bytes at `at` on this
            // device (checked contiguous above) until `taken`'s deleter
            // runs, which only the buffer's last clone going does; its
            // writes were ordered before the context's stream (`request`).
            let buffer = unsafe { rlx_onnx::cuda::Buffer::lend(&ctx, at, bytes, Box::new(taken)) };
            let t = rlx_onnx::cuda::DeviceTensor::new(dtype, dims, buffer);
            Ok(Value::Device(DeviceTensor::from_cuda(t)))
        }
        DEVICE_CPU | DEVICE_CUDA_HOST => {
            let host = if bytes == 0 {
                Bytes::copy_from(&[])
            } else {
                // SAFETY: host memory of `bytes` bytes (contiguous, checked
                // above), alive until `taken` is dropped below.
                Bytes::copy_from(unsafe { std::slice::from_raw_parts(at as *const u8, bytes) })
            };
            drop(taken);
            Tensor::new(dtype, dims, host)
                .map(Value::Host)
                .map_err(|e| invalid(format!("from_dlpack: {e}")))
        }
        other => Err(invalid(format!(
            "from_dlpack takes CPU and CUDA tensors, not DLPack device type {other}"
        ))),
    }
}

/// The capsule of a DLPack producer, asked for a versioned tensor (the
/// legacy one where the producer predates `max_version`) and, on CUDA, to
/// order its work before the device's stream.
fn request<'py>(py: Python<'py>, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let (kind, id): (i32, i32) = data
        .call_method0("__dlpack_device__")
        .map_err(|e| {
            PyTypeError::new_err(format!(
                "from_dlpack takes a DLPack capsule or an object with __dlpack__ and \
                 __dlpack_device__: {e}"
            ))
        })?
        .extract()?;
    let kwargs = PyDict::new(py);
    if kind == DEVICE_CUDA {
        kwargs.set_item("stream", cuda_context(py, id)?.stream_handle())?;
    }
    kwargs.set_item("max_version", (1u32, 1u32))?;
    match data.call_method("__dlpack__", (), Some(&kwargs)) {
        Err(e) if e.is_instance_of::<PyTypeError>(py) => {
            kwargs.del_item("max_version")?;
            data.call_method("__dlpack__", (), Some(&kwargs))
        }
        capsule => capsule,
    }
}

/// The CUDA context of device `id`, the one every session on it shares.
fn cuda_context(py: Python<'_>, id: i32) -> PyResult<std::sync::Arc<rlx_onnx::cuda::Context>> {
    let id = usize::try_from(id).map_err(|_| invalid(format!("from_dlpack: CUDA device {id}")))?;
    py.detach(|| devices::of(Target::Cuda, id).cuda())
        .map_err(to_py)
}

/// The tensor's dims, refused unless its elements are contiguous in
/// row-major order (DLPack strides count elements; a dim of one may have
/// any stride).
fn dims_of(t: &DLTensor) -> PyResult<Vec<usize>> {
    if !(0..=MAX_RANK).contains(&t.ndim) {
        return Err(invalid(format!("from_dlpack: a tensor of {} dims", t.ndim)));
    }
    let rank = t.ndim as usize;
    if rank > 0 && t.shape.is_null() {
        return Err(invalid("from_dlpack: a tensor with no shape"));
    }
    // SAFETY: `shape` (and `strides`, when set) hold `ndim` entries while
    // the producer's tensor lives (DLPack).
    let shape: &[i64] = if rank == 0 {
        &[]
    } else {
        unsafe { std::slice::from_raw_parts(t.shape, rank) }
    };
    let dims = shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| invalid(format!("from_dlpack: a tensor of shape {shape:?}")))?;
    if rank > 0 && !t.strides.is_null() && !dims.contains(&0) {
        let strides = unsafe { std::slice::from_raw_parts(t.strides, rank) };
        let mut want: i64 = 1;
        for (&d, &s) in shape.iter().zip(strides).rev() {
            if d != 1 && s != want {
                return Err(invalid(format!(
                    "from_dlpack takes contiguous tensors (shape {shape:?}, strides \
                     {strides:?}): make it contiguous first (`.contiguous()`)"
                )));
            }
            want = want.saturating_mul(d);
        }
    }
    Ok(dims)
}

/// A producer's tensor taken from its capsule: the capsule is renamed (the
/// producer's destructor then leaves it alone), and the tensor's deleter
/// runs when this is dropped.
struct Taken {
    managed: *mut c_void,
    versioned: bool,
}

// SAFETY: the tensor's struct is only read, and its deleter called once on
// drop; DLPack lets a consumer call it from any thread, and it is called
// with the interpreter attached for producers that need it.
unsafe impl Send for Taken {}
unsafe impl Sync for Taken {}

impl Taken {
    fn from_capsule(py: Python<'_>, capsule: &Bound<'_, PyAny>) -> PyResult<Taken> {
        let p = capsule.as_ptr();
        for (name, used, versioned) in [
            (VERSIONED, USED_VERSIONED, true),
            (LEGACY, USED_LEGACY, false),
        ] {
            // SAFETY: `p` is a live object; the capsule calls check its
            // type and name, and set an exception only on failure.
            unsafe {
                if ffi::PyCapsule_IsValid(p, name.as_ptr()) != 1 {
                    continue;
                }
                let managed = ffi::PyCapsule_GetPointer(p, name.as_ptr());
                if managed.is_null() || ffi::PyCapsule_SetName(p, used.as_ptr()) != 0 {
                    return Err(PyErr::fetch(py));
                }
                let taken = Taken { managed, versioned };
                if versioned {
                    let v = &(*(managed as *const DLManagedTensorVersioned)).version;
                    if v.major != 1 {
                        // Dropping `taken` hands the tensor back.
                        return Err(NotImplemented::new_err(format!(
                            "from_dlpack: DLPack {}.{} (this reads 1.x)",
                            v.major, v.minor
                        )));
                    }
                }
                return Ok(taken);
            }
        }
        Err(invalid(
            "from_dlpack: not a DLPack capsule, or one already consumed",
        ))
    }

    fn tensor(&self) -> &DLTensor {
        // SAFETY: the struct lives until its deleter runs, in `drop`.
        unsafe {
            if self.versioned {
                &(*(self.managed as *const DLManagedTensorVersioned)).dl_tensor
            } else {
                &(*(self.managed as *const DLManagedTensor)).dl_tensor
            }
        }
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        // SAFETY: the struct is the producer's, taken once (the capsule was
        // renamed); its deleter runs once, here. Where the interpreter is
        // gone (at exit) the tensor is left to the process's end.
        let _ = Python::try_attach(|_| unsafe {
            if self.versioned {
                let m = self.managed as *mut DLManagedTensorVersioned;
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            } else {
                let m = self.managed as *mut DLManagedTensor;
                if let Some(d) = (*m).deleter {
                    d(m);
                }
            }
        });
    }
}
