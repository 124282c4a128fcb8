//! Buffers lent to a run's large host outputs, back in the executable's
//! pool when the output tensor's last clone drops, for a later run's
//! outputs.
//!
//! A backend that brought a large output into freshly allocated host memory
//! would pay the kernel's page faults and zeroing on every run (the
//! allocator returns freed large blocks to the system): on GPT-2's 25.7 MB
//! of logits that took longer than the model. Devices that can write host
//! memory (CUDA's pinned buffers, Vulkan's mapped staging) write the output
//! straight into a lent buffer; the CPU and wgpu copy into one. The pool
//! holds at most two buffers per large output (one run's in use, the last
//! run's coming back), so a caller that keeps every run's outputs costs a
//! bounded amount of such memory; once the pool is out, the backend brings
//! outputs down the ordinary way.

use std::sync::{Arc, Mutex, Weak};

use crate::tensor::{AlignedBuf, Bytes};

/// Host outputs of at least this many bytes are lent buffers on the GPU
/// devices (the CPU lends from 64 KiB, where its copy is all there is).
pub const LENT_BYTES: usize = 1 << 20;

/// Buffers a pool may have, lent and free, per large output.
const PER_OUTPUT: usize = 2;

/// Host memory a device writes (or a backend copies into) and a tensor may
/// then read in place.
pub trait HostMemory: Send + Sync + 'static {
    /// Every byte of the buffer. Only called while nothing writes it: the
    /// pool hands a buffer to a run only when no tensor holds it, and a
    /// tensor reads it only after the run that wrote it has finished.
    fn bytes(&self) -> &[u8];
}

/// The lendable buffers of one executable's large host outputs.
pub struct LendPool<M> {
    state: Mutex<State<M>>,
    /// Buffers the pool may have in all.
    most: usize,
}

struct State<M> {
    free: Vec<M>,
    /// Buffers made: lent or free.
    made: usize,
}

impl<M: HostMemory> LendPool<M> {
    /// A pool for `large` outputs of at least [`LENT_BYTES`].
    pub fn new(large: usize) -> Arc<LendPool<M>> {
        Arc::new(LendPool {
            state: Mutex::new(State {
                free: Vec::new(),
                made: 0,
            }),
            most: PER_OUTPUT * large,
        })
    }

    /// A free buffer of at least `bytes`, or one `make` makes while the pool
    /// may have another; `None` when it may not or `make` fails. The buffer
    /// goes back to the pool if it is dropped without being lent (a run
    /// that failed).
    pub fn take(
        self: &Arc<LendPool<M>>,
        bytes: usize,
        make: impl FnOnce(usize) -> Option<M>,
    ) -> Option<Taken<M>> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let buf = match st.free.iter().position(|b| b.bytes().len() >= bytes) {
            Some(i) => st.free.swap_remove(i),
            None if st.made < self.most => {
                let buf = make(bytes)?;
                st.made += 1;
                buf
            }
            None => return None,
        };
        Some(Taken {
            lent: Lent {
                buf: Some(buf),
                len: 0,
                pool: Arc::downgrade(self),
            },
        })
    }
}

/// A buffer taken from its pool for one run's output.
pub struct Taken<M: HostMemory> {
    lent: Lent<M>,
}

impl<M: HostMemory> Taken<M> {
    /// The buffer.
    pub fn memory(&self) -> &M {
        self.lent.memory()
    }

    /// The buffer, for a copy into it.
    pub fn memory_mut(&mut self) -> &mut M {
        self.lent.memory_mut()
    }

    /// Lends the buffer, whose first `len` bytes the device has written
    /// (the run finished since), as the memory of a tensor; `None` (the
    /// buffer back in its pool) when `len` exceeds it.
    pub fn lend(self, len: usize) -> Option<Bytes> {
        if len > self.memory().bytes().len() {
            return None;
        }
        let mut lent = self.lent;
        lent.len = len;
        Some(Bytes::from_owner(lent))
    }
}

/// A buffer out of its pool, taken or lent to a tensor: back in the pool
/// when dropped (freed, when the executable is gone).
struct Lent<M: HostMemory> {
    /// Always `Some` until dropped.
    buf: Option<M>,
    len: usize,
    pool: Weak<LendPool<M>>,
}

impl<M: HostMemory> Lent<M> {
    fn memory(&self) -> &M {
        match &self.buf {
            Some(b) => b,
            None => unreachable!("a lent buffer is only taken when dropped"),
        }
    }

    fn memory_mut(&mut self) -> &mut M {
        match &mut self.buf {
            Some(b) => b,
            None => unreachable!("a lent buffer is only taken when dropped"),
        }
    }
}

impl<M: HostMemory> AsRef<[u8]> for Lent<M> {
    fn as_ref(&self) -> &[u8] {
        self.buf.as_ref().map_or(&[], |b| &b.bytes()[..self.len])
    }
}

impl<M: HostMemory> Drop for Lent<M> {
    fn drop(&mut self) {
        if let (Some(buf), Some(pool)) = (self.buf.take(), self.pool.upgrade()) {
            let mut st = pool.state.lock().unwrap_or_else(|p| p.into_inner());
            st.free.push(buf);
        }
    }
}

impl HostMemory for AlignedBuf {
    fn bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl LendPool<AlignedBuf> {
    /// `data` in a buffer of the pool, or in memory of its own when the
    /// pool is out.
    pub fn copy(self: &Arc<LendPool<AlignedBuf>>, data: &[u8]) -> Bytes {
        let Some(mut buf) = self.take(data.len(), AlignedBuf::try_zeroed) else {
            return Bytes::copy_from(data);
        };
        buf.memory_mut().as_mut_bytes()[..data.len()].copy_from_slice(data);
        buf.lend(data.len())
            .unwrap_or_else(|| Bytes::copy_from(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl HostMemory for Vec<u8> {
        fn bytes(&self) -> &[u8] {
            self
        }
    }

    #[test]
    fn lent_buffers_come_back_and_the_pool_stays_bounded() {
        let pool = LendPool::<Vec<u8>>::new(1);
        let make = |n: usize| Some(vec![7u8; n]);
        let a = pool.take(100, make).unwrap();
        let at = a.memory().as_ptr();
        let first = a.lend(60).unwrap();
        assert_eq!(first.as_slice(), &[7u8; 60][..]);
        let b = pool.take(100, make).unwrap();
        assert_ne!(
            b.memory().as_ptr(),
            at,
            "a lent buffer is not handed out again"
        );
        // Two per output: a third is refused while both are out.
        assert!(pool.take(100, make).is_none());
        let second = b.lend(100).unwrap();
        drop(first);
        let again = pool.take(80, make).unwrap();
        assert_eq!(again.memory().as_ptr(), at, "the returned buffer is reused");
        // Longer than the buffer: refused, and the buffer is back in the pool.
        assert!(again.lend(101).is_none());
        let third = pool.take(10, make).unwrap();
        assert_eq!(third.memory().as_ptr(), at);
        // Taken and dropped unlent (a failed run): back in the pool too.
        drop(third);
        assert_eq!(pool.take(10, make).unwrap().memory().as_ptr(), at);
        // Tensors outliving the pool keep their memory.
        drop(pool);
        assert_eq!(second.as_slice(), &[7u8; 100][..]);
    }

    #[test]
    fn copies_reuse_the_buffers_of_dropped_outputs() {
        let pool = LendPool::<AlignedBuf>::new(1);
        let data: Vec<u8> = (0..5000).map(|i| (i % 251) as u8).collect();
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
        // A live output's buffer is never handed out again; past two, the
        // copies are memory of their own.
        let third = pool.copy(&data);
        let fourth = pool.copy(&other);
        assert_ne!(third.as_slice().as_ptr(), at);
        assert_eq!(third.as_slice(), &data[..]);
        assert_eq!(fourth.as_slice(), &other[..]);
        assert_eq!(second.as_slice(), &other[..]);
    }
}
