//! The device half: an explicit [`Context`] (adapter, device, queue; no
//! process-wide state) and [`Executable`], which builds the storage buffer,
//! pipelines and bind groups once, and runs a schedule with one compute pass
//! and one submission, reading outputs back through a reused staging buffer.

use std::num::NonZeroU64;
use std::sync::{Arc, Mutex};

use rlx_ir::lend::{LendPool, LENT_BYTES};
use rlx_ir::tensor::AlignedBuf;
use rlx_ir::Tensor;

use rlx_gpu::io::{host_inputs, Input, Output, Place};

use crate::buffer::{Buffer, DeviceTensor};
use crate::profile::Timer;
use crate::{Caps, WgpuError};
use rlx_wgsl::schedule::{Schedule, PARAMS_ALIGN};

/// An adapter and its device: create once, share between executables.
pub struct Context {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    /// The adapter's name and backend, for reports.
    pub adapter: String,
    /// What the adapter says of itself: name, driver, device type.
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    /// Whether the device writes timestamps (per-dispatch profiles).
    pub timestamps: bool,
}

fn dev(e: impl std::fmt::Display) -> WgpuError {
    WgpuError::Device(e.to_string())
}

impl Context {
    /// The first Vulkan adapter (high performance preferred), or `Unavailable`.
    pub fn new() -> Result<Context, WgpuError> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: wgpu::Backends::VULKAN,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        }))
        .map_err(|e| WgpuError::Unavailable(e.to_string()))?;
        let info = adapter.get_info();
        let limits = adapter.limits();
        let timestamps = adapter.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("rlx-wgpu"),
            required_features: if timestamps {
                wgpu::Features::TIMESTAMP_QUERY
            } else {
                wgpu::Features::empty()
            },
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| WgpuError::Unavailable(e.to_string()))?;
        Ok(Context {
            device,
            queue,
            adapter: format!("{} ({:?})", info.name, info.backend),
            info,
            limits,
            timestamps,
        })
    }

    /// Whether the adapter is a CPU (a software rasterizer such as Mesa's
    /// lavapipe or SwiftShader): it runs, but far slower than a GPU.
    pub fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    /// The adapter in one line: name, driver, backend, and whether it is
    /// hardware or software.
    pub fn describe(&self) -> String {
        let i = &self.info;
        let kind = match i.device_type {
            wgpu::DeviceType::Cpu => "software (CPU)",
            wgpu::DeviceType::DiscreteGpu => "discrete GPU",
            wgpu::DeviceType::IntegratedGpu => "integrated GPU",
            wgpu::DeviceType::VirtualGpu => "virtual GPU",
            wgpu::DeviceType::Other => "unknown device type",
        };
        let driver = [i.driver.as_str(), i.driver_info.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        format!(
            "{}: {kind} through {:?}, driver {}",
            i.name,
            i.backend,
            if driver.is_empty() {
                "unnamed"
            } else {
                &driver
            }
        )
    }

    /// What plans for this device may assume.
    pub fn caps(&self) -> Caps {
        Caps {
            max_binding: u64::from(self.limits.max_storage_buffer_binding_size).min(1 << 30),
        }
    }
}

/// A schedule loaded on a device, ready to run (runs are serialized).
pub struct Executable {
    ctx: Arc<Context>,
    pub schedule: Schedule,
    buffer: wgpu::Buffer,
    pipelines: Vec<wgpu::ComputePipeline>,
    bind_groups: Vec<wgpu::BindGroup>,
    /// Output offsets in the staging buffer, and its size.
    staging_at: Vec<u64>,
    staging: Mutex<wgpu::Buffer>,
    /// Where control flow reads conditions and trip counts back.
    readback: wgpu::Buffer,
    /// Buffers of large host outputs, back when their tensors drop: a
    /// mapped wgpu buffer cannot outlive its view, so outputs are copied
    /// out of the staging, but into memory that does not fault in anew.
    lent: Arc<LendPool<AlignedBuf>>,
    /// Rounds one loop may run ([`Executable::set_max_loop_iterations`]).
    max_loop_iterations: u64,
}

pub(crate) fn pad4(b: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if b.len() % 4 == 0 {
        b.into()
    } else {
        let mut v = b.to_vec();
        v.resize(b.len().next_multiple_of(4), 0);
        v.into()
    }
}

impl Executable {
    /// Creates the buffer (constants uploaded), pipelines and bind groups.
    pub fn new(ctx: Arc<Context>, schedule: Schedule) -> Result<Executable, WgpuError> {
        let d = &ctx.device;
        if schedule.buffer_bytes > ctx.limits.max_buffer_size {
            return Err(WgpuError::Device(format!(
                "the model needs a {} byte buffer; the device allows {}",
                schedule.buffer_bytes, ctx.limits.max_buffer_size
            )));
        }
        if u64::from(ctx.limits.min_storage_buffer_offset_alignment) > PARAMS_ALIGN
            || schedule.max_binding > u64::from(ctx.limits.max_storage_buffer_binding_size)
        {
            return Err(WgpuError::Device(
                "the schedule was planned for other device limits".into(),
            ));
        }
        if schedule
            .dispatches
            .iter()
            .any(|x| x.pipeline >= schedule.pipelines.len() || x.windows.len() > 4)
        {
            return Err(WgpuError::Internal(
                "a dispatch names no pipeline or too many windows".into(),
            ));
        }
        let scope = d.push_error_scope(wgpu::ErrorFilter::Validation);
        let buffer = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rlx arena"),
            size: schedule.buffer_bytes,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        for c in &schedule.consts {
            ctx.queue.write_buffer(&buffer, c.offset, &pad4(&c.bytes));
        }
        let (poffs, psize) = schedule.params_layout();
        let mut pbytes = vec![0u8; psize as usize];
        for (disp, &o) in schedule.dispatches.iter().zip(&poffs) {
            let b = disp.param_bytes();
            if let Some(dst) = pbytes.get_mut(o as usize..o as usize + b.len()) {
                dst.copy_from_slice(&b);
            }
        }
        let params = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rlx params"),
            size: psize,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        ctx.queue.write_buffer(&params, 0, &pbytes);
        let storage = |binding, read_only| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let bgl = d.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("rlx layout"),
            entries: &[
                storage(0, false),
                storage(1, false),
                storage(2, false),
                storage(3, false),
                storage(4, true),
            ],
        });
        let layout = d.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("rlx pipeline layout"),
            bind_group_layouts: &[Some(&bgl)],
            immediate_size: 0,
        });
        let mut pipelines = Vec::with_capacity(schedule.pipelines.len());
        for p in &schedule.pipelines {
            let module = d.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(&p.name),
                source: wgpu::ShaderSource::Wgsl(p.source.as_str().into()),
            });
            pipelines.push(d.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&p.name),
                layout: Some(&layout),
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            }));
        }
        let mut bind_groups = Vec::with_capacity(schedule.dispatches.len());
        for (disp, &o) in schedule.dispatches.iter().zip(&poffs) {
            let window = |i: usize| {
                let w = disp
                    .windows
                    .get(i)
                    .or(disp.windows.first())
                    .copied()
                    .unwrap_or(rlx_wgsl::schedule::Range {
                        offset: 0,
                        bytes: schedule.buffer_bytes,
                    });
                wgpu::BindGroupEntry {
                    binding: i as u32,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &buffer,
                        offset: w.offset,
                        size: NonZeroU64::new(w.bytes),
                    }),
                }
            };
            bind_groups.push(d.create_bind_group(&wgpu::BindGroupDescriptor {
                label: None,
                layout: &bgl,
                entries: &[
                    window(0),
                    window(1),
                    window(2),
                    window(3),
                    wgpu::BindGroupEntry {
                        binding: 4,
                        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer: &params,
                            offset: o,
                            size: NonZeroU64::new(disp.param_bytes().len() as u64),
                        }),
                    },
                ],
            }));
        }
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(WgpuError::Device(format!("loading the schedule: {e}")));
        }
        let mut staging_at = Vec::new();
        let mut at = 0u64;
        for o in &schedule.outputs {
            staging_at.push(at);
            at += o.bytes.next_multiple_of(4);
        }
        let staging = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rlx staging"),
            size: at.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let readback = d.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rlx readback"),
            size: READBACK,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let large = schedule
            .outputs
            .iter()
            .filter(|o| o.bytes as usize >= LENT_BYTES)
            .count();
        Ok(Executable {
            ctx,
            schedule,
            buffer,
            pipelines,
            bind_groups,
            staging_at,
            staging: Mutex::new(staging),
            readback,
            lent: LendPool::new(large),
            max_loop_iterations: rlx_gpu::walk::MAX_ROUNDS,
        })
    }

    /// The most rounds one loop may run (a trip count past it is an error
    /// naming the loop) [default: `rlx_gpu::walk::MAX_ROUNDS`].
    pub fn set_max_loop_iterations(&mut self, n: u64) {
        self.max_loop_iterations = n;
    }

    /// Runs on host inputs in graph-input order (dtypes and shapes checked
    /// first) and returns host outputs.
    pub fn run(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>, WgpuError> {
        host_outputs(self.execute(&host_inputs(inputs), &self.host_places(), None)?)
    }

    /// Runs on inputs in graph-input order, host tensors or device tensors
    /// of this executable's context, and leaves output `i` at `places[i]`.
    pub fn run_io(
        &self,
        inputs: &[Input<'_, Buffer>],
        places: &[Place],
    ) -> Result<Vec<Output<Buffer>>, WgpuError> {
        self.execute(inputs, places, None)
    }

    /// Runs once with a GPU timestamp around every dispatch; returns the
    /// device time of each dispatch (summed over loop iterations), indexed
    /// as [`Schedule::dispatches`].
    pub fn profile(&self, inputs: &[&Tensor]) -> Result<Vec<std::time::Duration>, WgpuError> {
        let mut timer = Timer::new(&self.ctx, self.schedule.dispatches.len())?;
        self.execute(&host_inputs(inputs), &self.host_places(), Some(&mut timer))?;
        timer.finish(&self.ctx)
    }

    fn host_places(&self) -> Vec<Place> {
        vec![Place::Host; self.schedule.outputs.len()]
    }

    fn execute(
        &self,
        inputs: &[Input<'_, Buffer>],
        places: &[Place],
        timer: Option<&mut Timer>,
    ) -> Result<Vec<Output<Buffer>>, WgpuError> {
        let s = &self.schedule;
        rlx_gpu::io::check_run(&s.inputs, s.outputs.len(), inputs, places, "wgpu", |b| {
            Arc::ptr_eq(b.context(), &self.ctx)
        })
        .map_err(WgpuError::from)?;
        // One run at a time: runs share the arena and the staging buffer.
        let staging = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        let (d, q) = (&self.ctx.device, &self.ctx.queue);
        let scope = d.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut enc = self.encoder();
        for (input, slot) in inputs.iter().zip(&s.inputs) {
            match input {
                Input::Host(t) if !t.bytes().is_empty() => {
                    q.write_buffer(&self.buffer, slot.offset, &pad4(t.bytes()));
                }
                // Planned slots are padded to 4 bytes, as are device tensors.
                Input::Device(t) if t.bytes() > 0 => enc.copy_buffer_to_buffer(
                    t.buffer().raw(),
                    0,
                    &self.buffer,
                    slot.offset,
                    (t.bytes() as u64).next_multiple_of(4),
                ),
                _ => {}
            }
        }
        let mut run = Run {
            exe: self,
            enc,
            readback: &self.readback,
            since_submit: 0,
            timer,
            pending: Vec::new(),
        };
        rlx_gpu::walk::walk(&s.steps, &mut run, self.max_loop_iterations)?;
        run.flush()?;
        let mut enc = run.enc;
        let mut kept = Vec::with_capacity(places.len());
        for ((o, &at), place) in s.outputs.iter().zip(&self.staging_at).zip(places) {
            let keep = match place {
                Place::Host => None,
                Place::Device => Some(Buffer::alloc(&self.ctx, o.bytes)?),
            };
            if o.bytes > 0 {
                let (dst, dst_at) = match &keep {
                    Some(b) => (b.raw(), 0),
                    None => (&*staging, at),
                };
                enc.copy_buffer_to_buffer(
                    &self.buffer,
                    o.offset,
                    dst,
                    dst_at,
                    o.bytes.next_multiple_of(4),
                );
            }
            kept.push(keep);
        }
        q.submit([enc.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        d.poll(wgpu::PollType::wait_indefinitely()).map_err(dev)?;
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(WgpuError::Device(format!("running the schedule: {e}")));
        }
        rx.recv().map_err(dev)?.map_err(dev)?;
        let mut outs = Vec::with_capacity(s.outputs.len());
        {
            let view = staging.get_mapped_range(..).map_err(dev)?;
            for ((o, &at), kept) in s.outputs.iter().zip(&self.staging_at).zip(kept) {
                if let Some(b) = kept {
                    outs.push(Output::Device(DeviceTensor::new(
                        o.dtype,
                        o.dims.clone(),
                        b,
                    )));
                    continue;
                }
                let bytes = &view[at as usize..(at + o.bytes) as usize];
                let bytes = if bytes.len() >= LENT_BYTES {
                    self.lent.copy(bytes)
                } else {
                    rlx_ir::tensor::Bytes::copy_from(bytes)
                };
                outs.push(Output::Host(
                    Tensor::new(o.dtype, o.dims.clone(), bytes)
                        .map_err(|e| WgpuError::Internal(e.to_string()))?,
                ));
            }
        }
        staging.unmap();
        Ok(outs)
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    fn encoder(&self) -> wgpu::CommandEncoder {
        self.ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("rlx run"),
            })
    }
}

fn host_outputs(outs: Vec<Output<Buffer>>) -> Result<Vec<Tensor>, WgpuError> {
    rlx_gpu::io::host_outputs(outs)
        .ok_or_else(|| WgpuError::Internal("an output left on the device".into()))
}

/// Bytes control flow reads back at once (an i64 trip count at most).
const READBACK: u64 = 8;

/// Loop iterations encoded between submissions when nothing is read back.
const ITERATIONS_PER_SUBMIT: u64 = 256;

/// One run's encoding state: control flow submits and reads back where it must.
struct Run<'a> {
    exe: &'a Executable,
    enc: wgpu::CommandEncoder,
    readback: &'a wgpu::Buffer,
    since_submit: u64,
    /// Set when profiling: each dispatch then runs in its own timed pass.
    timer: Option<&'a mut Timer>,
    /// Dispatches recorded since the last pass, encoded together.
    pending: Vec<usize>,
}

impl rlx_gpu::walk::Walk for Run<'_> {
    type Error = WgpuError;

    /// Dispatches wait in `pending` and share one compute pass.
    fn launch(&mut self, k: usize) -> Result<(), WgpuError> {
        self.pending.push(k);
        Ok(())
    }

    fn read(&mut self, offset: u64) -> Result<[u8; 8], WgpuError> {
        self.flush()?;
        self.read_back(offset)
    }

    fn round(&mut self) -> Result<(), WgpuError> {
        self.since_submit += 1;
        if self.since_submit >= ITERATIONS_PER_SUBMIT {
            self.flush()?;
            self.submit();
        }
        Ok(())
    }

    fn node_error(&self, node: &str, origin: &[String], reason: String) -> WgpuError {
        WgpuError::Node {
            node: node.to_string(),
            origin: origin.to_vec(),
            reason,
        }
    }
}

impl Run<'_> {
    /// Encodes the pending dispatches: one compute pass, or one timed pass
    /// each when profiling.
    fn flush(&mut self) -> Result<(), WgpuError> {
        let pending = std::mem::take(&mut self.pending);
        if pending.is_empty() {
            return Ok(());
        }
        self.dispatch(&pending)
    }

    fn dispatch(&mut self, ks: &[usize]) -> Result<(), WgpuError> {
        if self.timer.is_some() {
            for &k in ks {
                self.timed(k)?;
            }
            return Ok(());
        }
        let exe = self.exe;
        let mut pass = self.enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("rlx schedule"),
            timestamp_writes: None,
        });
        for &k in ks {
            let (Some(disp), Some(bg)) = (exe.schedule.dispatches.get(k), exe.bind_groups.get(k))
            else {
                return Err(WgpuError::Internal("a step names no dispatch".into()));
            };
            let Some(pipeline) = exe.pipelines.get(disp.pipeline) else {
                return Err(WgpuError::Internal("a dispatch names no pipeline".into()));
            };
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, bg, &[]);
            pass.dispatch_workgroups(disp.groups[0], disp.groups[1], disp.groups[2]);
        }
        Ok(())
    }

    /// One dispatch in its own pass, between two timestamps.
    fn timed(&mut self, k: usize) -> Result<(), WgpuError> {
        let exe = self.exe;
        let (Some(disp), Some(bg)) = (exe.schedule.dispatches.get(k), exe.bind_groups.get(k))
        else {
            return Err(WgpuError::Internal("a step names no dispatch".into()));
        };
        let Some(pipeline) = exe.pipelines.get(disp.pipeline) else {
            return Err(WgpuError::Internal("a dispatch names no pipeline".into()));
        };
        let Some(timer) = self.timer.as_deref_mut() else {
            return Ok(());
        };
        if timer.full() {
            timer.flush(&exe.ctx, &mut self.enc)?;
        }
        let writes = timer.writes(k);
        let mut pass = self.enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("rlx timed dispatch"),
            timestamp_writes: Some(writes),
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, bg, &[]);
        pass.dispatch_workgroups(disp.groups[0], disp.groups[1], disp.groups[2]);
        Ok(())
    }

    fn submit(&mut self) {
        let enc = std::mem::replace(&mut self.enc, self.exe.encoder());
        self.exe.ctx.queue.submit([enc.finish()]);
        self.since_submit = 0;
    }

    /// Submits what is encoded and reads [`READBACK`] bytes at `offset`
    /// (4-byte aligned: planned values are) back.
    fn read_back(&mut self, offset: u64) -> Result<[u8; 8], WgpuError> {
        let exe = self.exe;
        let at = offset / 4 * 4;
        let len = READBACK.min(exe.schedule.buffer_bytes.saturating_sub(at)) / 4 * 4;
        self.enc
            .copy_buffer_to_buffer(&exe.buffer, at, self.readback, 0, len);
        self.submit();
        let (tx, rx) = std::sync::mpsc::channel();
        self.readback.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        exe.ctx
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(dev)?;
        rx.recv().map_err(dev)?.map_err(dev)?;
        let mut out = [0u8; 8];
        {
            let view = self.readback.get_mapped_range(..).map_err(dev)?;
            let skip = (offset - at) as usize;
            for (o, b) in out.iter_mut().zip(view.iter().skip(skip)) {
                *o = *b;
            }
        }
        self.readback.unmap();
        Ok(out)
    }
}
