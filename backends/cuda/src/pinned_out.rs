//! Large host outputs without a copy: the device writes them into pinned
//! buffers that become the output tensors' memory, lent to the tensors and
//! back in the pool when the last of them drops.
//!
//! A copy through the executable's staging costs a host `memcpy` into
//! freshly allocated (and page-faulting) memory after the transfer: on
//! GPT-2's 25.7 MB of logits that took longer than the model. A lent buffer
//! leaves only the transfer. The pool holds at most two buffers per large
//! output, so a caller that keeps every run's outputs costs a bounded amount
//! of pinned memory; once the pool is out, outputs come down into ordinary
//! memory instead.

use std::sync::{Arc, Mutex, Weak};

use cudarc::driver::{CudaContext, PinnedHostSlice};
use rlx_ir::tensor::Bytes;

/// Host outputs of at least this many bytes are lent pinned buffers.
pub const LENT_BYTES: usize = 1 << 20;

/// Buffers a pool may have, lent and free, per large output.
const PER_OUTPUT: usize = 2;

/// The pinned buffers of one executable's large host outputs.
pub struct Pool {
    state: Mutex<State>,
    /// Buffers the pool may have in all.
    most: usize,
}

struct State {
    free: Vec<PinnedHostSlice<u8>>,
    /// Buffers made: lent or free.
    made: usize,
}

impl Pool {
    /// A pool for `large` outputs of at least [`LENT_BYTES`].
    pub fn new(large: usize) -> Arc<Pool> {
        Arc::new(Pool {
            state: Mutex::new(State {
                free: Vec::new(),
                made: 0,
            }),
            most: PER_OUTPUT * large,
        })
    }

    /// A free buffer of at least `bytes`, or a new one while the pool may
    /// make one; `None` when it may not or the driver has none.
    pub fn take(&self, ctx: &Arc<CudaContext>, bytes: usize) -> Option<PinnedHostSlice<u8>> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = st.free.iter().position(|b| b.len() >= bytes) {
            return Some(st.free.swap_remove(i));
        }
        if st.made >= self.most {
            return None;
        }
        // SAFETY: the device writes the bytes a tensor shows before it is
        // made (the run synchronizes the stream first).
        let buf = unsafe { ctx.alloc_pinned_with_flags::<u8>(bytes.max(1), 0) }.ok()?;
        st.made += 1;
        Some(buf)
    }

    /// Lends `buf`, whose first `len` bytes the device has written (the
    /// stream synchronized since), as the memory of a tensor.
    pub fn lend(self: &Arc<Pool>, buf: PinnedHostSlice<u8>, len: usize) -> Option<Bytes> {
        let ptr = buf.as_ptr().ok()?;
        if len > buf.len() {
            return None;
        }
        Some(Bytes::from_owner(Lent {
            buf: Some(buf),
            ptr,
            len,
            pool: Arc::downgrade(self),
        }))
    }
}

/// A pinned buffer lent to a tensor: back to its pool when dropped (freed,
/// when the executable is gone).
struct Lent {
    buf: Option<PinnedHostSlice<u8>>,
    /// The buffer's memory, read only while lent.
    ptr: *const u8,
    len: usize,
    pool: Weak<Pool>,
}

// SAFETY: `ptr` points into `buf`, which this owns; nothing writes the
// memory while it is lent (the pool hands the buffer out again only after
// this gives it back), so shared reads from any thread are sound.
unsafe impl Send for Lent {}
unsafe impl Sync for Lent {}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len <= buf.len()` bytes while `buf`
        // lives (checked when lent), and they are not written meanwhile.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        if let (Some(buf), Some(pool)) = (self.buf.take(), self.pool.upgrade()) {
            let mut st = pool.state.lock().unwrap_or_else(|p| p.into_inner());
            st.free.push(buf);
        }
    }
}
