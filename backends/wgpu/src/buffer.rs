//! Device tensors on wgpu: storage buffers of a [`Context`]'s device, uploads
//! and (partial) reads. An executable copies a device input into its slot of
//! the arena and a device output out of its slot into a buffer of its own,
//! inside the run's one submission.

use std::sync::Arc;

use rlx_gpu::io::{DeviceMemory, Spans};
use rlx_ir::Tensor;

use crate::device::Context;
use crate::WgpuError;

/// A tensor in the device memory of a wgpu [`Context`].
pub type DeviceTensor = rlx_gpu::io::DeviceTensor<Buffer>;

/// A storage buffer of one [`Context`], shared by the tensors that hold it.
#[derive(Clone)]
pub struct Buffer(Arc<Held>);

struct Held {
    buffer: wgpu::Buffer,
    ctx: Arc<Context>,
}

fn dev(e: impl std::fmt::Display) -> WgpuError {
    WgpuError::Device(e.to_string())
}

impl Buffer {
    /// A buffer of `bytes` bytes (rounded up to 4, one word at least) that
    /// runs can copy into and out of.
    pub(crate) fn alloc(ctx: &Arc<Context>, bytes: u64) -> Result<Buffer, WgpuError> {
        let size = bytes.next_multiple_of(4).max(4);
        if size > ctx.limits.max_buffer_size {
            return Err(WgpuError::Device(format!(
                "a {bytes} byte tensor; the device allows buffers of {}",
                ctx.limits.max_buffer_size
            )));
        }
        let buffer = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rlx device tensor"),
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Ok(Buffer(Arc::new(Held {
            buffer,
            ctx: ctx.clone(),
        })))
    }

    /// Copies `t` to the device of `ctx`.
    pub fn upload(ctx: &Arc<Context>, t: &Tensor) -> Result<DeviceTensor, WgpuError> {
        let b = Buffer::alloc(ctx, t.bytes().len() as u64)?;
        if !t.bytes().is_empty() {
            ctx.queue
                .write_buffer(&b.0.buffer, 0, &crate::device::pad4(t.bytes()));
            ctx.queue.submit([]);
        }
        Ok(DeviceTensor::new(t.dtype(), t.dims().to_vec(), b))
    }

    pub(crate) fn raw(&self) -> &wgpu::Buffer {
        &self.0.buffer
    }

    /// The context whose device holds the buffer.
    pub fn context(&self) -> &Arc<Context> {
        &self.0.ctx
    }
}

impl DeviceMemory for Buffer {
    type Error = WgpuError;

    /// Copies the 4-byte-aligned range around the spans in one submission.
    fn read(&self, spans: &Spans, out: &mut [u8]) -> Result<(), WgpuError> {
        if spans.bytes() == 0 {
            return Ok(());
        }
        let end = (spans.count - 1)
            .checked_mul(spans.pitch)
            .and_then(|p| p.checked_add(spans.offset)?.checked_add(spans.width))
            .map(|e| e as u64)
            .filter(|&e| e <= self.0.buffer.size() && out.len() == spans.bytes())
            .ok_or_else(|| WgpuError::Internal(format!("reading {spans:?} beyond a buffer")))?;
        let start = spans.offset as u64 / 4 * 4;
        let len = end.next_multiple_of(4) - start;
        let ctx = &self.0.ctx;
        let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rlx read"),
            size: len,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("rlx read"),
            });
        enc.copy_buffer_to_buffer(&self.0.buffer, start, &staging, 0, len);
        ctx.queue.submit([enc.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        ctx.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(dev)?;
        rx.recv().map_err(dev)?.map_err(dev)?;
        {
            let view = staging.get_mapped_range(..).map_err(dev)?;
            let skip = spans.offset - start as usize;
            for (i, row) in out.chunks_mut(spans.width).enumerate() {
                let at = skip + i * spans.pitch;
                row.copy_from_slice(&view[at..at + spans.width]);
            }
        }
        staging.unmap();
        Ok(())
    }

    fn refused(why: String) -> WgpuError {
        WgpuError::Unsupported(why)
    }
}
