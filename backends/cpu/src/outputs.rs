//! Buffers for a run's large outputs that come back to the executable when
//! their tensors are dropped, for the next run's outputs (rlx-ir's
//! [`rlx_ir::lend`] pool, which the GPU devices use too).
//!
//! A run copies each output out of its arena into memory of its own. Fresh
//! memory of megabytes costs the kernel's page faults and zeroing on every
//! run, which on a decoder's step of batch 8, whose 84 MB cache is an
//! output, was 15% of the time. Outputs of a run that follows the last (a
//! decode loop feeding each step's cache to the next) reuse the buffers the
//! previous outputs held, as ONNX Runtime's arena allocator does.

use std::sync::Arc;

use rlx_ir::lend::{LendPool, Taken};
use rlx_ir::tensor::{AlignedBuf, Bytes};

/// Outputs smaller than this are allocated as usual: cheap, and not worth
/// a lock.
const MIN_BYTES: usize = 64 << 10;

/// The pool of one executable.
pub struct OutputPool {
    pool: Arc<LendPool<AlignedBuf>>,
}

impl OutputPool {
    /// The pool of an executable with `outputs` outputs.
    pub fn new(outputs: usize) -> OutputPool {
        OutputPool {
            pool: LendPool::new(outputs),
        }
    }

    /// `data` copied into memory of its own: a returned buffer where the
    /// pool holds one, else a new one.
    pub fn copy(&self, data: &[u8]) -> Bytes {
        if data.len() < MIN_BYTES {
            return Bytes::copy_from(data);
        }
        self.pool.copy(data)
    }

    /// A buffer of at least `bytes` for a run to write an output into, then
    /// lend ([`Taken::lend`]); `None` for a small output (copied out as
    /// usual) or when the pool has none to give.
    pub fn take(&self, bytes: usize) -> Option<Taken<AlignedBuf>> {
        if bytes < MIN_BYTES {
            return None;
        }
        self.pool.take(bytes, AlignedBuf::try_zeroed)
    }
}
