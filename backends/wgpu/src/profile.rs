//! Per-dispatch GPU time for `bench --profile`: timestamp queries written at
//! the beginning and end of a compute pass per dispatch, resolved and read
//! back in batches (a query set holds a bounded number of queries), summed
//! per dispatch over loop iterations.

use std::time::Duration;

use crate::device::Context;
use crate::WgpuError;

/// Dispatches timed per query set before it is resolved and read.
const BATCH: u32 = 1024;

pub(crate) struct Timer {
    queries: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
    /// Which dispatch each pair of queries in the current batch timed.
    pending: Vec<usize>,
    /// Nanoseconds per tick.
    period: f64,
    totals: Vec<Duration>,
}

fn dev(e: impl std::fmt::Display) -> WgpuError {
    WgpuError::Device(e.to_string())
}

impl Timer {
    pub(crate) fn new(ctx: &Context, dispatches: usize) -> Result<Timer, WgpuError> {
        if !ctx.timestamps {
            return Err(WgpuError::Unsupported(format!(
                "the adapter {} writes no timestamps (TIMESTAMP_QUERY): no per-dispatch profile",
                ctx.adapter
            )));
        }
        let d = &ctx.device;
        let bytes = u64::from(BATCH) * 16;
        Ok(Timer {
            queries: d.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("rlx profile"),
                ty: wgpu::QueryType::Timestamp,
                count: 2 * BATCH,
            }),
            resolve: d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("rlx profile resolve"),
                size: bytes,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
            read: d.create_buffer(&wgpu::BufferDescriptor {
                label: Some("rlx profile read"),
                size: bytes,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            pending: Vec::new(),
            period: f64::from(ctx.queue.get_timestamp_period()),
            totals: vec![Duration::ZERO; dispatches],
        })
    }

    pub(crate) fn full(&self) -> bool {
        self.pending.len() >= BATCH as usize
    }

    /// The timestamp writes of the next pass, which runs dispatch `k`.
    pub(crate) fn writes(&mut self, k: usize) -> wgpu::ComputePassTimestampWrites<'_> {
        let i = self.pending.len() as u32;
        self.pending.push(k);
        wgpu::ComputePassTimestampWrites {
            query_set: &self.queries,
            beginning_of_pass_write_index: Some(2 * i),
            end_of_pass_write_index: Some(2 * i + 1),
        }
    }

    /// Resolves the batch in `enc`, submits it and adds the times up.
    pub(crate) fn flush(
        &mut self,
        ctx: &Context,
        enc: &mut wgpu::CommandEncoder,
    ) -> Result<(), WgpuError> {
        let n = self.pending.len() as u32;
        if n == 0 {
            return Ok(());
        }
        enc.resolve_query_set(&self.queries, 0..2 * n, &self.resolve, 0);
        enc.copy_buffer_to_buffer(&self.resolve, 0, &self.read, 0, u64::from(n) * 16);
        let done = std::mem::replace(
            enc,
            ctx.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("rlx run"),
                }),
        );
        ctx.queue.submit([done.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        self.read.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        ctx.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(dev)?;
        rx.recv().map_err(dev)?.map_err(dev)?;
        {
            let view = self.read.get_mapped_range(..).map_err(dev)?;
            let ticks: &[u64] = bytemuck::cast_slice(&view[..n as usize * 16]);
            for (j, &k) in self.pending.iter().enumerate() {
                let dt = ticks[2 * j + 1].saturating_sub(ticks[2 * j]);
                if let Some(t) = self.totals.get_mut(k) {
                    *t += Duration::from_nanos((dt as f64 * self.period) as u64);
                }
            }
        }
        self.read.unmap();
        self.pending.clear();
        Ok(())
    }

    /// Reads what is left (the run has been submitted) and returns the times.
    pub(crate) fn finish(mut self, ctx: &Context) -> Result<Vec<Duration>, WgpuError> {
        let mut enc = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("rlx profile"),
            });
        self.flush(ctx, &mut enc)?;
        Ok(self.totals)
    }
}
