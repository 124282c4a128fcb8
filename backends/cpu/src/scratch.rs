//! Per-thread scratch: the memory a kernel uses on each thread of a run
//! (a staged band of rows, a packed panel of the right operand, a bordered
//! plane), declared by the kernel when it is planned and laid out in the
//! run's arena.
//!
//! A kernel says what it holds with [`PerThread`]: `each`, the most any
//! thread holds inside one task of a split (the caller's own tasks
//! included), and `caller`, what the calling thread holds around its splits
//! (a product's packed left operand, shared by the tasks). A schedule keeps
//! the largest of its steps' (see [`PerThread::max`]); a run's arena then
//! ends in one region for the calling thread, `caller + each` bytes, and
//! one of `each` bytes for every worker ([`Regions`]), so that a plan's
//! memory is the whole of what its runs use, and a session's workers keep
//! no buffers of their own between runs.
//!
//! Kernels take their scratch with [`floats`] and [`bytes`]: a stack on the
//! thread's region, popped when the closure returns, so that nested takes
//! (a band staged, then a panel packed for its product) get disjoint
//! memory. Outside a planned run (node-by-node runs, constant folding,
//! tests) a take is served from buffers this thread keeps, as before; in a
//! planned run a take the region has no room for is also served so, and
//! counted ([`overflows`]): a kernel that declared less than it takes,
//! which the tests look for.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes a take is rounded up to (and each region's start is aligned to).
pub const ALIGN: usize = 64;

/// What a kernel holds on the threads of its run, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerThread {
    /// What the calling thread holds around its splits.
    pub caller: usize,
    /// The most any thread holds inside one task.
    pub each: usize,
}

impl PerThread {
    pub const NONE: PerThread = PerThread { caller: 0, each: 0 };

    /// `each` bytes on every thread.
    pub fn each(each: usize) -> PerThread {
        PerThread { caller: 0, each }
    }

    /// Room for both `self` and `other` held at once.
    pub fn plus(self, other: PerThread) -> PerThread {
        PerThread {
            caller: self.caller.saturating_add(other.caller),
            each: self.each.saturating_add(other.each),
        }
    }

    /// Room for either of `self` and `other`.
    pub fn max(self, other: PerThread) -> PerThread {
        PerThread {
            caller: self.caller.max(other.caller),
            each: self.each.max(other.each),
        }
    }

    /// Bytes of the calling thread's region: what it holds around its
    /// splits and in its own tasks (rounded up to [`ALIGN`]).
    pub fn first(self) -> usize {
        round(self.caller.saturating_add(self.each))
    }

    /// Bytes of a worker's region (rounded up to [`ALIGN`]).
    fn worker(self) -> usize {
        round(self.each)
    }

    /// Bytes of the regions of `threads` threads (saturating: a plan whose
    /// scratch does not fit an address space fails the arena limit).
    pub fn total(self, threads: usize) -> usize {
        let workers = threads.saturating_sub(1).saturating_mul(self.worker());
        self.first().saturating_add(workers)
    }
}

/// `n` rounded up to [`ALIGN`], saturating.
fn round(n: usize) -> usize {
    n.checked_next_multiple_of(ALIGN)
        .unwrap_or(usize::MAX - ALIGN + 1)
}

/// Bytes a take of `len` floats occupies.
pub fn floats_bytes(len: usize) -> usize {
    round(len.saturating_mul(4))
}

/// Bytes a take of `len` bytes occupies.
pub fn bytes_bytes(len: usize) -> usize {
    round(len)
}

/// A run's regions: the calling thread's first (`first` bytes), then one of
/// `each` bytes per worker, all in memory the run owns. Null when the
/// current code is not inside a planned run. Crate-private: a copy that
/// outlived its run, or entered by two threads at one index, would alias.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Regions {
    base: *mut u8,
    first: usize,
    each: usize,
    threads: usize,
}

impl Regions {
    pub(crate) const NONE: Regions = Regions {
        base: std::ptr::null_mut(),
        first: 0,
        each: 0,
        threads: 0,
    };

    /// The regions of `need` over `threads` threads at `base`.
    ///
    /// # Safety
    /// `base` is [`ALIGN`]-aligned and valid for writes of
    /// `need.total(threads)` bytes, which nothing else uses while the
    /// regions are entered.
    pub(crate) unsafe fn new(base: *mut u8, need: PerThread, threads: usize) -> Regions {
        Regions {
            base,
            first: need.first(),
            each: need.worker(),
            threads,
        }
    }

    /// The region of thread `index` (0: the caller; workers from 1).
    fn of(self, index: usize) -> Region {
        if self.base.is_null() || index >= self.threads {
            return Region::NONE;
        }
        let (start, len) = match index {
            0 => (0, self.first),
            i => (self.first + (i - 1) * self.each, self.each),
        };
        Region {
            // SAFETY: inside the regions' memory (see `new`).
            base: unsafe { self.base.add(start) },
            len,
            used: 0,
            regions: self,
        }
    }
}

/// This thread's region and how much of it is taken.
#[derive(Clone, Copy)]
struct Region {
    base: *mut u8,
    len: usize,
    used: usize,
    /// The run's regions, handed to the tasks of a split.
    regions: Regions,
}

impl Region {
    const NONE: Region = Region {
        base: std::ptr::null_mut(),
        len: 0,
        used: 0,
        regions: Regions::NONE,
    };
}

thread_local! {
    static REGION: Cell<Region> = const { Cell::new(Region::NONE) };
    /// Buffers for takes outside a planned run, reused from take to take.
    static SPARE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// Takes in planned runs that found no room in their region.
static OVERFLOWS: AtomicUsize = AtomicUsize::new(0);

/// Takes served from a region (the tests' evidence that regions are used).
#[cfg(test)]
pub(crate) static SERVED: AtomicUsize = AtomicUsize::new(0);

/// Takes in planned runs, since the process started, that found no room in
/// their thread's region (a kernel that declared less than it takes).
pub fn overflows() -> usize {
    OVERFLOWS.load(Ordering::Relaxed)
}

/// The current run's regions (to hand to a split's tasks).
pub(crate) fn regions() -> Regions {
    REGION.with(Cell::get).regions
}

/// Runs `f` with thread `index`'s region of `regions` as this thread's
/// (restoring the one before after).
pub(crate) fn enter<R>(regions: Regions, index: usize, f: impl FnOnce() -> R) -> R {
    struct Restore(Region);
    impl Drop for Restore {
        fn drop(&mut self) {
            REGION.with(|r| r.set(self.0));
        }
    }
    let _restore = Restore(REGION.with(|r| r.replace(regions.of(index))));
    f()
}

/// `f` over `len` floats of scratch (their values are whatever was there).
pub fn floats<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    take(floats_bytes(len), |p| {
        // SAFETY: `take` hands out `floats_bytes(len)` bytes, ALIGN-aligned,
        // that no one else uses until `f` returns; any bits are a float.
        f(unsafe { std::slice::from_raw_parts_mut(p.cast::<f32>(), len) })
    })
}

/// `f` over `len` bytes of scratch (their values are whatever was there).
pub fn bytes<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    take(bytes_bytes(len), |p| {
        // SAFETY: as in `floats`.
        f(unsafe { std::slice::from_raw_parts_mut(p, len) })
    })
}

/// `f` over `size` bytes (a multiple of ALIGN) at an ALIGN-aligned address:
/// the top of this thread's region, or a spare buffer.
fn take<R>(size: usize, f: impl FnOnce(*mut u8) -> R) -> R {
    let region = REGION.with(Cell::get);
    if !region.base.is_null() && size <= region.len - region.used {
        struct Pop(usize);
        impl Drop for Pop {
            fn drop(&mut self) {
                REGION.with(|r| {
                    r.set(Region {
                        used: self.0,
                        ..r.get()
                    })
                });
            }
        }
        REGION.with(|r| {
            r.set(Region {
                used: region.used + size,
                ..region
            })
        });
        let _pop = Pop(region.used);
        #[cfg(test)]
        SERVED.fetch_add(1, Ordering::Relaxed);
        // SAFETY: inside this thread's region, past what outer takes hold.
        return f(unsafe { region.base.add(region.used) });
    }
    if !region.base.is_null() {
        OVERFLOWS.fetch_add(1, Ordering::Relaxed);
    }
    let mut buf = SPARE.with_borrow_mut(Vec::pop).unwrap_or_default();
    if buf.len() < size.saturating_add(ALIGN) {
        buf.resize(size.saturating_add(ALIGN), 0);
    }
    struct Back(Vec<u8>);
    impl Drop for Back {
        fn drop(&mut self) {
            let buf = std::mem::take(&mut self.0);
            SPARE.with_borrow_mut(|s| s.push(buf));
        }
    }
    let mut back = Back(buf);
    let at = (ALIGN - back.0.as_ptr() as usize % ALIGN) % ALIGN;
    // SAFETY: `at + size` is within the buffer, which `back` owns until `f`
    // returns.
    f(unsafe { back.0.as_mut_ptr().add(at) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_takes_are_disjoint_and_popped() {
        let mut mem = vec![0u8; 4096 + ALIGN];
        let at = mem.as_ptr().align_offset(ALIGN);
        let need = PerThread {
            caller: 1024,
            each: 1024,
        };
        // SAFETY: `mem` holds need.total(2) = 3072 bytes from `at`.
        let regions = unsafe { Regions::new(mem.as_mut_ptr().add(at), need, 2) };
        let before = overflows();
        enter(regions, 0, || {
            floats(100, |a| {
                a.fill(1.0);
                floats(100, |b| {
                    b.fill(2.0);
                    assert!(a.as_ptr() as usize + 400 <= b.as_ptr() as usize);
                });
                assert!(a.iter().all(|&v| v == 1.0));
            });
            // Popped: the next take starts where the first did.
            let first = floats(1, |a| a.as_ptr() as usize);
            let again = floats(1, |a| a.as_ptr() as usize);
            assert_eq!(first, again);
            assert_eq!(first % ALIGN, 0);
        });
        enter(regions, 1, || {
            let p = bytes(1024, |b| b.as_ptr() as usize);
            assert_eq!(p, mem.as_ptr() as usize + at + 2048);
        });
        assert_eq!(overflows(), before);
    }

    #[test]
    fn a_take_without_a_region_is_served_and_not_counted() {
        let before = overflows();
        let sum = floats(1 << 16, |a| {
            a.fill(0.5);
            a.iter().sum::<f32>()
        });
        assert_eq!(sum, 32768.0);
        assert_eq!(overflows(), before);
    }
}
