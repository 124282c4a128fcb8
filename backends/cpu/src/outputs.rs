//! Buffers for a run's large outputs that come back to the executable when
//! their tensors are dropped, for the next run's outputs of the same size.
//!
//! A run copies each output out of its arena into memory of its own. Fresh
//! memory of megabytes costs the kernel's page faults and zeroing on every
//! run (the allocator returns freed large blocks to the system), which on a
//! decoder's step of batch 8, whose 84 MB cache is an output, was 15% of
//! the time. Outputs of a run that follows the last (a decode loop feeding
//! each step's cache to the next) reuse the buffers the previous outputs
//! held, as ONNX Runtime's arena allocator does.

use std::sync::{Arc, Mutex, Weak};

use rlx_ir::tensor::{AlignedBuf, Bytes};

/// Outputs smaller than this are allocated as usual: cheap, and not worth
/// a lock.
const MIN_BYTES: usize = 64 << 10;

/// The pool of one executable: buffers whose tensors are gone. An
/// executable's outputs have fixed sizes, so a returned buffer fits the
/// same output of a later run; the pool keeps at most two buffers an
/// output (one run's in use, the last run's coming back), so that outputs
/// a caller kept by the thousand and then dropped are freed, not held.
pub struct OutputPool {
    free: Arc<Mutex<Free>>,
}

struct Free {
    bufs: Vec<AlignedBuf>,
    max_kept: usize,
}

/// A pooled buffer lent to a tensor: it goes back to the pool when dropped
/// (or is freed, when the executable is gone or the pool is full).
struct Pooled {
    buf: Option<AlignedBuf>,
    pool: Weak<Mutex<Free>>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        self.buf.as_ref().map_or(&[], AlignedBuf::as_bytes)
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let (Some(buf), Some(pool)) = (self.buf.take(), self.pool.upgrade()) else {
            return;
        };
        let mut free = pool.lock().unwrap_or_else(|p| p.into_inner());
        if free.bufs.len() < free.max_kept {
            free.bufs.push(buf);
        }
    }
}

impl OutputPool {
    /// The pool of an executable with `outputs` outputs.
    pub fn new(outputs: usize) -> OutputPool {
        OutputPool {
            free: Arc::new(Mutex::new(Free {
                bufs: Vec::new(),
                max_kept: 2 * outputs,
            })),
        }
    }

    /// `data` copied into memory of its own: a returned buffer of its size
    /// where the pool holds one, else a new one.
    pub fn copy(&self, data: &[u8]) -> Bytes {
        if data.len() < MIN_BYTES {
            return Bytes::copy_from(data);
        }
        let reused = {
            let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
            free.bufs
                .iter()
                .position(|b| b.len() == data.len())
                .map(|i| free.bufs.swap_remove(i))
        };
        let mut buf = reused.unwrap_or_else(|| AlignedBuf::zeroed(data.len()));
        buf.as_mut_bytes().copy_from_slice(data);
        Bytes::from_owner(Pooled {
            buf: Some(buf),
            pool: Arc::downgrade(&self.free),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_outputs_lend_their_buffers_to_the_next() {
        let pool = OutputPool::new(1);
        let data: Vec<u8> = (0..MIN_BYTES * 2).map(|i| (i % 251) as u8).collect();
        let first = pool.copy(&data);
        assert_eq!(first.as_slice(), &data[..]);
        let at = first.as_slice().as_ptr();
        drop(first);
        let other: Vec<u8> = data.iter().map(|b| b.wrapping_add(1)).collect();
        let second = pool.copy(&other);
        assert_eq!(
            second.as_slice().as_ptr(),
            at,
            "the returned buffer is reused"
        );
        assert_eq!(second.as_slice(), &other[..]);
        // A live output's buffer is never handed out again.
        let third = pool.copy(&data);
        assert_ne!(third.as_slice().as_ptr(), at);
        assert_eq!(third.as_slice(), &data[..]);
        assert_eq!(second.as_slice(), &other[..]);
        // At most two buffers an output come back (the first two dropped);
        // a third is freed.
        let fourth = pool.copy(&data);
        let kept = [third.as_slice().as_ptr(), fourth.as_slice().as_ptr()];
        let fifth = pool.copy(&data);
        drop(third);
        drop(fourth);
        drop(fifth);
        assert_eq!(pool.free.lock().unwrap().bufs.len(), 2);
        let third = pool.copy(&data);
        assert!(kept.contains(&third.as_slice().as_ptr()));
        assert_eq!(third.as_slice(), &data[..]);
        // Outputs outliving the pool are plain memory.
        drop(pool);
        drop(second);
        assert_eq!(third.as_slice(), &data[..]);
    }
}
