//! How many threads a kernel may use.
//!
//! A session with more than one thread runs its kernels inside its rayon pool
//! and they split large work over it. A session with one thread runs them on
//! the calling thread under [`inline`]: handing a run to a pool thread and
//! waiting for it costs two wake-ups, several microseconds, which is a small
//! model's whole run. Kernels ask [`parallel`] (or [`threads`]) before they
//! split work, so that inside [`inline`] nothing reaches rayon's global pool.

use std::cell::Cell;

thread_local! {
    static INLINE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` on this thread with every kernel sequential.
pub fn inline<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            INLINE.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(INLINE.with(|c| c.replace(true)));
    f()
}

/// The threads a kernel may split its work over: 1 inside [`inline`], else
/// the current rayon pool's.
pub fn threads() -> usize {
    if INLINE.with(Cell::get) {
        1
    } else {
        rayon::current_num_threads()
    }
}

/// Whether a kernel may split its work over threads.
pub fn parallel() -> bool {
    threads() > 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_is_sequential_and_restores() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        pool.install(|| {
            assert_eq!(threads(), 2);
            inline(|| {
                assert!(!parallel());
                inline(|| assert_eq!(threads(), 1));
                assert_eq!(threads(), 1);
            });
            assert!(parallel());
        });
    }
}
