//! Sessions: run a compiled model. Each distinct input-shape binding (and the
//! values of inputs that determine shapes) is specialized, planned and cached
//! once; runs with the same shapes reuse the plan.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rlx_cpu::dynamic::{run_graph_cached, BodyCache};
use rlx_cpu::tensor::TensorRef;
use rlx_cpu::{PlannedExecutable, Schedule};
use rlx_ir::analysis::{bind_input_values, bind_shapes, specialize, value_inputs};
use rlx_ir::{Graph, Tensor, Weights};
use rlx_passes::{plan_memory_with, MemoryOptions};

use crate::backend::GpuExecutable;
use crate::compile::{run_passes, CompiledModel, Fallback, Precision, Target};
use crate::error::{Error, InputError, Result};
use crate::partition::{self, Place, Slot};
use rlx_passes::verify_by_default;

/// Options of a session.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Worker threads (1 runs everything on one thread).
    pub threads: usize,
}

impl Default for SessionOptions {
    fn default() -> SessionOptions {
        SessionOptions {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// What one input binding compiles to.
pub(crate) enum Executable {
    Planned(PlannedExecutable),
    /// A schedule loaded on the session's GPU (CUDA, wgpu or Vulkan).
    Gpu(Box<dyn GpuExecutable>),
    /// Shapes depend on data: node-by-node execution, with the kernels built
    /// for each shape kept in `cache` from run to run.
    Dynamic {
        graph: Graph,
        weights: Weights,
        cache: BodyCache,
    },
    /// A GPU target's graph split with the CPU ([`Fallback::Cpu`]).
    Split(Split),
}

impl Executable {
    /// Whether a run is small enough to stay on the calling thread whatever
    /// the session's threads: a planned CPU schedule none of whose steps
    /// would split over `threads`.
    fn serial(&self, threads: usize) -> bool {
        matches!(self, Executable::Planned(p) if p.schedule.serial(threads))
    }

    /// Runs on (ordered, checked) inputs, on the calling thread's pool.
    pub(crate) fn run(&self, ordered: &[&Tensor]) -> Result<Vec<Tensor>> {
        match self {
            Executable::Planned(p) => {
                let refs: Vec<TensorRef> = ordered.iter().map(|t| TensorRef::of(t)).collect();
                p.run(&refs).map_err(Error::from)
            }
            Executable::Gpu(e) => e.run(ordered),
            Executable::Dynamic {
                graph,
                weights,
                cache,
            } => run_graph_cached(
                graph,
                weights,
                ordered.iter().map(|t| (*t).clone()).collect(),
                cache,
            )
            .map_err(Error::from),
            Executable::Split(s) => s.run(ordered, |step, ins| step.exec.run(ins)),
        }
    }
}

/// The segments of a split graph ([`crate::partition`]), each planned for
/// its place, run in order over a table of values.
pub(crate) struct Split {
    steps: Vec<SplitStep>,
    slots: usize,
    preset: Vec<(Slot, Tensor)>,
    outputs: Vec<Slot>,
}

struct SplitStep {
    place: Place,
    /// The ONNX nodes of the segment, for profiles.
    origin: String,
    inputs: Vec<Slot>,
    outputs: Vec<Slot>,
    exec: Executable,
}

impl Split {
    /// Runs every segment with `each` (a run, or a profiled run) and
    /// returns the model's outputs.
    fn run(
        &self,
        inputs: &[&Tensor],
        mut each: impl FnMut(&SplitStep, &[&Tensor]) -> Result<Vec<Tensor>>,
    ) -> Result<Vec<Tensor>> {
        let missing = |s: Slot| Error::Partition(format!("value {s} is read before it is made"));
        let mut values: Vec<Option<Tensor>> = vec![None; self.slots];
        for (v, t) in values.iter_mut().zip(inputs) {
            *v = Some((*t).clone());
        }
        for (s, t) in &self.preset {
            values[*s] = Some(t.clone());
        }
        for step in &self.steps {
            let ins = step
                .inputs
                .iter()
                .map(|&s| values[s].as_ref().ok_or_else(|| missing(s)))
                .collect::<Result<Vec<_>>>()?;
            let outs = each(step, &ins)?;
            for (&s, t) in step.outputs.iter().zip(outs) {
                values[s] = Some(t);
            }
        }
        self.outputs
            .iter()
            .map(|&s| values[s].clone().ok_or_else(|| missing(s)))
            .collect()
    }
}

/// Key of the specialization cache: input shapes and shape-determining values.
type Key = (Vec<Vec<usize>>, Vec<Vec<u8>>);

/// The executables of a session by key, the least recently run dropped
/// past [`crate::Limits::max_specializations`].
/// The most recently run one is also kept beside the map, so that a run
/// with the shapes of the last one (the common case) finds its executable
/// by comparing slices, without building and hashing a key; its entry's
/// time of use is written back when another one takes its place.
#[derive(Default)]
struct Specializations {
    entries: HashMap<Key, (Arc<Executable>, u64)>,
    clock: u64,
    last: Option<(Key, Arc<Executable>)>,
}

impl Specializations {
    /// The last run's executable, if these are its shapes and values.
    fn last(&mut self, shapes: &[&[usize]], values: &[(usize, Tensor)]) -> Option<Arc<Executable>> {
        let ((s, v), e) = self.last.as_ref()?;
        let same = s.len() == shapes.len()
            && s.iter().zip(shapes).all(|(a, b)| a == b)
            && v.len() == values.len()
            && v.iter()
                .zip(values)
                .all(|(a, (_, t))| a.as_slice() == t.bytes());
        if !same {
            return None;
        }
        let e = e.clone();
        self.clock += 1;
        Some(e)
    }

    /// Makes `key` the last run's, writing the clock back to the entry it
    /// replaces.
    fn set_last(&mut self, key: &Key, e: &Arc<Executable>) {
        if let Some((k, _)) = self.last.take() {
            if let Some((_, used)) = self.entries.get_mut(&k) {
                *used = self.clock;
            }
        }
        self.last = Some((key.clone(), e.clone()));
    }

    fn get(&mut self, key: &Key) -> Option<Arc<Executable>> {
        self.clock += 1;
        let (e, used) = self.entries.get_mut(key)?;
        *used = self.clock;
        let e = e.clone();
        self.set_last(key, &e);
        Some(e)
    }

    fn insert(&mut self, key: Key, e: Arc<Executable>, max: u64) {
        self.clock += 1;
        self.set_last(&key, &e);
        self.entries.insert(key, (e, self.clock));
        while self.entries.len() as u64 > max.max(1) {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    if self.last.as_ref().is_some_and(|(l, _)| *l == k) {
                        self.last = None;
                    }
                    self.entries.remove(&k)
                }
                None => break,
            };
        }
    }
}

/// The GPU device contexts sessions run on, each opened on first use. Share
/// one among sessions (a conformance run, a server with several models) so
/// that each does not open its own device.
#[derive(Default)]
pub struct Devices {
    wgpu: OnceLock<Arc<rlx_wgpu::Context>>,
    vulkan: OnceLock<Arc<rlx_vulkan::Context>>,
    cuda: OnceLock<Arc<rlx_cuda::Context>>,
    cuda_options: rlx_cuda::ContextOptions,
    vulkan_options: rlx_vulkan::ContextOptions,
}

impl Devices {
    pub fn new() -> Devices {
        Devices::default()
    }

    /// Devices whose CUDA context, when opened, is made with `options` (the
    /// device ordinal, where compiled kernels are cached on disk).
    pub fn with_cuda_options(options: rlx_cuda::ContextOptions) -> Devices {
        Devices {
            cuda_options: options,
            ..Devices::default()
        }
    }

    /// Devices whose Vulkan context, when opened, is made with `options`
    /// (which device, whether the validation layer checks every call).
    pub fn with_vulkan_options(options: rlx_vulkan::ContextOptions) -> Devices {
        Devices {
            vulkan_options: options,
            ..Devices::default()
        }
    }

    /// Devices whose wgpu context is `ctx`.
    pub fn with_wgpu(ctx: Arc<rlx_wgpu::Context>) -> Devices {
        let d = Devices::default();
        let _ = d.wgpu.set(ctx);
        d
    }

    /// The wgpu context, opened on first use.
    pub fn wgpu(&self) -> Result<Arc<rlx_wgpu::Context>> {
        if let Some(c) = self.wgpu.get() {
            return Ok(c.clone());
        }
        let c = Arc::new(rlx_wgpu::Context::new()?);
        Ok(self.wgpu.get_or_init(|| c).clone())
    }

    /// The Vulkan context, opened on first use.
    pub fn vulkan(&self) -> Result<Arc<rlx_vulkan::Context>> {
        if let Some(c) = self.vulkan.get() {
            return Ok(c.clone());
        }
        let c = Arc::new(rlx_vulkan::Context::with_options(&self.vulkan_options)?);
        Ok(self.vulkan.get_or_init(|| c).clone())
    }

    /// The CUDA context, opened on first use.
    pub fn cuda(&self) -> Result<Arc<rlx_cuda::Context>> {
        if let Some(c) = self.cuda.get() {
            return Ok(c.clone());
        }
        let c = Arc::new(rlx_cuda::Context::with_options(&self.cuda_options)?);
        Ok(self.cuda.get_or_init(|| c).clone())
    }

    /// Opens the device of `target` now (nothing for the CPU), so that a
    /// missing device is an error before a session is made on it.
    pub fn open(&self, target: Target) -> Result<()> {
        match target {
            Target::Cpu => {}
            Target::Cuda => drop(self.cuda()?),
            Target::Wgpu => drop(self.wgpu()?),
            Target::Vulkan => drop(self.vulkan()?),
        }
        Ok(())
    }

    /// Copies `t` to `target`'s device of these contexts: a value any
    /// session on them takes as an input (on the CPU, `t` itself).
    pub fn upload(&self, target: Target, t: &Tensor) -> Result<crate::Value> {
        crate::backend::upload(target, self, t)
    }
}

/// Where a session's kernels run.
pub(crate) enum Threads {
    /// Workers of the session's own; runs happen on the calling thread and
    /// kernels split large work over it and the workers.
    Pool(rlx_cpu::par::Pool),
    /// One thread: the calling one, with every kernel sequential.
    Inline,
}

impl Threads {
    fn new(threads: usize) -> Result<Threads> {
        if threads <= 1 {
            return Ok(Threads::Inline);
        }
        rlx_cpu::par::Pool::new(threads)
            .map(Threads::Pool)
            .map_err(|e| Error::Threads(e.to_string()))
    }

    /// The session's threads.
    pub(crate) fn count(&self) -> usize {
        match self {
            Threads::Pool(pool) => pool.threads(),
            Threads::Inline => 1,
        }
    }

    /// Runs `f` with the session's threads.
    pub(crate) fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        match self {
            Threads::Pool(pool) => pool.install(f),
            Threads::Inline => rlx_cpu::par::inline(f),
        }
    }
}

/// A model ready to run. `Send + Sync`: runs may come from several threads.
pub struct Session {
    model: Arc<CompiledModel>,
    value_inputs: Vec<usize>,
    pub(crate) threads: Threads,
    cache: Mutex<Specializations>,
    /// What the CPU kernels of its plans prepare of the weights (packed
    /// panels), shared by every specialization.
    packs: rlx_cpu::Packs,
    /// The arenas of its plans' runs, shared by every specialization.
    arenas: Arc<rlx_cpu::Arenas>,
    /// The GPU devices of this session (opened on first use unless shared).
    devices: Arc<Devices>,
    /// Sessions of rewritten forms of the model, by form (the decoder's
    /// in-place cache), made once.
    forms: Mutex<HashMap<String, Arc<Session>>>,
}

impl Session {
    pub fn new(model: CompiledModel, options: SessionOptions) -> Result<Session> {
        Session::with_devices(model, options, Arc::new(Devices::new()))
    }

    /// A session on shared GPU devices.
    pub fn with_devices(
        model: CompiledModel,
        options: SessionOptions,
        devices: Arc<Devices>,
    ) -> Result<Session> {
        let threads = Threads::new(options.threads)?;
        let value_inputs = value_inputs(&model.graph);
        Ok(Session {
            model: Arc::new(model),
            value_inputs,
            threads,
            cache: Mutex::new(Specializations::default()),
            packs: rlx_cpu::Packs::new(),
            arenas: Arc::new(rlx_cpu::Arenas::new()),
            devices,
            forms: Mutex::new(HashMap::new()),
        })
    }

    /// A session for a wgpu model on an existing device context.
    pub fn with_wgpu_context(
        model: CompiledModel,
        options: SessionOptions,
        ctx: Arc<rlx_wgpu::Context>,
    ) -> Result<Session> {
        Session::with_devices(model, options, Arc::new(Devices::with_wgpu(ctx)))
    }

    pub fn model(&self) -> &CompiledModel {
        &self.model
    }

    /// The session of the form `name` of this session's model (a graph
    /// `rewrite` makes), on the same devices and with as many threads; made
    /// once, so its plans are kept from one use to the next.
    pub(crate) fn form(
        &self,
        name: &str,
        rewrite: impl FnOnce(&CompiledModel) -> std::result::Result<CompiledModel, String>,
    ) -> std::result::Result<Arc<Session>, String> {
        let mut forms = self.forms.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = forms.get(name) {
            return Ok(s.clone());
        }
        let options = SessionOptions {
            threads: self.threads.count(),
        };
        let s = Session::with_devices(rewrite(&self.model)?, options, self.devices.clone())
            .map(Arc::new)
            .map_err(|e| e.to_string())?;
        forms.insert(name.to_string(), s.clone());
        Ok(s)
    }

    /// The GPU devices the session runs on.
    pub(crate) fn devices(&self) -> &Devices {
        &self.devices
    }

    /// The indices of the inputs whose values shapes depend on.
    pub(crate) fn value_input_indices(&self) -> &[usize] {
        &self.value_inputs
    }

    /// Orders named inputs as the graph declares them, checking names and dtypes.
    pub(crate) fn order<'a>(&self, inputs: &[(&str, &'a Tensor)]) -> Result<Vec<&'a Tensor>> {
        self.order_by(inputs, |t| t.dtype())
    }

    /// Orders named values of any kind (`dtype` says each one's element
    /// type) as the graph declares them, checking names and dtypes.
    pub(crate) fn order_by<'a, T>(
        &self,
        inputs: &[(&str, &'a T)],
        dtype: impl Fn(&T) -> rlx_ir::DType,
    ) -> Result<Vec<&'a T>> {
        let g = &self.model.graph;
        self.place_by(inputs, |t| Some(dtype(t)))?
            .into_iter()
            .zip(g.inputs())
            .map(|(s, id)| s.ok_or_else(|| InputError::Missing(g.node(*id).name.clone()).into()))
            .collect()
    }

    /// Places named values at their graph inputs (`None` where none is
    /// given), checking names, duplicates, and the dtypes `dtype` knows.
    pub(crate) fn place_by<'a, T>(
        &self,
        inputs: &[(&str, &'a T)],
        dtype: impl Fn(&T) -> Option<rlx_ir::DType>,
    ) -> Result<Vec<Option<&'a T>>> {
        // Names compared in place: a run's fixed cost is counted in
        // allocations (the names were cloned twice a run).
        let g = &self.model.graph;
        let ids = g.inputs();
        let mut slots: Vec<Option<&T>> = vec![None; ids.len()];
        for (name, t) in inputs {
            let i = ids
                .iter()
                .position(|id| g.node(*id).name == *name)
                .ok_or_else(|| InputError::Unknown {
                    name: name.to_string(),
                    expected: self.model.input_names(),
                })?;
            if slots[i].replace(*t).is_some() {
                return Err(InputError::Duplicate(name.to_string()).into());
            }
            let want = g.node(g.inputs()[i]).outputs[0].dtype;
            if let Some(got) = dtype(t).filter(|got| *got != want) {
                return Err(InputError::DType {
                    name: name.to_string(),
                    expected: want,
                    got,
                }
                .into());
            }
        }
        Ok(slots)
    }

    /// Runs the model on named inputs; returns the outputs in graph order.
    pub fn run(&self, inputs: &[(&str, &Tensor)]) -> Result<Vec<Tensor>> {
        let ordered = self.order(inputs)?;
        let exec = self.executable(&ordered)?;
        self.run_ordered(&exec, &ordered)
    }

    /// Runs `exec` on (ordered, checked) host inputs with the session's threads.
    pub(crate) fn run_ordered(
        &self,
        exec: &Executable,
        ordered: &[&Tensor],
    ) -> Result<Vec<Tensor>> {
        if exec.serial(self.threads.count()) {
            return rlx_cpu::par::inline(|| exec.run(ordered));
        }
        self.threads.run(|| exec.run(ordered))
    }

    /// The executable for these (ordered, checked) inputs: from the cache,
    /// or specialized, planned and cached now.
    pub(crate) fn executable(&self, ordered: &[&Tensor]) -> Result<Arc<Executable>> {
        let shapes: Vec<&[usize]> = ordered.iter().map(|t| t.dims()).collect();
        self.executable_of(&shapes, self.shape_values(ordered))
    }

    /// The executable for inputs of `shapes` whose shape-determining inputs
    /// hold `values` ([`Session::shape_values`]).
    pub(crate) fn executable_of(
        &self,
        shapes: &[&[usize]],
        values: Vec<(usize, Tensor)>,
    ) -> Result<Arc<Executable>> {
        // A cached executable's shapes were bound (and checked) when it was
        // made.
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = cache.last(shapes, &values) {
            return Ok(e);
        }
        let key: Key = (
            shapes.iter().map(|s| s.to_vec()).collect(),
            values.iter().map(|(_, t)| t.bytes().to_vec()).collect(),
        );
        if let Some(e) = cache.get(&key) {
            return Ok(e);
        }
        drop(cache);
        let bindings = bind_shapes(&self.model.graph, shapes).map_err(InputError::from)?;
        let e = Arc::new(
            self.prepare(&bindings, values)
                .map_err(|e| unfit(&self.model.graph, shapes, e))?,
        );
        let max = self.model.limits.max_specializations;
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, e.clone(), max);
        Ok(e)
    }

    /// The inputs whose values shapes depend on, with their values.
    pub(crate) fn shape_values(&self, ordered: &[&Tensor]) -> Vec<(usize, Tensor)> {
        self.value_inputs
            .iter()
            .map(|&i| (i, ordered[i].clone()))
            .collect()
    }

    /// Runs and returns, per planned step, (kernel label, ONNX origin,
    /// time): host time per CPU step (the median of several runs), device
    /// time (GPU timestamps) per GPU dispatch; `None` when the graph runs
    /// node by node (data-dependent shapes).
    pub fn profile(
        &self,
        inputs: &[(&str, &Tensor)],
    ) -> Result<Option<Vec<(String, String, std::time::Duration)>>> {
        self.run(inputs)?;
        let ordered = self.order(inputs)?;
        let exec = self.executable(&ordered)?;
        if exec.serial(self.threads.count()) {
            return rlx_cpu::par::inline(|| profile(&exec, &ordered));
        }
        self.threads.run(|| profile(&exec, &ordered))
    }

    /// Specializes and optimizes the graph for one input binding; the flag
    /// says whether every shape is now concrete.
    fn specialized(
        &self,
        bindings: &rlx_ir::Bindings,
        values: Vec<(usize, Tensor)>,
    ) -> Result<(Graph, Weights, bool)> {
        let m = &self.model;
        let mut g = m.graph.clone();
        bind_input_values(&mut g, &values)?;
        let mut g = specialize(&g, bindings, Some(&m.weights))?;
        let mut weights = m.weights.clone();
        let passes = crate::compile::pipeline(m.target, m.opt_level, m.precision);
        self.threads.run(|| {
            run_passes(
                &mut g,
                &mut weights,
                m.target,
                &passes,
                verify_by_default(),
                m.fallback,
                None,
            )
        })?;
        m.limits.check(&g)?;
        let concrete = is_static(&g);
        Ok((g, weights, concrete))
    }

    /// The WGSL schedule (wgpu's and Vulkan's) for these inputs, planned for
    /// `caps`, without a device (pure: for snapshots and inspection).
    pub fn wgpu_schedule(
        &self,
        inputs: &[(&str, &Tensor)],
        caps: rlx_wgsl::Caps,
    ) -> Result<rlx_wgsl::Schedule> {
        let ordered = self.order(inputs)?;
        let shapes: Vec<&[usize]> = ordered.iter().map(|t| t.dims()).collect();
        let bindings = bind_shapes(&self.model.graph, &shapes).map_err(InputError::from)?;
        let (g, weights, concrete) = self.specialized(&bindings, self.shape_values(&ordered))?;
        if !concrete {
            return Err(dynamic_shapes(Target::Wgpu, &g));
        }
        let mem = plan_memory_with(&g, &memory_options(Target::Wgpu))?;
        let opts = rlx_wgsl::PlanOptions { caps };
        Ok(rlx_wgsl::plan(&g, &weights, &mem, &opts).map_err(rlx_wgpu::WgpuError::from)?)
    }

    /// The CUDA schedule for these inputs, without a device (pure: for
    /// snapshots, inspection and compile checks).
    pub fn cuda_schedule(&self, inputs: &[(&str, &Tensor)]) -> Result<rlx_cuda::Schedule> {
        let ordered = self.order(inputs)?;
        let shapes: Vec<&[usize]> = ordered.iter().map(|t| t.dims()).collect();
        let bindings = bind_shapes(&self.model.graph, &shapes).map_err(InputError::from)?;
        let (g, weights, concrete) = self.specialized(&bindings, self.shape_values(&ordered))?;
        if !concrete {
            return Err(dynamic_shapes(Target::Cuda, &g));
        }
        let mem = plan_memory_with(&g, &memory_options(Target::Cuda))?;
        let opts = rlx_cuda::PlanOptions {
            tf32: self.model.precision == Precision::Tf32,
            ..rlx_cuda::PlanOptions::default()
        };
        let mut s = rlx_cuda::plan(&g, &weights, &mem, &opts)?;
        if let Some(p) = &self.model.cuda_ptx {
            p.attach(&mut s);
        }
        Ok(s)
    }

    /// Specializes, optimizes and plans the graph for one input binding.
    fn prepare(
        &self,
        bindings: &rlx_ir::Bindings,
        values: Vec<(usize, Tensor)>,
    ) -> Result<Executable> {
        let (g, weights, concrete) = self.specialized(bindings, values)?;
        self.plan_graph(g, weights, concrete)
    }

    /// The specialized graph of these (ordered, checked) inputs, and whether
    /// every shape is concrete.
    pub(crate) fn specialized_for(&self, ordered: &[&Tensor]) -> Result<(Graph, Weights, bool)> {
        let shapes: Vec<&[usize]> = ordered.iter().map(|t| t.dims()).collect();
        let bindings = bind_shapes(&self.model.graph, &shapes).map_err(InputError::from)?;
        self.specialized(&bindings, self.shape_values(ordered))
    }

    /// Plans an optimized graph for the model's target, split with the CPU
    /// where the model's fallback allows and the target cannot run a node.
    pub(crate) fn plan_graph(
        &self,
        g: Graph,
        weights: Weights,
        concrete: bool,
    ) -> Result<Executable> {
        let target = self.model.target;
        if target != Target::Cpu
            && self.model.fallback == Fallback::Cpu
            && !partition::all_on_device(&g, target.backend())
        {
            return self.plan_split(&g, &weights);
        }
        self.plan_on(target, g, weights, concrete)
    }

    /// Plans each segment of `g` split between the target and the CPU.
    fn plan_split(&self, g: &Graph, weights: &Weights) -> Result<Executable> {
        let p = partition::partition(g, weights, self.model.target.backend())
            .map_err(Error::Partition)?;
        let mut steps = Vec::new();
        for s in p.segments {
            let target = match s.place {
                Place::Device => self.model.target,
                Place::Host => Target::Cpu,
            };
            let mut origin: Vec<&str> = Vec::new();
            for id in s.graph.node_ids() {
                let n = s.graph.node(id);
                if !n.op.is_leaf() {
                    origin.extend(n.origin.iter().map(String::as_str));
                }
            }
            origin.dedup();
            let origin = origin.join(", ");
            let concrete = is_static(&s.graph);
            let exec = self.plan_on(target, s.graph, weights.clone(), concrete)?;
            steps.push(SplitStep {
                place: s.place,
                origin,
                inputs: s.inputs,
                outputs: s.outputs,
                exec,
            });
        }
        Ok(Executable::Split(Split {
            steps,
            slots: p.slots,
            preset: p.preset,
            outputs: p.outputs,
        }))
    }

    /// Plans an optimized graph for `target`.
    fn plan_on(
        &self,
        target: Target,
        g: Graph,
        weights: Weights,
        concrete: bool,
    ) -> Result<Executable> {
        if !concrete {
            if target != Target::Cpu {
                return Err(dynamic_shapes(target, &g));
            }
            return Ok(Executable::Dynamic {
                graph: g,
                weights,
                cache: BodyCache::new(self.model.limits.run_limits()),
            });
        }
        let mem = plan_memory_with(&g, &memory_options(target))?;
        self.model.limits.check_arena(mem.arena_bytes)?;
        if target == Target::Cpu {
            let limits = self.model.limits.run_limits();
            let schedule = rlx_cpu::plan_with(&g, &weights, &mem, limits, &self.packs)?;
            // The run's whole arena: its values, the steps' scratch and
            // every thread's region.
            let threads = self.threads.count();
            self.model.limits.check_arena(
                mem.arena_bytes + schedule.scratch_bytes + schedule.per_thread.total(threads),
            )?;
            let arenas = self.arenas.clone();
            return Ok(Executable::Planned(PlannedExecutable::with_arenas(
                schedule, arenas,
            )));
        }
        let loaded = crate::backend::load(target, &self.devices, &self.model, &g, &weights, &mem)?;
        Ok(Executable::Gpu(loaded))
    }

    /// Prepares the run for inputs of these shapes (and values, where a
    /// shape depends on them) now: specializes the graph, plans its memory
    /// and loads its kernels, as the first [`Session::run`] with them would.
    pub fn warm_up(&self, inputs: &[(&str, &Tensor)]) -> Result<()> {
        let ordered = self.order(inputs)?;
        self.executable(&ordered).map(|_| ())
    }

    /// The plan for inputs of these shapes (and values), for inspection; `None`
    /// when shapes depend on data and the graph runs node by node.
    pub fn plan_for(&self, inputs: &[(&str, &Tensor)]) -> Result<Option<PlanInfo>> {
        let ordered = self.order(inputs)?;
        let shapes: Vec<&[usize]> = ordered.iter().map(|t| t.dims()).collect();
        let bindings = bind_shapes(&self.model.graph, &shapes).map_err(InputError::from)?;
        Ok(PlanInfo::of(
            &self.prepare(&bindings, self.shape_values(&ordered))?,
            self.threads.count(),
        ))
    }
}

/// Whether every value of `g` is a tensor of numbers of known shape: a
/// static schedule can be planned. Strings, sequences and optionals have no
/// bytes to plan; a graph with them runs node by node.
fn is_static(g: &Graph) -> bool {
    g.node_ids().into_iter().all(|id| {
        g.node(id)
            .outputs
            .iter()
            .all(|t| t.shape.is_known() && t.is_plain())
    })
}

/// Runs a CPU profile takes the median of, per step.
const PROFILE_RUNS: usize = 9;

/// One profiled step: (kernel label, ONNX origin, time).
pub type Timed = (String, String, std::time::Duration);

/// Runs `exec` once on `ordered`, timing each planned step; `None` when it
/// runs node by node.
fn profile(exec: &Executable, ordered: &[&Tensor]) -> Result<Option<Vec<Timed>>> {
    let p = match exec {
        Executable::Planned(p) => p,
        Executable::Gpu(e) => return Ok(Some(e.profile(ordered)?)),
        Executable::Dynamic { .. } => return Ok(None),
        Executable::Split(split) => {
            // Each segment's steps, prefixed with its place; a segment that
            // runs node by node is one row.
            let mut rows = Vec::new();
            split.run(ordered, |step, ins| {
                let place = step.place.name();
                match profile(&step.exec, ins)? {
                    Some(r) => rows.extend(
                        r.into_iter()
                            .map(|(l, o, t)| (format!("{l} [{place}]"), o, t)),
                    ),
                    None => {
                        let t = std::time::Instant::now();
                        step.exec.run(ins)?;
                        rows.push((
                            format!("node-by-node [{place}]"),
                            step.origin.clone(),
                            t.elapsed(),
                        ));
                    }
                }
                step.exec.run(ins)
            })?;
            return Ok(Some(rows));
        }
    };
    let refs: Vec<TensorRef> = ordered.iter().map(|t| TensorRef::of(t)).collect();
    // Each step's median over several runs: one run's times on many threads
    // swing with the machine.
    let mut runs: Vec<Vec<std::time::Duration>> = Vec::with_capacity(PROFILE_RUNS);
    for _ in 0..PROFILE_RUNS {
        let mut t = Vec::new();
        p.run_timed(&refs, Some(&mut t))?;
        runs.push(t);
    }
    let times = (0..p.schedule.steps.len()).map(|i| {
        let mut ts: Vec<_> = runs.iter().filter_map(|r| r.get(i).copied()).collect();
        ts.sort();
        ts.get(ts.len() / 2).copied().unwrap_or_default()
    });
    Ok(Some(
        p.schedule
            .steps
            .iter()
            .zip(times)
            .map(|(s, t)| {
                let label = match s.kernel.flops() {
                    Some(f) => {
                        let rate = f as f64 / t.as_secs_f64().max(1e-12) / 1e9;
                        format!("{}, {rate:.1} GFLOP/s", s.kernel.label())
                    }
                    None => s.kernel.label(),
                };
                (label, s.origin.join(", "), t)
            })
            .collect(),
    ))
}

/// A printed schedule and its memory numbers.
#[derive(Debug, Clone)]
pub struct PlanInfo {
    pub schedule: String,
    /// Bytes of the arena (peak of simultaneously live tensors after packing).
    pub arena_bytes: usize,
    /// Bytes a run holds beside the arena's values: on the CPU, the steps'
    /// scratch and every thread's per-thread scratch at the session's
    /// threads (`rlx_cpu::scratch`); a run's memory is `arena_bytes +
    /// scratch_bytes`. Zero on the GPU backends, whose scratch is in the arena.
    pub scratch_bytes: usize,
    /// Sum of all planned tensor sizes.
    pub total_bytes: usize,
    /// What the device's driver reports of each compiled kernel (registers,
    /// spills, instructions), where it reports anything (Vulkan with
    /// `VK_KHR_pipeline_executable_properties`); empty elsewhere.
    pub kernel_statistics: Vec<rlx_vulkan::KernelStatistics>,
}

impl PlanInfo {
    /// The plan of `exec`; `None` when it runs node by node. A split graph
    /// prints each segment's plan under a header naming its place; its
    /// memory is the sum of the segments'.
    fn of(exec: &Executable, threads: usize) -> Option<PlanInfo> {
        Some(match exec {
            Executable::Planned(p) => PlanInfo::of_cpu(&p.schedule, threads),
            Executable::Gpu(e) => e.plan(),
            Executable::Dynamic { .. } => return None,
            Executable::Split(split) => {
                let mut info = PlanInfo {
                    schedule: String::new(),
                    arena_bytes: 0,
                    scratch_bytes: 0,
                    total_bytes: 0,
                    kernel_statistics: Vec::new(),
                };
                for (i, step) in split.steps.iter().enumerate() {
                    let place = step.place.name();
                    let part = PlanInfo::of(&step.exec, threads);
                    let body = part.as_ref().map_or_else(
                        || format!("  node by node: {}\n", step.origin),
                        |p| p.schedule.clone(),
                    );
                    info.schedule += &format!(
                        "segment {i} on the {place} (inputs {:?} -> outputs {:?}):\n{body}",
                        step.inputs, step.outputs
                    );
                    if let Some(p) = part {
                        info.arena_bytes += p.arena_bytes;
                        info.scratch_bytes += p.scratch_bytes;
                        info.total_bytes += p.total_bytes;
                        info.kernel_statistics.extend(p.kernel_statistics);
                    }
                }
                info
            }
        })
    }

    fn of_cpu(s: &Schedule, threads: usize) -> PlanInfo {
        PlanInfo {
            schedule: s.to_string(),
            arena_bytes: s.arena_bytes,
            scratch_bytes: s.scratch_bytes + s.per_thread.total(threads),
            total_bytes: s.total_bytes,
            kernel_statistics: Vec::new(),
        }
    }
}

/// An error of specializing the graph for `shapes` that the shapes cause
/// (shape inference or a node's folding failing on them: the graph passed
/// both for its symbolic shapes), as an input error naming the shapes; any
/// other error as it is.
fn unfit(g: &Graph, shapes: &[&[usize]], e: Error) -> Error {
    use rlx_passes::PassError;
    // A node the target cannot run, or a pass's own failure, is not the
    // inputs' doing.
    let by_shapes = matches!(
        e,
        Error::Infer(_) | Error::Pass(PassError::Infer { .. } | PassError::Node { .. })
    );
    if !by_shapes {
        return e;
    }
    let shapes = g
        .inputs()
        .iter()
        .zip(shapes)
        .map(|(id, dims)| format!("{}: {dims:?}", g.node(*id).name))
        .collect::<Vec<_>>()
        .join(", ");
    InputError::Unfit {
        shapes,
        reason: e.to_string(),
    }
    .into()
}

/// The error of a GPU target meeting shapes that depend on input data.
/// Why a graph `g` that is not static cannot run on a GPU `target`: shapes
/// that depend on data, or values that are no tensors of numbers.
fn dynamic_shapes(target: Target, g: &Graph) -> Error {
    let plain = g
        .node_ids()
        .into_iter()
        .all(|id| g.node(id).outputs.iter().all(rlx_ir::TensorType::is_plain));
    let why = if plain {
        format!("shapes depend on input data; the {target} backend runs only static schedules")
    } else {
        format!(
            "the graph holds strings, sequences or optionals; the {target} backend runs \
             tensors of numbers only"
        )
    };
    match target {
        Target::Cuda => Error::Cuda(rlx_cuda::CudaError::Unsupported(why)),
        Target::Wgpu => Error::Wgpu(rlx_wgpu::WgpuError::Unsupported(why)),
        Target::Vulkan => Error::Vulkan(rlx_vulkan::VulkanError::Unsupported(why)),
        // Not reached: the CPU runs such graphs node by node.
        Target::Cpu => Error::Pipeline(why),
    }
}

/// How the memory of a graph planned for `target` is laid out: the CPU
/// schedule skips concatenations whose inputs are written in place (GPU
/// kernels write only their own outputs); every schedule skips splits whose
/// outputs are views of their input; the CPU and CUDA write a cache update
/// over the cache it reads (WGSL binds a buffer once a dispatch).
fn memory_options(target: Target) -> MemoryOptions {
    MemoryOptions {
        concat_in_place: target == Target::Cpu,
        split_in_place: true,
        scatter_in_place: matches!(target, Target::Cpu | Target::Cuda),
    }
}
