//! DLPack's producer side: a value handed to `torch.from_dlpack`, CuPy or
//! numpy as a capsule of a `DLManagedTensor` (or, when the consumer asks
//! for version 1, a `DLManagedTensorVersioned`).
//!
//! A CUDA tensor is lent without a copy: the capsule holds a clone of the
//! device buffer until the consumer's deleter runs. A host tensor's bytes
//! may be shared with the model (an output that is a weight), so the
//! capsule gets its own copy, which the consumer may write.

use std::ffi::{c_void, CStr};

use pyo3::ffi;
use pyo3::prelude::*;
use rlx_onnx::ir::DType;
use rlx_onnx::Value;

use crate::errors::{invalid, NotImplemented};

pub const DEVICE_CPU: i32 = 1;
pub const DEVICE_CUDA: i32 = 2;

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
struct DLPackVersion {
    major: u32,
    minor: u32,
}

#[repr(C)]
struct DLManagedTensorVersioned {
    version: DLPackVersion,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    flags: u64,
    dl_tensor: DLTensor,
}

const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";

/// What a capsule keeps alive: the memory and the shape array.
struct Holder {
    /// The device tensor lent (its buffer stays allocated while held).
    _value: Option<Value>,
    /// The host copy (8-byte words, so any element is aligned).
    _host: Option<Vec<u64>>,
    shape: Vec<i64>,
}

/// DLPack's type code and bits of a dtype.
fn dl_dtype(d: DType) -> PyResult<DLDataType> {
    let (code, bits) = match d {
        DType::Bool => (6, 8),
        DType::I8 => (0, 8),
        DType::I16 => (0, 16),
        DType::I32 => (0, 32),
        DType::I64 => (0, 64),
        DType::U8 => (1, 8),
        DType::U16 => (1, 16),
        DType::U32 => (1, 32),
        DType::U64 => (1, 64),
        DType::F16 => (2, 16),
        DType::F32 => (2, 32),
        DType::F64 => (2, 64),
        DType::BF16 => (4, 16),
        DType::F8E4M3FN => (10, 8),
        DType::F8E4M3FNUZ => (11, 8),
        DType::F8E5M2 => (12, 8),
        DType::F8E5M2FNUZ => (13, 8),
        DType::F8E8M0 => (14, 8),
        _ => {
            return Err(NotImplemented::new_err(format!(
                "DLPack has no type for {d}"
            )))
        }
    };
    Ok(DLDataType {
        code,
        bits,
        lanes: 1,
    })
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
