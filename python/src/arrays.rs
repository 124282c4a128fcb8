//! numpy arrays to tensors and back.
//!
//! An input array that is C-contiguous, 8-byte aligned and in native byte
//! order is lent to the run without a copy (ONNX Runtime does the same):
//! the tensor's bytes are the array's, kept alive by a reference to it.
//! Any other array is made contiguous first. Outputs are new arrays (one
//! copy, as ONNX Runtime's `run` makes). Strings are object arrays of `str`;
//! ml_dtypes' types (bfloat16, float8, int4, ...) map to the ONNX types of
//! the same name.

use numpy::npyffi::{self, PY_ARRAY_API};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList};
use rlx_onnx::ir::tensor::Bytes;
use rlx_onnx::ir::{DType, Tensor, ValueKind};

use crate::errors::{invalid, NotImplemented};

/// The bytes of a numpy array lent to a run.
struct Lent {
    /// Keeps the array (and so its data) alive; numpy refuses to resize an
    /// array others reference.
    _array: Py<PyAny>,
    ptr: *const u8,
    len: usize,
}

// SAFETY: the data pointer stays valid while `_array` holds a reference;
// the tensor only reads it.
unsafe impl Send for Lent {}
unsafe impl Sync for Lent {}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` and `len` are the data of the array `_array` keeps
        // alive; `len` is non-zero (empty arrays are not lent).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

fn numpy_fn<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let np = NUMPY.get_or_try_init(py, || Ok::<_, PyErr>(py.import("numpy")?.unbind()))?;
    np.bind(py).getattr(name)
}

/// ml_dtypes' element types by their numpy name (their kind is `V`).
const ML_DTYPES: [(&str, DType); 11] = [
    ("bfloat16", DType::BF16),
    ("float8_e4m3fn", DType::F8E4M3FN),
    ("float8_e4m3fnuz", DType::F8E4M3FNUZ),
    ("float8_e5m2", DType::F8E5M2),
    ("float8_e5m2fnuz", DType::F8E5M2FNUZ),
    ("float8_e8m0fnu", DType::F8E8M0),
    ("float4_e2m1fn", DType::F4E2M1),
    ("int4", DType::I4),
    ("uint4", DType::U4),
    ("int2", DType::I2),
    ("uint2", DType::U2),
];

/// The dtype of numpy's `descr` for a tensor of numbers (`name` in errors).
pub fn number_dtype(name: &str, descr: &Bound<'_, PyArrayDescr>) -> PyResult<DType> {
    dtype_of(name, descr)?
        .ok_or_else(|| invalid(format!("`{name}`: strings have no device memory")))
}

/// The dtype of a numpy array's elements; `None` for strings.
fn dtype_of(name: &str, descr: &Bound<'_, PyArrayDescr>) -> PyResult<Option<DType>> {
    let size = descr.itemsize();
    let d = match (descr.kind(), size) {
        (b'b', 1) => DType::Bool,
        (b'i', 1) => DType::I8,
        (b'i', 2) => DType::I16,
        (b'i', 4) => DType::I32,
        (b'i', 8) => DType::I64,
        (b'u', 1) => DType::U8,
        (b'u', 2) => DType::U16,
        (b'u', 4) => DType::U32,
        (b'u', 8) => DType::U64,
        (b'f', 2) => DType::F16,
        (b'f', 4) => DType::F32,
        (b'f', 8) => DType::F64,
        (b'O' | b'U' | b'S', _) => return Ok(None),
        _ => {
            let tname = descr.typeobj().name()?.to_string();
            match ML_DTYPES.iter().find(|(n, _)| *n == tname) {
                Some((_, d)) if size == d.size() => *d,
                _ => {
                    return Err(NotImplemented::new_err(format!(
                        "input `{name}`: numpy dtype {} has no ONNX element type rlx-onnx runs",
                        descr.str()?
                    )))
                }
            }
        }
    };
    Ok(Some(d))
}

/// A tensor of the numpy array (or array-like) `obj`, fed as input `name`.
pub fn to_tensor(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Tensor> {
    let py = obj.py();
    let arr = match obj.cast::<PyUntypedArray>() {
        Ok(a) => a.clone(),
        Err(_) => numpy_fn(py, "asarray")?
            .call1((obj,))?
            .cast_into::<PyUntypedArray>()
            .map_err(|_| invalid(format!("input `{name}` is not an array")))?,
    };
    let descr = arr.dtype();
    let dims = arr.shape().to_vec();
    let Some(dtype) = dtype_of(name, &descr)? else {
        let flat = arr.call_method0("ravel")?.call_method0("tolist")?;
        let values = flat
            .cast::<PyList>()?
            .iter()
            .map(|v| string_of(name, &v))
            .collect::<PyResult<Vec<_>>>()?;
        return Tensor::from_strings(&dims, values)
            .map_err(|e| invalid(format!("input `{name}`: {e}")));
    };
    let native = descr.is_native_byteorder().unwrap_or(true);
    let arr = if arr.is_c_contiguous() && native {
        arr
    } else {
        let native_dtype = descr.call_method1("newbyteorder", ("=",))?;
        numpy_fn(py, "ascontiguousarray")?
            .call1((&arr, native_dtype))?
            .cast_into::<PyUntypedArray>()?
    };
    let len = arr.len() * dtype.size();
    // SAFETY: a C-contiguous array of `arr.len()` elements of this size.
    let ptr = unsafe { (*arr.as_array_ptr()).fields.data as *const u8 };
    let bytes = if len == 0 {
        Bytes::copy_from(&[])
    } else {
        Bytes::from_owner(Lent {
            _array: arr.into_any().unbind(),
            ptr,
            len,
        })
    };
    Tensor::new(dtype, dims, bytes).map_err(|e| invalid(format!("input `{name}`: {e}")))
}

/// A string element: `str`, or `bytes` holding UTF-8.
fn string_of(name: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = v.extract::<String>() {
        return Ok(s);
    }
    let b: Vec<u8> = v.extract().map_err(|_| {
        invalid(format!(
            "input `{name}`: a string tensor holds a {}",
            v.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    String::from_utf8(b).map_err(|_| invalid(format!("input `{name}`: bytes that are not UTF-8")))
}

/// The numpy dtype of `d` (numpy's own descriptors for its types; ml_dtypes'
/// for the others).
pub fn descr<'py>(py: Python<'py>, d: DType) -> PyResult<Bound<'py, PyArrayDescr>> {
    use numpy::dtype;
    Ok(match d {
        DType::Bool => dtype::<bool>(py),
        DType::I8 => dtype::<i8>(py),
        DType::I16 => dtype::<i16>(py),
        DType::I32 => dtype::<i32>(py),
        DType::I64 => dtype::<i64>(py),
        DType::U8 => dtype::<u8>(py),
        DType::U16 => dtype::<u16>(py),
        DType::U32 => dtype::<u32>(py),
        DType::U64 => dtype::<u64>(py),
        DType::F16 => dtype::<half::f16>(py),
        DType::F32 => dtype::<f32>(py),
        DType::F64 => dtype::<f64>(py),
        DType::Str => dtype::<Py<PyAny>>(py),
        _ => {
            let Some((ml, _)) = ML_DTYPES.iter().find(|(_, m)| *m == d) else {
                return Err(NotImplemented::new_err(format!("no numpy dtype for {d}")));
            };
            let module = py.import("ml_dtypes").map_err(|_| {
                NotImplemented::new_err(format!(
                    "a {d} tensor needs the ml_dtypes package for its numpy dtype (pip install ml_dtypes)"
                ))
            })?;
            return PyArrayDescr::new(py, module.getattr(*ml)?);
        }
    })
}

/// A new C-contiguous numpy array holding a copy of `t`: an array for a
/// tensor, a list for a sequence, a dict for a map, `None` for an absent
/// optional (as ONNX Runtime returns them).
pub fn to_python<'py>(py: Python<'py>, t: &Tensor) -> PyResult<Bound<'py, PyAny>> {
    match t.kind() {
        ValueKind::Tensor => array_of(py, t),
        ValueKind::Sequence | ValueKind::MapSequence { .. } => {
            let items = t
                .elements()
                .unwrap_or_default()
                .iter()
                .map(|e| to_python(py, e))
                .collect::<PyResult<Vec<_>>>()?;
            Ok(PyList::new(py, items)?.into_any())
        }
        ValueKind::Map { .. } => {
            let (keys, values) = t
                .map_entries()
                .ok_or_else(|| crate::errors::Fail::new_err("a map value without entries"))?;
            let dict = PyDict::new(py);
            let keys = array_of(py, keys)?.call_method0("tolist")?;
            let values = array_of(py, values)?.call_method0("tolist")?;
            for (k, v) in keys.try_iter()?.zip(values.try_iter()?) {
                dict.set_item(k?, v?)?;
            }
            Ok(dict.into_any())
        }
        ValueKind::Optional | ValueKind::OptionalSequence => Ok(py.None().into_bound(py)),
    }
}

/// The numpy array of a tensor of numbers or strings.
fn array_of<'py>(py: Python<'py>, t: &Tensor) -> PyResult<Bound<'py, PyAny>> {
    if let Some(strings) = t.strings() {
        let list = PyList::new(py, strings)?;
        let arr = numpy_fn(py, "array")?.call1((list, "object"))?;
        return arr.call_method1("reshape", (t.dims().to_vec(),));
    }
    let d = descr(py, t.dtype())?;
    let mut dims: Vec<npyffi::npy_intp> = t.dims().iter().map(|&n| n as npyffi::npy_intp).collect();
    // SAFETY: numpy allocates a C-contiguous array of `dims` elements of
    // `d` (the call steals the descriptor's reference); it is filled from
    // the tensor's bytes, exactly its size, before Python sees it.
    unsafe {
        let subtype = npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type);
        let ptr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            subtype,
            d.into_dtype_ptr(),
            dims.len() as std::os::raw::c_int,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            // With no data given, a non-zero flag asks for Fortran order.
            0,
            std::ptr::null_mut(),
        );
        let arr = Bound::from_owned_ptr_or_err(py, ptr)?;
        let bytes = t.bytes();
        if !bytes.is_empty() {
            let data = (*(ptr as *mut npyffi::PyArrayObject)).fields.data as *mut u8;
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
        }
        Ok(arr)
    }
}
