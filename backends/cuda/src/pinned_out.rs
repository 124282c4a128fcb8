//! Large host outputs without a copy: the device writes them into pinned
//! buffers lent to the output tensors (rlx-ir's [`rlx_ir::lend`] pool).

use std::sync::Arc;

use cudarc::driver::{CudaContext, PinnedHostSlice};
pub use rlx_ir::lend::LENT_BYTES;
use rlx_ir::lend::{HostMemory, LendPool};

/// The pinned buffers of one executable's large host outputs.
pub type Pool = LendPool<Pinned>;

/// A pinned host buffer and its address.
pub struct Pinned {
    buf: PinnedHostSlice<u8>,
    ptr: *const u8,
}

// SAFETY: `ptr` points into `buf`, which this owns; the pool hands the
// buffer to a run only while no tensor reads it, so shared reads from any
// thread are sound.
unsafe impl Send for Pinned {}
unsafe impl Sync for Pinned {}

impl HostMemory for Pinned {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `buf.len()` bytes while `buf` lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.buf.len()) }
    }
}

impl Pinned {
    /// A new pinned buffer of `bytes` (one at least); `None` when the
    /// driver has none.
    pub fn alloc(ctx: &Arc<CudaContext>, bytes: usize) -> Option<Pinned> {
        // SAFETY: the device writes the bytes a tensor shows before it is
        // made (the run synchronizes the stream first).
        let buf = unsafe { ctx.alloc_pinned_with_flags::<u8>(bytes.max(1), 0) }.ok()?;
        let ptr = buf.as_ptr().ok()?;
        Some(Pinned { buf, ptr })
    }

    /// The buffer's bytes, for the device to write into.
    pub fn as_mut_slice(&mut self) -> Result<&mut [u8], cudarc::driver::DriverError> {
        self.buf.as_mut_slice()
    }
}
