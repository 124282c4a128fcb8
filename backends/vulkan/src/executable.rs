//! A schedule loaded on a device: the arena and the dispatches' parameters
//! in device-local memory (constants uploaded once), one compute pipeline
//! per WGSL source, one descriptor set per dispatch written once, staging
//! buffers for host inputs and outputs, and for a schedule without control
//! flow its dispatches recorded once into a command buffer that every run
//! resubmits between its input and output copies.

use std::sync::{Arc, Mutex};

use ash::vk;
use rlx_gpu::io::{host_inputs, Input, Output, Place};
use rlx_ir::lend::{LendPool, LENT_BYTES};
use rlx_ir::Tensor;
use rlx_wgsl::schedule::{Range, Schedule, Step, PARAMS_ALIGN};

use crate::buffer::{Buffer, DeviceTensor};
use crate::context::Context;
use crate::memory::{Kind, RawBuffer};
use crate::record::{Rec, Timer};
use crate::spirv::spirv;
use crate::{vk_err, VulkanError};

/// A schedule loaded on a device, ready to run (runs are serialized).
pub struct Executable {
    pub(crate) ctx: Arc<Context>,
    pub schedule: Schedule,
    pub(crate) arena: RawBuffer,
    _params: RawBuffer,
    set_layout: vk::DescriptorSetLayout,
    pub(crate) layout: vk::PipelineLayout,
    pub(crate) pipelines: Vec<vk::Pipeline>,
    /// The driver's statistics of each pipeline, where it reports them.
    statistics: Vec<crate::statistics::KernelStatistics>,
    descriptor_pool: vk::DescriptorPool,
    pub(crate) sets: Vec<vk::DescriptorSet>,
    /// The pool of `recorded`, never reset.
    recorded_pool: vk::CommandPool,
    /// The dispatches of a schedule without control flow, recorded once.
    recorded: Option<vk::CommandBuffer>,
    /// Where each input waits in the upload buffer, and each output in the
    /// download buffer.
    upload_at: Vec<u64>,
    download_at: Vec<u64>,
    /// Mapped staging buffers lent to large host outputs.
    lent: Arc<LendPool<RawBuffer>>,
    state: Mutex<State>,
    /// Rounds one loop may run ([`Executable::set_max_loop_iterations`]).
    pub(crate) max_loop_iterations: u64,
}

/// What one run uses, behind the executable's lock.
pub(crate) struct State {
    pub(crate) pool: vk::CommandPool,
    /// Command buffers of `pool`, reused run after run.
    pub(crate) cmds: Vec<vk::CommandBuffer>,
    pub(crate) fence: vk::Fence,
    upload: RawBuffer,
    download: RawBuffer,
    /// Where control flow reads a condition or trip count back.
    pub(crate) readback: RawBuffer,
}

// SAFETY: Vulkan handles; the command pool and its buffers, the fence and the
// staging buffers are used only under the `state` lock.
unsafe impl Send for Executable {}
unsafe impl Sync for Executable {}

/// Bytes control flow reads back at once (an i64 trip count at most).
pub(crate) const READBACK: u64 = 8;

impl Executable {
    /// Uploads the constants and parameters, builds the pipelines and
    /// descriptor sets, and records the dispatches when they never change.
    pub fn new(ctx: Arc<Context>, schedule: Schedule) -> Result<Executable, VulkanError> {
        check_limits(&ctx, &schedule)?;
        let d = &ctx.device;
        let arena = RawBuffer::new(&ctx, schedule.buffer_bytes, Kind::Device)?;
        let consts: Vec<(u64, &[u8])> = schedule
            .consts
            .iter()
            .map(|c| (c.offset, c.bytes.as_slice()))
            .collect();
        arena.upload_many(&consts)?;
        let (poffs, psize) = schedule.params_layout();
        let mut pbytes = vec![0u8; psize as usize];
        for (disp, &o) in schedule.dispatches.iter().zip(&poffs) {
            let b = disp.param_bytes();
            if let Some(dst) = pbytes.get_mut(o as usize..o as usize + b.len()) {
                dst.copy_from_slice(&b);
            }
        }
        let params = RawBuffer::new(&ctx, psize, Kind::Device)?;
        params.upload(0, &pbytes)?;
        let mut exe = Executable {
            ctx: ctx.clone(),
            arena,
            _params: params,
            set_layout: vk::DescriptorSetLayout::null(),
            layout: vk::PipelineLayout::null(),
            pipelines: Vec::new(),
            statistics: Vec::new(),
            descriptor_pool: vk::DescriptorPool::null(),
            sets: Vec::new(),
            recorded_pool: vk::CommandPool::null(),
            recorded: None,
            upload_at: Vec::new(),
            download_at: Vec::new(),
            lent: LendPool::new(
                schedule
                    .outputs
                    .iter()
                    .filter(|o| o.bytes as usize >= LENT_BYTES)
                    .count(),
            ),
            state: Mutex::new(State::new(&ctx, &schedule)?),
            schedule,
            max_loop_iterations: rlx_gpu::walk::MAX_ROUNDS,
        };
        // From here on `exe`'s `Drop` destroys whatever was made.
        exe.build_pipelines()?;
        exe.write_sets(&poffs)?;
        exe.upload_at = offsets(exe.schedule.inputs.iter().map(|s| s.bytes));
        exe.download_at = offsets(exe.schedule.outputs.iter().map(|s| s.bytes));
        let straight = exe
            .schedule
            .steps
            .iter()
            .all(|s| matches!(s, Step::Dispatch(_)));
        if straight && !exe.schedule.steps.is_empty() {
            exe.record_once()?;
        }
        let _ = d;
        ctx.check_validation()?;
        Ok(exe)
    }

    /// The most rounds one loop may run (a trip count past it is an error
    /// naming the loop) [default: `rlx_gpu::walk::MAX_ROUNDS`].
    pub fn set_max_loop_iterations(&mut self, n: u64) {
        self.max_loop_iterations = n;
    }

    fn build_pipelines(&mut self) -> Result<(), VulkanError> {
        let d = &self.ctx.device;
        let bindings: Vec<vk::DescriptorSetLayoutBinding> = (0..5)
            .map(|b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        // SAFETY: creation calls on a live device; `Drop` destroys each.
        self.set_layout = unsafe {
            d.create_descriptor_set_layout(
                &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                None,
            )
        }
        .map_err(vk_err("creating the descriptor set layout"))?;
        let set_layouts = [self.set_layout];
        self.layout = unsafe {
            d.create_pipeline_layout(
                &vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts),
                None,
            )
        }
        .map_err(vk_err("creating the pipeline layout"))?;
        for p in &self.schedule.pipelines {
            let words = spirv(&self.ctx, &p.name, &p.source)
                .map_err(|e| VulkanError::Internal(format!("translating WGSL to SPIR-V: {e}")))?;
            let module = unsafe {
                d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&words), None)
            }
            .map_err(vk_err("creating a shader module"))?;
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(c"main");
            let flags = if self.ctx.statistics.is_some() {
                vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR
            } else {
                vk::PipelineCreateFlags::empty()
            };
            let info = [vk::ComputePipelineCreateInfo::default()
                .flags(flags)
                .stage(stage)
                .layout(self.layout)];
            let made = unsafe { d.create_compute_pipelines(self.ctx.pipeline_cache, &info, None) };
            unsafe { d.destroy_shader_module(module, None) };
            let pipeline = made.map_err(|(_, e)| {
                VulkanError::Device(format!("creating pipeline {}: {e}", p.name))
            })?;
            if let (Some(loader), Some(&made)) = (&self.ctx.statistics, pipeline.first()) {
                self.statistics
                    .push(crate::statistics::of(loader, made, &p.name));
            }
            self.pipelines.extend(pipeline);
        }
        Ok(())
    }

    fn write_sets(&mut self, poffs: &[u64]) -> Result<(), VulkanError> {
        let d = &self.ctx.device;
        let n = self.schedule.dispatches.len() as u32;
        let sizes = [vk::DescriptorPoolSize {
            ty: vk::DescriptorType::STORAGE_BUFFER,
            descriptor_count: 5 * n.max(1),
        }];
        self.descriptor_pool = unsafe {
            d.create_descriptor_pool(
                &vk::DescriptorPoolCreateInfo::default()
                    .max_sets(n.max(1))
                    .pool_sizes(&sizes),
                None,
            )
        }
        .map_err(vk_err("creating the descriptor pool"))?;
        if n == 0 {
            return Ok(());
        }
        let layouts = vec![self.set_layout; n as usize];
        self.sets = unsafe {
            d.allocate_descriptor_sets(
                &vk::DescriptorSetAllocateInfo::default()
                    .descriptor_pool(self.descriptor_pool)
                    .set_layouts(&layouts),
            )
        }
        .map_err(vk_err("allocating descriptor sets"))?;
        let whole = Range {
            offset: 0,
            bytes: self.schedule.buffer_bytes,
        };
        let mut infos: Vec<[vk::DescriptorBufferInfo; 5]> = Vec::with_capacity(n as usize);
        for (disp, &o) in self.schedule.dispatches.iter().zip(poffs) {
            let window = |i: usize| {
                let w = disp
                    .windows
                    .get(i)
                    .or(disp.windows.first())
                    .unwrap_or(&whole);
                vk::DescriptorBufferInfo {
                    buffer: self.arena.buffer,
                    offset: w.offset,
                    range: w.bytes.next_multiple_of(4).max(4),
                }
            };
            infos.push([
                window(0),
                window(1),
                window(2),
                window(3),
                vk::DescriptorBufferInfo {
                    buffer: self._params.buffer,
                    offset: o,
                    range: (disp.param_bytes().len() as u64).max(4),
                },
            ]);
        }
        let mut writes = Vec::with_capacity(5 * n as usize);
        for (set, info) in self.sets.iter().zip(&infos) {
            for (b, one) in info.iter().enumerate() {
                writes.push(
                    vk::WriteDescriptorSet::default()
                        .dst_set(*set)
                        .dst_binding(b as u32)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .buffer_info(std::slice::from_ref(one)),
                );
            }
        }
        // SAFETY: every set, buffer and info outlives the call.
        unsafe { d.update_descriptor_sets(&writes, &[]) };
        Ok(())
    }

    /// Records the dispatches of a straight-line schedule, with the plan's
    /// barriers, into a command buffer of their own.
    fn record_once(&mut self) -> Result<(), VulkanError> {
        let d = &self.ctx.device;
        self.recorded_pool = unsafe {
            d.create_command_pool(
                &vk::CommandPoolCreateInfo::default().queue_family_index(self.ctx.family),
                None,
            )
        }
        .map_err(vk_err("creating a command pool"))?;
        let cmd = unsafe {
            d.allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(self.recorded_pool)
                    .level(vk::CommandBufferLevel::PRIMARY)
                    .command_buffer_count(1),
            )
        }
        .map_err(vk_err("allocating a command buffer"))?[0];
        unsafe { d.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default()) }
            .map_err(vk_err("recording commands"))?;
        for step in &self.schedule.steps {
            if let Step::Dispatch(k) = step {
                crate::record::encode(self, cmd, *k, false)?;
            }
        }
        unsafe { d.end_command_buffer(cmd) }.map_err(vk_err("recording commands"))?;
        self.recorded = Some(cmd);
        Ok(())
    }

    /// Runs on host inputs in graph-input order (dtypes and shapes checked
    /// first) and returns host outputs.
    pub fn run(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>, VulkanError> {
        host_outputs(self.execute(&host_inputs(inputs), &self.host_places(), None)?)
    }

    /// Runs on inputs in graph-input order, host tensors or device tensors
    /// of this executable's context, and leaves output `i` at `places[i]`.
    pub fn run_io(
        &self,
        inputs: &[Input<'_, Buffer>],
        places: &[Place],
    ) -> Result<Vec<Output<Buffer>>, VulkanError> {
        self.execute(inputs, places, None)
    }

    /// The driver's statistics of each pipeline (registers, spills,
    /// instructions: whatever it reports), in [`Schedule::pipelines`]'
    /// order; empty where the device lacks
    /// `VK_KHR_pipeline_executable_properties`.
    pub fn kernel_statistics(&self) -> &[crate::KernelStatistics] {
        &self.statistics
    }

    /// Runs once with timestamps around every dispatch; returns the device
    /// time of each dispatch (summed over loop iterations), indexed as
    /// [`Schedule::dispatches`].
    pub fn profile(&self, inputs: &[&Tensor]) -> Result<Vec<std::time::Duration>, VulkanError> {
        let mut timer = Timer::new(&self.ctx, self.schedule.dispatches.len())?;
        self.execute(&host_inputs(inputs), &self.host_places(), Some(&mut timer))?;
        Ok(timer.totals())
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    fn host_places(&self) -> Vec<Place> {
        vec![Place::Host; self.schedule.outputs.len()]
    }

    fn execute(
        &self,
        inputs: &[Input<'_, Buffer>],
        places: &[Place],
        timer: Option<&mut Timer>,
    ) -> Result<Vec<Output<Buffer>>, VulkanError> {
        let s = &self.schedule;
        rlx_gpu::io::check_run(&s.inputs, s.outputs.len(), inputs, places, "Vulkan", |b| {
            Arc::ptr_eq(b.context(), &self.ctx)
        })
        .map_err(VulkanError::from)?;
        // One run at a time: runs share the arena and the staging buffers.
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let d = &self.ctx.device;
        for ((input, slot), &at) in inputs.iter().zip(&s.inputs).zip(&self.upload_at) {
            if let Input::Host(t) = input {
                state.upload.write(at, t.bytes())?;
                let _ = slot;
            }
        }
        let upload = state.upload.buffer;
        let download = state.download.buffer;
        let mut rec = Rec::begin(self, &mut state, timer)?;
        let cmd = rec.cmd();
        for ((input, slot), &at) in inputs.iter().zip(&s.inputs).zip(&self.upload_at) {
            let (src, src_offset, bytes) = match input {
                Input::Host(t) => (upload, at, t.bytes().len()),
                Input::Device(t) => (t.buffer().raw().buffer, 0, t.bytes()),
            };
            if bytes > 0 {
                let copy = [vk::BufferCopy {
                    src_offset,
                    dst_offset: slot.offset,
                    size: (bytes as u64).next_multiple_of(4),
                }];
                // SAFETY: both ranges lie in their buffers (slots are planned
                // and padded to 4 bytes, as are staging and device tensors).
                unsafe { d.cmd_copy_buffer(cmd, src, self.arena.buffer, &copy) };
            }
        }
        rec.barrier(
            vk::PipelineStageFlags::TRANSFER,
            vk::AccessFlags::TRANSFER_WRITE,
            vk::PipelineStageFlags::COMPUTE_SHADER,
            vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE,
        );
        match self.recorded {
            Some(recorded) if !rec.timed() => rec.append(recorded)?,
            _ => rec.steps(&s.steps)?,
        }
        rec.barrier(
            vk::PipelineStageFlags::COMPUTE_SHADER,
            vk::AccessFlags::SHADER_WRITE,
            vk::PipelineStageFlags::TRANSFER,
            vk::AccessFlags::TRANSFER_READ,
        );
        let cmd = rec.cmd();
        let mut kept = Vec::with_capacity(places.len());
        for ((o, &at), place) in s.outputs.iter().zip(&self.download_at).zip(places) {
            let n = o.bytes as usize;
            let keep = match place {
                Place::Host if n >= LENT_BYTES => self
                    .lent
                    .take(n, |n| RawBuffer::lendable(&self.ctx, n))
                    .map(Landed::Lent),
                Place::Host => None,
                Place::Device => Some(Landed::Device(Buffer::alloc(&self.ctx, o.bytes)?)),
            };
            if o.bytes > 0 {
                let (dst, dst_offset) = match &keep {
                    Some(Landed::Device(b)) => (b.raw().buffer, 0),
                    Some(Landed::Lent(b)) => (b.memory().buffer, 0),
                    None => (download, at),
                };
                let copy = [vk::BufferCopy {
                    src_offset: o.offset,
                    dst_offset,
                    size: o.bytes.next_multiple_of(4),
                }];
                unsafe { d.cmd_copy_buffer(cmd, self.arena.buffer, dst, &copy) };
            }
            kept.push(keep);
        }
        rec.finish()?;
        let mut outs = Vec::with_capacity(s.outputs.len());
        let host = |o: &rlx_gpu::IoSlot, bytes| {
            Tensor::new(o.dtype, o.dims.clone(), bytes)
                .map(Output::Host)
                .map_err(|e| VulkanError::Internal(e.to_string()))
        };
        for ((o, &at), kept) in s.outputs.iter().zip(&self.download_at).zip(kept) {
            match kept {
                Some(Landed::Device(b)) => {
                    outs.push(Output::Device(DeviceTensor::new(
                        o.dtype,
                        o.dims.clone(),
                        b,
                    )));
                    continue;
                }
                Some(Landed::Lent(b)) => {
                    let bytes = b.lend(o.bytes as usize).ok_or_else(|| {
                        VulkanError::Internal("an output buffer too small".into())
                    })?;
                    outs.push(host(o, bytes)?);
                    continue;
                }
                None => {}
            }
            let mut buf =
                rlx_ir::tensor::AlignedBuf::try_zeroed(o.bytes as usize).ok_or_else(|| {
                    VulkanError::Device(format!("no host memory for {} bytes", o.bytes))
                })?;
            state.download.read(at, buf.as_mut_bytes())?;
            outs.push(host(o, buf.freeze())?);
        }
        Ok(outs)
    }
}

impl Drop for Executable {
    fn drop(&mut self) {
        let d = &self.ctx.device;
        // SAFETY: runs wait for their work before they return, so nothing
        // that uses these handles is pending; null handles are ignored.
        unsafe {
            let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
            d.destroy_fence(state.fence, None);
            d.destroy_command_pool(state.pool, None);
            d.destroy_command_pool(self.recorded_pool, None);
            for &p in &self.pipelines {
                d.destroy_pipeline(p, None);
            }
            d.destroy_descriptor_pool(self.descriptor_pool, None);
            d.destroy_pipeline_layout(self.layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}

impl State {
    fn new(ctx: &Arc<Context>, s: &Schedule) -> Result<State, VulkanError> {
        let d = &ctx.device;
        let staged = |slots: &[rlx_gpu::IoSlot]| {
            slots
                .iter()
                .map(|o| o.bytes.next_multiple_of(4))
                .sum::<u64>()
        };
        let upload = RawBuffer::new(ctx, staged(&s.inputs), Kind::Staging)?;
        let download = RawBuffer::new(ctx, staged(&s.outputs), Kind::Staging)?;
        let readback = RawBuffer::new(ctx, READBACK, Kind::Staging)?;
        // SAFETY: creation calls; the executable's `Drop` destroys both.
        let pool = unsafe {
            d.create_command_pool(
                &vk::CommandPoolCreateInfo::default()
                    .queue_family_index(ctx.family)
                    .flags(vk::CommandPoolCreateFlags::TRANSIENT),
                None,
            )
        }
        .map_err(vk_err("creating a command pool"))?;
        let fence = match unsafe { d.create_fence(&vk::FenceCreateInfo::default(), None) } {
            Ok(f) => f,
            Err(e) => {
                unsafe { d.destroy_command_pool(pool, None) };
                return Err(VulkanError::Device(format!("creating a fence: {e}")));
            }
        };
        Ok(State {
            pool,
            cmds: Vec::new(),
            fence,
            upload,
            download,
            readback,
        })
    }
}

/// Where a run's output comes down, other than the download staging.
enum Landed {
    /// A staging buffer of the pool, lent to the output tensor.
    Lent(rlx_ir::lend::Taken<RawBuffer>),
    /// A device tensor's buffer.
    Device(Buffer),
}

/// Checks what the schedule assumes of the device against its limits.
fn check_limits(ctx: &Context, s: &Schedule) -> Result<(), VulkanError> {
    let l = &ctx.limits;
    if l.min_storage_buffer_offset_alignment > PARAMS_ALIGN
        || s.max_binding > u64::from(l.max_storage_buffer_range)
    {
        return Err(VulkanError::Device(
            "the schedule was planned for other device limits".into(),
        ));
    }
    for d in &s.dispatches {
        if d.pipeline >= s.pipelines.len() || d.windows.len() > 4 {
            return Err(VulkanError::Internal(
                "a dispatch names no pipeline or too many windows".into(),
            ));
        }
        if d.groups
            .iter()
            .zip(&l.max_compute_work_group_count)
            .any(|(g, m)| g > m)
        {
            return Err(VulkanError::Node {
                node: d.node.clone(),
                origin: d.origin.clone(),
                reason: format!(
                    "{:?} workgroups exceed the device's {:?}",
                    d.groups, l.max_compute_work_group_count
                ),
            });
        }
    }
    Ok(())
}

/// Offsets of consecutive 4-byte-aligned blocks of these sizes.
fn offsets(sizes: impl Iterator<Item = u64>) -> Vec<u64> {
    let mut at = 0;
    sizes
        .map(|b| {
            let o = at;
            at += b.next_multiple_of(4);
            o
        })
        .collect()
}

fn host_outputs(outs: Vec<Output<Buffer>>) -> Result<Vec<Tensor>, VulkanError> {
    rlx_gpu::io::host_outputs(outs)
        .ok_or_else(|| VulkanError::Internal("an output left on the device".into()))
}
