//! The memory a run's intermediate values live in: one arena a run, taken
//! from a pool and given back after. A session's plans (one per set of
//! input shapes) share one pool, so a run of shapes not seen before takes
//! an arena another plan's runs have already brought into memory, and the
//! session holds as many arenas as runs at once, not one a shape: a text
//! detector's first run at each new image size page-faulted a fresh arena
//! (a tenth of the run), and every size kept its own.

use std::sync::Mutex;

/// 64-byte aligned bytes, zeroed when made.
pub(crate) struct Arena {
    bytes: Vec<u8>,
    start: usize,
    len: usize,
}

impl Arena {
    pub(crate) fn new(len: usize) -> Arena {
        // `vec![0u8; n]` is a calloc: fresh pages come zeroed from the
        // kernel and are touched when a step first writes them (a `Vec` of
        // 64-byte lines was set to zero page by page first).
        let bytes = vec![0u8; len + 63];
        let start = bytes.as_ptr().align_offset(64);
        Arena { bytes, start, len }
    }

    pub(crate) fn ptr(&mut self) -> *mut u8 {
        self.bytes[self.start..].as_mut_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// A pool of arenas, shared by the plans given it.
#[derive(Default)]
pub struct Arenas {
    pool: Mutex<Vec<Arena>>,
}

impl Arenas {
    pub fn new() -> Arenas {
        Arenas::default()
    }

    /// An arena of at least `need` bytes: the smallest pooled one that is
    /// large enough, or a new one (the largest pooled one dropped first,
    /// so that a pool of one run at a time holds one arena, of the largest
    /// size asked).
    pub(crate) fn take(&self, need: usize) -> Arena {
        let mut pool = self.lock();
        let fits = (0..pool.len())
            .filter(|&i| pool[i].len() >= need)
            .min_by_key(|&i| pool[i].len());
        if let Some(i) = fits {
            return pool.swap_remove(i);
        }
        let largest = (0..pool.len()).max_by_key(|&i| pool[i].len());
        if let Some(i) = largest {
            drop(pool.swap_remove(i));
        }
        drop(pool);
        Arena::new(need)
    }

    pub(crate) fn give(&self, a: Arena) {
        self.lock().push(a);
    }

    /// Bytes of the arenas in the pool now (none of those in use).
    pub fn pooled_bytes(&self) -> usize {
        self.lock().iter().map(Arena::len).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arena>> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arenas_are_aligned_and_zeroed() {
        for len in [0, 1, 63, 64, 1000, 1 << 20] {
            let mut a = Arena::new(len);
            assert_eq!(a.ptr() as usize % 64, 0);
            assert_eq!(a.len(), len);
            assert!(a.bytes[a.start..a.start + len].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn the_smallest_that_fits_is_taken_and_a_miss_replaces_the_largest() {
        let arenas = Arenas::new();
        arenas.give(Arena::new(100));
        arenas.give(Arena::new(300));
        arenas.give(Arena::new(200));
        assert_eq!(arenas.take(150).len(), 200);
        assert_eq!(arenas.pooled_bytes(), 400);
        // Nothing fits 1000: the 300 goes, a 1000 is made.
        let big = arenas.take(1000);
        assert_eq!(big.len(), 1000);
        assert_eq!(arenas.pooled_bytes(), 100);
        arenas.give(big);
        assert_eq!(arenas.take(500).len(), 1000);
    }
}
