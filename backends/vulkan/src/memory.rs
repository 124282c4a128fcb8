//! Buffers and their memory: device-local storage (the arena, parameters,
//! device tensors) and host-visible staging that stays mapped. One
//! allocation per buffer: an executable has a handful, so a sub-allocator
//! would buy nothing yet.

use std::ptr::NonNull;
use std::sync::Arc;

use ash::vk;

use crate::context::Context;
use crate::{vk_err, VulkanError};

/// Where a buffer lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Device-local storage that transfers read and write.
    Device,
    /// Host-visible, coherent and mapped: staging for uploads and reads.
    Staging,
}

/// A buffer with its own memory, destroyed on drop.
pub(crate) struct RawBuffer {
    ctx: Arc<Context>,
    pub(crate) buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    pub(crate) size: u64,
    mapped: Option<NonNull<u8>>,
}

// SAFETY: the mapping is plain memory of this buffer; writers and readers
// are serialized by the executable's run lock or own the buffer alone.
unsafe impl Send for RawBuffer {}
unsafe impl Sync for RawBuffer {}

impl rlx_ir::lend::HostMemory for RawBuffer {
    /// The mapped bytes of a staging buffer (none of a device-local one).
    fn bytes(&self) -> &[u8] {
        match self.mapped {
            // SAFETY: the mapping covers the whole buffer (`size` bytes,
            // mapped coherent), and the lending pool reads it only while
            // no device work writes it.
            Some(p) => unsafe { std::slice::from_raw_parts(p.as_ptr(), self.size as usize) },
            None => &[],
        }
    }
}

impl RawBuffer {
    /// A buffer of at least `bytes` bytes (a word at least, rounded to 4).
    pub(crate) fn new(
        ctx: &Arc<Context>,
        bytes: u64,
        kind: Kind,
    ) -> Result<RawBuffer, VulkanError> {
        let size = bytes.next_multiple_of(4).max(4);
        let usage = match kind {
            Kind::Device => {
                vk::BufferUsageFlags::STORAGE_BUFFER
                    | vk::BufferUsageFlags::TRANSFER_SRC
                    | vk::BufferUsageFlags::TRANSFER_DST
            }
            Kind::Staging => {
                vk::BufferUsageFlags::TRANSFER_SRC | vk::BufferUsageFlags::TRANSFER_DST
            }
        };
        let d = &ctx.device;
        // SAFETY: plain creation calls on a live device; every handle made
        // here is destroyed on the error paths or by `Drop`.
        let buffer = unsafe {
            d.create_buffer(
                &vk::BufferCreateInfo::default()
                    .size(size)
                    .usage(usage)
                    .sharing_mode(vk::SharingMode::EXCLUSIVE),
                None,
            )
        }
        .map_err(|e| VulkanError::Device(format!("creating a {size} byte buffer: {e}")))?;
        let req = unsafe { d.get_buffer_memory_requirements(buffer) };
        let (need, want) = match kind {
            Kind::Device => (
                vk::MemoryPropertyFlags::empty(),
                vk::MemoryPropertyFlags::DEVICE_LOCAL,
            ),
            Kind::Staging => (
                vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT,
                vk::MemoryPropertyFlags::HOST_CACHED,
            ),
        };
        let Some(type_index) = ctx.memory_type(req.memory_type_bits, need, want) else {
            unsafe { d.destroy_buffer(buffer, None) };
            return Err(VulkanError::Device(format!(
                "no memory type for a {kind:?} buffer"
            )));
        };
        let memory = match unsafe {
            d.allocate_memory(
                &vk::MemoryAllocateInfo::default()
                    .allocation_size(req.size)
                    .memory_type_index(type_index),
                None,
            )
        } {
            Ok(m) => m,
            Err(e) => {
                unsafe { d.destroy_buffer(buffer, None) };
                return Err(VulkanError::Device(format!(
                    "allocating {} bytes of device memory: {e}",
                    req.size
                )));
            }
        };
        let mut raw = RawBuffer {
            ctx: ctx.clone(),
            buffer,
            memory,
            size,
            mapped: None,
        };
        unsafe { d.bind_buffer_memory(buffer, memory, 0) }.map_err(vk_err("binding memory"))?;
        if kind == Kind::Staging {
            let p = unsafe { d.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
                .map_err(vk_err("mapping memory"))?;
            raw.mapped = NonNull::new(p.cast::<u8>());
        }
        Ok(raw)
    }

    /// The mapped bytes of a staging buffer.
    fn mapping(&self) -> Result<NonNull<u8>, VulkanError> {
        self.mapped
            .ok_or_else(|| VulkanError::Internal("a device-local buffer is not mapped".into()))
    }

    /// A new staging buffer for an output lent to its tensor; `None` when the
    /// device has no memory for it (the output then comes down the usual way).
    pub(crate) fn lendable(ctx: &Arc<Context>, bytes: usize) -> Option<RawBuffer> {
        RawBuffer::new(ctx, bytes as u64, Kind::Staging).ok()
    }

    /// Copies `bytes` into a staging buffer at `at`.
    pub(crate) fn write(&self, at: u64, bytes: &[u8]) -> Result<(), VulkanError> {
        let p = self.mapping()?;
        if at + bytes.len() as u64 > self.size {
            return Err(VulkanError::Internal(format!(
                "writing {} bytes at {at} of a {} byte buffer",
                bytes.len(),
                self.size
            )));
        }
        // SAFETY: in bounds of the mapping (checked), which no device work
        // touches while the caller holds the buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p.as_ptr().add(at as usize), bytes.len())
        };
        Ok(())
    }

    /// Copies `out.len()` bytes at `at` of a staging buffer into `out`.
    pub(crate) fn read(&self, at: u64, out: &mut [u8]) -> Result<(), VulkanError> {
        let p = self.mapping()?;
        if at + out.len() as u64 > self.size {
            return Err(VulkanError::Internal(format!(
                "reading {} bytes at {at} of a {} byte buffer",
                out.len(),
                self.size
            )));
        }
        // SAFETY: as in `write`; the device finished writing (fence waited).
        unsafe {
            std::ptr::copy_nonoverlapping(p.as_ptr().add(at as usize), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    /// Uploads `bytes` to `at` of this device-local buffer through a staging
    /// buffer (one submission, waited for).
    pub(crate) fn upload(&self, at: u64, bytes: &[u8]) -> Result<(), VulkanError> {
        self.upload_many(&[(at, bytes)])
    }

    /// Uploads each `(at, bytes)` through one staging buffer in one
    /// submission (constants at load).
    pub(crate) fn upload_many(&self, blocks: &[(u64, &[u8])]) -> Result<(), VulkanError> {
        let mut total = 0u64;
        let mut copies = Vec::with_capacity(blocks.len());
        for (at, b) in blocks {
            if b.is_empty() {
                continue;
            }
            let size = (b.len() as u64).next_multiple_of(4);
            if at + size > self.size {
                return Err(VulkanError::Internal(format!(
                    "uploading {size} bytes at {at} of a {} byte buffer",
                    self.size
                )));
            }
            copies.push(vk::BufferCopy {
                src_offset: total,
                dst_offset: *at,
                size,
            });
            total += size;
        }
        if copies.is_empty() {
            return Ok(());
        }
        let staging = RawBuffer::new(&self.ctx, total, Kind::Staging)?;
        for ((_, b), c) in blocks.iter().filter(|(_, b)| !b.is_empty()).zip(&copies) {
            staging.write(c.src_offset, b)?;
        }
        self.ctx.one_shot(|cmd| unsafe {
            self.ctx
                .device
                .cmd_copy_buffer(cmd, staging.buffer, self.buffer, &copies)
        })
    }

    /// Reads `out.len()` bytes at `at` (4-byte aligned ranges around it are
    /// copied) through a staging buffer.
    pub(crate) fn download(&self, at: u64, out: &mut [u8]) -> Result<(), VulkanError> {
        if out.is_empty() {
            return Ok(());
        }
        let start = at / 4 * 4;
        let end = (at + out.len() as u64).next_multiple_of(4);
        if end > self.size {
            return Err(VulkanError::Internal(format!(
                "reading [{at}, {}) of a {} byte buffer",
                at + out.len() as u64,
                self.size
            )));
        }
        let staging = RawBuffer::new(&self.ctx, end - start, Kind::Staging)?;
        let copy = [vk::BufferCopy {
            src_offset: start,
            dst_offset: 0,
            size: end - start,
        }];
        self.ctx.one_shot(|cmd| unsafe {
            self.ctx
                .device
                .cmd_copy_buffer(cmd, self.buffer, staging.buffer, &copy)
        })?;
        staging.read(at - start, out)
    }
}

impl Drop for RawBuffer {
    fn drop(&mut self) {
        // SAFETY: no work that uses the buffer is pending: runs and one-off
        // transfers wait for their fences before they return.
        unsafe {
            if self.mapped.is_some() {
                self.ctx.device.unmap_memory(self.memory);
            }
            self.ctx.device.destroy_buffer(self.buffer, None);
            self.ctx.device.free_memory(self.memory, None);
        }
    }
}

impl RawBuffer {
    pub(crate) fn context(&self) -> &Arc<Context> {
        &self.ctx
    }
}
