//! Device tensors on Vulkan: device-local buffers of a [`Context`], uploads
//! and (partial) reads. An executable copies a device input into its slot of
//! the arena and a device output out of its slot into a buffer of its own,
//! in the run's submission.

use std::sync::Arc;

use rlx_gpu::io::{DeviceMemory, Spans};
use rlx_ir::Tensor;

use crate::context::Context;
use crate::memory::{Kind, RawBuffer};
use crate::VulkanError;

/// A tensor in the device memory of a Vulkan [`Context`].
pub type DeviceTensor = rlx_gpu::io::DeviceTensor<Buffer>;

/// A device-local buffer of one [`Context`], shared by the tensors that
/// hold it.
#[derive(Clone)]
pub struct Buffer(Arc<RawBuffer>);

impl Buffer {
    /// A buffer of `bytes` bytes (rounded up to 4, one word at least).
    pub(crate) fn alloc(ctx: &Arc<Context>, bytes: u64) -> Result<Buffer, VulkanError> {
        Ok(Buffer(Arc::new(RawBuffer::new(ctx, bytes, Kind::Device)?)))
    }

    /// Copies `t` to the device of `ctx`.
    pub fn upload(ctx: &Arc<Context>, t: &Tensor) -> Result<DeviceTensor, VulkanError> {
        let b = Buffer::alloc(ctx, t.bytes().len() as u64)?;
        b.0.upload(0, t.bytes())?;
        Ok(DeviceTensor::new(t.dtype(), t.dims().to_vec(), b))
    }

    pub(crate) fn raw(&self) -> &RawBuffer {
        &self.0
    }

    /// The context whose device holds the buffer.
    pub fn context(&self) -> &Arc<Context> {
        self.0.context()
    }
}

impl DeviceMemory for Buffer {
    type Error = VulkanError;

    /// Copies the range around the spans back in one submission.
    fn read(&self, spans: &Spans, out: &mut [u8]) -> Result<(), VulkanError> {
        if spans.bytes() == 0 {
            return Ok(());
        }
        let end = (spans.count - 1)
            .checked_mul(spans.pitch)
            .and_then(|p| p.checked_add(spans.offset)?.checked_add(spans.width))
            .filter(|&e| e as u64 <= self.0.size && out.len() == spans.bytes())
            .ok_or_else(|| VulkanError::Internal(format!("reading {spans:?} beyond a buffer")))?;
        let mut all = vec![0u8; end - spans.offset];
        self.0.download(spans.offset as u64, &mut all)?;
        for (i, row) in out.chunks_mut(spans.width).enumerate() {
            let at = i * spans.pitch;
            row.copy_from_slice(&all[at..at + spans.width]);
        }
        Ok(())
    }

    fn refused(why: String) -> VulkanError {
        VulkanError::Unsupported(why)
    }
}
