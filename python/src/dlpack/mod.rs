//! DLPack, the tensor exchange of PyTorch, CuPy, JAX and numpy: its C
//! structs (`dlpack.h`, versions 0.8 and 1.x), the producer side
//! ([`export`]: a value handed to a consumer) and the consumer side
//! ([`import`]: another library's tensor taken as a value).

use std::ffi::{c_void, CStr};

use pyo3::prelude::*;
use rlx_onnx::ir::DType;

use crate::errors::NotImplemented;

mod export;
mod import;

pub use export::export;
pub use import::import;

pub const DEVICE_CPU: i32 = 1;
pub const DEVICE_CUDA: i32 = 2;
/// CUDA memory the host may read (`cudaMallocHost`): taken as host memory.
const DEVICE_CUDA_HOST: i32 = 3;

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

/// Capsule names: offered, and taken (a consumer renames what it took, so
/// that the producer's destructor leaves it alone).
const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";
const USED_LEGACY: &CStr = c"used_dltensor";
const USED_VERSIONED: &CStr = c"used_dltensor_versioned";

/// The dtypes DLPack has, with its type code and bits for each.
const TYPES: [(DType, u8, u8); 18] = [
    (DType::Bool, 6, 8),
    (DType::I8, 0, 8),
    (DType::I16, 0, 16),
    (DType::I32, 0, 32),
    (DType::I64, 0, 64),
    (DType::U8, 1, 8),
    (DType::U16, 1, 16),
    (DType::U32, 1, 32),
    (DType::U64, 1, 64),
    (DType::F16, 2, 16),
    (DType::F32, 2, 32),
    (DType::F64, 2, 64),
    (DType::BF16, 4, 16),
    (DType::F8E4M3FN, 10, 8),
    (DType::F8E4M3FNUZ, 11, 8),
    (DType::F8E5M2, 12, 8),
    (DType::F8E5M2FNUZ, 13, 8),
    (DType::F8E8M0, 14, 8),
];

/// DLPack's type of a dtype.
fn dl_dtype(d: DType) -> PyResult<DLDataType> {
    TYPES
        .iter()
        .find(|(t, ..)| *t == d)
        .map(|&(_, code, bits)| DLDataType {
            code,
            bits,
            lanes: 1,
        })
        .ok_or_else(|| NotImplemented::new_err(format!("DLPack has no type for {d}")))
}

/// The dtype of DLPack's type, if rlx-onnx has it.
fn dtype_of(t: DLDataType) -> Option<DType> {
    if t.lanes != 1 {
        return None;
    }
    TYPES
        .iter()
        .find(|&&(_, code, bits)| code == t.code && bits == t.bits)
        .map(|&(d, ..)| d)
}
