//! The device half: an explicit [`Context`] (driver context, one stream, the
//! NVRTC compiler and its loaded modules) and an [`Executable`] that owns one
//! device allocation for the whole schedule buffer, uploads constants once,
//! resolves every kernel and prepares every GEMM when built, and per run
//! copies inputs in through pinned staging, runs the steps, and copies
//! outputs back. A schedule with no host reads (no If, no loop reading a
//! trip count or condition) is captured once as a CUDA graph and replayed.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{CUdeviceptr, CUstreamCaptureMode};
use cudarc::driver::{
    result as dr, sys as ds, CudaContext, CudaFunction, CudaGraph, CudaModule, CudaSlice,
    CudaStream, DevicePtr, PinnedHostSlice,
};
use cudarc::nvrtc::Ptx;
use rlx_ir::Tensor;

use crate::compile::{nvrtc_available, CompileOptions, Compiler};
use crate::dependent;
use crate::dnn::{self, Dnn, PreparedConv};
use crate::gemm::{self, Lt, Prepared};
use crate::pinned_out;
use crate::schedule::{Launch, Module, Schedule, Step, Trip};
use crate::tune::Timer;
use crate::CudaError;

/// What a [`Context`] is made with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContextOptions {
    /// The device ordinal.
    pub ordinal: usize,
    pub compile: CompileOptions,
    /// How plans for this device are made.
    pub plan: crate::PlanOptions,
}

/// A CUDA device, its stream, and the modules compiled for it.
pub struct Context {
    /// The cuDNN handle on `stream`, made when an executable first needs
    /// it. First: fields drop in order, and the handle must go before the
    /// stream it is bound to.
    dnn: Mutex<Option<Arc<Dnn>>>,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    compiler: Compiler,
    capability: (i32, i32),
    plan: crate::PlanOptions,
    name: String,
    /// Loaded modules by name and source.
    modules: Mutex<HashMap<(String, String), Loaded>>,
}

impl Context {
    /// Device 0, PTX not cached on disk.
    pub fn new() -> Result<Context, CudaError> {
        Context::with_options(&ContextOptions::default())
    }

    /// `Err(Unavailable)` when the driver, a device or NVRTC is missing.
    pub fn with_options(opts: &ContextOptions) -> Result<Context, CudaError> {
        // cudarc's dynamic loader panics when a library is missing; these
        // checks open the libraries fallibly first.
        // SAFETY: only tries to open the library by its candidate names.
        if !unsafe { ds::is_culib_present() } {
            return Err(CudaError::Unavailable(
                "the CUDA driver library (libcuda) cannot be loaded".into(),
            ));
        }
        if !nvrtc_available() {
            return Err(CudaError::Unavailable(
                "libnvrtc cannot be loaded (not on the library search path)".into(),
            ));
        }
        let ctx = CudaContext::new(opts.ordinal)
            .map_err(|e| CudaError::Unavailable(format!("device {}: {e:?}", opts.ordinal)))?;
        // Graph capture fails with CUDA_ERROR_STREAM_CAPTURE_ISOLATION while
        // cudarc records per-allocation events; this context orders its one
        // stream itself. Must precede every allocation.
        // SAFETY: nothing has been allocated on this context yet.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx
            .new_stream()
            .map_err(|e| CudaError::Device(format!("stream: {e:?}")))?;
        let cap = ctx
            .compute_capability()
            .map_err(|e| CudaError::Device(format!("compute capability: {e:?}")))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown CUDA device".into());
        Ok(Context {
            compiler: Compiler::new(cap, &opts.compile)?,
            capability: cap,
            plan: opts.plan,
            ctx,
            stream,
            name,
            modules: Mutex::new(HashMap::new()),
            dnn: Mutex::new(None),
        })
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The stream every executable of this context runs on (`CUstream`,
    /// as an integer): what another library orders its work before when
    /// it lends this context memory (DLPack's `__dlpack__(stream=...)`).
    pub fn stream_handle(&self) -> u64 {
        self.stream.cu_stream() as u64
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// The device's compute capability (major, minor).
    pub fn capability(&self) -> (i32, i32) {
        self.capability
    }

    /// How plans for this device are made.
    pub fn plan_options(&self) -> crate::PlanOptions {
        self.plan
    }

    pub fn compiler(&self) -> &Compiler {
        &self.compiler
    }

    /// The context's cuDNN handle, made on first use.
    fn dnn(&self) -> Result<Arc<Dnn>, CudaError> {
        let mut dnn = self.dnn.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = dnn.as_ref() {
            return Ok(d.clone());
        }
        let d = Arc::new(Dnn::new(self.stream.cu_stream() as *mut _)?);
        *dnn = Some(d.clone());
        Ok(d)
    }

    /// The modules of a schedule, each compiled (or read from the PTX
    /// cache) and loaded once: prebuilt PTX first (the driver refuses it on
    /// an older architecture than it targets), then what is left compiled
    /// by NVRTC on all cores at once.
    fn load_modules(&self, modules: &[Module]) -> Result<Vec<Loaded>, CudaError> {
        let mut cache = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        let mut todo: Vec<&Module> = Vec::new();
        for m in modules {
            let key = (m.name.clone(), m.source.clone());
            if cache.contains_key(&key)
                || todo
                    .iter()
                    .any(|t| t.name == m.name && t.source == m.source)
            {
                continue;
            }
            let prebuilt = m.ptx.as_ref().and_then(|ptx| self.load(ptx.clone()).ok());
            match prebuilt {
                Some(loaded) => {
                    cache.insert(key, loaded);
                }
                None => todo.push(m),
            }
        }
        let jobs: Vec<(&str, &str)> = todo
            .iter()
            .map(|m| (m.name.as_str(), m.source.as_str()))
            .collect();
        for (m, ptx) in todo.iter().zip(self.compiler.ptx_many(&jobs)) {
            let loaded = self
                .load(ptx?)
                .map_err(|e| CudaError::Device(format!("loading module `{}`: {e:?}", m.name)))?;
            cache.insert((m.name.clone(), m.source.clone()), loaded);
        }
        modules
            .iter()
            .map(|m| {
                cache
                    .get(&(m.name.clone(), m.source.clone()))
                    .cloned()
                    .ok_or_else(|| CudaError::Internal(format!("module `{}` not loaded", m.name)))
            })
            .collect()
    }

    /// Loads one module's PTX, noting which of its entries may overlap the
    /// kernel before them.
    fn load(&self, ptx: String) -> Result<Loaded, cudarc::driver::DriverError> {
        let waiting = Arc::new(dependent::waiting_entries(&ptx));
        let module = self.ctx.load_module(Ptx::from_src(ptx))?;
        Ok(Loaded { module, waiting })
    }

    /// Whether kernels that wait for their predecessor are launched to
    /// overlap it: chosen so, and the device has programmatic dependent
    /// launch (compute capability 9.0 and newer).
    fn overlaps(&self) -> bool {
        self.plan.launch == crate::KernelLaunch::Overlapped && self.capability.0 >= 9
    }
}

/// A loaded module and the entries of it that wait for the kernel before
/// them ([`dependent::waiting_entries`]).
#[derive(Clone)]
struct Loaded {
    module: Arc<CudaModule>,
    waiting: Arc<std::collections::HashSet<String>>,
}

/// Shared memory a block may use without opting in (CUDA's default limit).
const STATIC_SHARED: u32 = 48 << 10;

/// cuBLASLt workspace (NVIDIA's recommendation for Hopper).
const WORKSPACE: usize = 32 << 20;

/// A kernel launch resolved: its function, pointers and parameter words.
struct Resolved {
    function: CudaFunction,
    grid: [u32; 3],
    block: [u32; 3],
    /// Dynamic shared memory bytes a block.
    shared: u32,
    pointers: Vec<CUdeviceptr>,
    /// The parameter struct as 4-byte words (aligned as the kernel reads it).
    params: Vec<u32>,
    /// Launched with programmatic stream serialization (dependent.rs).
    overlaps: bool,
}

enum Ready {
    Kernel(Resolved),
    Gemm(Prepared),
    Conv(PreparedConv),
}

/// A captured CUDA graph of the top-level steps.
struct Graph(CudaGraph);

// SAFETY: a graph exec is a driver handle usable from any thread with the
// context bound; it is only launched under the executable's run lock.
unsafe impl Send for Graph {}

/// Per-run state, one run at a time.
struct RunState {
    staging: PinnedHostSlice<u8>,
    graph: Option<Graph>,
    /// Capture failed once: run the steps directly from then on.
    no_graph: bool,
    /// Whose kept values the input slots hold ([`Executable::run_kept`]).
    held: Option<held::HeldBy>,
}

/// A schedule loaded on a device.
pub struct Executable {
    /// Unique among the process's executables (what a [`Holder`] names).
    id: u64,
    ctx: Arc<Context>,
    schedule: Schedule,
    /// Kept alive: the buffer every pointer points into, the GEMM workspace.
    _buffer: CudaSlice<u8>,
    _workspace: Option<CudaSlice<u8>>,
    base: CUdeviceptr,
    ready: Vec<Ready>,
    lt: Option<Lt>,
    dnn: Option<Arc<Dnn>>,
    /// Staging offsets of the inputs, then of the outputs (those of at
    /// least [`pinned_out::LENT_BYTES`] have none: they are lent buffers).
    staging_at: Vec<usize>,
    /// Pinned buffers lent to large host outputs.
    lent: Arc<pinned_out::Pool>,
    run: Mutex<RunState>,
    /// Rounds one loop may run ([`Executable::set_max_loop_iterations`]).
    max_loop_iterations: u64,
}

// Executables and contexts are shared across threads.
const _: fn() = || {
    fn shared<T: Send + Sync>() {}
    shared::<Executable>();
    shared::<Context>();
};

fn host_reads(steps: &[Step]) -> bool {
    steps.iter().any(|s| match s {
        Step::Dispatch(_) => false,
        Step::If { .. } => true,
        Step::Loop {
            trip, cond, body, ..
        } => matches!(trip, Trip::Read(_)) || cond.is_some() || host_reads(body),
    })
}

impl Executable {
    pub fn new(ctx: Arc<Context>, schedule: Schedule) -> Result<Executable, CudaError> {
        let (cx, stream) = (&ctx.ctx, &ctx.stream);
        cx.bind_to_thread()
            .map_err(|e| CudaError::Device(format!("{e:?}")))?;
        let bytes = usize::try_from(schedule.buffer_bytes)
            .map_err(|_| CudaError::Unsupported("a buffer beyond the address space".into()))?;
        let buffer = stream
            .alloc_zeros::<u8>(bytes.max(1))
            .map_err(|e| CudaError::Device(format!("allocating {bytes} bytes: {e:?}")))?;
        let base = buffer.device_ptr(stream).0;
        for c in &schedule.consts {
            if c.offset + c.bytes.len() as u64 > schedule.buffer_bytes {
                return Err(CudaError::Internal("a constant beyond the buffer".into()));
            }
            // SAFETY: the range lies inside `buffer` (checked above); the
            // stream is synchronized below, before `c.bytes` could go away.
            unsafe { dr::memcpy_htod_async(base + c.offset, &c.bytes, stream.cu_stream()) }
                .map_err(|e| CudaError::Device(format!("uploading constants: {e:?}")))?;
        }
        let modules = ctx.load_modules(&schedule.modules)?;
        let overlaps = ctx.overlaps();
        let needs_lt = schedule
            .launches
            .iter()
            .any(|l| matches!(l, Launch::Gemm(_)));
        let (workspace, lt) = if needs_lt {
            let ws = stream
                .alloc_zeros::<u8>(WORKSPACE)
                .map_err(|e| CudaError::Device(format!("cuBLASLt workspace: {e:?}")))?;
            let ptr = ws.device_ptr(stream).0;
            let lt = Lt::new(ptr, WORKSPACE)?;
            (Some(ws), Some(lt))
        } else {
            (None, None)
        };
        let dnn = if schedule
            .launches
            .iter()
            .any(|l| matches!(l, Launch::Conv(_)))
        {
            Some(ctx.dnn()?)
        } else {
            None
        };
        // Constants (the weights) are in place before cuDNN times its
        // algorithms on the buffer.
        stream
            .synchronize()
            .map_err(|e| CudaError::Device(format!("uploading constants: {e:?}")))?;
        let inside = |r: &crate::schedule::Range| r.offset + r.bytes <= schedule.buffer_bytes;
        let timer = Timer::new(cx, stream)?;
        let mut choices = gemm::Choices::new();
        let mut ready = Vec::with_capacity(schedule.launches.len());
        for l in &schedule.launches {
            let node_err = |reason: String| CudaError::Node {
                node: l.node().to_string(),
                origin: l.origin().to_vec(),
                reason,
            };
            match l {
                Launch::Kernel(k) => {
                    let module = modules
                        .get(k.module)
                        .ok_or_else(|| CudaError::Internal("a launch names no module".into()))?;
                    let function = module
                        .module
                        .load_function(&k.entry)
                        .map_err(|e| node_err(format!("kernel `{}`: {e:?}", k.entry)))?;
                    if k.shared > STATIC_SHARED {
                        // Past 48 KiB a kernel must opt in to dynamic shared memory.
                        let bytes = i32::try_from(k.shared).map_err(|_| {
                            node_err(format!("{} bytes of shared memory", k.shared))
                        })?;
                        function
                            .set_attribute(
                                ds::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                bytes,
                            )
                            .map_err(|e| {
                                node_err(format!("kernel `{}`, {bytes} bytes of shared memory: {e:?}", k.entry))
                            })?;
                    }
                    if !k.operands.iter().all(inside) {
                        return Err(node_err("an operand beyond the buffer".into()));
                    }
                    let mut params: Vec<u32> = k
                        .params
                        .bytes
                        .chunks(4)
                        .map(|c| {
                            let mut w = [0u8; 4];
                            w[..c.len()].copy_from_slice(c);
                            u32::from_le_bytes(w)
                        })
                        .collect();
                    if params.is_empty() {
                        params.push(0);
                    }
                    ready.push(Ready::Kernel(Resolved {
                        function,
                        grid: k.grid,
                        block: k.block,
                        shared: k.shared,
                        pointers: k.operands.iter().map(|r| base + r.offset).collect(),
                        params,
                        overlaps: overlaps && module.waiting.contains(&k.entry),
                    }));
                }
                Launch::Gemm(g) => {
                    let gm = &g.gemm;
                    let ranges = [Some(gm.a), Some(gm.b), Some(gm.c), gm.bias];
                    if !ranges.iter().flatten().all(inside) {
                        return Err(node_err("a GEMM operand beyond the buffer".into()));
                    }
                    let lt = lt
                        .as_ref()
                        .ok_or_else(|| CudaError::Internal("no cuBLASLt".into()))?;
                    let p = gemm::prepare(
                        lt,
                        gm,
                        base,
                        schedule.tf32,
                        &timer,
                        &mut choices,
                        stream.cu_stream() as *mut _,
                    )
                    .map_err(|e| node_err(e.to_string()))?;
                    ready.push(Ready::Gemm(p));
                }
                Launch::Conv(c) => {
                    let cv = &c.conv;
                    let ranges = [
                        Some(cv.x),
                        Some(cv.w),
                        Some(cv.y),
                        cv.bias,
                        Some(cv.workspace),
                    ];
                    if !ranges.iter().flatten().all(inside) {
                        return Err(node_err("a convolution operand beyond the buffer".into()));
                    }
                    let d = dnn
                        .as_ref()
                        .ok_or_else(|| CudaError::Internal("no cuDNN".into()))?;
                    ready.push(Ready::Conv(
                        dnn::prepare(d, cv, base, schedule.tf32)
                            .map_err(|e| node_err(e.to_string()))?,
                    ));
                }
            }
        }
        // Large outputs come down into lent buffers (or, past the pool's
        // bound, ordinary memory): no room in the staging.
        let mut staging_at = Vec::new();
        let mut at = 0usize;
        for s in schedule.inputs.iter() {
            staging_at.push(at);
            at += (s.bytes as usize).next_multiple_of(256);
        }
        let large = |s: &&crate::schedule::IoSlot| s.bytes as usize >= pinned_out::LENT_BYTES;
        for s in schedule.outputs.iter() {
            staging_at.push(at);
            if !large(&s) {
                at += (s.bytes as usize).next_multiple_of(256);
            }
        }
        let lent = pinned_out::Pool::new(schedule.outputs.iter().filter(large).count());
        // SAFETY: the contents are written before being read (inputs) or
        // filled by the device (outputs).
        let staging = unsafe { cx.alloc_pinned_with_flags::<u8>(at.max(256), 0) }
            .map_err(|e| CudaError::Device(format!("pinned staging: {e:?}")))?;
        stream
            .synchronize()
            .map_err(|e| CudaError::Device(format!("loading: {e:?}")))?;
        static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Ok(Executable {
            id: IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            ctx,
            _buffer: buffer,
            _workspace: workspace,
            base,
            ready,
            lt,
            dnn,
            staging_at,
            lent,
            run: Mutex::new(RunState {
                staging,
                graph: None,
                no_graph: host_reads(&schedule.steps),
                held: None,
            }),
            schedule,
            max_loop_iterations: rlx_gpu::walk::MAX_ROUNDS,
        })
    }

    /// The most rounds one loop may run (a trip count past it is an error
    /// naming the loop) [default: `rlx_gpu::walk::MAX_ROUNDS`].
    pub fn set_max_loop_iterations(&mut self, n: u64) {
        self.max_loop_iterations = n;
    }

    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The cuDNN algorithm chosen for each convolution launch, by launch
    /// index (chosen once, when the executable was built).
    pub fn conv_algorithms(&self) -> Vec<(usize, String)> {
        self.ready
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match r {
                Ready::Conv(c) => Some((i, c.algorithm())),
                _ => None,
            })
            .collect()
    }

    /// Whether runs replay a captured CUDA graph (after the first run).
    pub fn replays_graph(&self) -> bool {
        let st = self.run.lock().unwrap_or_else(|p| p.into_inner());
        st.graph.is_some()
    }

    /// Runs on host inputs in graph-input order (dtypes and shapes checked
    /// first) and returns host outputs.
    pub fn run(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>, CudaError> {
        let inputs: Vec<Input<'_, Buffer>> = inputs.iter().map(|t| Input::Host(t)).collect();
        let places = vec![Place::Host; self.schedule.outputs.len()];
        self.run_io(&inputs, &places)?
            .into_iter()
            .map(|o| match o {
                Output::Host(t) => Ok(t),
                Output::Device(_) => {
                    Err(CudaError::Internal("an output left on the device".into()))
                }
            })
            .collect()
    }

    /// Runs the top-level steps: the captured graph when there is one (it is
    /// captured on the first run), else step by step.
    fn execute(&self, st: &mut RunState) -> Result<(), CudaError> {
        if !st.no_graph && st.graph.is_none() {
            match self.capture() {
                Ok(g) => st.graph = Some(g),
                Err(_) => st.no_graph = true,
            }
        }
        match &st.graph {
            Some(g) => {
                g.0.launch()
                    .map_err(|e| CudaError::Device(format!("graph launch: {e:?}")))
            }
            None => self.steps(&self.schedule.steps),
        }
    }

    fn capture(&self) -> Result<Graph, CudaError> {
        let stream = &self.ctx.stream;
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| CudaError::Device(format!("begin capture: {e:?}")))?;
        let body = self.steps(&self.schedule.steps);
        let end = stream.end_capture(ds::CUgraphInstantiate_flags(0));
        body?;
        match end {
            Ok(Some(g)) => Ok(Graph(g)),
            Ok(None) => Err(CudaError::Device("an empty capture".into())),
            Err(e) => Err(CudaError::Device(format!("end capture: {e:?}"))),
        }
    }

    fn steps(&self, steps: &[Step]) -> Result<(), CudaError> {
        self.walk(steps, &mut |i| self.launch(i))
    }

    /// Runs `steps` in order, each launch through `launch` (the plain launch,
    /// or a timed one when profiling), reading conditions and trip counts
    /// back where control flow needs them (rlx-gpu's walk).
    fn walk(
        &self,
        steps: &[Step],
        launch: &mut dyn FnMut(usize) -> Result<(), CudaError>,
    ) -> Result<(), CudaError> {
        rlx_gpu::walk::walk(
            steps,
            &mut Launches { exe: self, launch },
            self.max_loop_iterations,
        )
    }

    fn launch(&self, i: usize) -> Result<(), CudaError> {
        let cs = self.ctx.stream.cu_stream();
        match self.ready.get(i) {
            Some(Ready::Kernel(k)) => {
                let mut ptrs = k.pointers.clone();
                let mut args: Vec<*mut c_void> = ptrs
                    .iter_mut()
                    .map(|p| (p as *mut CUdeviceptr).cast())
                    .collect();
                let mut params = k.params.clone();
                args.push(params.as_mut_ptr().cast());
                // SAFETY: the kernel takes one pointer per operand, then its
                // parameter struct (whose layout `params` follows, checked by
                // the struct's static_asserts); all pointers lie in the buffer;
                // a kernel launched to overlap is one whose PTX waits first.
                unsafe {
                    if k.overlaps {
                        dependent::launch(
                            k.function.cu_function(),
                            k.grid,
                            k.block,
                            k.shared,
                            cs,
                            &mut args,
                        )
                        .map_err(|e| format!("{e:?}"))
                    } else {
                        dr::launch_kernel(
                            k.function.cu_function(),
                            (k.grid[0], k.grid[1], k.grid[2]),
                            (k.block[0], k.block[1], k.block[2]),
                            k.shared,
                            cs,
                            &mut args,
                        )
                        .map_err(|e| format!("{e:?}"))
                    }
                }
                .map_err(|e| CudaError::Device(format!("launch {i}: {e}")))
            }
            Some(Ready::Gemm(p)) => {
                let lt = self
                    .lt
                    .as_ref()
                    .ok_or_else(|| CudaError::Internal("no cuBLASLt".into()))?;
                gemm::run(lt, p, cs as *mut _)
            }
            Some(Ready::Conv(c)) => {
                let d = self
                    .dnn
                    .as_ref()
                    .ok_or_else(|| CudaError::Internal("no cuDNN".into()))?;
                dnn::run(d, c)
            }
            None => Err(CudaError::Internal("a step names no launch".into())),
        }
    }

    /// Reads 8 bytes at `offset` (a condition or trip count) back to the host.
    fn read(&self, offset: u64) -> Result<[u8; 8], CudaError> {
        let n = 8.min(self.schedule.buffer_bytes.saturating_sub(offset)) as usize;
        let mut out = [0u8; 8];
        let stream = &self.ctx.stream;
        // SAFETY: `out` lives until the stream is synchronized just below.
        unsafe { dr::memcpy_dtoh_async(&mut out[..n], self.base + offset, stream.cu_stream()) }
            .map_err(|e| CudaError::Device(format!("reading back: {e:?}")))?;
        stream
            .synchronize()
            .map_err(|e| CudaError::Device(format!("reading back: {e:?}")))?;
        Ok(out)
    }
}

#[path = "held.rs"]
mod held;
#[path = "io.rs"]
mod io;
#[path = "profile.rs"]
mod profile;

pub use held::Holder;
pub use io::{Buffer, DeviceTensor};
use rlx_gpu::io::{Input, Output, Place};

/// A CUDA run as rlx-gpu's walk drives it.
struct Launches<'a, 'b> {
    exe: &'a Executable,
    launch: &'b mut dyn FnMut(usize) -> Result<(), CudaError>,
}

impl rlx_gpu::walk::Walk for Launches<'_, '_> {
    type Error = CudaError;

    fn launch(&mut self, i: usize) -> Result<(), CudaError> {
        (self.launch)(i)
    }

    fn read(&mut self, offset: u64) -> Result<[u8; 8], CudaError> {
        self.exe.read(offset)
    }

    fn node_error(&self, node: &str, origin: &[String], reason: String) -> CudaError {
        CudaError::Node {
            node: node.to_string(),
            origin: origin.to_vec(),
            reason,
        }
    }
}
