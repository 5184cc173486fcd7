//! Cutting one GEMM into independent parts for threads (`nnefc_sgemm_parallel`).
//!
//! The routine is chosen once on the whole problem ([`Route::of`]); a part is a range of
//! rows or columns of C, aligned to the routine's tile (`MR` rows, the kernel's `nr`
//! columns, 64 outputs for the GEMV forms; whole pairs of 16-row panels or any columns for lane
//! panels, whose elements do not depend on the tile), computed by that same routine on the narrowed
//! operands. Every element of C is therefore produced by the same instructions in the same
//! order as in the serial call, whatever the number of parts, and parts never share a
//! reduction. Each part gets its own scratch (`scratch + worker · stride`).
//!
//! Not here: the thread pool (`crate::parallel`), the blocking loops (`driver`).

use super::GemmEpilogue;
use super::MR;
use super::driver::{ASrc, GemvKind, Prefetch, Problem, Route, run_route};
use super::lanes::LANES;
use crate::parallel::{self, Parallel};
use core::ffi::c_void;

/// Multiply-adds below which a part is not worth a thread hand-off (about a microsecond of
/// work on one core, the order of a wake-up of a spinning helper).
pub(crate) const MIN_PART_MACS: usize = 1 << 17;
/// Rows per part from which a blocked product splits by rows even when B is much wider
/// than A is tall (see [`Plan::new`]).
const ROW_PART_MIN_ROWS: usize = 48;
/// Output granule of the GEMV forms: the AVX2 axpy form computes blocks of 64 outputs with
/// one accumulator chain but its last few outputs with others, so parts start and end on
/// its block boundaries (the other forms compute every output independently).
const GEMV_GRANULE: usize = 64;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Axis {
    Rows,
    Cols,
}

/// How a problem is cut: `parts` ranges of whole `granule`s along `axis`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    pub axis: Axis,
    pub parts: usize,
    pub granule: usize,
    /// Rows or columns in all.
    pub total: usize,
}

impl Plan {
    /// The cut of `p` (routine `route`) for at most `workers` parts.
    pub(crate) fn new(route: Route, p: &Problem, workers: usize) -> Plan {
        let serial = |axis| Plan {
            axis,
            parts: 1,
            granule: 1,
            total: if axis == Axis::Rows { p.m } else { p.n },
        };
        let work = p.m.saturating_mul(p.n).saturating_mul(p.k);
        let want = workers.min(work / MIN_PART_MACS).max(1);
        let (axis, granule) = match route {
            Route::Empty | Route::EpilogueOnly => return serial(Axis::Rows),
            Route::Gemv(GemvKind::RowAxpy | GemvKind::RowDot, _) => (Axis::Cols, GEMV_GRANULE),
            Route::Gemv(GemvKind::ColAxpy | GemvKind::ColDot, _) => (Axis::Rows, GEMV_GRANULE),
            Route::Gemv(GemvKind::Panel, _) => (Axis::Rows, MR),
            // Lane panels: whole pairs of panels of rows (B is read in place, so row parts
            // repeat no packing; a pair tile runs about twice as fast as a single panel's,
            // so a part never gets an odd panel it could have paired), when the pairs
            // share out evenly and A has at least as many rows as B has columns; otherwise
            // columns. mobilenet_v2 at two threads (Zen 5,
            // `nnefc bench --profile --threads 2`): 192→32 at 28×28 took 0.043 ms on two
            // threads against 0.045 on one as two one-panel parts, 576→96 at 14×14 0.063
            // against 0.088 as three panels each.
            //
            // Why m ≥ n: a row part reads all of B and its share of A, a column part all
            // of A and its share of B, so the smaller operand is the one to read whole.
            // In a network B is the previous layer's output, which the other workers wrote
            // (column parts there, or channel ranges of a depthwise layer), and every line
            // of it one worker reads but another wrote crosses between cores. mobilenet_v2's
            // 384→64 and 192→64 layers on 14×14 (m = 64 < n = 196; two threads, per-layer
            // minima of three interleaved runs) took 3–6 % less as column parts when the
            // machine's cores were close (a cache line round trip of 0.12 µs), 20–26 % less
            // when they were far (0.6 µs); a standalone layer, whose B both cores keep in
            // their caches, runs alike either way.
            Route::Lanes(_) => {
                let pairs = p.m.div_ceil(2 * LANES);
                let even = pairs >= want && (pairs.is_multiple_of(want) || pairs >= 4 * want);
                if (even && p.m >= p.n) || p.n < 2 * want {
                    (Axis::Rows, 2 * LANES)
                } else {
                    (Axis::Cols, 1)
                }
            }
            // Few rows: whole 16-column tiles.
            #[cfg(target_arch = "x86_64")]
            Route::Tall => (Axis::Cols, 16),
            Route::Blocked(kern, _) => {
                // The axis whose largest part is closest to an even share.
                let waste = |total: usize, g: usize| {
                    let units = total.div_ceil(g);
                    let parts = want.min(units);
                    (units.div_ceil(parts) * parts * g) as f64 / total as f64
                        + if parts < want { 1.0 } else { 0.0 }
                };
                // Every row part packs all of B: with B much wider than A is tall (a 1×1
                // conv projecting to few channels) that repeated packing outweighs the
                // compute each part saves, so such products split by columns.
                //
                // But an expansion (more filters than input channels, k < m, and enough
                // of them) splits by rows however wide B is: a part's packing is then a
                // small share of its work (one packed element per 48 or more of its
                // multiply-adds), and each worker writes whole channels of C, which the
                // depthwise layer that follows reads by channel ranges, so its input
                // stays in the cache of the core that wrote it. mobilenet_v2 at two
                // threads (Zen 4, `nnefc bench --profile --threads 2 -n 400`, three
                // interleaved pairs, ms): its 32→192 layers on 28² 0.061–0.065 →
                // 0.050–0.055, the depthwise layer after one 0.0171 → 0.0143–0.0150.
                let expansion = p.k < p.m && p.m >= ROW_PART_MIN_ROWS * want;
                let b_dominates = p.n >= 4 * p.m && !expansion;
                if !b_dominates && waste(p.m, MR) < waste(p.n, kern.nr) {
                    (Axis::Rows, MR)
                } else {
                    (Axis::Cols, kern.nr)
                }
            }
        };
        let total = if axis == Axis::Rows { p.m } else { p.n };
        let parts = want.min(total.div_ceil(granule)).max(1);
        Plan {
            axis,
            parts,
            granule,
            total,
        }
    }

    /// Rows or columns `[lo, hi)` of part `i`.
    pub(crate) fn range(&self, i: usize) -> (usize, usize) {
        let units = self.total.div_ceil(self.granule);
        let at = |j: usize| ((j * units / self.parts) * self.granule).min(self.total);
        (at(i), at(i + 1))
    }
}

/// Part `[lo, hi)` of `p` along `axis`, with the epilogue's bias narrowed to match.
///
/// # Safety
/// `p` and `epi` describe valid operands; `lo ≤ hi` ≤ the extent along `axis`; for rows
/// of packed A, `lo` is a multiple of `MR` (of `LANES` for lane panels).
pub(crate) unsafe fn narrow(
    p: &Problem,
    epi: &GemmEpilogue,
    axis: Axis,
    lo: usize,
    hi: usize,
) -> (Problem, GemmEpilogue) {
    let mut q = *p;
    let mut e = *epi;
    // SAFETY: every offset below addresses row `lo` / column `lo` of an operand that has
    // it (or one past the end when lo == extent, which is never dereferenced).
    unsafe {
        match axis {
            Axis::Rows => {
                q.m = hi - lo;
                q.a = match p.a {
                    ASrc::Strided { a, rsa, csa } => ASrc::Strided {
                        a: a.offset(lo as isize * rsa),
                        rsa,
                        csa,
                    },
                    ASrc::Packed(ap) => ASrc::Packed(ap.add((lo / MR) * p.k * MR)),
                    ASrc::Lanes(ap) => ASrc::Lanes(ap.add((lo / LANES) * p.k * LANES)),
                };
                q.c = p.c.offset(lo as isize * p.rsc);
                if epi.bias_kind == 1 && !epi.bias.is_null() {
                    e.bias = epi.bias.add(lo);
                }
            }
            Axis::Cols => {
                q.n = hi - lo;
                q.b = p.b.offset(lo as isize * p.csb);
                q.c = p.c.add(lo);
                if epi.bias_kind == 2 && !epi.bias.is_null() {
                    e.bias = epi.bias.add(lo);
                }
            }
        }
    }
    (q, e)
}

/// What every part's task needs.
struct Job {
    route: Route,
    p: Problem,
    epi: GemmEpilogue,
    plan: Plan,
    scratch: *mut u8,
    stride: usize,
    pf: Prefetch,
}

unsafe extern "C" fn part_task(ctx: *mut c_void, i: usize, worker: usize) {
    // SAFETY: ctx is the `Job` of `sgemm_parallel`, alive until every task returned; the
    // worker index is unique among running tasks, so each has its own scratch.
    unsafe {
        let job = &*(ctx as *const Job);
        let (lo, hi) = job.plan.range(i);
        if lo >= hi {
            return;
        }
        let (q, e) = narrow(&job.p, &job.epi, job.plan.axis, lo, hi);
        // Each part prefetches the share of the region its rows or columns are of the
        // product's.
        let pf = job.pf.share(lo, hi, job.plan.total);
        run_route(job.route, &q, &e, job.scratch.add(worker * job.stride), pf);
    }
}

/// Runs `p` with up to `par`'s workers; worker `w` uses `scratch + w · stride`; `pf` is
/// prefetched meanwhile, each part its share (see [`run_route`]).
///
/// # Safety
/// The `nnefc_sgemm` contract for `p` and `epi`; `par` is null or valid; `scratch` holds
/// `stride` bytes (at least `sgemm_scratch_bytes` of the whole problem, a multiple of 64)
/// per worker.
pub(crate) unsafe fn sgemm_parallel(
    kern: &'static super::kernels::Kernel,
    p: Problem,
    epi: &GemmEpilogue,
    par: *const Parallel,
    scratch: *mut u8,
    stride: usize,
    pf: Prefetch,
) {
    let route = Route::of(kern, &p);
    // SAFETY: forwarded caller contract.
    let workers = unsafe { parallel::workers(par) };
    let plan = Plan::new(route, &p, workers);
    if plan.parts <= 1 {
        // SAFETY: forwarded caller contract.
        unsafe { run_route(route, &p, epi, scratch, pf) };
        return;
    }
    let job = Job {
        route,
        p,
        epi: *epi,
        plan,
        scratch,
        stride,
        pf,
    };
    // SAFETY: `job` outlives the call; tasks write disjoint parts of C.
    unsafe {
        parallel::run(
            par,
            part_task,
            &job as *const Job as *mut c_void,
            plan.parts,
        )
    };
}
