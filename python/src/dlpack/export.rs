//! DLPack's producer side: a value handed to `torch.from_dlpack`, CuPy or
//! numpy as a capsule of a `DLManagedTensor` (or, when the consumer asks
//! for version 1, a `DLManagedTensorVersioned`).
//!
//! A CUDA tensor is lent without a copy: the capsule holds a clone of the
//! device buffer until the consumer's deleter runs. A host tensor's bytes
//! may be shared with the model (an output that is a weight), so the
//! capsule gets its own copy, which the consumer may write.

use std::ffi::c_void;

use pyo3::ffi;
use pyo3::prelude::*;
use rlx_onnx::Value;

use super::{
    dl_dtype, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor,
    DEVICE_CPU, DEVICE_CUDA, LEGACY, VERSIONED,
};
use crate::errors::invalid;

/// What a capsule keeps alive: the memory and the shape array.
struct Holder {
    /// The device tensor lent (its buffer stays allocated while held).
    _value: Option<Value>,
    /// The host copy (8-byte words, so any element is aligned).
    _host: Option<Vec<u64>>,
    shape: Vec<i64>,
}

unsafe extern "C" fn delete_legacy(m: *mut DLManagedTensor) {
    // SAFETY: `m` and its holder were boxed by `export` and are freed once,
    // by the consumer's call or the unused capsule's destructor.
    unsafe {
        drop(Box::from_raw((*m).manager_ctx as *mut Holder));
        drop(Box::from_raw(m));
    }
}

unsafe extern "C" fn delete_versioned(m: *mut DLManagedTensorVersioned) {
    // SAFETY: as `delete_legacy`.
    unsafe {
        drop(Box::from_raw((*m).manager_ctx as *mut Holder));
        drop(Box::from_raw(m));
    }
}

/// Frees a capsule's tensor if no consumer took it (a consumer renames the
/// capsule when it does, and then owns the deleter call).
unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: the capsule is one `export` made, named for its struct.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, LEGACY.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(capsule, LEGACY.as_ptr()) as *mut DLManagedTensor;
            if let Some(d) = (*m).deleter {
                d(m);
            }
        } else if ffi::PyCapsule_IsValid(capsule, VERSIONED.as_ptr()) == 1 {
            let m = ffi::PyCapsule_GetPointer(capsule, VERSIONED.as_ptr())
                as *mut DLManagedTensorVersioned;
            if let Some(d) = (*m).deleter {
                d(m);
            }
        }
    }
}

/// The capsule of `value` (`max_version`: the newest DLPack the consumer
/// reads; version 1 or later gets the versioned struct).
pub fn export<'py>(
    py: Python<'py>,
    value: &Value,
    max_version: Option<(u32, u32)>,
) -> PyResult<Bound<'py, PyAny>> {
    let dtype = dl_dtype(value.dtype())?;
    let shape: Vec<i64> = value.dims().iter().map(|&d| d as i64).collect();
    let (data, device, holder) = match value {
        Value::Host(t) => {
            if !t.is_plain() {
                return Err(invalid("DLPack carries tensors of numbers only"));
            }
            let bytes = t.bytes();
            let mut words = vec![0u64; bytes.len().div_ceil(8).max(1)];
            bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
            let data = words.as_mut_ptr() as *mut c_void;
            let device = DLDevice {
                device_type: DEVICE_CPU,
                device_id: 0,
            };
            (
                data,
                device,
                Holder {
                    _value: None,
                    _host: Some(words),
                    shape,
                },
            )
        }
        Value::Device(d) => {
            let Some(c) = d.as_cuda() else {
                return Err(invalid(format!(
                    "DLPack cannot carry {} memory; read it with numpy()",
                    d.target().name()
                )));
            };
            let data = c.buffer().device_ptr() as *mut c_void;
            let device = DLDevice {
                device_type: DEVICE_CUDA,
                device_id: c.buffer().context().ordinal() as i32,
            };
            let holder = Holder {
                _value: Some(value.clone()),
                _host: None,
                shape,
            };
            (data, device, holder)
        }
    };
    let mut holder = Box::new(holder);
    let tensor = DLTensor {
        data,
        device,
        ndim: holder.shape.len() as i32,
        dtype,
        shape: holder.shape.as_mut_ptr(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let ctx = Box::into_raw(holder) as *mut c_void;
    let versioned = max_version.is_some_and(|(major, _)| major >= 1);
    // SAFETY: the capsule owns the boxed struct until a consumer renames it
    // (then the consumer calls the deleter) or it is destroyed unused.
    unsafe {
        let capsule = if versioned {
            let m = Box::into_raw(Box::new(DLManagedTensorVersioned {
                version: DLPackVersion { major: 1, minor: 0 },
                manager_ctx: ctx,
                deleter: Some(delete_versioned),
                flags: 0,
                dl_tensor: tensor,
            }));
            ffi::PyCapsule_New(
                m as *mut c_void,
                VERSIONED.as_ptr(),
                Some(capsule_destructor),
            )
        } else {
            let m = Box::into_raw(Box::new(DLManagedTensor {
                dl_tensor: tensor,
                manager_ctx: ctx,
                deleter: Some(delete_legacy),
            }));
            ffi::PyCapsule_New(m as *mut c_void, LEGACY.as_ptr(), Some(capsule_destructor))
        };
        Bound::from_owned_ptr_or_err(py, capsule)
    }
}
