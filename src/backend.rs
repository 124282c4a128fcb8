//! The facade's one view of a GPU backend: a schedule loaded on a device
//! ([`GpuExecutable`]: run, run on device values, profile, print its plan),
//! and the one place that maps a target to its backend ([`load`],
//! [`upload`]). A new GPU backend is an impl of the trait and one arm in
//! each of those two functions; sessions, device I/O, profiles and plan
//! printing go through the trait.

use rlx_gpu::io::{DeviceTensor as Held, Input, Output, Place};
use rlx_ir::{Graph, Tensor, Weights};
use rlx_passes::memory::MemoryPlan;

use crate::compile::{CompiledModel, Precision, Target};
use crate::error::{Error, Result};
use crate::session::{Devices, PlanInfo, Timed};
use crate::value::{DeviceTensor, OnDevice, Value};

/// A schedule loaded on a GPU, as a session uses it.
pub(crate) trait GpuExecutable: Send + Sync {
    /// Runs on host inputs in graph-input order.
    fn run(&self, ordered: &[&Tensor]) -> Result<Vec<Tensor>>;
    /// Runs on host values or device values of this backend's context, and
    /// leaves each output where `run.places` says.
    fn run_values(&self, run: &ValueRun<'_>) -> Result<Vec<Value>>;
    /// One run with each step timed on the device: (kernel, ONNX origin, time).
    fn profile(&self, ordered: &[&Tensor]) -> Result<Vec<Timed>>;
    /// The printed schedule and its memory.
    fn plan(&self) -> PlanInfo;
    /// [`crate::Session::run_kept`] for `holders`: `None` inputs are the
    /// values its last run left, `None` places keep an output in its slot.
    /// Targets that cannot hold values between runs refuse.
    fn run_kept(&self, _holders: &Holders, _run: &KeptRun<'_>) -> Result<Vec<Option<Value>>> {
        Err(Error::Pipeline(
            "a run that keeps its state: this target holds no values between runs".into(),
        ))
    }
    /// Whether `holders`' last run here left a value for input `input`.
    fn holds(&self, _holders: &Holders, _input: usize) -> bool {
        false
    }
}

/// One caller's claims on values its runs leave on GPU targets that hold
/// them ([`crate::RunState`]).
#[derive(Default)]
pub(crate) struct Holders {
    cuda: rlx_cuda::Holder,
}

/// A [`crate::Session::run_kept`] run: inputs in graph order (`None`:
/// kept), their names, and output places (`None`: kept).
pub(crate) struct KeptRun<'a> {
    pub ordered: &'a [Option<&'a Value>],
    pub names: &'a [String],
    pub places: &'a [Option<Place>],
}

/// Plans `g` for the GPU `target` and loads it on that target's device of
/// `devices`.
pub(crate) fn load(
    target: Target,
    devices: &Devices,
    model: &CompiledModel,
    g: &Graph,
    weights: &Weights,
    mem: &MemoryPlan,
) -> Result<Box<dyn GpuExecutable>> {
    Ok(match target {
        Target::Cuda => {
            let ctx = devices.cuda()?;
            let mut opts = ctx.plan_options();
            opts.tf32 |= model.precision == Precision::Tf32;
            let mut schedule = rlx_cuda::plan(g, weights, mem, &opts)?;
            if let Some(p) = &model.cuda_ptx {
                p.attach(&mut schedule);
            }
            let mut exe = rlx_cuda::Executable::new(ctx, schedule)?;
            exe.set_max_loop_iterations(model.limits.max_loop_iterations);
            Box::new(exe)
        }
        Target::Wgpu => {
            let ctx = devices.wgpu()?;
            let opts = rlx_wgsl::PlanOptions { caps: ctx.caps() };
            let schedule =
                rlx_wgsl::plan(g, weights, mem, &opts).map_err(rlx_wgpu::WgpuError::from)?;
            let mut exe = rlx_wgpu::Executable::new(ctx, schedule)?;
            exe.set_max_loop_iterations(model.limits.max_loop_iterations);
            Box::new(exe)
        }
        Target::Vulkan => {
            let ctx = devices.vulkan()?;
            let opts = rlx_wgsl::PlanOptions { caps: ctx.caps() };
            let schedule =
                rlx_wgsl::plan(g, weights, mem, &opts).map_err(rlx_vulkan::VulkanError::from)?;
            let mut exe = rlx_vulkan::Executable::new(ctx, schedule)?;
            exe.set_max_loop_iterations(model.limits.max_loop_iterations);
            Box::new(exe)
        }
        Target::Cpu => return Err(Error::Pipeline("the cpu target has no GPU device".into())),
    })
}

/// Copies `t` to the device of `target` (the host itself for the CPU).
pub(crate) fn upload(target: Target, devices: &Devices, t: &Tensor) -> Result<Value> {
    let on = match target {
        Target::Cpu => return Ok(Value::Host(t.clone())),
        Target::Cuda => OnDevice::Cuda(rlx_cuda::Buffer::upload(&devices.cuda()?, t)?),
        Target::Wgpu => OnDevice::Wgpu(rlx_wgpu::Buffer::upload(&devices.wgpu()?, t)?),
        Target::Vulkan => OnDevice::Vulkan(rlx_vulkan::Buffer::upload(&devices.vulkan()?, t)?),
    };
    Ok(Value::Device(DeviceTensor(on)))
}

/// A run's inputs (graph order, with their names) and output places.
pub(crate) struct ValueRun<'a> {
    pub ordered: &'a [&'a Value],
    pub names: &'a [String],
    pub places: &'a [Place],
}

impl ValueRun<'_> {
    /// Runs through a backend's `run_io`: host values as they are, device
    /// tensors `mine` accepts (one of another target is an error naming the
    /// input), device outputs wrapped by `wrap`.
    fn through<B, E>(
        &self,
        target: Target,
        mine: impl Fn(&OnDevice) -> Option<&Held<B>>,
        wrap: impl Fn(Held<B>) -> OnDevice,
        run_io: impl FnOnce(&[Input<'_, B>], &[Place]) -> std::result::Result<Vec<Output<B>>, E>,
    ) -> Result<Vec<Value>>
    where
        Error: From<E>,
    {
        let ins = self
            .ordered
            .iter()
            .zip(self.names)
            .map(|(v, name)| match v {
                Value::Host(t) => Ok(Input::Host(t)),
                Value::Device(d) => match mine(&d.0) {
                    Some(t) => Ok(Input::Device(t)),
                    None => Err(crate::device_io::elsewhere(name, d, target)),
                },
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(run_io(&ins, self.places)?
            .into_iter()
            .map(|o| match o {
                Output::Host(t) => Value::Host(t),
                Output::Device(t) => Value::Device(DeviceTensor(wrap(t))),
            })
            .collect())
    }
}

impl GpuExecutable for rlx_cuda::Executable {
    fn run(&self, ordered: &[&Tensor]) -> Result<Vec<Tensor>> {
        Ok(rlx_cuda::Executable::run(self, ordered)?)
    }

    fn run_kept(&self, holders: &Holders, run: &KeptRun<'_>) -> Result<Vec<Option<Value>>> {
        let ins = run
            .ordered
            .iter()
            .zip(run.names)
            .map(|(v, name)| match v {
                None => Ok(None),
                Some(Value::Host(t)) => Ok(Some(Input::Host(t))),
                Some(Value::Device(d)) => match &d.0 {
                    OnDevice::Cuda(t) => Ok(Some(Input::Device(t))),
                    _ => Err(crate::device_io::elsewhere(name, d, Target::Cuda)),
                },
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(
            rlx_cuda::Executable::run_kept(self, &holders.cuda, &ins, run.places)?
                .into_iter()
                .map(|o| {
                    o.map(|o| match o {
                        Output::Host(t) => Value::Host(t),
                        Output::Device(t) => Value::Device(DeviceTensor(OnDevice::Cuda(t))),
                    })
                })
                .collect(),
        )
    }

    fn holds(&self, holders: &Holders, input: usize) -> bool {
        rlx_cuda::Executable::holds(self, &holders.cuda, input)
    }

    fn run_values(&self, run: &ValueRun<'_>) -> Result<Vec<Value>> {
        run.through(
            Target::Cuda,
            |d| match d {
                OnDevice::Cuda(t) => Some(t),
                _ => None,
            },
            OnDevice::Cuda,
            |ins, places| self.run_io(ins, places),
        )
    }

    fn profile(&self, ordered: &[&Tensor]) -> Result<Vec<Timed>> {
        let times = rlx_cuda::Executable::profile(self, ordered)?;
        Ok(self
            .schedule()
            .launches
            .iter()
            .zip(times)
            .map(|(l, t)| {
                let rate = l.work().rate(t.as_secs_f64());
                (format!("{}, {rate}", l.label()), l.origin().join(", "), t)
            })
            .collect())
    }

    fn plan(&self) -> PlanInfo {
        let s = self.schedule();
        PlanInfo {
            schedule: s.to_string(),
            arena_bytes: s.arena_bytes as usize,
            scratch_bytes: 0,
            total_bytes: s.buffer_bytes as usize,
            kernel_statistics: Vec::new(),
        }
    }
}

impl GpuExecutable for rlx_wgpu::Executable {
    fn run(&self, ordered: &[&Tensor]) -> Result<Vec<Tensor>> {
        Ok(rlx_wgpu::Executable::run(self, ordered)?)
    }

    fn run_values(&self, run: &ValueRun<'_>) -> Result<Vec<Value>> {
        run.through(
            Target::Wgpu,
            |d| match d {
                OnDevice::Wgpu(t) => Some(t),
                _ => None,
            },
            OnDevice::Wgpu,
            |ins, places| self.run_io(ins, places),
        )
    }

    fn profile(&self, ordered: &[&Tensor]) -> Result<Vec<Timed>> {
        Ok(wgsl_rows(
            &self.schedule,
            rlx_wgpu::Executable::profile(self, ordered)?,
        ))
    }

    fn plan(&self) -> PlanInfo {
        wgsl_plan(&self.schedule)
    }
}

impl GpuExecutable for rlx_vulkan::Executable {
    fn run(&self, ordered: &[&Tensor]) -> Result<Vec<Tensor>> {
        Ok(rlx_vulkan::Executable::run(self, ordered)?)
    }

    fn run_values(&self, run: &ValueRun<'_>) -> Result<Vec<Value>> {
        run.through(
            Target::Vulkan,
            |d| match d {
                OnDevice::Vulkan(t) => Some(t),
                _ => None,
            },
            OnDevice::Vulkan,
            |ins, places| self.run_io(ins, places),
        )
    }

    fn profile(&self, ordered: &[&Tensor]) -> Result<Vec<Timed>> {
        Ok(wgsl_rows(
            &self.schedule,
            rlx_vulkan::Executable::profile(self, ordered)?,
        ))
    }

    fn plan(&self) -> PlanInfo {
        PlanInfo {
            kernel_statistics: self.kernel_statistics().to_vec(),
            ..wgsl_plan(&self.schedule)
        }
    }
}

/// A WGSL schedule's profile rows: pipeline, ONNX origin, device time.
fn wgsl_rows(s: &rlx_wgsl::Schedule, times: Vec<std::time::Duration>) -> Vec<Timed> {
    s.dispatches
        .iter()
        .zip(times)
        .map(|(d, t)| {
            let name = s.pipelines.get(d.pipeline).map_or("?", |p| &p.name);
            (name.to_string(), d.origin.join(", "), t)
        })
        .collect()
}

fn wgsl_plan(s: &rlx_wgsl::Schedule) -> PlanInfo {
    PlanInfo {
        schedule: s.to_string(),
        arena_bytes: s.arena_bytes as usize,
        scratch_bytes: 0,
        total_bytes: s.buffer_bytes as usize,
        kernel_statistics: Vec::new(),
    }
}
