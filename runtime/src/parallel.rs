//! The parallel-for contract between compiled models and whoever owns the threads, and
//! (with `std`) the runtime's own thread pool that implements it.
//!
//! A compiled model's `PREFIX_run_parallel` takes a [`Parallel`] (`nnefc_parallel` in C):
//! a pool pointer, the number of workers and a `parallel_for(pool, task, ctx, n_tasks)`
//! callback. The callback must call `task(ctx, i, worker)` exactly once for every
//! `i in 0..n_tasks`, in any order and on any threads, with a `worker` index below
//! `workers` that no two concurrently running tasks share (the model uses it to pick its
//! per-worker scratch in the workspace), and return once every task has finished. Tasks
//! never fail and never unwind. Splitting is the model's business: tasks write disjoint
//! outputs and compute each element exactly as the serial code does, so results do not
//! depend on the thread count or on the order the callback chooses.
//!
//! [`ThreadPool`] is the default implementation: `workers − 1` threads started once, which
//! spin briefly and then park between calls; the calling thread is worker 0 and takes
//! tasks too. A call's tasks are cut into one contiguous part per worker; each worker
//! runs its own part first and then takes what is left of the others, so a helper that is
//! descheduled delays nothing but the task it holds. A
//! call allocates nothing. A pool serves one `parallel_for` at a time; a concurrent second
//! caller runs its tasks inline on its own thread (worker 0 of its own workspace), so
//! sharing a pool between threads is safe, merely not faster.
//!
//! Not here: how a model splits its work (the compiler's `back::object` and the GEMM
//! driver's [`crate::gemm`] parts).

use core::ffi::c_void;

/// A task of a parallel-for: `task(ctx, index, worker)`.
pub type TaskFn = unsafe extern "C" fn(ctx: *mut c_void, index: usize, worker: usize);

/// `parallel_for(pool, task, ctx, n_tasks)`: runs `task(ctx, i, worker)` for every
/// `i < n_tasks` (see the module docs for the contract) and returns when all are done.
pub type ParallelForFn =
    unsafe extern "C" fn(pool: *mut c_void, task: TaskFn, ctx: *mut c_void, n_tasks: usize);

/// `nnefc_parallel`: how a compiled model may run work in parallel. Passing null (or a
/// value with `workers ≤ 1` or no callback) means serial.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Parallel {
    /// Handed back to `parallel_for` unchanged.
    pub pool: *mut c_void,
    /// Number of distinct `worker` indices `parallel_for` may pass (≥ 1). The workspace
    /// must be sized for this many workers (`PREFIX_WORKSPACE_SIZE_FOR(workers)`).
    pub workers: usize,
    /// The callback; `None` (a null function pointer in C) means serial.
    pub parallel_for: Option<ParallelForFn>,
}

impl Parallel {
    /// Serial execution (one worker, no callback).
    pub const SERIAL: Parallel = Parallel {
        pool: core::ptr::null_mut(),
        workers: 1,
        parallel_for: None,
    };
}

/// Number of workers `par` offers (1 for null or serial).
///
/// # Safety
/// `par` is null or points to a valid [`Parallel`].
pub(crate) unsafe fn workers(par: *const Parallel) -> usize {
    if par.is_null() {
        return 1;
    }
    // SAFETY: non-null and valid by the caller's contract.
    let p = unsafe { &*par };
    match p.parallel_for {
        Some(_) => p.workers.max(1),
        None => 1,
    }
}

/// Runs `task(ctx, i, w)` for `i in 0..n` through `par`, or inline (worker 0) when `par`
/// is serial or `n ≤ 1`.
///
/// # Safety
/// `par` is null or valid; `task` may be called with `ctx` from several threads at once.
pub(crate) unsafe fn run(par: *const Parallel, task: TaskFn, ctx: *mut c_void, n: usize) {
    // SAFETY: forwarded caller contract.
    unsafe {
        if n > 1 && workers(par) > 1 {
            let p = &*par;
            if let Some(f) = p.parallel_for {
                f(p.pool, task, ctx, n);
                return;
            }
        }
        for i in 0..n {
            task(ctx, i, 0);
        }
    }
}

/// Runs `f(args, lo, hi)` over `0..count` cut into `tasks` contiguous ranges of near-equal
/// length, one task each, through `par` (see [`run`]): how the window kernels split their
/// planes or units of work.
///
/// # Safety
/// `par` is null or valid; `f` may be called with `args` from several threads at once,
/// each call on a disjoint range.
pub(crate) unsafe fn ranges<T>(
    par: *const Parallel,
    args: &T,
    count: usize,
    tasks: usize,
    f: unsafe fn(&T, usize, usize),
) {
    /// `f` on its range, the worker aside.
    unsafe fn each<T>(
        (args, f): &(&T, unsafe fn(&T, usize, usize)),
        lo: usize,
        hi: usize,
        _worker: usize,
    ) {
        // SAFETY: forwarded caller contract.
        unsafe { f(args, lo, hi) }
    }
    // SAFETY: forwarded caller contract.
    unsafe { worker_ranges(par, &(args, f), count, tasks, each::<T>) }
}

/// [`ranges`] for work that needs to know which worker runs it (to use that worker's
/// scratch): `f(args, lo, hi, worker)`.
///
/// # Safety
/// As for [`ranges`]; two tasks that run at once never have the same `worker`.
pub(crate) unsafe fn worker_ranges<T>(
    par: *const Parallel,
    args: &T,
    count: usize,
    tasks: usize,
    f: unsafe fn(&T, usize, usize, usize),
) {
    struct Job<'a, T> {
        args: &'a T,
        count: usize,
        tasks: usize,
        f: unsafe fn(&T, usize, usize, usize),
    }
    unsafe extern "C" fn task<T>(ctx: *mut c_void, i: usize, worker: usize) {
        // SAFETY: `ctx` is the `Job` of the enclosing call, alive until it returns.
        let j = unsafe { &*ctx.cast::<Job<'_, T>>() };
        // SAFETY: a range of its own, by the caller's contract.
        unsafe {
            (j.f)(
                j.args,
                i * j.count / j.tasks,
                (i + 1) * j.count / j.tasks,
                worker,
            )
        }
    }
    let tasks = tasks.max(1);
    let job = Job {
        args,
        count,
        tasks,
        f,
    };
    // SAFETY: `task` reads `job` for the duration of the call only.
    unsafe {
        run(
            par,
            task::<T>,
            (&raw const job).cast_mut().cast::<c_void>(),
            tasks,
        )
    }
}

#[cfg(feature = "std")]
pub use pool::{ThreadPool, nnefc_pool_free, nnefc_pool_new, nnefc_pool_parallel};

#[cfg(feature = "std")]
mod pool {
    use super::{Parallel, TaskFn};
    use core::ffi::c_void;
    use std::boxed::Box;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
    use std::thread::{self, JoinHandle, Thread};
    use std::vec::Vec;

    /// Spin iterations a helper waits for the next job before parking. Jobs of one
    /// inference come microseconds apart, and waking a parked thread costs tens of
    /// microseconds, so helpers stay awake through an inference and sleep between them.
    const SPIN: u32 = 1 << 16;

    /// One part's next unclaimed task: the generation in the high 32 bits, the index in
    /// the low 32. On its own cache line, so that workers claiming from their own parts
    /// do not contend.
    #[repr(align(128))]
    struct Part(AtomicU64);

    /// The shared state of a pool.
    ///
    /// A job is published seqlock-style: `state` holds the generation in its high 32 bits.
    /// The caller makes the generation odd while it writes the job fields, then even; a
    /// helper reads the fields between two loads of an equal, even generation. The tasks
    /// are cut into one contiguous part per taking worker, and worker `w` claims from part
    /// `w` first, then from the others (so a descheduled helper delays nothing but the
    /// task it holds). Contiguous parts matter on a machine whose cores have private
    /// caches: consecutive layers cut alike (row bands, pixel ranges) then hand each
    /// worker the rows it wrote itself. A claim is a compare-and-swap on a part's
    /// generation and index, which fails once the generation moved on, so a helper that
    /// wakes late can neither run a task twice nor run one with another job's fields, and
    /// the caller never waits for a helper that took no task: it waits for `done == n`.
    struct Inner {
        workers: usize,
        busy: AtomicBool,
        shutdown: AtomicBool,
        state: AtomicU64,
        task: AtomicUsize,
        ctx: AtomicUsize,
        n: AtomicUsize,
        /// Number of parts of the current job (`min(workers, n)`).
        parts: AtomicUsize,
        /// Tasks of the current job that have finished.
        done: AtomicUsize,
        /// Per part (`workers` of them, the first `parts` in use).
        next: Box<[Part]>,
        threads: std::sync::OnceLock<Vec<Thread>>,
    }

    impl Inner {
        /// Claims and runs tasks of generation `generation` until none are left: those of
        /// part `worker % parts` first, then the other parts' in turn.
        fn drain(
            &self,
            generation: u64,
            task: TaskFn,
            ctx: *mut c_void,
            n: usize,
            parts: usize,
            worker: usize,
        ) {
            for k in 0..parts {
                let part = (worker + k) % parts;
                let end = ((part + 1) * n / parts) as u64;
                let slot = &self.next[part].0;
                let mut cur = slot.load(Ordering::Acquire);
                loop {
                    if cur >> 32 != generation || (cur & 0xFFFF_FFFF) >= end {
                        break;
                    }
                    match slot.compare_exchange_weak(
                        cur,
                        cur + 1,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => {
                            let i = (cur & 0xFFFF_FFFF) as usize;
                            // SAFETY: task i of the job published as `generation`, claimed
                            // once; `worker` is this thread's own index.
                            unsafe { task(ctx, i, worker) };
                            self.done.fetch_add(1, Ordering::Release);
                            cur = slot.load(Ordering::Acquire);
                        }
                        Err(now) => cur = now,
                    }
                }
            }
        }

        fn helper(&self, worker: usize) {
            let mut seen = 0u64;
            loop {
                let mut spins = 0u32;
                let generation = loop {
                    if self.shutdown.load(Ordering::Acquire) {
                        return;
                    }
                    let g = self.state.load(Ordering::Acquire) >> 32;
                    if g != seen && g.is_multiple_of(2) {
                        break g;
                    }
                    if spins < SPIN {
                        spins += 1;
                        core::hint::spin_loop();
                    } else {
                        thread::park();
                    }
                };
                seen = generation;
                let task = self.task.load(Ordering::Relaxed);
                let ctx = self.ctx.load(Ordering::Relaxed) as *mut c_void;
                let n = self.n.load(Ordering::Relaxed);
                let parts = self.parts.load(Ordering::Relaxed);
                fence(Ordering::Acquire);
                if self.state.load(Ordering::Relaxed) >> 32 != generation || task == 0 {
                    continue;
                }
                // SAFETY: a non-zero `task` was stored from a `TaskFn` by `parallel_for`
                // for this generation (validated above).
                let task: TaskFn = unsafe { core::mem::transmute::<usize, TaskFn>(task) };
                self.drain(generation, task, ctx, n, parts, worker);
            }
        }

        /// # Safety
        /// The `parallel_for` contract.
        unsafe fn parallel_for(&self, task: TaskFn, ctx: *mut c_void, n: usize) {
            let helpers = (self.workers - 1).min(n.saturating_sub(1));
            if helpers == 0
                || n > u32::MAX as usize
                || self
                    .busy
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_err()
            {
                for i in 0..n {
                    // SAFETY: caller's contract; inline on this thread as worker 0.
                    unsafe { task(ctx, i, 0) };
                }
                return;
            }
            // Publish: odd generation while writing, then even with index 0. Generations
            // live in 32 bits and wrap; masking keeps their parity across the wrap.
            const GEN: u64 = 0xFFFF_FFFF;
            let generation = ((self.state.load(Ordering::Relaxed) >> 32) + 1) & GEN;
            self.state.store(generation << 32, Ordering::Relaxed);
            fence(Ordering::Release);
            self.task.store(task as usize, Ordering::Relaxed);
            self.ctx.store(ctx as usize, Ordering::Relaxed);
            self.n.store(n, Ordering::Relaxed);
            self.done.store(0, Ordering::Relaxed);
            let generation = (generation + 1) & GEN;
            let parts = helpers + 1;
            self.parts.store(parts, Ordering::Relaxed);
            for (p, slot) in self.next[..parts].iter().enumerate() {
                slot.0
                    .store(generation << 32 | (p * n / parts) as u64, Ordering::Relaxed);
            }
            self.state.store(generation << 32, Ordering::Release);
            if let Some(threads) = self.threads.get() {
                for t in threads.iter().take(helpers) {
                    t.unpark();
                }
            }
            self.drain(generation, task, ctx, n, parts, 0);
            let mut spins = 0u32;
            while self.done.load(Ordering::Acquire) < n {
                if spins < SPIN {
                    spins += 1;
                    core::hint::spin_loop();
                } else {
                    thread::yield_now();
                }
            }
            self.busy.store(false, Ordering::Release);
        }
    }

    /// The runtime's thread pool: `workers − 1` helper threads plus the calling thread.
    ///
    /// Created once and reused; [`ThreadPool::parallel`] hands compiled models the
    /// [`Parallel`] that drives it. Dropping the pool stops and joins the helpers.
    pub struct ThreadPool {
        inner: Arc<Inner>,
        handles: Vec<JoinHandle<()>>,
    }

    impl ThreadPool {
        /// A pool of `threads` workers in all (the caller counts as one); 0 means
        /// [`std::thread::available_parallelism`].
        ///
        /// # Errors
        /// The operating system refused to start a thread.
        pub fn new(threads: usize) -> std::io::Result<ThreadPool> {
            let workers = if threads == 0 {
                thread::available_parallelism().map_or(1, |n| n.get())
            } else {
                threads
            };
            let inner = Arc::new(Inner {
                workers,
                busy: AtomicBool::new(false),
                shutdown: AtomicBool::new(false),
                state: AtomicU64::new(0),
                task: AtomicUsize::new(0),
                ctx: AtomicUsize::new(0),
                n: AtomicUsize::new(0),
                parts: AtomicUsize::new(0),
                done: AtomicUsize::new(0),
                next: (0..workers).map(|_| Part(AtomicU64::new(0))).collect(),
                threads: std::sync::OnceLock::new(),
            });
            let mut pool = ThreadPool {
                inner: inner.clone(),
                handles: Vec::new(),
            };
            for s in 0..workers - 1 {
                let inner = inner.clone();
                let h = thread::Builder::new()
                    .name(std::format!("nnefc-worker-{}", s + 1))
                    .spawn(move || inner.helper(s + 1))?;
                pool.handles.push(h);
            }
            let _ = inner
                .threads
                .set(pool.handles.iter().map(|h| h.thread().clone()).collect());
            Ok(pool)
        }

        /// Number of workers, the calling thread included.
        pub fn workers(&self) -> usize {
            self.inner.workers
        }

        /// The generation of the last published job (tests of the wrap-around).
        #[cfg(test)]
        pub(crate) fn generation(&self) -> u64 {
            self.inner.state.load(Ordering::Acquire) >> 32
        }

        /// Sets the generation, as if that many jobs had run (tests of the wrap-around).
        #[cfg(test)]
        pub(crate) fn set_generation(&self, g: u64) {
            self.inner.state.store(g << 32, Ordering::Release);
        }

        /// The descriptor to pass to `PREFIX_run_parallel`; valid while the pool lives.
        pub fn parallel(&self) -> Parallel {
            Parallel {
                pool: Arc::as_ptr(&self.inner) as *mut c_void,
                workers: self.inner.workers,
                parallel_for: Some(pool_parallel_for),
            }
        }

        /// Runs `task(ctx, i, worker)` for `i in 0..n` on the pool.
        ///
        /// # Safety
        /// `task` may be called concurrently with `ctx` from `workers()` threads.
        pub unsafe fn parallel_for(&self, task: TaskFn, ctx: *mut c_void, n: usize) {
            // SAFETY: forwarded.
            unsafe { self.inner.parallel_for(task, ctx, n) }
        }
    }

    impl Drop for ThreadPool {
        fn drop(&mut self) {
            self.inner.shutdown.store(true, Ordering::Release);
            for h in &self.handles {
                h.thread().unpark();
            }
            for h in self.handles.drain(..) {
                let _ = h.join();
            }
        }
    }

    impl core::fmt::Debug for ThreadPool {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_struct("ThreadPool")
                .field("workers", &self.inner.workers)
                .finish()
        }
    }

    /// The [`ParallelForFn`](super::ParallelForFn) of [`ThreadPool`].
    unsafe extern "C" fn pool_parallel_for(
        pool: *mut c_void,
        task: TaskFn,
        ctx: *mut c_void,
        n: usize,
    ) {
        // SAFETY: `pool` came from `ThreadPool::parallel`, whose pool outlives the call.
        unsafe { (*(pool as *const Inner)).parallel_for(task, ctx, n) }
    }

    /// C: `nnefc_pool *nnefc_pool_new(size_t threads)`: a pool of `threads` workers (0 =
    /// all cores), or null if a thread could not be started.
    #[unsafe(no_mangle)]
    pub extern "C" fn nnefc_pool_new(threads: usize) -> *mut ThreadPool {
        match ThreadPool::new(threads) {
            Ok(p) => Box::into_raw(Box::new(p)),
            Err(_) => core::ptr::null_mut(),
        }
    }

    /// C: `void nnefc_pool_free(nnefc_pool *)`: stops the helpers (null is ignored).
    ///
    /// # Safety
    /// `pool` is null or came from [`nnefc_pool_new`] and is not used afterwards.
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn nnefc_pool_free(pool: *mut ThreadPool) {
        if !pool.is_null() {
            // SAFETY: allocated by nnefc_pool_new.
            drop(unsafe { Box::from_raw(pool) });
        }
    }

    /// C: `nnefc_parallel nnefc_pool_parallel(const nnefc_pool *)`: the descriptor for
    /// `PREFIX_run_parallel` (serial for null).
    ///
    /// # Safety
    /// `pool` is null or a live pool from [`nnefc_pool_new`].
    #[unsafe(no_mangle)]
    pub unsafe extern "C" fn nnefc_pool_parallel(pool: *const ThreadPool) -> Parallel {
        if pool.is_null() {
            Parallel::SERIAL
        } else {
            // SAFETY: live pool by the caller's contract.
            unsafe { (*pool).parallel() }
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::ThreadPool;
    use core::ffi::c_void;
    use std::sync::atomic::{AtomicUsize, Ordering};

    unsafe extern "C" fn count(ctx: *mut c_void, _i: usize, _w: usize) {
        // SAFETY: ctx is the counter below.
        unsafe { (*(ctx as *const AtomicUsize)).fetch_add(1, Ordering::SeqCst) };
    }

    /// A worker that stalls on its first task delays nothing but that task: the other
    /// workers take the rest of its part. Worker 0's first task waits (up to 20 s, then
    /// fails rather than hangs) until every other task has finished, which happens only
    /// if the helpers claim the tasks of worker 0's part too.
    #[test]
    fn a_stalled_worker_s_part_is_taken_by_the_others() {
        struct Ctx {
            n: usize,
            done: AtomicUsize,
            waited: AtomicUsize,
            timed_out: AtomicUsize,
        }
        unsafe extern "C" fn task(ctx: *mut c_void, _i: usize, w: usize) {
            // SAFETY: ctx is the test's Ctx.
            let c = unsafe { &*(ctx as *const Ctx) };
            if w == 0 && c.waited.fetch_add(1, Ordering::SeqCst) == 0 {
                let t = std::time::Instant::now();
                while c.done.load(Ordering::SeqCst) < c.n - 1 {
                    if t.elapsed().as_secs() >= 20 {
                        c.timed_out.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                    std::thread::yield_now();
                }
            }
            c.done.fetch_add(1, Ordering::SeqCst);
        }
        for threads in [2usize, 3] {
            let pool = ThreadPool::new(threads).expect("threads start");
            for n in [2usize, 5, 16] {
                let ctx = Ctx {
                    n,
                    done: AtomicUsize::new(0),
                    waited: AtomicUsize::new(0),
                    timed_out: AtomicUsize::new(0),
                };
                // SAFETY: `task` only touches `ctx`, which outlives the call.
                unsafe { pool.parallel_for(task, &ctx as *const Ctx as *mut c_void, n) };
                assert_eq!(ctx.done.load(Ordering::SeqCst), n);
                assert_eq!(
                    ctx.timed_out.load(Ordering::SeqCst),
                    0,
                    "{threads} workers, {n} tasks: worker 0's part waited for it"
                );
            }
        }
    }

    /// The 32-bit generation wraps with its parity intact: every published job stays even
    /// (helpers take only even generations) and every task still runs once.
    #[test]
    fn generation_wraps_with_even_parity() {
        let pool = ThreadPool::new(3).expect("threads start");
        pool.set_generation(0xFFFF_FFFA);
        for _ in 0..6 {
            let hits = AtomicUsize::new(0);
            // SAFETY: `count` only touches `hits`, which outlives the call.
            unsafe { pool.parallel_for(count, &hits as *const AtomicUsize as *mut c_void, 9) };
            assert_eq!(hits.load(Ordering::SeqCst), 9);
            assert!(
                pool.generation().is_multiple_of(2),
                "{:#x}",
                pool.generation()
            );
        }
        assert!(
            pool.generation() < 0x10,
            "wrapped: {:#x}",
            pool.generation()
        );
    }
}
