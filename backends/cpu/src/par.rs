//! The CPU backend's threads: a session's [`Pool`] and the fork-join calls
//! kernels split their work with.
//!
//! A session with `n > 1` threads owns a pool of `n - 1` workers; its runs
//! happen on the calling thread inside [`Pool::install`], and a kernel that
//! splits its work ([`for_each`] and the helpers over it) hands the tasks to
//! the workers and takes a share itself. Between tasks a worker spins for up
//! to [`SPIN`] before it sleeps: a model's parallel steps come microseconds
//! apart, and waking a sleeping thread costs tens of microseconds on a
//! virtual machine (the idle vCPU has halted), more than many steps take.
//! That is what onnxruntime's spinning pool does, and what rayon's pool,
//! used here before, did not (its workers sleep after a few yields).
//!
//! A split of `t` tasks over `n` threads wakes `w = min(t, n) - 1` workers
//! (workers `1..=w`); they and the caller take tasks from one counter. The
//! others do not touch the split, and a worker announces that it is inside
//! one with a flag on a cache line of its own: on the lent 16-core Xeon,
//! sixteen threads incrementing one shared count per split cost 5 us, most
//! of a small step.
//!
//! A run with one thread, and every task of a split, runs its kernels
//! sequentially: inside a task, or inside [`inline`], [`threads`] is 1, so
//! nested splits run in place and no call waits on a thread that waits on it.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long an idle worker spins, yielding now and then, before it sleeps.
pub const SPIN: Duration = Duration::from_micros(500);

thread_local! {
    static INLINE: Cell<bool> = const { Cell::new(false) };
    static CURRENT: Cell<*const Shared> = const { Cell::new(std::ptr::null()) };
}

/// A session's worker threads. Dropping it stops and joins them.
pub struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

/// A value alone on its cache lines (two: adjacent-line prefetch).
#[repr(align(128))]
struct Own<T>(T);

/// What the caller and the workers share.
struct Shared {
    /// The caller and its workers.
    threads: usize,
    /// The job of the current split, or null; a `*const Job`.
    slot: AtomicPtr<()>,
    /// `split << 32 | threads taking part`, bumped once per split.
    signal: Own<AtomicU64>,
    /// Per worker (index 1..threads; 0 is the caller's and unused): up from
    /// before the worker reads `slot` until it is done with the job there.
    busy: Box<[Own<AtomicBool>]>,
    /// Workers asleep on `wake`.
    sleeping: AtomicUsize,
    lock: Mutex<bool>,
    wake: Condvar,
    /// One split at a time: runs of one session from several threads take
    /// turns per split.
    dispatch: Mutex<()>,
}

/// One split: `tasks` calls of `f`, handed out in order.
struct Job<'a> {
    f: &'a (dyn Fn(usize) + Sync),
    tasks: usize,
    /// The caller's run's per-thread scratch; a worker takes its own.
    scratch: crate::scratch::Regions,
    next: AtomicUsize,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

impl Job<'_> {
    /// Takes tasks until none are left; a panic stops the handing out and is
    /// kept for the caller.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, SeqCst);
            if i >= self.tasks {
                return;
            }
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| (self.f)(i))) {
                self.next.store(self.tasks, SeqCst);
                let mut slot = self.panic.lock().unwrap_or_else(|e| e.into_inner());
                slot.get_or_insert(p);
            }
        }
    }
}

impl Pool {
    /// A pool for `threads` threads in all: the caller and `threads - 1`
    /// workers.
    pub fn new(threads: usize) -> std::io::Result<Pool> {
        let threads = threads.clamp(1, u32::MAX as usize);
        let shared = Arc::new(Shared {
            threads,
            slot: AtomicPtr::new(std::ptr::null_mut()),
            signal: Own(AtomicU64::new(0)),
            busy: (0..threads).map(|_| Own(AtomicBool::new(false))).collect(),
            sleeping: AtomicUsize::new(0),
            lock: Mutex::new(false),
            wake: Condvar::new(),
            dispatch: Mutex::new(()),
        });
        let mut pool = Pool {
            shared: shared.clone(),
            workers: Vec::with_capacity(threads - 1),
        };
        for i in 1..threads {
            let shared = shared.clone();
            let handle = std::thread::Builder::new()
                .name(format!("rlx-cpu-{i}"))
                .spawn(move || worker(&shared, i))?;
            pool.workers.push(handle);
        }
        Ok(pool)
    }

    /// The caller and the workers.
    pub fn threads(&self) -> usize {
        self.shared.threads
    }

    /// Runs `f` on this thread with kernels splitting their work over the pool.
    pub fn install<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(*const Shared, bool);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
                INLINE.with(|c| c.set(self.1));
            }
        }
        let _restore = Restore(
            CURRENT.with(|c| c.replace(Arc::as_ptr(&self.shared))),
            INLINE.with(|c| c.replace(false)),
        );
        f()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        *self.shared.lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.shared.wake.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pool({} threads)", self.shared.threads)
    }
}

/// Worker `me`: waits for the next split (spinning, then asleep) and, when
/// it takes part, raises its flag, works on the job in the slot, and lowers
/// the flag.
fn worker(shared: &Shared, me: usize) {
    INLINE.with(|c| c.set(true));
    let split = |signal: u64| signal >> 32;
    // Splits are numbered from 1: one published before this thread got
    // here is still to be seen.
    let mut seen = 0;
    loop {
        let start = Instant::now();
        let mut spins = 0u32;
        let signal = loop {
            let now = shared.signal.0.load(SeqCst);
            if split(now) != seen {
                break now;
            }
            spins = spins.wrapping_add(1);
            if spins % 64 != 0 {
                std::hint::spin_loop();
                continue;
            }
            if start.elapsed() < SPIN {
                // Lets another runnable thread have this core when the
                // machine has fewer cores than threads.
                std::thread::yield_now();
                continue;
            }
            let mut stop = shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            shared.sleeping.fetch_add(1, SeqCst);
            while !*stop && split(shared.signal.0.load(SeqCst)) == seen {
                stop = shared.wake.wait(stop).unwrap_or_else(|e| e.into_inner());
            }
            shared.sleeping.fetch_sub(1, SeqCst);
            if *stop {
                return;
            }
            break shared.signal.0.load(SeqCst);
        };
        seen = split(signal);
        if me < (signal & u64::from(u32::MAX)) as usize {
            let flag = &shared.busy[me].0;
            flag.store(true, SeqCst);
            let job = shared.slot.load(SeqCst) as *const Job;
            if !job.is_null() {
                // SAFETY: the caller keeps the job alive until it has taken
                // it out of the slot and seen every flag down; this worker
                // raised its flag before reading the slot.
                let job = unsafe { &*job };
                crate::scratch::enter(job.scratch, me, || job.work());
            }
            flag.store(false, SeqCst);
        }
    }
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

/// The threads a kernel may split its work over: 1 inside [`inline`] or a
/// task, or outside [`Pool::install`]; else the installed pool's.
pub fn threads() -> usize {
    let pool = CURRENT.with(Cell::get);
    if INLINE.with(Cell::get) || pool.is_null() {
        1
    } else {
        // SAFETY: `install` keeps the pool alive while it is current.
        unsafe { (*pool).threads }
    }
}

/// Whether a kernel may split its work over threads.
pub fn parallel() -> bool {
    threads() > 1
}

/// Calls `f(i)` for every `i` in `0..tasks`, over the pool's threads when
/// [`parallel`] (the caller takes tasks too), else in order on this thread.
/// Tasks are handed out one at a time in order, so fewer, larger tasks cost
/// less; each task runs with kernels sequential.
pub fn for_each(tasks: usize, f: impl Fn(usize) + Sync) {
    let pool = CURRENT.with(Cell::get);
    if tasks <= 1 || !parallel() {
        (0..tasks).for_each(f);
        return;
    }
    // SAFETY: `install` keeps the pool alive while it is current.
    let shared = unsafe { &*pool };
    let _turn = shared.dispatch.lock().unwrap_or_else(|e| e.into_inner());
    let width = tasks.min(shared.threads);
    let job = Job {
        f: &f,
        tasks,
        scratch: crate::scratch::regions(),
        next: AtomicUsize::new(0),
        panic: Mutex::new(None),
    };
    shared.slot.store(&job as *const Job as *mut (), SeqCst);
    let split = (shared.signal.0.load(SeqCst) >> 32) + 1;
    shared.signal.0.store(split << 32 | width as u64, SeqCst);
    if shared.sleeping.load(SeqCst) > 0 {
        let _lock = shared.lock.lock().unwrap_or_else(|e| e.into_inner());
        shared.wake.notify_all();
    }
    inline(|| job.work());
    shared.slot.store(std::ptr::null_mut(), SeqCst);
    // Every worker's flag, not only this split's: one still on an earlier
    // split may have read the slot after this job went in. A flag that is
    // down stays in this core's cache; only those that moved cost a miss.
    for flag in &shared.busy[1..] {
        while flag.0.load(SeqCst) {
            std::hint::spin_loop();
        }
    }
    let panic = job.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(p) = panic {
        resume_unwind(p);
    }
}

/// A pointer that tasks may share; each task touches a disjoint part.
struct Shareable<T>(*mut T);
impl<T> Clone for Shareable<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Shareable<T> {}
// SAFETY: the functions below hand each task a disjoint part of the memory.
unsafe impl<T: Send> Send for Shareable<T> {}
unsafe impl<T: Send> Sync for Shareable<T> {}

impl<T> Shareable<T> {
    /// Elements `start..start + len`.
    ///
    /// # Safety
    /// In bounds of the slice this came from, and no other live reference to
    /// those elements.
    unsafe fn part<'a>(self, start: usize, len: usize) -> &'a mut [T] {
        std::slice::from_raw_parts_mut(self.0.add(start), len)
    }
}

/// Calls `f(c, chunk)` for the chunks of `per` elements of `data` (the last
/// may be shorter), over the pool when [`parallel`].
pub fn chunks_mut<T: Send>(data: &mut [T], per: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let per = per.max(1);
    let (len, base) = (data.len(), Shareable(data.as_mut_ptr()));
    for_each(len.div_ceil(per), |c| {
        let start = c * per;
        // SAFETY: chunk `c` is `start..start + per` clipped to the slice; the
        // chunks are disjoint and `data` is borrowed mutably throughout.
        f(c, unsafe { base.part(start, per.min(len - start)) })
    });
}

/// [`chunks_mut`] over two slices in step: chunk `c` of `a` (`pa` elements)
/// with chunk `c` of `b` (`pb` elements), as many chunks as the shorter has.
pub fn chunks_mut2<A: Send, B: Send>(
    a: &mut [A],
    pa: usize,
    b: &mut [B],
    pb: usize,
    f: impl Fn(usize, &mut [A], &mut [B]) + Sync,
) {
    let (pa, pb) = (pa.max(1), pb.max(1));
    let (la, lb) = (a.len(), b.len());
    let (ba, bb) = (Shareable(a.as_mut_ptr()), Shareable(b.as_mut_ptr()));
    let n = la.div_ceil(pa).min(lb.div_ceil(pb));
    for_each(n, |c| {
        let (sa, sb) = (c * pa, c * pb);
        // SAFETY: as in `chunks_mut`, for each slice.
        let (x, y) = unsafe { (ba.part(sa, pa.min(la - sa)), bb.part(sb, pb.min(lb - sb))) };
        f(c, x, y)
    });
}

/// `[f(0), .., f(tasks - 1)]`, computed over the pool when [`parallel`].
pub fn map<R: Send>(tasks: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    let mut out: Vec<Option<R>> = (0..tasks).map(|_| None).collect();
    chunks_mut(&mut out, 1, |i, o| o[0] = Some(f(i)));
    out.into_iter().flatten().collect()
}

/// Runs `a` and `b`, on two threads when [`parallel`].
pub fn join<A: Send, B: Send>(
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    /// A call made once, by whichever task takes it, and its result.
    struct Once<F, R>(Mutex<(Option<F>, Option<R>)>);
    impl<F: FnOnce() -> R, R> Once<F, R> {
        fn call(&self) {
            let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(f) = s.0.take() {
                s.1 = Some(f());
            }
        }
        fn result(self) -> R {
            let s = self.0.into_inner().unwrap_or_else(|e| e.into_inner());
            match s.1 {
                Some(r) => r,
                None => unreachable!("for_each returns after every task ran"),
            }
        }
    }
    let (ra, rb) = (
        Once(Mutex::new((Some(a), None))),
        Once(Mutex::new((Some(b), None))),
    );
    for_each(2, |i| if i == 0 { ra.call() } else { rb.call() });
    (ra.result(), rb.result())
}

/// An output that the tasks of one split share, each writing a part of its
/// own (disjoint tiles, rows or columns): the pointer crosses threads, the
/// caller keeps the disjointness (every use is an `unsafe` write).
pub(crate) struct Disjoint<T>(*mut T);

// SAFETY: tasks only write disjoint parts through it (see the type's doc).
unsafe impl<T> Send for Disjoint<T> {}
unsafe impl<T> Sync for Disjoint<T> {}

impl<T> Disjoint<T> {
    pub(crate) fn new(out: &mut [T]) -> Disjoint<T> {
        Disjoint(out.as_mut_ptr())
    }

    /// The element `i` places from the start.
    pub(crate) fn at(&self, i: usize) -> *mut T {
        self.0.wrapping_add(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_is_sequential_and_restores() {
        let pool = Pool::new(2).unwrap();
        pool.install(|| {
            assert_eq!(threads(), 2);
            inline(|| {
                assert!(!parallel());
                inline(|| assert_eq!(threads(), 1));
                assert_eq!(threads(), 1);
            });
            assert!(parallel());
        });
        assert_eq!(threads(), 1, "outside install");
    }

    /// Every task runs once, on several threads, nested splits run in place,
    /// and the pool serves splits after its workers went to sleep.
    #[test]
    fn every_task_runs_once() {
        let pool = Pool::new(4).unwrap();
        for round in 0..3 {
            let counts: Vec<AtomicUsize> = (0..1000).map(|_| AtomicUsize::new(0)).collect();
            let names = Mutex::new(std::collections::HashSet::new());
            pool.install(|| {
                for_each(counts.len(), |i| {
                    assert_eq!(threads(), 1, "a task's kernels are sequential");
                    for_each(3, |_| {});
                    counts[i].fetch_add(1, SeqCst);
                    let name = std::thread::current().name().map(str::to_owned);
                    names.lock().unwrap().insert(name);
                    std::hint::black_box((0..200).sum::<usize>());
                });
            });
            assert!(counts.iter().all(|c| c.load(SeqCst) == 1), "round {round}");
            assert!(!names.lock().unwrap().is_empty());
            if round == 1 {
                std::thread::sleep(SPIN * 4);
            }
        }
    }

    #[test]
    fn chunks_map_and_join() {
        let pool = Pool::new(3).unwrap();
        pool.install(|| {
            let mut v = vec![0usize; 1001];
            chunks_mut(&mut v, 10, |c, s| s.iter_mut().for_each(|x| *x = c));
            assert!(v.iter().enumerate().all(|(i, &x)| x == i / 10));
            let (mut a, mut b) = (vec![0u8; 7], vec![0u32; 30]);
            chunks_mut2(&mut a, 2, &mut b, 10, |c, x, y| {
                x.fill(c as u8 + 1);
                y.fill(c as u32 + 1);
            });
            assert_eq!(a, [1, 1, 2, 2, 3, 3, 0]);
            assert_eq!(b.iter().filter(|&&x| x == 3).count(), 10);
            assert_eq!(map(5, |i| i * i), [0, 1, 4, 9, 16]);
            assert_eq!(join(|| 1, || "b"), (1, "b"));
        });
    }

    /// What a split costs: empty tasks handed to awake workers, and the
    /// same after a pause longer than [`SPIN`]. A measurement, not a check
    /// (`cargo test --release -p rlx-cpu --lib dispatch_cost -- --ignored
    /// --nocapture`).
    #[test]
    #[ignore = "prints timings; run by hand on the machine in question"]
    fn dispatch_cost() {
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        let pool = Pool::new(threads).unwrap();
        pool.install(|| {
            let n = AtomicUsize::new(0);
            for tasks in [2, threads, 4 * threads] {
                for _ in 0..100 {
                    for_each(tasks, |_| {
                        n.fetch_add(1, SeqCst);
                    });
                }
                let runs = 10_000;
                let t = Instant::now();
                for _ in 0..runs {
                    for_each(tasks, |_| {
                        n.fetch_add(1, SeqCst);
                    });
                }
                let awake = t.elapsed() / runs;
                let mut asleep = Duration::ZERO;
                for _ in 0..20 {
                    std::thread::sleep(SPIN * 3);
                    let t = Instant::now();
                    for_each(tasks, |_| {
                        n.fetch_add(1, SeqCst);
                    });
                    asleep += t.elapsed();
                }
                println!(
                    "{threads} threads, {tasks} tasks: {awake:?} per split awake, {:?} after sleeping",
                    asleep / 20
                );
            }
        });
    }

    #[test]
    fn a_panicking_task_reaches_the_caller() {
        let pool = Pool::new(2).unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.install(|| for_each(8, |i| assert!(i != 5, "task five")))
        }));
        assert!(r.is_err());
        // The pool still works.
        let n = AtomicUsize::new(0);
        pool.install(|| {
            for_each(8, |_| {
                n.fetch_add(1, SeqCst);
            })
        });
        assert_eq!(n.load(SeqCst), 8);
    }
}
