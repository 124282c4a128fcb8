//! cuDNN for [`Conv`] launches, through cudarc's `cudnn::sys` layer. Each
//! convolution's descriptors are built and its algorithm chosen once, when
//! the executable is built: `cudnnFind*AlgorithmEx` times the candidates on
//! the executable's own buffer (falling back to the `_v7` heuristics),
//! keeping those that fit the workspace the plan reserved and, for f32 and
//! f64, compute with plain FMA (no TF32: the math type is `CUDNN_FMA_MATH`)
//! unless the schedule allows TF32 for f32. Running one is one or two cuDNN calls on the
//! executable's stream, so it can be captured in a CUDA graph.
//!
//! One handle serves a [`Context`](crate::Context) (all its executables,
//! on its one stream) for the context's life, as NVIDIA recommends:
//! `cudnnDestroy` synchronizes the whole device. Every host call into
//! cuDNN holds one process-wide lock. Concurrent `cudnnFind*` calls from
//! two contexts' threads crashed inside cuDNN (a null event in
//! `ForkInternalStreams`, two runs in three of the CUDA parity test on the
//! H100); cuDNN runs only the convolutions GEMMs do not take, and a
//! replayed CUDA graph makes no host call, so the lock costs nothing that
//! matters.
//!
//! f32 bias + ReLU runs as `cudnnConvolutionBiasActivationForward`; a bias
//! without ReLU too when the chosen algorithm is IMPLICIT_PRECOMP_GEMM (the
//! only one cuDNN fuses an identity activation with), else the forward
//! convolution and `cudnnAddTensor`.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;
use std::sync::{Mutex, MutexGuard};

use cudarc::cudnn::sys;
use cudarc::driver::sys::CUdeviceptr;
use rlx_ir::DType;

use crate::schedule::{Conv, ConvKind};
use crate::CudaError;

fn dnn(what: &str, s: sys::cudnnStatus_t) -> Result<(), CudaError> {
    if s == sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(CudaError::Device(format!("cuDNN {what}: {s:?}")))
    }
}

/// Held by every host call into cuDNN.
static CALLS: Mutex<()> = Mutex::new(());

fn calls() -> MutexGuard<'static, ()> {
    CALLS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A cuDNN handle bound to a context's stream.
pub(crate) struct Dnn {
    handle: sys::cudnnHandle_t,
}

// SAFETY: a cuDNN handle may be used from any thread, one call at a time;
// every call holds `CALLS`.
unsafe impl Send for Dnn {}
unsafe impl Sync for Dnn {}

impl Dnn {
    pub(crate) fn new(stream: sys::cudaStream_t) -> Result<Dnn, CudaError> {
        // SAFETY: only tries to open the library by its candidate names.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaError::Unavailable("libcudnn cannot be loaded".into()));
        }
        let mut handle = null_mut();
        let _calls = calls();
        // SAFETY: a fresh handle, then bound to a live stream.
        unsafe {
            dnn("create", sys::cudnnCreate(&mut handle))?;
            let d = Dnn { handle };
            dnn("set stream", sys::cudnnSetStream(d.handle, stream))?;
            Ok(d)
        }
    }
}

impl Drop for Dnn {
    fn drop(&mut self) {
        let _calls = calls();
        // SAFETY: created once in `new`, destroyed once.
        unsafe {
            let _ = sys::cudnnDestroy(self.handle);
        }
    }
}

/// The cuDNN algorithm chosen for one convolution.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Algo {
    Forward(sys::cudnnConvolutionFwdAlgo_t),
    Transpose(sys::cudnnConvolutionBwdDataAlgo_t),
}

/// One convolution ready to run.
pub(crate) struct PreparedConv {
    x: sys::cudnnTensorDescriptor_t,
    w: sys::cudnnFilterDescriptor_t,
    y: sys::cudnnTensorDescriptor_t,
    bias_desc: sys::cudnnTensorDescriptor_t,
    conv: sys::cudnnConvolutionDescriptor_t,
    act: sys::cudnnActivationDescriptor_t,
    algo: Algo,
    /// `Some(relu)`: the fused bias (+ ReLU) call.
    fused: Option<bool>,
    ptrs: [CUdeviceptr; 3],
    bias: Option<CUdeviceptr>,
    workspace: CUdeviceptr,
    workspace_bytes: usize,
    double: bool,
}

// SAFETY: the descriptors are plain cuDNN heap objects only read by the run
// calls; executables run one at a time (a Mutex).
unsafe impl Send for PreparedConv {}
unsafe impl Sync for PreparedConv {}

impl Drop for PreparedConv {
    fn drop(&mut self) {
        let _calls = calls();
        // SAFETY: each created once in `prepare` (or null), destroyed once.
        unsafe {
            for t in [self.x, self.y, self.bias_desc] {
                if !t.is_null() {
                    let _ = sys::cudnnDestroyTensorDescriptor(t);
                }
            }
            if !self.w.is_null() {
                let _ = sys::cudnnDestroyFilterDescriptor(self.w);
            }
            if !self.conv.is_null() {
                let _ = sys::cudnnDestroyConvolutionDescriptor(self.conv);
            }
            if !self.act.is_null() {
                let _ = sys::cudnnDestroyActivationDescriptor(self.act);
            }
        }
    }
}

impl PreparedConv {
    /// The chosen algorithm, for reports.
    pub(crate) fn algorithm(&self) -> String {
        let a = match self.algo {
            Algo::Forward(a) => format!("{a:?}"),
            Algo::Transpose(a) => format!("{a:?}"),
        };
        let a = a.trim_start_matches("CUDNN_CONVOLUTION_").to_string();
        match self.fused {
            Some(true) => format!("{a} +bias+relu"),
            Some(false) => format!("{a} +bias"),
            None => a,
        }
    }
}

fn data_type(d: DType) -> Result<(sys::cudnnDataType_t, sys::cudnnDataType_t), CudaError> {
    use sys::cudnnDataType_t as T;
    Ok(match d {
        DType::F32 => (T::CUDNN_DATA_FLOAT, T::CUDNN_DATA_FLOAT),
        DType::F64 => (T::CUDNN_DATA_DOUBLE, T::CUDNN_DATA_DOUBLE),
        DType::F16 => (T::CUDNN_DATA_HALF, T::CUDNN_DATA_FLOAT),
        DType::BF16 => (T::CUDNN_DATA_BFLOAT16, T::CUDNN_DATA_FLOAT),
        d => {
            return Err(CudaError::Unsupported(format!(
                "a cuDNN convolution on {d}"
            )))
        }
    })
}

fn ints(v: &[usize]) -> Result<Vec<c_int>, CudaError> {
    v.iter()
        .map(|&x| {
            c_int::try_from(x).map_err(|_| CudaError::Unsupported(format!("a cuDNN size of {x}")))
        })
        .collect()
}

/// A packed NCHW (NCDHW) tensor descriptor.
///
/// # Safety
/// Creates a descriptor the caller destroys.
unsafe fn tensor(
    dt: sys::cudnnDataType_t,
    dims: &[usize],
) -> Result<sys::cudnnTensorDescriptor_t, CudaError> {
    let d = ints(dims)?;
    let st = ints(&rlx_gpu::geometry::strides(dims))?;
    let mut t = null_mut();
    dnn(
        "tensor descriptor",
        sys::cudnnCreateTensorDescriptor(&mut t),
    )?;
    if let Err(e) = dnn(
        "tensor descriptor",
        sys::cudnnSetTensorNdDescriptor(t, dt, d.len() as c_int, d.as_ptr(), st.as_ptr()),
    ) {
        let _ = sys::cudnnDestroyTensorDescriptor(t);
        return Err(e);
    }
    Ok(t)
}

/// Descriptors and algorithm of `c` (whose ranges start at `base`), with
/// the workspace its range in the buffer provides. Runs cuDNN's timing of
/// the candidates on the buffer (writing only `y` and the workspace).
pub(crate) fn prepare(
    d: &Dnn,
    c: &Conv,
    base: CUdeviceptr,
    tf32: bool,
) -> Result<PreparedConv, CudaError> {
    use sys::cudnnConvolutionFwdAlgo_t as F;
    let _calls = calls();
    let (dt, compute) = data_type(c.dtype)?;
    let sp = c.x_dims.len() - 2;
    let mut p = PreparedConv {
        x: null_mut(),
        w: null_mut(),
        y: null_mut(),
        bias_desc: null_mut(),
        conv: null_mut(),
        act: null_mut(),
        algo: Algo::Forward(F::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM),
        fused: None,
        ptrs: [base + c.x.offset, base + c.w.offset, base + c.y.offset],
        bias: c.bias.map(|b| base + b.offset),
        workspace: base + c.workspace.offset,
        workspace_bytes: c.workspace.bytes as usize,
        double: c.dtype == DType::F64,
    };
    // SAFETY: every descriptor is created here, owned by `p` (destroyed on
    // drop, also on an early error), and set from arrays that outlive the
    // calls; the pointers lie in the executable's buffer (checked by the
    // caller) and the workspace range is the plan's.
    unsafe {
        p.x = tensor(dt, &c.x_dims)?;
        p.y = tensor(dt, &c.y_dims)?;
        dnn(
            "filter descriptor",
            sys::cudnnCreateFilterDescriptor(&mut p.w),
        )?;
        let wd = ints(&c.w_dims)?;
        dnn(
            "filter descriptor",
            sys::cudnnSetFilterNdDescriptor(
                p.w,
                dt,
                sys::cudnnTensorFormat_t::CUDNN_TENSOR_NCHW,
                wd.len() as c_int,
                wd.as_ptr(),
            ),
        )?;
        dnn(
            "convolution descriptor",
            sys::cudnnCreateConvolutionDescriptor(&mut p.conv),
        )?;
        let (pads, strides, dils) = (ints(&c.pads)?, ints(&c.strides)?, ints(&c.dilations)?);
        dnn(
            "convolution descriptor",
            sys::cudnnSetConvolutionNdDescriptor(
                p.conv,
                sp as c_int,
                pads.as_ptr(),
                strides.as_ptr(),
                dils.as_ptr(),
                sys::cudnnConvolutionMode_t::CUDNN_CROSS_CORRELATION,
                compute,
            ),
        )?;
        let groups = c_int::try_from(c.groups)
            .map_err(|_| CudaError::Unsupported("a group count".into()))?;
        dnn(
            "group count",
            sys::cudnnSetConvolutionGroupCount(p.conv, groups),
        )?;
        // Exact fp32: FMA only (CUDNN_DEFAULT_MATH permits TF32 on Ampere on).
        let math = match c.dtype {
            DType::F32 if tf32 => sys::cudnnMathType_t::CUDNN_DEFAULT_MATH,
            DType::F32 | DType::F64 => sys::cudnnMathType_t::CUDNN_FMA_MATH,
            _ => sys::cudnnMathType_t::CUDNN_DEFAULT_MATH,
        };
        dnn("math type", sys::cudnnSetConvolutionMathType(p.conv, math))?;
        let fma_only = math == sys::cudnnMathType_t::CUDNN_FMA_MATH;
        let ok_math = |m: sys::cudnnMathType_t| {
            !fma_only
                || matches!(
                    m,
                    sys::cudnnMathType_t::CUDNN_FMA_MATH | sys::cudnnMathType_t::CUDNN_DEFAULT_MATH
                )
        };
        let ws = p.workspace_bytes;
        let ws_ptr = p.workspace as *mut c_void;
        let [xp, wp, yp] = p.ptrs;
        match c.kind {
            ConvKind::Forward => {
                const N: usize = F::CUDNN_CONVOLUTION_FWD_ALGO_COUNT as usize;
                let mut perf: [sys::cudnnConvolutionFwdAlgoPerf_t; N] = std::mem::zeroed();
                let mut got: c_int = 0;
                let pick = |perf: &[sys::cudnnConvolutionFwdAlgoPerf_t]| {
                    perf.iter()
                        .find(|r| {
                            r.status == sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS
                                && r.memory <= ws
                                && ok_math(r.mathType)
                        })
                        .map(|r| r.algo)
                };
                let found = sys::cudnnFindConvolutionForwardAlgorithmEx(
                    d.handle,
                    p.x,
                    xp as *const c_void,
                    p.w,
                    wp as *const c_void,
                    p.conv,
                    p.y,
                    yp as *mut c_void,
                    N as c_int,
                    &mut got,
                    perf.as_mut_ptr(),
                    ws_ptr,
                    ws,
                );
                let mut algo = (found == sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS)
                    .then(|| pick(&perf[..got.clamp(0, N as c_int) as usize]))
                    .flatten();
                if algo.is_none() {
                    got = 0;
                    dnn(
                        "forward algorithm",
                        sys::cudnnGetConvolutionForwardAlgorithm_v7(
                            d.handle,
                            p.x,
                            p.w,
                            p.conv,
                            p.y,
                            N as c_int,
                            &mut got,
                            perf.as_mut_ptr(),
                        ),
                    )?;
                    algo = pick(&perf[..got.clamp(0, N as c_int) as usize]);
                }
                let algo = algo.ok_or_else(|| {
                    CudaError::Unsupported(format!(
                        "no cuDNN forward algorithm fits {} bytes of workspace for {c}",
                        ws
                    ))
                })?;
                // Find may leave another math type behind: set it again.
                dnn("math type", sys::cudnnSetConvolutionMathType(p.conv, math))?;
                p.algo = Algo::Forward(algo);
                if c.bias.is_some() {
                    let mut bd = vec![1; c.y_dims.len()];
                    bd[1] = c.y_dims[1];
                    p.bias_desc = tensor(dt, &bd)?;
                    if c.relu || algo == F::CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM {
                        dnn(
                            "activation descriptor",
                            sys::cudnnCreateActivationDescriptor(&mut p.act),
                        )?;
                        let mode = if c.relu {
                            sys::cudnnActivationMode_t::CUDNN_ACTIVATION_RELU
                        } else {
                            sys::cudnnActivationMode_t::CUDNN_ACTIVATION_IDENTITY
                        };
                        dnn(
                            "activation descriptor",
                            sys::cudnnSetActivationDescriptor(
                                p.act,
                                mode,
                                sys::cudnnNanPropagation_t::CUDNN_PROPAGATE_NAN,
                                0.0,
                            ),
                        )?;
                        p.fused = Some(c.relu);
                    } else if c.relu {
                        return Err(CudaError::Internal(
                            "a fused ReLU without the fused call".into(),
                        ));
                    }
                }
            }
            ConvKind::Transpose => {
                use sys::cudnnConvolutionBwdDataAlgo_t as B;
                const N: usize = B::CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT as usize;
                let mut perf: [sys::cudnnConvolutionBwdDataAlgoPerf_t; N] = std::mem::zeroed();
                let mut got: c_int = 0;
                let pick = |perf: &[sys::cudnnConvolutionBwdDataAlgoPerf_t]| {
                    perf.iter()
                        .find(|r| {
                            r.status == sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS
                                && r.memory <= ws
                                && ok_math(r.mathType)
                        })
                        .map(|r| r.algo)
                };
                // dy is our input x (the forward's output), dx our output y.
                let found = sys::cudnnFindConvolutionBackwardDataAlgorithmEx(
                    d.handle,
                    p.w,
                    wp as *const c_void,
                    p.x,
                    xp as *const c_void,
                    p.conv,
                    p.y,
                    yp as *mut c_void,
                    N as c_int,
                    &mut got,
                    perf.as_mut_ptr(),
                    ws_ptr,
                    ws,
                );
                let mut algo = (found == sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS)
                    .then(|| pick(&perf[..got.clamp(0, N as c_int) as usize]))
                    .flatten();
                if algo.is_none() {
                    got = 0;
                    dnn(
                        "backward data algorithm",
                        sys::cudnnGetConvolutionBackwardDataAlgorithm_v7(
                            d.handle,
                            p.w,
                            p.x,
                            p.conv,
                            p.y,
                            N as c_int,
                            &mut got,
                            perf.as_mut_ptr(),
                        ),
                    )?;
                    algo = pick(&perf[..got.clamp(0, N as c_int) as usize]);
                }
                let algo = algo.ok_or_else(|| {
                    CudaError::Unsupported(format!(
                        "no cuDNN backward-data algorithm fits {} bytes of workspace for {c}",
                        ws
                    ))
                })?;
                dnn("math type", sys::cudnnSetConvolutionMathType(p.conv, math))?;
                p.algo = Algo::Transpose(algo);
            }
        }
    }
    Ok(p)
}

/// Enqueues `p` on the handle's stream.
pub(crate) fn run(d: &Dnn, p: &PreparedConv) -> Result<(), CudaError> {
    let _calls = calls();
    let (one_f, zero_f) = (1.0f32, 0.0f32);
    let (one_d, zero_d) = (1.0f64, 0.0f64);
    // Scaling factors are double for double data, float otherwise.
    let (one, zero): (*const c_void, *const c_void) = if p.double {
        (
            (&one_d as *const f64).cast(),
            (&zero_d as *const f64).cast(),
        )
    } else {
        (
            (&one_f as *const f32).cast(),
            (&zero_f as *const f32).cast(),
        )
    };
    let [x, w, y] = p.ptrs;
    let (x, w, y) = (x as *const c_void, w as *const c_void, y as *mut c_void);
    let ws = p.workspace as *mut c_void;
    // SAFETY: descriptors are live, pointers lie in the executable's buffer,
    // the workspace range is reserved for this launch; the scaling factors
    // outlive the calls (cuDNN reads them before returning).
    unsafe {
        match p.algo {
            Algo::Forward(algo) => match (p.fused, p.bias) {
                (Some(_), Some(b)) => dnn(
                    "convolution bias activation",
                    sys::cudnnConvolutionBiasActivationForward(
                        d.handle,
                        one,
                        p.x,
                        x,
                        p.w,
                        w,
                        p.conv,
                        algo,
                        ws,
                        p.workspace_bytes,
                        zero,
                        p.y,
                        y as *const c_void,
                        p.bias_desc,
                        b as *const c_void,
                        p.act,
                        p.y,
                        y,
                    ),
                ),
                (_, bias) => {
                    dnn(
                        "convolution forward",
                        sys::cudnnConvolutionForward(
                            d.handle,
                            one,
                            p.x,
                            x,
                            p.w,
                            w,
                            p.conv,
                            algo,
                            ws,
                            p.workspace_bytes,
                            zero,
                            p.y,
                            y,
                        ),
                    )?;
                    match bias {
                        Some(b) => dnn(
                            "add bias",
                            sys::cudnnAddTensor(
                                d.handle,
                                one,
                                p.bias_desc,
                                b as *const c_void,
                                one,
                                p.y,
                                y,
                            ),
                        ),
                        None => Ok(()),
                    }
                }
            },
            Algo::Transpose(algo) => dnn(
                "convolution backward data",
                sys::cudnnConvolutionBackwardData(
                    d.handle,
                    one,
                    p.w,
                    w,
                    p.x,
                    x,
                    p.conv,
                    algo,
                    ws,
                    p.workspace_bytes,
                    zero,
                    p.y,
                    y,
                ),
            ),
        }
    }
}
