//! Recording a run: dispatches with the plan's barriers, control flow that
//! reads a condition or trip count back (submitting what is recorded and
//! waiting there), and per-dispatch timestamps for profiles.

use std::time::Duration;

use ash::vk;
use rlx_wgsl::schedule::Step;

use crate::context::Context;
use crate::executable::{Executable, State, READBACK};
use crate::{vk_err, VulkanError};

/// Loop iterations recorded between submissions when nothing is read back.
const ITERATIONS_PER_SUBMIT: u64 = 256;

/// Records dispatch `k`: a barrier first where the plan placed one (or
/// always, when `timed` runs every dispatch alone), then the dispatch.
pub(crate) fn encode(
    exe: &Executable,
    cmd: vk::CommandBuffer,
    k: usize,
    always_wait: bool,
) -> Result<(), VulkanError> {
    let s = &exe.schedule;
    let (Some(disp), Some(&set)) = (s.dispatches.get(k), exe.sets.get(k)) else {
        return Err(VulkanError::Internal("a step names no dispatch".into()));
    };
    let Some(&pipeline) = exe.pipelines.get(disp.pipeline) else {
        return Err(VulkanError::Internal("a dispatch names no pipeline".into()));
    };
    let d = &exe.ctx.device;
    // SAFETY: `cmd` is recording; the pipeline, layout and set belong to
    // `exe`, which outlives every submission of `cmd`.
    unsafe {
        if disp.barrier || always_wait {
            compute_barrier(d, cmd);
        }
        d.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, pipeline);
        d.cmd_bind_descriptor_sets(
            cmd,
            vk::PipelineBindPoint::COMPUTE,
            exe.layout,
            0,
            &[set],
            &[],
        );
        d.cmd_dispatch(cmd, disp.groups[0], disp.groups[1], disp.groups[2]);
    }
    Ok(())
}

/// Shader writes before it are visible to shader reads and writes after it.
unsafe fn compute_barrier(d: &ash::Device, cmd: vk::CommandBuffer) {
    let b = [vk::MemoryBarrier::default()
        .src_access_mask(vk::AccessFlags::SHADER_WRITE)
        .dst_access_mask(vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE)];
    unsafe {
        d.cmd_pipeline_barrier(
            cmd,
            vk::PipelineStageFlags::COMPUTE_SHADER,
            vk::PipelineStageFlags::COMPUTE_SHADER,
            vk::DependencyFlags::empty(),
            &b,
            &[],
            &[],
        )
    };
}

/// One run's recording: command buffers of the run's pool, submitted
/// together at the end or where the host must read something back.
pub(crate) struct Rec<'a> {
    exe: &'a Executable,
    state: &'a mut State,
    /// Command buffers of `state.cmds` in use this run.
    used: usize,
    cmd: vk::CommandBuffer,
    /// Recorded and not yet submitted, in order.
    pending: Vec<vk::CommandBuffer>,
    since_submit: u64,
    timer: Option<&'a mut Timer>,
}

impl<'a> Rec<'a> {
    pub(crate) fn begin(
        exe: &'a Executable,
        state: &'a mut State,
        timer: Option<&'a mut Timer>,
    ) -> Result<Rec<'a>, VulkanError> {
        // SAFETY: the previous run waited for all its work.
        unsafe {
            exe.ctx
                .device
                .reset_command_pool(state.pool, vk::CommandPoolResetFlags::empty())
        }
        .map_err(vk_err("resetting a command pool"))?;
        let mut rec = Rec {
            exe,
            state,
            used: 0,
            cmd: vk::CommandBuffer::null(),
            pending: Vec::new(),
            since_submit: 0,
            timer,
        };
        rec.cmd = rec.start()?;
        Ok(rec)
    }

    /// The command buffer being recorded.
    pub(crate) fn cmd(&self) -> vk::CommandBuffer {
        self.cmd
    }

    pub(crate) fn timed(&self) -> bool {
        self.timer.is_some()
    }

    /// Begins the next command buffer of the pool (allocating one when all
    /// are in use).
    fn start(&mut self) -> Result<vk::CommandBuffer, VulkanError> {
        let d = &self.exe.ctx.device;
        if self.used == self.state.cmds.len() {
            let more = unsafe {
                d.allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(self.state.pool)
                        .level(vk::CommandBufferLevel::PRIMARY)
                        .command_buffer_count(1),
                )
            }
            .map_err(vk_err("allocating a command buffer"))?;
            self.state.cmds.extend(more);
        }
        let cmd = self.state.cmds[self.used];
        self.used += 1;
        unsafe {
            d.begin_command_buffer(
                cmd,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
        }
        .map_err(vk_err("recording commands"))?;
        if let Some(t) = self.timer.as_deref_mut() {
            t.reset(d, cmd);
        }
        Ok(cmd)
    }

    /// A pipeline barrier in the current command buffer.
    pub(crate) fn barrier(
        &mut self,
        src: vk::PipelineStageFlags,
        src_access: vk::AccessFlags,
        dst: vk::PipelineStageFlags,
        dst_access: vk::AccessFlags,
    ) {
        let b = [vk::MemoryBarrier::default()
            .src_access_mask(src_access)
            .dst_access_mask(dst_access)];
        // SAFETY: `self.cmd` is recording.
        unsafe {
            self.exe.ctx.device.cmd_pipeline_barrier(
                self.cmd,
                src,
                dst,
                vk::DependencyFlags::empty(),
                &b,
                &[],
                &[],
            )
        };
    }

    /// Ends the current command buffer, queues `recorded` after it, and
    /// begins a new one.
    pub(crate) fn append(&mut self, recorded: vk::CommandBuffer) -> Result<(), VulkanError> {
        self.end()?;
        self.pending.push(recorded);
        self.cmd = self.start()?;
        Ok(())
    }

    fn end(&mut self) -> Result<(), VulkanError> {
        unsafe { self.exe.ctx.device.end_command_buffer(self.cmd) }
            .map_err(vk_err("recording commands"))?;
        self.pending.push(self.cmd);
        Ok(())
    }

    /// Submits everything recorded and waits for it; recording goes on in a
    /// new command buffer that waits for all of it.
    fn flush(&mut self) -> Result<(), VulkanError> {
        self.end()?;
        self.submit_pending()?;
        self.cmd = self.start()?;
        self.barrier(
            vk::PipelineStageFlags::ALL_COMMANDS,
            vk::AccessFlags::MEMORY_WRITE,
            vk::PipelineStageFlags::ALL_COMMANDS,
            vk::AccessFlags::MEMORY_READ | vk::AccessFlags::MEMORY_WRITE,
        );
        self.since_submit = 0;
        Ok(())
    }

    fn submit_pending(&mut self) -> Result<(), VulkanError> {
        let cmds = std::mem::take(&mut self.pending);
        self.exe.ctx.submit_wait(&cmds, self.state.fence)?;
        if let Some(t) = self.timer.as_deref_mut() {
            t.harvest(&self.exe.ctx)?;
        }
        Ok(())
    }

    /// Submits the rest of the run and waits for it.
    pub(crate) fn finish(mut self) -> Result<(), VulkanError> {
        self.end()?;
        self.submit_pending()
    }

    pub(crate) fn steps(&mut self, steps: &[Step]) -> Result<(), VulkanError> {
        let max = self.exe.max_loop_iterations;
        rlx_gpu::walk::walk(steps, self, max)
    }

    fn dispatch(&mut self, k: usize) -> Result<(), VulkanError> {
        if self.timer.as_deref().is_some_and(Timer::full) {
            self.flush()?;
        }
        let d = &self.exe.ctx.device;
        match self.timer.as_deref_mut() {
            None => encode(self.exe, self.cmd, k, false),
            Some(t) => {
                let q = t.start(k);
                // SAFETY: `self.cmd` is recording; the pool was reset in it.
                unsafe {
                    d.cmd_write_timestamp(self.cmd, vk::PipelineStageFlags::TOP_OF_PIPE, t.pool, q)
                };
                encode(self.exe, self.cmd, k, true)?;
                unsafe {
                    d.cmd_write_timestamp(
                        self.cmd,
                        vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                        t.pool,
                        q + 1,
                    )
                };
                Ok(())
            }
        }
    }

    /// Submits what is recorded and reads [`READBACK`] bytes at `offset`
    /// (planned values are 4-byte aligned) back.
    fn read_back(&mut self, offset: u64) -> Result<[u8; 8], VulkanError> {
        let exe = self.exe;
        let at = offset / 4 * 4;
        let len = READBACK.min(exe.schedule.buffer_bytes.saturating_sub(at)) / 4 * 4;
        self.barrier(
            vk::PipelineStageFlags::COMPUTE_SHADER,
            vk::AccessFlags::SHADER_WRITE,
            vk::PipelineStageFlags::TRANSFER,
            vk::AccessFlags::TRANSFER_READ,
        );
        if len > 0 {
            let copy = [vk::BufferCopy {
                src_offset: at,
                dst_offset: 0,
                size: len,
            }];
            unsafe {
                exe.ctx.device.cmd_copy_buffer(
                    self.cmd,
                    exe.arena.buffer,
                    self.state.readback.buffer,
                    &copy,
                )
            };
        }
        self.flush()?;
        let mut out = [0u8; 8];
        let skip = (offset - at) as usize;
        let mut word = [0u8; READBACK as usize];
        self.state.readback.read(0, &mut word[..len as usize])?;
        for (o, b) in out.iter_mut().zip(word.iter().skip(skip)) {
            *o = *b;
        }
        Ok(out)
    }
}

impl rlx_gpu::walk::Walk for Rec<'_> {
    type Error = VulkanError;

    fn launch(&mut self, k: usize) -> Result<(), VulkanError> {
        self.dispatch(k)
    }

    fn read(&mut self, offset: u64) -> Result<[u8; 8], VulkanError> {
        self.read_back(offset)
    }

    fn round(&mut self) -> Result<(), VulkanError> {
        self.since_submit += 1;
        if self.since_submit >= ITERATIONS_PER_SUBMIT {
            self.flush()?;
        }
        Ok(())
    }

    fn node_error(&self, node: &str, origin: &[String], reason: String) -> VulkanError {
        VulkanError::Node {
            node: node.to_string(),
            origin: origin.to_vec(),
            reason,
        }
    }
}

/// Per-dispatch device time for profiles: two timestamps around each
/// dispatch (which then waits for the one before), read back at every
/// submission and summed per dispatch over loop iterations.
pub(crate) struct Timer {
    pool: vk::QueryPool,
    device: ash::Device,
    capacity: u32,
    /// Which dispatch each pair of queries written since the last harvest
    /// timed.
    pending: Vec<usize>,
    period: f64,
    totals: Vec<Duration>,
}

/// Dispatches timed between two reads of the query pool.
const BATCH: u32 = 1024;

impl Timer {
    pub(crate) fn new(ctx: &Context, dispatches: usize) -> Result<Timer, VulkanError> {
        let Some(period) = ctx.timestamp_period else {
            return Err(VulkanError::Unsupported(format!(
                "{} writes no timestamps on its compute queue: no per-dispatch profile",
                ctx.info.name
            )));
        };
        let pool = unsafe {
            ctx.device.create_query_pool(
                &vk::QueryPoolCreateInfo::default()
                    .query_type(vk::QueryType::TIMESTAMP)
                    .query_count(2 * BATCH),
                None,
            )
        }
        .map_err(vk_err("creating a query pool"))?;
        Ok(Timer {
            pool,
            device: ctx.device.clone(),
            capacity: BATCH,
            pending: Vec::new(),
            period,
            totals: vec![Duration::ZERO; dispatches],
        })
    }

    fn full(&self) -> bool {
        self.pending.len() as u32 >= self.capacity
    }

    /// The first of the two queries that time dispatch `k`.
    fn start(&mut self, k: usize) -> u32 {
        self.pending.push(k);
        2 * (self.pending.len() as u32 - 1)
    }

    /// Resets the pool at the start of a command buffer (nothing is pending
    /// then: every submission is harvested).
    fn reset(&self, d: &ash::Device, cmd: vk::CommandBuffer) {
        unsafe { d.cmd_reset_query_pool(cmd, self.pool, 0, 2 * self.capacity) };
    }

    fn harvest(&mut self, ctx: &Context) -> Result<(), VulkanError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut ticks = vec![0u64; 2 * self.pending.len()];
        unsafe {
            ctx.device.get_query_pool_results(
                self.pool,
                0,
                &mut ticks,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WAIT,
            )
        }
        .map_err(vk_err("reading timestamps"))?;
        for (pair, &k) in ticks.chunks(2).zip(&self.pending) {
            let ns = pair[1].saturating_sub(pair[0]) as f64 * self.period;
            if let Some(t) = self.totals.get_mut(k) {
                *t += Duration::from_nanos(ns as u64);
            }
        }
        self.pending.clear();
        Ok(())
    }

    pub(crate) fn totals(&self) -> Vec<Duration> {
        self.totals.clone()
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        // SAFETY: every submission that wrote the pool was waited for.
        unsafe { self.device.destroy_query_pool(self.pool, None) };
    }
}
