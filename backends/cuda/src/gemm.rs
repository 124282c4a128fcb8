//! cuBLASLt for [`Gemm`] launches, through cudarc's `cublaslt::result` layer
//! (its safe API computes f32 as TF32): `CUBLAS_COMPUTE_32F` (exact fp32) for
//! f32, f16 and bf16 operands, `CUBLAS_COMPUTE_64F` for f64, strided batches, and the bias / ReLU epilogue. Each GEMM's descriptors and
//! algorithm are chosen once, when the executable is built; running one is a
//! single `cublasLtMatmul` call, so it can be captured in a CUDA graph.
//!
//! cuBLAS is column-major: a row-major `C = A B` is computed as the
//! column-major `C^T = B^T A^T`, so cuBLASLt's A is our B and its B our A.

use std::collections::HashMap;
use std::ffi::c_void;
use std::mem::size_of;

use cudarc::cublaslt::{result, sys};
use cudarc::driver::sys::CUdeviceptr;

use rlx_ir::DType;

use crate::schedule::{Gemm, GemmAct};
use crate::tune::Timer;
use crate::CudaError;

fn lt(what: &str, e: result::CublasError) -> CudaError {
    CudaError::Device(format!("cuBLASLt {what}: {e:?}"))
}

/// A cuBLASLt handle and the workspace its GEMMs share.
pub(crate) struct Lt {
    handle: sys::cublasLtHandle_t,
    pub(crate) workspace: CUdeviceptr,
    pub(crate) workspace_bytes: usize,
}

// SAFETY: a cuBLASLt handle may be used from any thread, one call at a
// time; executables run one at a time (a Mutex).
unsafe impl Send for Lt {}
unsafe impl Sync for Lt {}

impl Lt {
    /// `workspace` is a device allocation of `workspace_bytes` that outlives
    /// this handle (the executable owns both).
    pub(crate) fn new(workspace: CUdeviceptr, workspace_bytes: usize) -> Result<Lt, CudaError> {
        // SAFETY: only tries to open the library by its candidate names.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaError::Unavailable(
                "libcublasLt cannot be loaded".into(),
            ));
        }
        let handle = result::create_handle().map_err(|e| lt("create", e))?;
        Ok(Lt {
            handle,
            workspace,
            workspace_bytes,
        })
    }
}

impl Drop for Lt {
    fn drop(&mut self) {
        // SAFETY: created by `create_handle`, destroyed once.
        unsafe {
            let _ = result::destroy_handle(self.handle);
        }
    }
}

/// One GEMM ready to run: descriptors, chosen algorithm, device pointers.
pub(crate) struct Prepared {
    desc: sys::cublasLtMatmulDesc_t,
    /// cuBLASLt's A (our B), B (our A), and C = D.
    layouts: [sys::cublasLtMatrixLayout_t; 3],
    algo: sys::cublasLtMatmulAlgo_t,
    ptrs: [CUdeviceptr; 3],
    /// Alpha and beta are f64 (an f64 GEMM), else f32.
    f64: bool,
}

// SAFETY: the descriptors are plain heap objects of cuBLASLt, only read by
// `cublasLtMatmul`; executables run one at a time (a Mutex), so no two
// threads use them at once.
unsafe impl Send for Prepared {}
unsafe impl Sync for Prepared {}

impl Drop for Prepared {
    fn drop(&mut self) {
        // SAFETY: each created once in `prepare`, destroyed once.
        unsafe {
            let _ = result::destroy_matmul_desc(self.desc);
            for l in self.layouts {
                let _ = result::destroy_matrix_layout(l);
            }
        }
    }
}

fn i64_of(v: u64, what: &str) -> Result<i64, CudaError> {
    i64::try_from(v).map_err(|_| CudaError::Unsupported(format!("a GEMM {what} of {v}")))
}

/// The cuBLASLt element type of a GEMM dtype.
fn data_type(d: DType) -> Result<sys::cudaDataType, CudaError> {
    Ok(match d {
        DType::F32 => sys::cudaDataType::CUDA_R_32F,
        DType::F16 => sys::cudaDataType::CUDA_R_16F,
        DType::BF16 => sys::cudaDataType::CUDA_R_16BF,
        DType::F64 => sys::cudaDataType::CUDA_R_64F,
        d => return Err(CudaError::Unsupported(format!("a GEMM on {d}"))),
    })
}

/// A column-major layout of `rows` x `cols` with leading dim `ld`, batched.
fn layout(
    dtype: sys::cudaDataType,
    (rows, cols, ld): (u64, u64, u64),
    batch: u64,
    stride: u64,
) -> Result<sys::cublasLtMatrixLayout_t, CudaError> {
    let l = result::create_matrix_layout(dtype, rows, cols, i64_of(ld, "leading dim")?)
        .map_err(|e| lt("layout", e))?;
    let count = i32::try_from(batch)
        .map_err(|_| CudaError::Unsupported(format!("a GEMM batch of {batch}")))?;
    let stride = i64_of(stride, "batch stride")?;
    // SAFETY: `l` is a live layout; the values match the attributes' types.
    unsafe {
        result::set_matrix_layout_attribute(
            l,
            sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
            (&count as *const i32).cast(),
            size_of::<i32>(),
        )
        .and_then(|()| {
            result::set_matrix_layout_attribute(
                l,
                sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                (&stride as *const i64).cast(),
                size_of::<i64>(),
            )
        })
        .map_err(|e| {
            let _ = result::destroy_matrix_layout(l);
            lt("layout batch", e)
        })?;
    }
    Ok(l)
}

/// Sets one matmul descriptor attribute from a value.
///
/// # Safety
/// `desc` is live and `T` is the attribute's type.
unsafe fn set_desc<T>(
    desc: sys::cublasLtMatmulDesc_t,
    attr: sys::cublasLtMatmulDescAttributes_t,
    v: &T,
) -> Result<(), CudaError> {
    result::set_matmul_desc_attribute(desc, attr, (v as *const T).cast(), size_of::<T>())
        .map_err(|e| lt("descriptor", e))
}

/// Algorithms asked of cuBLASLt's heuristic per GEMM, then timed.
const CANDIDATES: usize = 8;

/// What a GEMM's choice of algorithm depends on: everything but where its
/// operands lie, except how they are aligned. Equal GEMMs (a transformer's
/// layers) are timed once and run the same algorithm.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Shape {
    sizes: [u64; 10],
    trans: (bool, bool),
    bias: Option<u64>,
    act: GemmAct,
    dtype: DType,
    align: [u64; 3],
    tf32: bool,
}

/// Choices made so far while building one executable.
pub(crate) type Choices = HashMap<Shape, sys::cublasLtMatmulAlgo_t>;

impl Shape {
    fn of(g: &Gemm, tf32: bool) -> Shape {
        const ALIGN: u64 = 256;
        Shape {
            sizes: [
                g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch, g.stride_a, g.stride_b, g.stride_c,
            ],
            trans: (g.trans_a, g.trans_b),
            bias: g.bias.map(|b| b.offset % ALIGN),
            act: g.act,
            dtype: g.dtype,
            align: [g.a.offset % ALIGN, g.b.offset % ALIGN, g.c.offset % ALIGN],
            tf32,
        }
    }
}

/// Builds the descriptors of `g` (whose ranges start at `base` in device
/// memory) and picks its algorithm: the fastest of cuBLASLt's candidates,
/// timed on `stream` (the run writes only C and the workspace). `tf32`
/// lets an f32 GEMM use TF32 tensor cores.
pub(crate) fn prepare(
    lt_: &Lt,
    g: &Gemm,
    base: CUdeviceptr,
    tf32: bool,
    timer: &Timer,
    choices: &mut Choices,
    stream: sys::cudaStream_t,
) -> Result<Prepared, CudaError> {
    use sys::cublasLtMatmulDescAttributes_t as D;
    let dt = data_type(g.dtype)?;
    // f64 computes in f64; f32, f16 and bf16 in exact fp32.
    let f64 = g.dtype == DType::F64;
    let (compute, scale) = if f64 {
        (
            sys::cublasComputeType_t::CUBLAS_COMPUTE_64F,
            sys::cudaDataType::CUDA_R_64F,
        )
    } else if tf32 && g.dtype == DType::F32 {
        (
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            sys::cudaDataType::CUDA_R_32F,
        )
    } else {
        (
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            sys::cudaDataType::CUDA_R_32F,
        )
    };
    let desc =
        result::create_matmul_desc(compute, scale).map_err(|e| lt("matmul descriptor", e))?;
    let mut p = Prepared {
        desc,
        layouts: [std::ptr::null_mut(); 3],
        algo: unsafe { std::mem::zeroed() },
        ptrs: [base + g.b.offset, base + g.a.offset, base + g.c.offset],
        f64,
    };
    // Each stored matrix as (rows, cols, ld), column-major: cuBLASLt's A is
    // our B^T (n x k), its B our A^T (k x m), its D our C^T (n x m).
    let stored = |t: bool, r: u64, c: u64, ld: u64| if t { (c, r, ld) } else { (r, c, ld) };
    p.layouts[0] = layout(dt, stored(g.trans_b, g.n, g.k, g.ldb), g.batch, g.stride_b)?;
    p.layouts[1] = layout(dt, stored(g.trans_a, g.k, g.m, g.lda), g.batch, g.stride_a)?;
    p.layouts[2] = layout(dt, (g.n, g.m, g.ldc), g.batch, g.stride_c)?;
    use sys::cublasLtEpilogue_t as E;
    let epilogue = match (g.bias.is_some(), g.act) {
        (false, GemmAct::None) => E::CUBLASLT_EPILOGUE_DEFAULT,
        (false, GemmAct::Relu) => E::CUBLASLT_EPILOGUE_RELU,
        (false, GemmAct::GeluTanh) => E::CUBLASLT_EPILOGUE_GELU,
        (true, GemmAct::None) => E::CUBLASLT_EPILOGUE_BIAS,
        (true, GemmAct::Relu) => E::CUBLASLT_EPILOGUE_RELU_BIAS,
        (true, GemmAct::GeluTanh) => E::CUBLASLT_EPILOGUE_GELU_BIAS,
    };
    // SAFETY: `desc` is live; each value has its attribute's type (the
    // transposes are cublasOperation_t, an i32; the bias a device pointer).
    unsafe {
        set_desc(desc, D::CUBLASLT_MATMUL_DESC_TRANSA, &i32::from(g.trans_b))?;
        set_desc(desc, D::CUBLASLT_MATMUL_DESC_TRANSB, &i32::from(g.trans_a))?;
        set_desc(desc, D::CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue)?;
        if let Some(bias) = g.bias {
            let ptr: CUdeviceptr = base + bias.offset;
            set_desc(desc, D::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr)?;
            set_desc(desc, D::CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &0i64)?;
        }
    }
    let shape = Shape::of(g, tf32);
    if let Some(algo) = choices.get(&shape) {
        p.algo = *algo;
        return Ok(p);
    }
    let pref = result::create_matmul_pref().map_err(|e| lt("preference", e))?;
    let ws = lt_.workspace_bytes as u64;
    let mut found: [sys::cublasLtMatmulHeuristicResult_t; CANDIDATES] =
        // SAFETY: a plain C struct, filled by the heuristic below.
        unsafe { std::mem::zeroed() };
    let mut count = 0i32;
    // SAFETY: all descriptors are live; `found` has room for CANDIDATES
    // results; the preference is destroyed once.
    unsafe {
        let r = result::set_matmul_pref_attribute(
            pref,
            sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
            (&ws as *const u64).cast(),
            size_of::<u64>(),
        )
        .and_then(|()| {
            sys::cublasLtMatmulAlgoGetHeuristic(
                lt_.handle,
                desc,
                p.layouts[0],
                p.layouts[1],
                p.layouts[2],
                p.layouts[2],
                pref,
                CANDIDATES as i32,
                found.as_mut_ptr(),
                &mut count,
            )
            .result()
        });
        let _ = result::destroy_matmul_pref(pref);
        r.map_err(|e| lt(&format!("no algorithm for {g}"), e))?;
    }
    let ok = sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS;
    let algos: Vec<sys::cublasLtMatmulAlgo_t> = found
        [..(count.clamp(0, CANDIDATES as i32) as usize)]
        .iter()
        .filter(|r| r.state == ok)
        .map(|r| r.algo)
        .collect();
    if algos.is_empty() {
        return Err(CudaError::Unsupported(format!(
            "cuBLASLt has no algorithm for {g}"
        )));
    }
    // The heuristic's order is a guess: time the candidates here.
    let best = timer.fastest(algos.len(), |i| {
        p.algo = algos[i];
        run(lt_, &p, stream)
    });
    p.algo = algos[best?.ok_or_else(|| {
        CudaError::Unsupported(format!("every cuBLASLt algorithm failed for {g}"))
    })?];
    choices.insert(shape, p.algo);
    Ok(p)
}

/// Enqueues `p` on `stream`: `D = A B` (beta 0, C = D).
pub(crate) fn run(lt_: &Lt, p: &Prepared, stream: sys::cudaStream_t) -> Result<(), CudaError> {
    let (alpha, beta) = (1.0f32, 0.0f32);
    let (alpha64, beta64) = (1.0f64, 0.0f64);
    let (pa, pb): (*const c_void, *const c_void) = if p.f64 {
        (
            (&alpha64 as *const f64).cast(),
            (&beta64 as *const f64).cast(),
        )
    } else {
        ((&alpha as *const f32).cast(), (&beta as *const f32).cast())
    };
    let [a, b, c] = p.ptrs;
    // SAFETY: the descriptors are live, the pointers lie inside the
    // executable's buffer (checked when planned), the workspace outlives `lt_`.
    unsafe {
        result::matmul(
            lt_.handle,
            p.desc,
            pa,
            pb,
            a as *const c_void,
            p.layouts[0],
            b as *const c_void,
            p.layouts[1],
            c as *const c_void,
            p.layouts[2],
            c as *mut c_void,
            p.layouts[2],
            &p.algo,
            lt_.workspace as *mut c_void,
            lt_.workspace_bytes,
            stream,
        )
    }
    .map_err(|e| lt("matmul", e))
}
