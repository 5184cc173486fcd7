//! Depthwise 2-D convolution (one input and one output channel per group), the layer
//! MobileNet-style networks spend their memory bandwidth in: compiled models call
//! [`nnefc_dwconv`] instead of emitting a loop nest, so that the inner loops get AVX-512's
//! 16-lane masked vectors, which Cranelift's 128-bit code cannot use. Other CPUs (and
//! filters wider than 16 columns) take a portable row loop that the compiler vectorizes
//! for the baseline target; the compiler only emits the call for AVX-512 targets.
//!
//! # Semantics
//! For every plane (sample `n`, channel `c`) and output `(oy, ox)`:
//! `y = act(bias[c] + Σ_{ky,kx} w[c,ky,kx] · x[n,c, oy·sh + ky·dh − pt, ox·sw + kx·dw − pl]
//! (+ res[n,c,oy,ox]))`, taps outside the input contributing nothing (zero padding), summed
//! after the bias in an order fixed by the shape (`(ky, kx)` on the portable path, the
//! AVX-512 3×3 bands and the stride-2 5×5 and 7×7 bands). The AVX-512 path fuses each
//! multiply-add (one rounding), the portable path rounds twice: results may differ in the
//! last bits between CPUs, never between runs or thread counts on one CPU. Activation 1
//! is ReLU, 2 clamps to `[lo, hi]`, exactly as the GEMM epilogue computes them (IEEE
//! `maximum`/`minimum`: NaN propagates, ReLU(−0) is +0).
//!
//! # Threads
//! Planes are independent: with a [`Parallel`] of several workers the planes are handed
//! out in contiguous ranges, each computed exactly as in the serial run, so the output
//! does not depend on the number of threads.
//!
//! Not here: grouped convolutions with several channels per group (those are GEMMs), a
//! channel multiplier, borders other than zero padding (the compiler keeps its loop nests
//! for those), and non-unit strides between the elements of an input row.

use crate::gemm::activate;
use crate::parallel::{self, Parallel, workers};

/// `nnefc_dwconv_args`: one depthwise convolution. Every field is pointer-sized except
/// the last two (`lo`, `hi`), so the struct is 27 words plus 8 bytes (224 bytes on 64-bit
/// targets), in this order. Strides are in elements; the innermost dimension of `x`, `y`
/// and `res` has unit stride.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DwArgs {
    /// Samples.
    pub n: usize,
    /// Channels (of input and output).
    pub c: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
    /// Filter height.
    pub kh: usize,
    /// Filter width.
    pub kw: usize,
    /// Vertical stride.
    pub sh: usize,
    /// Horizontal stride.
    pub sw: usize,
    /// Vertical dilation.
    pub dh: usize,
    /// Horizontal dilation.
    pub dw: usize,
    /// Zero rows above the input.
    pub pt: usize,
    /// Zero columns left of the input.
    pub pl: usize,
    /// Input.
    pub x: *const f32,
    /// Input stride between samples.
    pub x_sn: isize,
    /// Input stride between channels.
    pub x_sc: isize,
    /// Input stride between rows.
    pub x_sh: isize,
    /// Filter, `[c, 1, kh, kw]` dense.
    pub filter: *const f32,
    /// Bias (null: none).
    pub bias: *const f32,
    /// Bias stride between channels (0: one value for all).
    pub bias_sc: isize,
    /// Added before the activation, laid out like `y` (null: none).
    pub res: *const f32,
    /// Output.
    pub y: *mut f32,
    /// Output stride between samples.
    pub y_sn: isize,
    /// Output stride between channels.
    pub y_sc: isize,
    /// Output stride between rows.
    pub y_sh: isize,
    /// An activation code as [`GemmEpilogue::activation`](crate::GemmEpilogue): 0 none,
    /// 1 ReLU, 2 clamp to `[lo, hi]`, 3 sigmoid, 4 swish, 5 hard swish.
    pub act: usize,
    /// Lower clamp bound.
    pub lo: f32,
    /// Upper clamp bound.
    pub hi: f32,
}

/// Multiply-adds below which a call runs on the calling thread: handing out tasks costs
/// a few microseconds.
const PARALLEL_MIN_MACS: usize = 1 << 16;
/// Tasks per worker when splitting, so that a slow worker does not hold up the rest.
const TASKS_PER_WORKER: usize = 4;
/// Output columns accumulated at a time (a row of the accumulator stays in L1).
const CHUNK: usize = 256;

/// Runs the depthwise convolution `args` describes, in parallel over planes when `par`
/// offers several workers.
///
/// # Safety
/// `args` points to a valid [`DwArgs`] whose pointers and strides address buffers of the
/// described extents; `y` does not overlap `x`, `filter`, `bias` (`res` may equal `y`);
/// `par` is null or a valid [`Parallel`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nnefc_dwconv(args: *const DwArgs, par: *const Parallel) {
    // SAFETY: the caller's contract.
    unsafe { run(args, par, run_planes) }
}

/// Splits the planes of `args` over `par`'s workers, each range computed by `planes`.
///
/// # Safety
/// As for [`nnefc_dwconv`]; `planes` computes the planes it is given of such arguments.
pub(crate) unsafe fn run(
    args: *const DwArgs,
    par: *const Parallel,
    planes_fn: unsafe fn(&DwArgs, usize, usize),
) {
    // SAFETY: valid by the caller's contract.
    let a = unsafe { &*args };
    let planes = a.n * a.c;
    if planes == 0 || a.oh == 0 || a.ow == 0 {
        return;
    }
    let macs = [a.oh, a.ow, a.kh, a.kw]
        .iter()
        .fold(planes, |m, &e| m.saturating_mul(e));
    // SAFETY: `par` is null or valid.
    let tasks = if macs >= PARALLEL_MIN_MACS {
        planes.min(unsafe { workers(par) } * TASKS_PER_WORKER)
    } else {
        1
    };
    // SAFETY: tasks write disjoint planes.
    unsafe { parallel::ranges(par, a, planes, tasks, planes_fn) }
}

/// Planes `[lo, hi)` with the widest code the CPU supports.
unsafe fn run_planes(a: &DwArgs, lo: usize, hi: usize) {
    // SAFETY: forwarded.
    unsafe { run_planes_with(a, lo, hi, true) }
}

/// Every plane of `args` on the calling thread, for an input the caller has just written
/// (an inverted-residual block's band buffer, in L1 or L2): the same kernels and bits as
/// [`nnefc_dwconv`], without the software prefetch of the input rows of the bands ahead,
/// which for such an input only costs issue slots. AMD Zen 4, one thread, warm caches
/// (`dw_shapes` example, best of six interleaved runs, ns per 16 outputs, prefetching →
/// not): 4 planes of 112² 4.32 → 3.91, 8 planes of 112² at stride 2 7.87 → 6.52, 16 of
/// 56² 4.74 → 4.40, at stride 2 8.77 → 7.87. In mobilenet_v2 (`nnefc bench --profile`,
/// minima of six interleaved runs) only its first block moved beyond noise, 0.658 →
/// 0.636 ms.
///
/// # Safety
/// As for [`nnefc_dwconv`] with a null `par`.
pub(crate) unsafe fn in_cache(a: &DwArgs) {
    let planes = a.n * a.c;
    if planes == 0 || a.oh == 0 || a.ow == 0 {
        return;
    }
    // SAFETY: forwarded.
    unsafe { run_planes_with(a, 0, planes, false) }
}

/// [`run_planes`]; `prefetch`: as for `avx512::planes_with`.
unsafe fn run_planes_with(a: &DwArgs, lo: usize, hi: usize, prefetch: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::gemm::avx512_selected() && crate::dwconv_lanes::takes(a) {
            // SAFETY: the CPU has AVX-512F; `takes` holds.
            return unsafe { crate::dwconv_lanes::planes(a, lo, hi) };
        }
        if a.kw <= avx512::MAX_KW && crate::gemm::avx512_selected() {
            // SAFETY: the CPU has AVX-512F (that is what selected the kernel).
            return unsafe { avx512::planes_with(a, lo, hi, prefetch) };
        }
    }
    let _ = prefetch;
    // SAFETY: the caller's contract.
    unsafe { planes_body(a, lo, hi) }
}

/// The input, output and residual pointers, filter taps and bias of sample `n`'s channel
/// `c`.
#[inline(always)]
pub(crate) unsafe fn plane_ptrs(
    a: &DwArgs,
    n: usize,
    c: usize,
) -> (*const f32, *mut f32, *const f32, *const f32, f32) {
    let (xo, yo) = (
        n as isize * a.x_sn + c as isize * a.x_sc,
        n as isize * a.y_sn + c as isize * a.y_sc,
    );
    let res = if a.res.is_null() {
        a.res
    } else {
        a.res.wrapping_offset(yo)
    };
    let b = if a.bias.is_null() {
        0.0
    } else {
        // SAFETY: channel `c` of the bias the caller describes.
        unsafe { *a.bias.offset(c as isize * a.bias_sc) }
    };
    (
        a.x.wrapping_offset(xo),
        a.y.wrapping_offset(yo),
        res,
        a.filter.wrapping_add(c * a.kh * a.kw),
        b,
    )
}

/// AVX-512: 16 output columns per vector register, every tap a masked load (lanes whose
/// input column is outside the row are neither read nor added) and a masked add, so edge
/// columns and short rows need no scalar code. 3×3 planes of at most 8 output columns
/// (7×7 maps) hold two output rows per vector instead (`pair_rows`).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    use super::{DwArgs, lanes, lanes3, plane_ptrs, prefetch_row};
    use core::arch::x86_64::*;

    /// Widest filter row the AVX-512 path takes (its per-column masks live on the stack).
    pub(super) const MAX_KW: usize = 16;

    /// Column blocks whose tap columns are worked out once per call instead of once per
    /// plane: planes up to 256 columns wide, which covers every depthwise layer of common
    /// networks. On small planes (7×7, 14×14) the per-plane setup, with its divisions,
    /// cost as much as the arithmetic.
    pub(super) const MAX_BLOCKS: usize = 16;

    /// What tap column `kx` reads for one block of 16 output columns: the first input
    /// column, the lanes that read inside the row, and for stride 2 the element masks of
    /// the two 16-wide loads.
    #[derive(Clone, Copy, Default)]
    struct Col {
        ix0: isize,
        m: u16,
        lo16: u16,
        hi16: u16,
    }

    /// One block of 16 output columns: its first column, live lanes, what each tap column
    /// reads, and whether the sums need masks at all.
    #[derive(Clone, Copy)]
    struct Cols {
        ox0: usize,
        live: u16,
        /// No live lane of any tap column reads outside the row: every multiply-add can be
        /// unmasked (the lanes past `live` compute values that are never stored).
        plain: bool,
        /// For [`Block::bands`] at stride 2: the masks of the loads
        /// of elements 0..16, 16..32 and 32..48 from tap 0's first column (of the
        /// 2·count + kw − 2 the tap columns read, those inside the row).
        s2: [u16; 3],
        col: [Col; MAX_KW],
    }

    impl Cols {
        const EMPTY: Cols = Cols {
            ox0: 0,
            live: 0,
            plain: false,
            s2: [0; 3],
            col: [Col {
                ix0: 0,
                m: 0,
                lo16: 0,
                hi16: 0,
            }; MAX_KW],
        };

        /// The block of output columns `ox0..ox0 + 16` (clipped to the row).
        #[inline(always)]
        fn new(a: &DwArgs, ox0: usize) -> Cols {
            let (w, sw) = (a.w as isize, a.sw as isize);
            let cnt = (a.ow - ox0).min(16) as isize;
            let live = lanes(0, cnt);
            let mut out = Cols {
                ox0,
                live,
                plain: true,
                ..Cols::EMPTY
            };
            // Lane l reads column ix0 + l·sw: in the row iff −ix0 ≤ l·sw ≤ w − 1 − ix0.
            for (kx, col) in out.col.iter_mut().enumerate().take(a.kw) {
                let ix0 = (ox0 * a.sw + kx * a.dw) as isize - a.pl as isize;
                let last = w - 1 - ix0;
                let m = if last < 0 {
                    0
                } else {
                    let first = if ix0 >= 0 { 0 } else { (-ix0 + sw - 1) / sw };
                    live & lanes(first, last / sw + 1)
                };
                // Stride 2: elements e = 2l of the 32 from ix0; a pair's odd partner may be
                // outside the row, so these masks are per element.
                let e_first = (-ix0).max(0);
                let e_end = (w - ix0).min(2 * cnt - 1);
                *col = Col {
                    ix0,
                    m,
                    lo16: lanes(e_first, e_end),
                    hi16: lanes(e_first - 16, e_end - 16),
                };
                out.plain &= m == live;
            }
            // Elements e < 2·count + kw − 2 from tap 0's first column that are in the row.
            let ix0 = (ox0 * a.sw) as isize - a.pl as isize;
            let (lo, hi) = ((-ix0).max(0), (w - ix0).min(2 * cnt + a.kw as isize - 2));
            out.s2 = lanes3(lo, hi);
            out
        }
    }

    /// The input rows of the band of `R` output rows from `oy` (stride `S`, `K` rows of
    /// taps): the offset of its first row in a plane, the rows inside the input as bits
    /// (`i < (R − 1)·S + K`), and whether all are.
    #[inline(always)]
    fn band_rows<const R: usize, const S: usize, const K: usize>(
        a: &DwArgs,
        oy: usize,
    ) -> (isize, u32, bool) {
        let n_in = (R - 1) * S + K;
        let iy0 = (oy * S) as isize - a.pt as isize;
        let first = (-iy0).max(0) as usize;
        let end = (a.h as isize - iy0).clamp(0, n_in as isize) as usize;
        let keep = if first >= end {
            0
        } else {
            ((1u32 << end) - 1) & !((1u32 << first) - 1)
        };
        (iy0 * a.x_sh, keep, first == 0 && end == n_in)
    }

    /// Output rows computed together.
    const ROWS: usize = 6;

    /// Output rows per band of the 3×3 kernels ([`Block::bands`]): eight against six
    /// saves a fifth of the rows loaded twice and of the per-band setup. Zen 5, one
    /// thread, warm caches (scratch benchmark of `nnefc_dwconv`), cycles per output
    /// vector: 144×56² 13.7–14.4 → 12.8–13.0, 192×28² 12.9–13.6 → 12.2–12.5, 384×14²
    /// 16.2 → 14.9–15.2; in mobilenet_v2 (`nnefc bench --profile`) eight of its
    /// depthwise layers together 0.528–0.530 → 0.510–0.518 ms.
    const BAND3_ROWS: usize = 8;

    /// One block of 16 output columns of one plane.
    struct Block<'a> {
        a: &'a DwArgs,
        x: *const f32,
        y: *mut f32,
        res: *const f32,
        f: *const f32,
        b: f32,
        c: &'a Cols,
        even: __m512i,
        odd: __m512i,
        steps: __m512i,
    }

    /// What [`Block::bands_block`] needs of the call per band, copied out of `DwArgs`: input row stride, output (at the band's first row) and
    /// residual with their row stride, and the epilogue's activation and bounds.
    struct Band3 {
        x_sh: isize,
        y: *mut f32,
        y_sh: isize,
        res: *const f32,
        act: u32,
        lo: __m512,
        hi: __m512,
    }

    impl Band3 {
        /// Stores the sums `acc` of block `c`'s output rows from the band's first through
        /// [`RowsOut::store`].
        ///
        /// # Safety
        /// The block's live lanes of those rows are inside the output (and residual).
        #[inline(always)]
        unsafe fn store<const R: usize>(&self, c: &Cols, acc: [__m512; R]) {
            let out = RowsOut {
                y: self.y,
                res: self.res,
                at: c.ox0 as isize,
                y_sh: self.y_sh,
                live: c.live,
                lo: self.lo,
                hi: self.hi,
            };
            // SAFETY: the caller's contract.
            unsafe { out.store(acc, self.act) };
        }
    }

    impl Block<'_> {
        /// Every output row of the block: filters of 3, 5 or 7 rows in [`Self::band`]s,
        /// others [`ROWS`] rows at a time. `SW` is the horizontal stride when 1 or 2, else
        /// 0. (3×3 filters with equal strides of 1 or 2 take [`Self::bands_rows`]
        /// instead.)
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn all_rows<const SW: usize>(&self) {
            let a = self.a;
            let mut oy = 0;
            let banded = matches!(a.kh, 3 | 5 | 7) && a.dh == 1 && matches!(a.sh, 1 | 2) && SW != 0;
            // Bands of at most 8 rows (4 at vertical stride 2: the sums, the filter column
            // and the loaded row then fit the registers), as even as the rows allow: a 7×7
            // map is one band of 7, not 6 and a band of one row that loads 5 input rows.
            let step = if banded {
                let most = if a.sh == 2 { 4 } else { 8 };
                a.oh.div_ceil(a.oh.div_ceil(most))
            } else {
                ROWS
            };
            while oy < a.oh {
                let r = step.min(a.oh - oy);
                // SAFETY: rows of this plane.
                unsafe {
                    match (banded, a.kh) {
                        (true, 3) => self.band_any::<3, SW>(oy, r),
                        (true, 5) => self.band_any::<5, SW>(oy, r),
                        (true, _) => self.band_any::<7, SW>(oy, r),
                        (false, _) if r == ROWS => self.rows::<ROWS, SW>(oy),
                        (false, _) => {
                            for k in 0..r {
                                self.rows::<1, SW>(oy + k);
                            }
                        }
                    }
                }
                oy += r;
            }
        }

        /// [`Self::band`] of a `KH`-row filter for the `r` output rows from `oy` (at most
        /// 8, 4 at vertical stride 2).
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn band_any<const KH: usize, const SW: usize>(&self, oy: usize, r: usize) {
            // SAFETY: forwarded.
            unsafe {
                match (self.a.sh, r) {
                    (1, 8) => self.band::<KH, 8, SW, 1>(oy),
                    (1, 7) => self.band::<KH, 7, SW, 1>(oy),
                    (1, 6) => self.band::<KH, 6, SW, 1>(oy),
                    (1, 5) => self.band::<KH, 5, SW, 1>(oy),
                    (1, 4) => self.band::<KH, 4, SW, 1>(oy),
                    (1, 3) => self.band::<KH, 3, SW, 1>(oy),
                    (1, 2) => self.band::<KH, 2, SW, 1>(oy),
                    (1, _) => self.band::<KH, 1, SW, 1>(oy),
                    (_, 4) => self.band::<KH, 4, SW, 2>(oy),
                    (_, 3) => self.band::<KH, 3, SW, 2>(oy),
                    (_, 2) => self.band::<KH, 2, SW, 2>(oy),
                    (_, _) => self.band::<KH, 1, SW, 2>(oy),
                }
            }
        }

        /// The 16 (stride 1) or 16 of 32 (stride 2) input values tap `col` reads from
        /// `row`, lanes outside `keep` (and outside the row) zero and not read.
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn load<const SW: usize>(&self, col: &Col, row: *const f32, keep: u16) -> __m512 {
            let src = row.wrapping_offset(col.ix0);
            // SAFETY (loads): masked-off lanes are not read (AVX-512 suppresses their
            // faults); the others are in the row.
            match SW {
                1 => unsafe { _mm512_maskz_loadu_ps(col.m & keep, src) },
                2 => {
                    let v0 = unsafe { _mm512_maskz_loadu_ps(col.lo16 & keep, src) };
                    let v1 =
                        unsafe { _mm512_maskz_loadu_ps(col.hi16 & keep, src.wrapping_add(16)) };
                    _mm512_permutex2var_ps(v0, self.even, v1)
                }
                _ => unsafe {
                    _mm512_mask_i32gather_ps::<4>(
                        _mm512_setzero_ps(),
                        col.m & keep,
                        self.steps,
                        src,
                    )
                },
            }
        }

        /// What the band kernels' blocks need of the call for a band from output row `oy`
        /// ([`Band3`]).
        #[inline]
        #[target_feature(enable = "avx512f")]
        fn band_out(&self, oy: usize) -> Band3 {
            Band3 {
                x_sh: self.a.x_sh,
                y: self.y.wrapping_offset(oy as isize * self.a.y_sh),
                y_sh: self.a.y_sh,
                res: if self.res.is_null() {
                    self.res
                } else {
                    self.res.wrapping_offset(oy as isize * self.a.y_sh)
                },
                act: self.a.act as u32,
                lo: _mm512_set1_ps(self.a.lo),
                hi: _mm512_set1_ps(self.a.hi),
            }
        }

        /// [`Self::bands_rows`] for the `r ≤ 8` output rows from `oy` of the column
        /// blocks `cols` (at most [`BAND3_ROWS`] or [`BANDS2_ROWS`], both 8).
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn bands_any<const K: usize, const S: usize>(
            &self,
            oy: usize,
            r: usize,
            cols: &[Cols],
        ) {
            const { assert!(BAND3_ROWS == 8 && BANDS2_ROWS == 8) };
            // SAFETY: rows of this plane.
            unsafe {
                match r {
                    1 => self.bands_rows::<K, 1, S>(oy, cols),
                    2 => self.bands_rows::<K, 2, S>(oy, cols),
                    3 => self.bands_rows::<K, 3, S>(oy, cols),
                    4 => self.bands_rows::<K, 4, S>(oy, cols),
                    5 => self.bands_rows::<K, 5, S>(oy, cols),
                    6 => self.bands_rows::<K, 6, S>(oy, cols),
                    7 => self.bands_rows::<K, 7, S>(oy, cols),
                    _ => self.bands_rows::<K, 8, S>(oy, cols),
                }
            }
        }

        /// Input rows `oy·S − pt + i` (`i < (R − 1)·S + KH`) of a band of `R` output rows
        /// of a `KH`-row filter for [`Self::band`]: their pointers, which are inside the
        /// input (`keep` all ones, else empty), and whether all are.
        #[inline(always)]
        fn band_inputs<const KH: usize, const R: usize, const S: usize>(
            &self,
            oy: usize,
        ) -> ([*const f32; 24], [u16; 24], bool) {
            let a = self.a;
            let mut rows = [self.x; 24];
            let mut keep = [0u16; 24];
            let n_in = (R - 1) * S + KH;
            let mut full = true;
            for i in 0..n_in {
                let iy = (oy * S + i) as isize - a.pt as isize;
                if iy >= 0 && iy < a.h as isize {
                    rows[i] = self.x.wrapping_offset(iy * a.x_sh);
                    keep[i] = 0xFFFF;
                } else {
                    full = false;
                }
            }
            (rows, keep, full)
        }

        /// [`Self::bands`] for output rows `oy..oy + R` of a `K`×`K` filter at stride `S`,
        /// picking the variant without row masks (every band but the first and last) and
        /// without column masks (every block but the edge ones) where it can.
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn bands_rows<const K: usize, const R: usize, const S: usize>(
            &self,
            oy: usize,
            cols: &[Cols],
        ) {
            // Input rows iy0 + i (i < n_in), row i at base + i·x_sh; `keep` has bit i set
            // for the rows inside the input. No arrays: building them cost as much as the
            // arithmetic of a short band.
            let (off, keep, full) = band_rows::<R, S, K>(self.a, oy);
            let base = self.x.wrapping_offset(off);
            // The block loop inside each variant: a call per block and band (with its
            // dispatch and the filter's broadcasts) cost as much as the block's 54
            // multiply-adds. Zen 5, one thread, warm caches (scratch benchmark of
            // `nnefc_dwconv`, with the unmasked store of full vectors in `finish`), cycles
            // per output vector (3×3): 32×112² 15.8–17.2 → 12.1–12.3, 144×56² 16.2–17.2 →
            // 12.9–13.0, 96×112² stride 2 24.9–28.5 → 20.4–20.8, 192×28² 16.6 → 14.2.
            // SAFETY: forwarded.
            unsafe {
                if full {
                    self.bands::<K, R, S, true>(oy, base, keep, cols)
                } else {
                    self.bands::<K, R, S, false>(oy, base, keep, cols)
                }
            }
        }

        /// Output rows `oy..oy + R` of a `K`×`K` filter with stride `S` in both
        /// directions (3×3 at stride 1 or 2, 5×5 and 7×7 at stride 2), in each column
        /// block of `cols` ([`Self::bands_block`]). `FULL`: every input row of the band is
        /// inside the input.
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn bands<const K: usize, const R: usize, const S: usize, const FULL: bool>(
            &self,
            oy: usize,
            base: *const f32,
            keep: u32,
            cols: &[Cols],
        ) {
            // A 3×3 filter's nine broadcasts once per band, for all its blocks (larger
            // filters broadcast each tap where it is used).
            // SAFETY: the nine taps of this channel's filter.
            let w: [__m512; 9] = core::array::from_fn(|t| {
                if K == 3 {
                    _mm512_set1_ps(unsafe { *self.f.add(t) })
                } else {
                    _mm512_setzero_ps()
                }
            });
            let e = self.band_out(oy);
            for c in cols {
                // SAFETY: forwarded.
                unsafe {
                    if c.plain {
                        Self::bands_block::<K, R, S, FULL, true>(&e, base, keep, &w, c, self)
                    } else {
                        Self::bands_block::<K, R, S, FULL, false>(&e, base, keep, &w, c, self)
                    }
                }
            }
        }

        /// Output rows `oy..oy + R` of column block `c` (`e.y` at row `oy`): input row
        /// `i` of the band is loaded once ([`Self::taps`]: at stride 2 three loads and
        /// permutes give every tap column) and feeds output `r` through filter row
        /// `i − r·S`. Each sum thus takes its taps in `(ky, kx)` order. `PLAIN`: no live
        /// lane reads outside the row, so the multiply-adds need no masks. `w` holds a 3×3
        /// filter's broadcasts (unused for larger ones).
        ///
        /// Everything it reads per row or per vector (strides, masks, column offsets, the
        /// epilogue's bounds) is copied into locals first: through `&DwArgs` and `&Cols`
        /// the compiler reloaded them after every store to the output, which it cannot
        /// tell apart from them, and the loads and mask moves outnumbered the
        /// multiply-adds. Zen 5, one thread, warm caches (scratch benchmark of
        /// `nnefc_dwconv`, best of three), µs: 144×56² 104 → 91, stride 2 49 → 43,
        /// 96×112² stride 2 117 → 113; in mobilenet_v2 (`nnefc bench --profile`, minima
        /// of three interleaved runs) its 17 depthwise layers 10–17 % faster, e.g. 144×56²
        /// 0.102 → 0.087 ms, 576×14² 0.028 → 0.024, 960×7² 0.022 → 0.019.
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn bands_block<
            const K: usize,
            const R: usize,
            const S: usize,
            const FULL: bool,
            const PLAIN: bool,
        >(
            e: &Band3,
            base: *const f32,
            keep: u32,
            w: &[__m512; 9],
            c: &Cols,
            k: &Self,
        ) {
            let n_in = (R - 1) * S + K;
            let x_sh = e.x_sh;
            let m: [u16; 7] = core::array::from_fn(|kx| c.col[kx].m);
            let ix0: [isize; 3] = core::array::from_fn(|kx| c.col[kx].ix0);
            let s2 = c.s2;
            let f = k.f;
            let mut acc = [_mm512_set1_ps(k.b); R];
            // Row `i` at `base + i·x_sh`, each from the one before through an empty asm
            // block: LLVM otherwise computes all 18 row pointers once per band, outside
            // the loop over column blocks, and keeps them on the stack, reloading one
            // for every row's loads (a fifth of the samples). Zen 5, one thread, warm
            // caches (scratch benchmark of `nnefc_dwconv`), µs: 144×56² 91.6 → 79.1,
            // 32×112² 68.4 → 60.3, 192×28² 35.4 → 31.2; stride 2 and small maps alike.
            let mut row = base;
            // Unrolled by hand: LLVM leaves a loop this long rolled, and the sums, indexed
            // by the row, then live in memory.
            unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20] {
                if i > 0 && i < n_in {
                    row = super::opaque(row.wrapping_offset(x_sh));
                }
                if i < n_in && (FULL || keep & (1 << i) != 0) {
                    // SAFETY: a row of this plane.
                    let t = unsafe { k.taps::<K, S>(&ix0, &m, &s2, row) };
                    unroll!(ky in [0, 1, 2, 3, 4, 5, 6] {
                        if ky < K && i >= ky && (i - ky).is_multiple_of(S) && (i - ky) / S < R {
                            let r = (i - ky) / S;
                            unroll!(kx in [0, 1, 2, 3, 4, 5, 6] {
                                if kx < K {
                                    let wv = if K == 3 {
                                        // (`min`: ky, kx < 3 here; the bound only keeps
                                        // the lint off the larger filters' dead arm.)
                                        w[(3 * ky + kx).min(8)]
                                    } else {
                                        // SAFETY: tap (ky, kx) of this channel's filter.
                                        _mm512_set1_ps(unsafe { *f.add(ky * K + kx) })
                                    };
                                    acc[r] = if PLAIN {
                                        _mm512_fmadd_ps(wv, t[kx], acc[r])
                                    } else {
                                        _mm512_mask3_fmadd_ps(wv, t[kx], acc[r], m[kx])
                                    };
                                }
                            });
                        }
                    });
                }
            });
            // SAFETY: the live lanes of these output rows of the block.
            unsafe { e.store(c, acc) };
        }

        /// The values the `K` tap columns (at most 7) of a `K`-wide filter at stride `S`
        /// read from input row `row` (lanes that would read outside the row zero and not
        /// read), given the block's first input column per tap column (`ix0`; stride 1,
        /// 3×3 only), lanes inside the row (`m`) and, for stride 2, the element masks of
        /// its three loads from tap 0's first column (`s2`).
        ///
        /// Stride 2: tap `kx` reads elements `kx + 2l`, the even ones from `kx/2` for even
        /// `kx`, the odd ones from `(kx − 1)/2` for odd `kx`. The loads of elements 0..48
        /// are split into even and odd halves with two permutes; tap 2 is the even half
        /// moved on by one (`valignd`, cheaper than a two-source permute), every later tap
        /// one permute of its half with the third load.
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn taps<const K: usize, const S: usize>(
            &self,
            ix0: &[isize; 3],
            m: &[u16; 7],
            s2: &[u16; 3],
            row: *const f32,
        ) -> [__m512; 7] {
            if S == 1 {
                let mut t = [_mm512_setzero_ps(); 7];
                // SAFETY: masked-off lanes are not read (AVX-512 suppresses their faults);
                // the others are in the row.
                unsafe {
                    t[0] = _mm512_maskz_loadu_ps(m[0], row.wrapping_offset(ix0[0]));
                    t[1] = _mm512_maskz_loadu_ps(m[1], row.wrapping_offset(ix0[1]));
                    t[2] = _mm512_maskz_loadu_ps(m[2], row.wrapping_offset(ix0[2]));
                }
                return t;
            }
            let src = row.wrapping_offset(ix0[0]);
            // SAFETY: masked-off lanes are not read; the others are in the row.
            let (v0, v1, v2) = unsafe {
                (
                    _mm512_maskz_loadu_ps(s2[0], src),
                    _mm512_maskz_loadu_ps(s2[1], src.wrapping_add(16)),
                    _mm512_maskz_loadu_ps(s2[2], src.wrapping_add(32)),
                )
            };
            let ev = _mm512_permutex2var_ps(v0, self.even, v1);
            let od = _mm512_permutex2var_ps(v0, self.odd, v1);
            let mut t = [ev; 7];
            t[1] = od;
            t[2] = _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(
                _mm512_castps_si512(v2),
                _mm512_castps_si512(ev),
            ));
            unroll!(kx in [3, 4, 5, 6] {
                if kx < K {
                    // Lane j of tap kx: element kx + 2j, lane (kx/2 + j) of the even or
                    // odd half while inside it, else element 32 + … of the third load.
                    let h = kx / 2;
                    let idx: [i32; 16] = core::array::from_fn(|j| {
                        let e = (kx + 2 * j) as i32;
                        if h + j < 16 { (h + j) as i32 } else { 16 + (e - 32) }
                    });
                    // SAFETY: 16 i32s are one 512-bit vector.
                    let iv = unsafe { core::mem::transmute::<[i32; 16], __m512i>(idx) };
                    t[kx] = _mm512_permutex2var_ps(if kx.is_multiple_of(2) { ev } else { od }, iv, v2);
                }
            });
            t
        }

        /// Output rows `oy..oy + R` of a `KH`-row filter with vertical stride `SH`: input
        /// row `i` of the band feeds output `r` through filter row `i − r·SH`, so each
        /// input row is loaded once per tap column and used by every output that needs it
        /// (a 5×5 filter at stride 1: 12 loads for 8 rows of 25 taps, not 200). All loops
        /// but the one over tap columns have constant bounds and unroll, keeping the sums
        /// in registers. Each sum is taken in `(kx, ky)` order. 5×5 layers (Zen 5, one
        /// thread, one-layer models of `benches/grouped_layers.py`, `nnefc bench` median
        /// ms), where each output row summed its own 25 taps before: 240 channels on
        /// 28×28 0.213 → 0.089, 672 on 14×14 0.147 → 0.064, 1152 on 7×7 0.121 → 0.055
        /// (bands of 6 rows and a tail of one: 0.096, 0.077, 0.074), 144 on 56×56 at
        /// stride 2 0.253 → 0.127, 672 on 14×14 at stride 2 0.136 → 0.085; 7×7 filters,
        /// 256 channels on 28×28 0.388 → 0.159, 128 on 56×56 at stride 2 0.405 → 0.174.
        /// Bands of up to 8 rows at stride 2 spill the sums: 2.4–2.8 times slower. Summing
        /// the odd tap columns apart (twice the chains of dependent multiply-adds, two
        /// columns loaded per pass) made the 5×5 layers 1.2–1.5 times slower.
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn band<const KH: usize, const R: usize, const SW: usize, const SH: usize>(
            &self,
            oy: usize,
        ) {
            let (rows, keep, full) = self.band_inputs::<KH, R, SH>(oy);
            // Inside the input (every band but the first and last): no row masks, so the
            // column masks stay in mask registers.
            // SAFETY: forwarded.
            unsafe {
                if full {
                    self.band_rows::<KH, R, SW, SH, true>(oy, &rows, &keep)
                } else {
                    self.band_rows::<KH, R, SW, SH, false>(oy, &rows, &keep)
                }
            }
        }

        /// [`Self::band`] over its input rows; `FULL`: every row is inside the input.
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn band_rows<
            const KH: usize,
            const R: usize,
            const SW: usize,
            const SH: usize,
            const FULL: bool,
        >(
            &self,
            oy: usize,
            rows: &[*const f32; 24],
            keep: &[u16; 24],
        ) {
            let a = self.a;
            let mut acc = [_mm512_set1_ps(self.b); R];
            let n_in = (R - 1) * SH + KH;
            for (kx, col) in self.c.col[..a.kw].iter().enumerate() {
                if col.m == 0 {
                    continue;
                }
                // Column kx of this channel's `KH` filter rows (a loop: a closure would not
                // inherit AVX-512).
                let mut w = [_mm512_setzero_ps(); KH];
                for (ky, wk) in w.iter_mut().enumerate() {
                    // SAFETY: tap (ky, kx) of the filter.
                    *wk = _mm512_set1_ps(unsafe { *self.f.add(ky * a.kw + kx) });
                }
                for i in 0..n_in {
                    let k = if FULL { 0xFFFF } else { keep[i] };
                    // SAFETY: a row of this plane or an empty mask.
                    let v = unsafe { self.load::<SW>(col, rows[i], k) };
                    let m = col.m & k;
                    for (ky, wk) in w.iter().enumerate() {
                        if i >= ky && (i - ky) % SH == 0 && (i - ky) / SH < R {
                            let r = (i - ky) / SH;
                            acc[r] = _mm512_mask3_fmadd_ps(*wk, v, acc[r], m);
                        }
                    }
                }
            }
            // SAFETY: rows oy..oy + R of this block.
            unsafe { self.store_rows(self.c, acc, oy) };
        }

        /// Output rows `oy..oy + R` of the block, each its own sum.
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn rows<const R: usize, const SW: usize>(&self, oy: usize) {
            let a = self.a;
            let mut acc = [_mm512_set1_ps(self.b); R];
            for ky in 0..a.kh {
                let fr = self.f.wrapping_add(ky * a.kw);
                // Rows outside the input get an empty mask (no load, no add) rather than a
                // branch, so the loop over rows unrolls and the sums stay in registers.
                let mut rows = [self.x; R];
                let mut keep = [0u16; R];
                for r in 0..R {
                    let iy = ((oy + r) * a.sh + ky * a.dh) as isize - a.pt as isize;
                    if iy >= 0 && iy < a.h as isize {
                        rows[r] = self.x.wrapping_offset(iy * a.x_sh);
                        keep[r] = 0xFFFF;
                    }
                }
                if keep.iter().all(|&k| k == 0) {
                    continue;
                }
                for (kx, col) in self.c.col[..a.kw].iter().enumerate() {
                    if col.m == 0 {
                        continue;
                    }
                    // SAFETY: tap (ky, kx) of this channel's filter.
                    let wv = _mm512_set1_ps(unsafe { *fr.add(kx) });
                    for r in 0..R {
                        // SAFETY: a row of this plane or an empty mask.
                        let v = unsafe { self.load::<SW>(col, rows[r], keep[r]) };
                        acc[r] = _mm512_mask3_fmadd_ps(wv, v, acc[r], col.m & keep[r]);
                    }
                }
            }
            // SAFETY: rows oy..oy + R of this block.
            unsafe { self.store_rows(self.c, acc, oy) };
        }

        /// Adds the residual, applies the activation and stores the sums `acc` of output
        /// rows `oy..oy + R` of block `c` (its live lanes only), through [`RowsOut::store`].
        ///
        /// # Safety
        /// Rows `oy..oy + R` are output rows of this plane.
        #[inline(always)]
        unsafe fn store_rows<const R: usize>(&self, c: &Cols, acc: [__m512; R], oy: usize) {
            let a = self.a;
            let at = oy as isize * a.y_sh + c.ox0 as isize;
            // SAFETY: the live lanes of these output rows; the caller runs on AVX-512F.
            unsafe {
                let out = RowsOut {
                    y: self.y,
                    res: self.res,
                    at,
                    y_sh: a.y_sh,
                    live: c.live,
                    lo: _mm512_set1_ps(a.lo),
                    hi: _mm512_set1_ps(a.hi),
                };
                out.store(acc, a.act as u32)
            };
        }
    }

    /// Adds the residual (`res` non-null) to `v`, applies `a`'s activation and stores the
    /// `live` lanes at `y + at`: the epilogue of every vector kernel here and in `conv`.
    ///
    /// # Safety
    /// The `live` lanes from `at` are inside `y` and (when not null) `res`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn finish(
        v: __m512,
        a: &DwArgs,
        y: *mut f32,
        res: *const f32,
        at: isize,
        live: u16,
    ) {
        // SAFETY: forwarded.
        unsafe { finish_act(v, a, a.act as u32, y, res, at, live) }
    }

    /// [`finish`] with the activation `act` (`DwArgs::act`) given: a caller that passes
    /// a constant has the dispatch on it folded away.
    ///
    /// # Safety
    /// As for [`finish`].
    #[inline]
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn finish_act(
        v: __m512,
        a: &DwArgs,
        act: u32,
        y: *mut f32,
        res: *const f32,
        at: isize,
        live: u16,
    ) {
        let (lo, hi) = (_mm512_set1_ps(a.lo), _mm512_set1_ps(a.hi));
        // SAFETY: forwarded.
        unsafe { finish_with(v, act, lo, hi, y, res, at, live) }
    }

    /// [`finish_act`] with the bounds given as vectors: for loops that copy what they
    /// read per vector out of the arguments first (the compiler reloads fields read
    /// through a reference after every store to the output, which it cannot tell apart
    /// from them).
    ///
    /// # Safety
    /// As for [`finish`].
    #[inline]
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn finish_with(
        mut v: __m512,
        act: u32,
        lo: __m512,
        hi: __m512,
        y: *mut f32,
        res: *const f32,
        at: isize,
        live: u16,
    ) {
        if !res.is_null() {
            // SAFETY: the caller's contract.
            v = _mm512_add_ps(v, unsafe {
                _mm512_maskz_loadu_ps(live, res.wrapping_offset(at))
            });
        }
        // The GEMM tiles' activation, so a conv computes the same bits on either path (NaN
        // payloads aside: the GEMM routes' shorter clamp passes a NaN sum's payload through,
        // this one gives the canonical NaN; a per-vector dispatch to the shorter forms
        // made the depthwise layers 4–12 % slower).
        // SAFETY: the caller runs on AVX-512F.
        v = unsafe { crate::gemm::activate_avx512(v, act, lo, hi) };
        // SAFETY: the caller's contract.
        unsafe { crate::gemm::store16(y.wrapping_offset(at), live, v) };
    }

    /// Evaluates `$inline` with `$A` a `const u32` equal to activation code `$act` for the
    /// activations the depthwise epilogues unroll on the registers (none, ReLU, clamp, hard
    /// swish), else `$other` (the out-of-line form, for sigmoid and swish): the one list
    /// [`RowsOut::store`] and [`pair_rows`] dispatch on.
    macro_rules! by_inline_act {
        ($act:expr, $A:ident => $inline:expr, $other:expr) => {{
            use crate::gemm::{ACT_CLAMP, ACT_HARDSWISH, ACT_NONE, ACT_RELU};
            match $act {
                ACT_NONE => {
                    const $A: u32 = ACT_NONE;
                    $inline
                }
                ACT_RELU => {
                    const $A: u32 = ACT_RELU;
                    $inline
                }
                ACT_CLAMP => {
                    const $A: u32 = ACT_CLAMP;
                    $inline
                }
                ACT_HARDSWISH => {
                    const $A: u32 = ACT_HARDSWISH;
                    $inline
                }
                _ => $other,
            }
        }};
    }

    /// Where the `R` sums of one column block on consecutive output rows go (`acc[r]` at
    /// `y + at + r·y_sh`, its `live` lanes), with the activation's bounds.
    pub(crate) struct RowsOut {
        pub y: *mut f32,
        pub res: *const f32,
        pub at: isize,
        pub y_sh: isize,
        pub live: u16,
        pub lo: __m512,
        pub hi: __m512,
    }

    impl RowsOut {
        /// [`finish_with`] for each of the sums, the activation dispatched once for all of
        /// them. Called per vector from a loop over the rows, the activation's dispatch
        /// kept LLVM from unrolling that loop: the sums went through a stack array and
        /// every vector through an indirect jump. The common activations run unrolled on
        /// the registers, the others out of line ([`Self::store_any`]).
        ///
        /// # Safety
        /// As for [`finish`], for each row.
        #[inline(always)]
        pub(crate) unsafe fn store<const R: usize>(&self, acc: [__m512; R], act: u32) {
            // SAFETY: forwarded.
            unsafe {
                by_inline_act!(act, A => self.store_act::<R, A>(&acc, act), self.store_any(acc, act))
            }
        }

        /// [`Self::store`] with the activation `ACT` known (`act` when `ACT` is
        /// [`u32::MAX`]).
        ///
        /// # Safety
        /// As for [`Self::store`].
        #[inline(always)]
        unsafe fn store_act<const R: usize, const ACT: u32>(&self, acc: &[__m512; R], act: u32) {
            let code = if ACT == u32::MAX { act } else { ACT };
            for (r, &v) in acc.iter().enumerate() {
                let at = self.at + r as isize * self.y_sh;
                // SAFETY: forwarded.
                unsafe { finish_with(v, code, self.lo, self.hi, self.y, self.res, at, self.live) };
            }
        }

        /// [`Self::store`] for the other activations (sigmoid, swish), out of line on a
        /// copy of the sums.
        ///
        /// # Safety
        /// As for [`Self::store`].
        #[inline(never)]
        #[target_feature(enable = "avx512f")]
        unsafe fn store_any<const R: usize>(&self, acc: [__m512; R], act: u32) {
            // SAFETY: forwarded.
            unsafe { self.store_act::<R, { u32::MAX }>(&acc, act) }
        }
    }

    /// Input planes of at most this many bytes are not prefetched by [`Ahead`].
    const PREFETCH_MIN_PLANE_BYTES: usize = 4096;

    /// The prefetch distance plus one: band `i` prefetches band `i + AHEAD − 1`. (1, 2
    /// and 4 bands ahead measured alike in mobilenet_v2 within this machine's noise.)
    const AHEAD: usize = 3;

    /// The prefetch cursor: the band (sample, channel, first output row) whose input rows
    /// [`Ahead::next`] prefetches next.
    struct Ahead {
        n: usize,
        c: usize,
        oy: usize,
    }

    impl Ahead {
        /// Prefetches the input rows of the cursor's band (nothing past the last plane)
        /// and moves the cursor to the next band, `step` output rows on.
        #[inline]
        #[target_feature(enable = "avx512f")]
        fn next(&mut self, a: &DwArgs, step: usize) {
            if self.n >= a.n {
                return;
            }
            // SAFETY: (n, c) is a plane of the call (its bias is read).
            let (x, ..) = unsafe { plane_ptrs(a, self.n, self.c) };
            let rows = step.min(a.oh - self.oy);
            let first = ((self.oy * a.sh) as isize - a.pt as isize).max(0);
            let end = ((self.oy * a.sh) as isize - a.pt as isize
                + ((rows - 1) * a.sh + (a.kh - 1) * a.dh + 1) as isize)
                .min(a.h as isize);
            if a.x_sh == a.w as isize {
                // Rows one after the other: the band's input is one range, a line per
                // prefetch (a row at a time spent 12 % of a 144×56² layer on the loop).
                if end > first {
                    let n = (end - first) as usize * a.w;
                    prefetch_row::<_MM_HINT_T0>(x.wrapping_offset(first * a.x_sh), n);
                }
            } else {
                for iy in first..end {
                    prefetch_row::<_MM_HINT_T0>(x.wrapping_offset(iy * a.x_sh), a.w);
                }
            }
            self.oy += rows;
            if self.oy >= a.oh {
                self.oy = 0;
                self.c += 1;
                if self.c == a.c {
                    self.c = 0;
                    self.n += 1;
                }
            }
        }
    }

    /// Planes `[lo, hi)` of a 3×3 layer whose planes are one column block `c` and at most
    /// two bands (maps of at most 16×16): [`two_bands`] for their band heights.
    ///
    /// # Safety
    /// As for `nnefc_dwconv`; the CPU has AVX-512F; `c` is the layer's only block and
    /// `a.oh ≤ 2·BAND3_ROWS`.
    #[target_feature(enable = "avx512f")]
    unsafe fn small_planes<const S: usize>(
        a: &DwArgs,
        lo: usize,
        hi: usize,
        c: &Cols,
        v: (__m512i, __m512i, __m512i),
    ) {
        // SAFETY: forwarded.
        unsafe {
            match a.oh {
                1 => two_bands::<1, 0, S>(a, lo, hi, c, v),
                2 => two_bands::<2, 0, S>(a, lo, hi, c, v),
                3 => two_bands::<3, 0, S>(a, lo, hi, c, v),
                4 => two_bands::<4, 0, S>(a, lo, hi, c, v),
                5 => two_bands::<5, 0, S>(a, lo, hi, c, v),
                6 => two_bands::<6, 0, S>(a, lo, hi, c, v),
                7 => two_bands::<7, 0, S>(a, lo, hi, c, v),
                8 => two_bands::<8, 0, S>(a, lo, hi, c, v),
                9 => two_bands::<8, 1, S>(a, lo, hi, c, v),
                10 => two_bands::<8, 2, S>(a, lo, hi, c, v),
                11 => two_bands::<8, 3, S>(a, lo, hi, c, v),
                12 => two_bands::<8, 4, S>(a, lo, hi, c, v),
                13 => two_bands::<8, 5, S>(a, lo, hi, c, v),
                14 => two_bands::<8, 6, S>(a, lo, hi, c, v),
                15 => two_bands::<8, 7, S>(a, lo, hi, c, v),
                _ => two_bands::<8, 8, S>(a, lo, hi, c, v),
            }
        }
    }

    /// Planes `[lo, hi)` of a 3×3 layer whose planes are one column block `c` and two
    /// bands, `R1` output rows then `R2` (none when 0): the bands' rows and variants are
    /// worked out once for all planes, and each plane is its filter's broadcasts and the
    /// block. A pass through [`planes`]' general loop per plane cost more than the
    /// plane's multiply-adds. Zen 5, one thread, cycles per output vector (scratch
    /// benchmark): 960 planes of 7×7 15.3 → 11.9–12.6, 384 of 14×14 14.9–16.3 →
    /// 12.6–12.8; in mobilenet_v2 (`nnefc bench --profile`) its four 7×7 layers together
    /// 0.101–0.104 → 0.081–0.089 ms, its seven 14×14 layers 0.166–0.171 → 0.137–0.139.
    ///
    /// # Safety
    /// As for [`small_planes`].
    #[target_feature(enable = "avx512f")]
    unsafe fn two_bands<const R1: usize, const R2: usize, const S: usize>(
        a: &DwArgs,
        lo: usize,
        hi: usize,
        c: &Cols,
        vecs: (__m512i, __m512i, __m512i),
    ) {
        let (off, keep, full) = band_rows::<R1, S, 3>(a, 0);
        // (R2 = 0: no second band, whose row arithmetic would underflow.)
        let (off2, keep2, full2) = if R2 > 0 {
            band_rows::<R2, S, 3>(a, R1)
        } else {
            (0, 0, true)
        };
        let cols = core::slice::from_ref(c);
        for p in lo..hi {
            // SAFETY: plane p of the caller's buffers.
            let (x, y, res, f, b) = unsafe { plane_ptrs(a, p / a.c, p % a.c) };
            let k = Block {
                a,
                x,
                y,
                res,
                f,
                b,
                c,
                even: vecs.0,
                odd: vecs.1,
                steps: vecs.2,
            };
            // SAFETY: the bands of this plane.
            unsafe {
                let base = x.wrapping_offset(off);
                if full {
                    k.bands::<3, R1, S, true>(0, base, keep, cols)
                } else {
                    k.bands::<3, R1, S, false>(0, base, keep, cols)
                }
                if R2 > 0 {
                    let base = x.wrapping_offset(off2);
                    if full2 {
                        k.bands::<3, R2, S, true>(R1, base, keep2, cols)
                    } else {
                        k.bands::<3, R2, S, false>(R1, base, keep2, cols)
                    }
                }
            }
        }
    }

    /// 3×3 windows with equal strides of 1 or 2 and no dilation: almost every depthwise
    /// layer, and what [`Block::bands`] computes.
    fn fast3(a: &DwArgs) -> bool {
        a.kh == 3 && a.kw == 3 && a.dh == 1 && a.dw == 1 && a.sh == a.sw && (a.sw == 1 || a.sw == 2)
    }

    /// Whether [`Block::bands`] takes a layer of larger filters: square 5×5 or 7×7
    /// windows, stride 2 both ways, no dilation.
    fn fast_s2(a: &DwArgs) -> bool {
        a.kh == a.kw && matches!(a.kh, 5 | 7) && a.dh == 1 && a.dw == 1 && a.sh == 2 && a.sw == 2
    }

    /// Most output rows per band of [`Block::bands`] at 5×5 and 7×7 (bands as even as the
    /// map allows): fewer input rows loaded twice. Zen 4, one-layer models, `nnefc bench -n 1000`
    /// medians at 3 / 4 / 6 / 8 rows, ms: 144 channels 5×5 from 56² 0.147 / 0.134 / 0.125
    /// / 0.122; 240 from 28² — / 0.063 / 0.057 / 0.052; 96 channels 7×7 from 56² — / 0.163
    /// / 0.152 / 0.136.
    const BANDS2_ROWS: usize = 8;

    /// Whether [`pair_planes`] takes a layer: 3×3 windows ([`fast3`]) on planes of at
    /// most 16 output rows of at most 8 columns, read from input rows of at most 16.
    pub(super) fn pairs_fit(a: &DwArgs) -> bool {
        fast3(a) && a.ow <= 8 && a.oh <= 2 * MAX_PAIRS && a.w <= 16
    }

    /// Most row pairs per plane [`pair_rows`] takes.
    const MAX_PAIRS: usize = 8;
    /// Most input rows a plane of [`MAX_PAIRS`] pairs reads: `S·(2P − 1) + 3` at stride 2.
    const PAIR_INPUT_ROWS: usize = 2 * (2 * MAX_PAIRS - 1) + 3;

    /// Planes `[lo, hi)` of a layer [`pairs_fit`] takes, [`pair_rows`] for its number of
    /// row pairs.
    ///
    /// # Safety
    /// As for [`pair_rows`].
    #[target_feature(enable = "avx512f")]
    unsafe fn pair_planes<const S: usize>(a: &DwArgs, lo: usize, hi: usize) {
        // SAFETY: forwarded.
        unsafe {
            match a.oh.div_ceil(2) {
                1 => pair_rows::<S, 1>(a, lo, hi),
                2 => pair_rows::<S, 2>(a, lo, hi),
                3 => pair_rows::<S, 3>(a, lo, hi),
                4 => pair_rows::<S, 4>(a, lo, hi),
                5 => pair_rows::<S, 5>(a, lo, hi),
                6 => pair_rows::<S, 6>(a, lo, hi),
                7 => pair_rows::<S, 7>(a, lo, hi),
                _ => pair_rows::<S, 8>(a, lo, hi),
            }
        }
    }

    /// Planes `[lo, hi)` of `P` pairs of output rows each, two output rows per vector:
    /// row `2q` of the plane in lanes 0..8, row `2q + 1` in lanes 8..16. A 16-lane block
    /// on a 7-column row leaves 9 lanes idle, and its per-row setup (masks, stride-2
    /// loads) cost more than the row's nine multiply-adds. Each input row of a plane is
    /// one load; each tap of a pair one two-source permute of the two rows its halves
    /// read and one multiply-add masked to the lanes that read inside the input, in
    /// `(ky, kx)` order from the bias: the operations of [`Block::bands`], so the same
    /// bits. The pairs' sums are independent chains, interleaved.
    ///
    /// # Safety
    /// As for `nnefc_dwconv`; the CPU has AVX-512F; [`pairs_fit`] holds; `S` is the
    /// stride and `P = ⌈oh/2⌉`.
    #[target_feature(enable = "avx512f")]
    unsafe fn pair_rows<const S: usize, const P: usize>(a: &DwArgs, lo: usize, hi: usize) {
        // Per tap column: where each lane's element sits in the two rows (the first in
        // 0..16, the second in 16..32), and the lanes whose output column is live and
        // whose input column is inside the row.
        let mut idx = [_mm512_setzero_si512(); 3];
        let mut cols = [0u16; 3];
        for (kx, (iv, m)) in idx.iter_mut().zip(&mut cols).enumerate() {
            let mut ix = [0i32; 16];
            for (j, e) in ix.iter_mut().enumerate() {
                let col = (S * (j % 8) + kx) as isize - a.pl as isize;
                if j % 8 < a.ow && col >= 0 && col < a.w as isize {
                    *m |= 1 << j;
                    *e = col as i32 + if j < 8 { 0 } else { 16 };
                }
            }
            // SAFETY: 16 i32 read from a local array.
            *iv = unsafe { _mm512_loadu_si512(ix.as_ptr().cast()) };
        }
        // Input row t − pt of the plane is `rows[t]`; the halves of pair q's taps of
        // filter row ky that read inside the input (row 2q + 1 only if it exists).
        let n_rows = S * (2 * P - 1) + 3;
        let inside = |t: usize| t >= a.pt && t - a.pt < a.h;
        let mut halves = [[0u16; 3]; P];
        for (q, hq) in halves.iter_mut().enumerate() {
            for (ky, m) in hq.iter_mut().enumerate() {
                let (t0, t1) = (S * 2 * q + ky, S * (2 * q + 1) + ky);
                *m = if inside(t0) { 0x00FF } else { 0 }
                    | if 2 * q + 1 < a.oh && inside(t1) {
                        0xFF00
                    } else {
                        0
                    };
            }
        }
        let in_row = lanes(0, a.w as isize);
        let live = lanes(0, a.ow as isize);
        let (pt, x_sh, y_sh, oh) = (a.pt, a.x_sh, a.y_sh, a.oh);
        let act = a.act as u32;
        let (lo_v, hi_v) = (_mm512_set1_ps(a.lo), _mm512_set1_ps(a.hi));
        for p in lo..hi {
            // SAFETY: plane p of the caller's buffers.
            let (x, y, res, f, b) = unsafe { plane_ptrs(a, p / a.c, p % a.c) };
            let mut rows = [_mm512_setzero_ps(); PAIR_INPUT_ROWS];
            for (t, r) in rows.iter_mut().enumerate().take(n_rows) {
                if inside(t) {
                    // SAFETY: row t − pt of this plane, its first w elements.
                    *r = unsafe {
                        _mm512_maskz_loadu_ps(in_row, x.wrapping_offset((t - pt) as isize * x_sh))
                    };
                }
            }
            let mut acc = [_mm512_set1_ps(b); P];
            // (ky indexes the taps, the rows and every pair's halves alike.)
            #[allow(clippy::needless_range_loop)]
            for ky in 0..3 {
                for kx in 0..3 {
                    // SAFETY: tap (ky, kx) of this plane's filter.
                    let w = _mm512_set1_ps(unsafe { *f.add(3 * ky + kx) });
                    for q in 0..P {
                        let (t0, t1) = (S * 2 * q + ky, S * (2 * q + 1) + ky);
                        let v = _mm512_permutex2var_ps(rows[t0], idx[kx], rows[t1]);
                        acc[q] = _mm512_mask3_fmadd_ps(w, v, acc[q], cols[kx] & halves[q][ky]);
                    }
                }
            }
            let out = PairOut {
                y,
                res,
                y_sh,
                oh,
                live,
                lo: lo_v,
                hi: hi_v,
            };
            // The activation dispatched once per plane, as in `RowsOut::store`.
            // SAFETY: the live lanes of this plane's output rows.
            unsafe {
                by_inline_act!(act, A => out.store::<P, A>(&acc, act), out.store_any::<P>(acc, act))
            }
        }
    }

    /// Where [`pair_rows`] stores a plane's pairs of output rows, and how.
    struct PairOut {
        y: *mut f32,
        res: *const f32,
        y_sh: isize,
        oh: usize,
        /// The output columns (lanes 0..ow).
        live: u16,
        lo: __m512,
        hi: __m512,
    }

    impl PairOut {
        /// Adds the residual to pair `q`'s sum `acc[q]`, applies the activation (`ACT`
        /// when it is not [`u32::MAX`], else `act`) and stores rows `2q` and `2q + 1`.
        ///
        /// # Safety
        /// The CPU has AVX-512F; `y` (and `res`, if not null) address a plane of `oh` rows
        /// `y_sh` apart with the `live` columns.
        #[inline(always)]
        unsafe fn store<const P: usize, const ACT: u32>(&self, acc: &[__m512; P], act: u32) {
            let (y, res, y_sh, live) = (self.y, self.res, self.y_sh, self.live);
            for (q, &v) in acc.iter().enumerate() {
                // Row 2q + 1 is stored from lane 8: its address less 8 (lanes below 8 are
                // masked off, so neither read nor written).
                let at0 = (2 * q) as isize * y_sh;
                let at1 = at0 + y_sh - 8;
                let hi_live = if 2 * q + 1 < self.oh { live << 8 } else { 0 };
                // SAFETY: AVX-512F; the live lanes of rows 2q and 2q + 1 of the residual
                // and the output.
                unsafe {
                    let mut v = v;
                    if !res.is_null() {
                        let r0 = _mm512_maskz_loadu_ps(live, res.wrapping_offset(at0));
                        v = _mm512_add_ps(
                            v,
                            _mm512_mask_loadu_ps(r0, hi_live, res.wrapping_offset(at1)),
                        );
                    }
                    let code = if ACT == u32::MAX { act } else { ACT };
                    let v = crate::gemm::activate_avx512(v, code, self.lo, self.hi);
                    crate::gemm::store16(y.wrapping_offset(at0), live, v);
                    crate::gemm::store16(y.wrapping_offset(at1), hi_live, v);
                }
            }
        }

        /// [`Self::store`] for the other activations, out of line on a copy of the sums.
        ///
        /// # Safety
        /// As for [`Self::store`].
        #[inline(never)]
        #[target_feature(enable = "avx512f")]
        unsafe fn store_any<const P: usize>(&self, acc: [__m512; P], act: u32) {
            // SAFETY: forwarded.
            unsafe { self.store::<P, { u32::MAX }>(&acc, act) }
        }
    }

    /// Depthwise convolution of planes `[lo, hi)` (the tests' entry to [`planes_with`]).
    #[cfg(test)]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn planes(a: &DwArgs, lo: usize, hi: usize) {
        // SAFETY: forwarded.
        unsafe { planes_with(a, lo, hi, true) }
    }

    /// [`planes`], prefetching the input rows of the bands ahead ([`Ahead`]) when
    /// `prefetch` holds and the planes are large enough.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn planes_with(a: &DwArgs, lo: usize, hi: usize, prefetch: bool) {
        if pairs_fit(a) {
            // SAFETY: forwarded; pairs_fit holds.
            unsafe {
                match a.sw {
                    1 => pair_planes::<1>(a, lo, hi),
                    _ => pair_planes::<2>(a, lo, hi),
                }
            }
            return;
        }
        // SAFETY: forwarded.
        unsafe { blocks_with(a, lo, hi, prefetch) }
    }

    /// Depthwise convolution of planes `[lo, hi)` in blocks of 16 output columns (the
    /// tests' entry to [`blocks_with`]).
    #[cfg(test)]
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn blocks(a: &DwArgs, lo: usize, hi: usize) {
        // SAFETY: forwarded.
        unsafe { blocks_with(a, lo, hi, true) }
    }

    /// [`blocks`], prefetching ahead when `prefetch` holds (see [`planes_with`]).
    #[target_feature(enable = "avx512f")]
    unsafe fn blocks_with(a: &DwArgs, lo: usize, hi: usize, prefetch: bool) {
        let (even, odd, steps) = {
            let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
            let steps = _mm512_mullo_epi32(
                _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                _mm512_set1_epi32(a.sw as i32),
            );
            (even, odd, steps)
        };
        let blocks = a.ow.div_ceil(16);
        // The columns each tap reads do not depend on the plane or the row.
        let mut pre = [Cols::EMPTY; MAX_BLOCKS];
        let hoisted = blocks <= MAX_BLOCKS;
        if hoisted {
            for (i, c) in pre.iter_mut().enumerate().take(blocks) {
                *c = Cols::new(a, 16 * i);
            }
        }
        let banded = fast3(a);
        let s2k = hoisted && fast_s2(a);
        let (mut n, mut c) = (lo / a.c, lo % a.c);
        let step = if banded && a.oh > BAND3_ROWS {
            BAND3_ROWS
        } else if s2k {
            // As even as the rows allow.
            a.oh.div_ceil(a.oh.div_ceil(BANDS2_ROWS))
        } else {
            a.oh
        };
        if banded && hoisted && blocks == 1 && a.oh <= 2 * BAND3_ROWS {
            let (v, c0) = ((even, odd, steps), &pre[0]);
            // SAFETY: forwarded.
            unsafe {
                match a.sw {
                    1 => small_planes::<1>(a, lo, hi, c0, v),
                    _ => small_planes::<2>(a, lo, hi, c0, v),
                }
            }
            return;
        }
        let mut pf = Ahead { n, c, oy: 0 };
        // Planes of a few lines, one after the other in memory, stream well through the
        // hardware prefetchers; prefetching them cost more than it saved. Zen 5, one
        // thread: 960 planes of 7×7 18.4 → 15.3 cycles per output vector (scratch
        // benchmark); in mobilenet_v2 (`nnefc bench --profile`) its 7×7 layers 0.031–0.033
        // → 0.026–0.028 ms, 14×14 0.028–0.029 → 0.023–0.024, 28×28 0.045–0.047 → 0.041.
        let prefetch = prefetch && a.h * a.w * 4 > PREFETCH_MIN_PLANE_BYTES;
        for _ in 1..AHEAD {
            if prefetch {
                pf.next(a, step);
            }
        }
        for _ in lo..hi {
            // SAFETY: plane (n, c) of the caller's buffers.
            let (x, y, res, f, b) = unsafe { plane_ptrs(a, n, c) };
            // Bands of rows across every column block, then the next band: a band's input
            // rows are read from memory once and then come from L1. Other windows take
            // the whole plane as one band (`all_rows` walks its rows itself).
            let mut oy = 0;
            while oy < a.oh {
                let r = step.min(a.oh - oy);
                // The input rows of the band AHEAD bands on (in this plane or the next
                // ones), which a band reads 16 columns at a time across up to a dozen
                // rows: a pattern the hardware prefetchers follow badly. mobilenet_v2's
                // stride-2 layer after its 4.8 MB expansion (Zen 5, in the network,
                // `nnefc bench --profile`): 0.53 ms without, 0.21 one band ahead.
                if prefetch {
                    pf.next(a, step);
                }
                // 3×3 windows (columns hoisted), and 5×5 and 7×7 ones at stride 2: every
                // block of the band in one call.
                if s2k || (banded && hoisted) {
                    let k = Block {
                        a,
                        x,
                        y,
                        res,
                        f,
                        b,
                        c: &pre[0],
                        even,
                        odd,
                        steps,
                    };
                    // SAFETY: rows oy..oy + r of every block of this plane.
                    unsafe {
                        match (a.kh, a.sw) {
                            (5, _) => k.bands_any::<5, 2>(oy, r, &pre[..blocks]),
                            (7, _) => k.bands_any::<7, 2>(oy, r, &pre[..blocks]),
                            (_, 1) => k.bands_any::<3, 1>(oy, r, &pre[..blocks]),
                            _ => k.bands_any::<3, 2>(oy, r, &pre[..blocks]),
                        }
                    }
                    oy += r;
                    continue;
                }
                // Block i's columns: hoisted, or worked out here (wide rows).
                #[allow(clippy::needless_range_loop)]
                for i in 0..blocks {
                    let built;
                    let cols = if hoisted {
                        &pre[i]
                    } else {
                        built = Cols::new(a, 16 * i);
                        &built
                    };
                    let k = Block {
                        a,
                        x,
                        y,
                        res,
                        f,
                        b,
                        c: cols,
                        even,
                        odd,
                        steps,
                    };
                    // SAFETY: rows oy..oy + r of this block of this plane.
                    unsafe {
                        match (banded, a.sw) {
                            (true, 1) => k.bands_any::<3, 1>(oy, r, core::slice::from_ref(cols)),
                            (true, _) => k.bands_any::<3, 2>(oy, r, core::slice::from_ref(cols)),
                            (false, 1) => k.all_rows::<1>(),
                            (false, 2) => k.all_rows::<2>(),
                            (false, _) => k.all_rows::<0>(),
                        }
                    }
                }
                oy += r;
            }
            c += 1;
            if c == a.c {
                c = 0;
                n += 1;
            }
        }
    }
}

/// `p`, through an empty asm block: the compiler no longer knows how `p` was computed,
/// so it cannot compute a run of such pointers ahead of their use and keep them all live
/// (on the stack, when registers run out) — each is made from the one before when needed.
/// Not `core::hint::black_box`, which passes its value through memory: a store and a
/// load per row, the very reload this avoids.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::pointers_in_nomem_asm_block)] // the asm reads and writes no memory
fn opaque<T>(mut p: *const T) -> *const T {
    // SAFETY: an empty asm block; it touches nothing but the register holding `p`.
    unsafe {
        core::arch::asm!(
            "/* {0} */",
            inout(reg) p,
            options(pure, nomem, nostack, preserves_flags)
        )
    };
    p
}

/// The one implementation, inlined into each target-feature copy above so that the
/// compiler vectorizes its unit-stride loops with that copy's vectors.
#[inline(always)]
unsafe fn planes_body(a: &DwArgs, lo: usize, hi: usize) {
    let kvol = a.kh * a.kw;
    let mut acc = [0.0f32; CHUNK];
    for p in lo..hi {
        // SAFETY (all pointer arithmetic below): within the extents the caller describes.
        let (x, y, res, f, b) = unsafe { plane_ptrs(a, p / a.c, p % a.c) };
        let res = (!res.is_null()).then_some(res);
        let f = unsafe { core::slice::from_raw_parts(f, kvol) };
        for oy in 0..a.oh {
            let mut col0 = 0;
            while col0 < a.ow {
                let len = CHUNK.min(a.ow - col0);
                let acc = &mut acc[..len];
                acc.fill(b);
                for ky in 0..a.kh {
                    let iy = (oy * a.sh + ky * a.dh) as isize - a.pt as isize;
                    if iy < 0 || iy >= a.h as isize {
                        continue;
                    }
                    let row = unsafe { core::slice::from_raw_parts(x.offset(iy * a.x_sh), a.w) };
                    for kx in 0..a.kw {
                        let wv = f[ky * a.kw + kx];
                        let off = (kx * a.dw) as isize - a.pl as isize;
                        let (olo, ohi) = in_bounds(col0, len, off, a.sw, a.w);
                        if olo >= ohi {
                            continue;
                        }
                        let dst = &mut acc[olo - col0..ohi - col0];
                        let start = (olo as isize * a.sw as isize + off) as usize;
                        if a.sw == 1 {
                            let src = &row[start..start + dst.len()];
                            for (d, s) in dst.iter_mut().zip(src) {
                                *d += wv * *s;
                            }
                        } else {
                            let src = row[start..].iter().step_by(a.sw);
                            for (d, s) in dst.iter_mut().zip(src) {
                                *d += wv * *s;
                            }
                        }
                    }
                }
                let out = unsafe {
                    core::slice::from_raw_parts_mut(y.offset(oy as isize * a.y_sh).add(col0), len)
                };
                if let Some(r) = res {
                    let r = unsafe {
                        core::slice::from_raw_parts(r.offset(oy as isize * a.y_sh).add(col0), len)
                    };
                    for (v, r) in acc.iter_mut().zip(r) {
                        *v += *r;
                    }
                }
                for (o, v) in out.iter_mut().zip(acc.iter()) {
                    *o = activate(*v, a.act as u32, a.lo, a.hi);
                }
                col0 += len;
            }
        }
    }
}

/// Output columns `[lo, hi)` within `[col0, col0 + len)` whose input column
/// `ox·sw + off` lies in `[0, w)`.
#[inline(always)]
fn in_bounds(col0: usize, len: usize, off: isize, sw: usize, w: usize) -> (usize, usize) {
    let sw_i = sw as isize;
    // ox·sw + off ≥ 0  ⇔  ox ≥ ceil(−off / sw)
    let first = if off >= 0 {
        0
    } else {
        ((-off) + sw_i - 1) / sw_i
    } as usize;
    // ox·sw + off ≤ w − 1  ⇔  ox ≤ floor((w − 1 − off) / sw)
    let last = w as isize - 1 - off;
    let end = if last < 0 {
        0
    } else {
        (last / sw_i + 1) as usize
    };
    (first.max(col0), end.min(col0 + len))
}

/// Prefetches, with hint `HINT`, every cache line of the `w` floats from `row`: the input
/// rows the window kernels here, in `maxpool` and in `conv` read ahead of time, and the
/// next packed filter panel of the GEMM driver.
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn prefetch_row<const HINT: i32>(row: *const f32, w: usize) {
    use core::arch::x86_64::_mm_prefetch;
    let mut e = 0;
    while e < w {
        // SAFETY: a hint: it never faults, whatever the address (SSE is part of x86_64).
        unsafe { _mm_prefetch::<HINT>(row.wrapping_add(e).cast()) };
        e += 16;
    }
    // SAFETY: as above (the row's last line, when it does not start a line).
    unsafe { _mm_prefetch::<HINT>(row.wrapping_add(w.saturating_sub(1)).cast()) };
}

/// The masks of three consecutive 16-lane loads covering elements `lo..hi` from the first
/// load's start: [`lanes`] of `[lo, hi)`, shifted by 0, 16 and 32.
#[cfg(target_arch = "x86_64")]
pub(crate) fn lanes3(lo: isize, hi: isize) -> [u16; 3] {
    [
        lanes(lo, hi),
        lanes(lo - 16, hi - 16),
        lanes(lo - 32, hi - 32),
    ]
}

/// Lanes `l` in `[lo, hi)` (clamped to 0..16) as a 16-lane mask.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn lanes(lo: isize, hi: isize) -> u16 {
    let lo = lo.clamp(0, 16) as u32;
    let hi = hi.clamp(0, 16) as u32;
    if hi <= lo {
        return 0;
    }
    let upto = |n: u32| {
        if n >= 16 {
            0xFFFFu16
        } else {
            ((1u32 << n) - 1) as u16
        }
    };
    upto(hi) & !upto(lo)
}

#[cfg(all(test, feature = "std"))]
pub(crate) mod tests {
    use super::*;

    /// Dense NCHW arguments: extents `[n, c, h, w, oh, ow]`, window
    /// `[kh, kw, sh, sw, dh, dw, pt, pl]`, a bias stride of 1 (0 without a bias), clamp
    /// bounds −0.5 and 0.75, and no output yet (each run sets `y`).
    pub(crate) fn dense(
        [n, c, h, w, oh, ow]: [usize; 6],
        [kh, kw, sh, sw, dh, dw, pt, pl]: [usize; 8],
        x: &[f32],
        filter: *const f32,
        bias: *const f32,
        res: Option<&[f32]>,
        act: usize,
    ) -> DwArgs {
        DwArgs {
            n,
            c,
            h,
            w,
            oh,
            ow,
            kh,
            kw,
            sh,
            sw,
            dh,
            dw,
            pt,
            pl,
            x: x.as_ptr(),
            x_sn: (c * h * w) as isize,
            x_sc: (h * w) as isize,
            x_sh: w as isize,
            filter,
            bias,
            bias_sc: isize::from(!bias.is_null()),
            res: res.map_or(core::ptr::null(), <[f32]>::as_ptr),
            y: core::ptr::null_mut(),
            y_sn: (c * oh * ow) as isize,
            y_sc: (oh * ow) as isize,
            y_sh: ow as isize,
            act,
            lo: -0.5,
            hi: 0.75,
        }
    }

    /// Runs `call` serially (a null `Parallel`) and through `pool`, each into a fresh
    /// output of `len` NaNs, asserts that the two give the same bits, and returns them.
    pub(crate) fn serial_and_pooled_runs(
        len: usize,
        pool: &crate::ThreadPool,
        case: usize,
        mut call: impl FnMut(&mut [f32], *const Parallel),
    ) -> Vec<Vec<f32>> {
        let mut runs = Vec::new();
        for par in [core::ptr::null(), &pool.parallel() as *const Parallel] {
            let mut y = vec![f32::NAN; len];
            call(&mut y, par);
            runs.push(y);
        }
        let same = runs[0]
            .iter()
            .zip(&runs[1])
            .all(|(p, q)| p.to_bits() == q.to_bits());
        assert!(same, "case {case}: serial and pooled runs differ");
        runs
    }

    /// `nnefc_dwconv` of `a` serially and through `pool`: each within rounding of `want`,
    /// and the two bit for bit equal.
    pub(crate) fn serial_and_pooled(
        a: &DwArgs,
        want: &[f32],
        pool: &crate::ThreadPool,
        case: usize,
    ) {
        let runs = serial_and_pooled_runs(want.len(), pool, case, |y, par| {
            let args = DwArgs {
                y: y.as_mut_ptr(),
                ..*a
            };
            unsafe { nnefc_dwconv(&args, par) };
        });
        for y in &runs {
            let bad = y
                .iter()
                .zip(want)
                .position(|(p, q)| (p - q).abs() > 1e-5 * q.abs().max(1.0));
            if let Some(i) = bad {
                panic!("case {case}: {a:?}: element {i}: {} vs {}", y[i], want[i]);
            }
        }
    }

    /// The definition, written out: every output the sum of its in-bounds taps.
    pub(crate) fn naive(
        a: &DwArgs,
        x: &[f32],
        f: &[f32],
        bias: &[f32],
        res: Option<&[f32]>,
    ) -> Vec<f32> {
        let mut y = vec![0.0; a.n * a.c * a.oh * a.ow];
        for n in 0..a.n {
            for c in 0..a.c {
                for oy in 0..a.oh {
                    for ox in 0..a.ow {
                        let mut s = bias[c];
                        for ky in 0..a.kh {
                            for kx in 0..a.kw {
                                let iy = (oy * a.sh + ky * a.dh) as isize - a.pt as isize;
                                let ix = (ox * a.sw + kx * a.dw) as isize - a.pl as isize;
                                if iy < 0 || ix < 0 || iy >= a.h as isize || ix >= a.w as isize {
                                    continue;
                                }
                                let xv = x[((n * a.c + c) * a.h + iy as usize) * a.w + ix as usize];
                                s += f[(c * a.kh + ky) * a.kw + kx] * xv;
                            }
                        }
                        let o = ((n * a.c + c) * a.oh + oy) * a.ow + ox;
                        if let Some(r) = res {
                            s += r[o];
                        }
                        y[o] = activate(s, a.act as u32, a.lo, a.hi);
                    }
                }
            }
        }
        y
    }

    /// A layer's random data (input, filter, bias, residual), for [`dense`] arguments.
    pub(crate) struct Layer {
        dims: [usize; 6],
        x: Vec<f32>,
        f: Vec<f32>,
        bias: Vec<f32>,
        res: Option<Vec<f32>>,
    }

    impl Layer {
        /// Data for extents `[n, c, h, w, oh, ow]` and a `[kh, kw]` filter, from `seed`;
        /// a residual when `with_res`.
        pub(crate) fn random(
            seed: u64,
            dims: [usize; 6],
            [kh, kw]: [usize; 2],
            with_res: bool,
        ) -> Layer {
            let [n, c, h, w, oh, ow] = dims;
            let mut g = Lcg(seed);
            let mut take = |len: usize| -> Vec<f32> { (0..len).map(|_| g.next()).collect() };
            let (x, f, bias) = (take(n * c * h * w), take(c * kh * kw), take(c));
            let res = take(n * c * oh * ow);
            Layer {
                dims,
                x,
                f,
                bias,
                res: with_res.then_some(res),
            }
        }
        /// The arguments for window `[kh, kw, sh, sw, dh, dw, pt, pl]` and activation `act`.
        pub(crate) fn args(&self, window: [usize; 8], act: usize) -> DwArgs {
            dense(
                self.dims,
                window,
                &self.x,
                self.f.as_ptr(),
                self.bias.as_ptr(),
                self.res.as_deref(),
                act,
            )
        }
        /// What the definition gives for `a` (made by [`Layer::args`]).
        pub(crate) fn want(&self, a: &DwArgs) -> Vec<f32> {
            naive(a, &self.x, &self.f, &self.bias, self.res.as_deref())
        }
    }

    /// Deterministic test data (an LCG), values in [−1, 1); the direct conv's tests too.
    pub(crate) struct Lcg(pub(crate) u64);
    impl Lcg {
        pub(crate) fn next(&mut self) -> f32 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }
        /// A value in `0..m`.
        pub(crate) fn below(&mut self, m: usize) -> usize {
            ((self.next() + 1.0) * 0.5 * m as f32) as usize % m
        }
    }

    /// The output extents of a 3×3 window with stride `s` over `h × w` padded by
    /// `[top, left, bottom, right]`, or `None` when the padded input is smaller than it.
    fn out_3x3(
        [h, w]: [usize; 2],
        [pt, pl, pb, pr]: [usize; 4],
        s: usize,
    ) -> Option<(usize, usize)> {
        let (ph, pw) = (h + pt + pb, w + pl + pr);
        (ph >= 3 && pw >= 3).then(|| ((ph - 3) / s + 1, (pw - 3) / s + 1))
    }

    /// 3×3 filters with equal strides of 1 or 2 (the banded path): random plane sizes
    /// (short, narrow, wider than the hoisted column blocks), paddings 0..=2 on each side,
    /// residuals and every activation, against the definition, serial and pooled bit for
    /// bit.
    #[test]
    fn dwconv_3x3_bands_match_the_definition() {
        let mut r = Lcg(11);
        let mut u = |m: usize| ((r.next() + 1.0) * 0.5 * m as f32) as usize % m;
        let pool = crate::ThreadPool::new(2).expect("pool");
        for case in 0..400 {
            let s = 1 + u(2);
            let h = 1 + u(if case % 7 == 0 { 40 } else { 16 });
            let w = 1 + u(if case % 5 == 0 { 300 } else { 70 });
            let (pt, pl, pb, pr) = (u(3), u(3), u(3), u(3));
            let Some((oh, ow)) = out_3x3([h, w], [pt, pl, pb, pr], s) else {
                continue;
            };
            let c = 1 + u(5);
            let mut g = Lcg(case as u64 + 7000);
            let x: Vec<f32> = (0..c * h * w).map(|_| g.next()).collect();
            let f: Vec<f32> = (0..c * 9).map(|_| g.next()).collect();
            let bias: Vec<f32> = (0..c).map(|_| g.next()).collect();
            let res: Vec<f32> = (0..c * oh * ow).map(|_| g.next()).collect();
            let with_res = case % 3 == 0;
            let a = dense(
                [1, c, h, w, oh, ow],
                [3, 3, s, s, 1, 1, pt, pl],
                &x,
                f.as_ptr(),
                bias.as_ptr(),
                with_res.then_some(&res[..]),
                // Every activation code (0..=5): the bands' epilogue has inline and
                // out-of-line forms (`RowsOut::store`).
                case % 6,
            );
            let want = naive(&a, &x, &f, &bias, with_res.then_some(&res[..]));
            serial_and_pooled(&a, &want, &pool, case);
        }
    }

    /// 5×5 and 7×7 filters at stride 2 (the 5×5 and 7×7 `bands` path of the AVX-512 blocks): random
    /// plane sizes (short, narrow, wider than the hoisted column blocks), paddings up to
    /// the filter's width on each side, residuals, every activation, and NaN, ±0 and ±∞
    /// among the inputs in every fourth case. The blocks are checked against the
    /// definition (finite cases) and against `nnefc_dwconv` serially and pooled, bit for
    /// bit (which also takes them unless the lane-panel kernel does).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn dwconv_stride2_bands_match_the_definition() {
        if !crate::gemm::avx512_selected() {
            return;
        }
        let mut r = Lcg(41);
        let pool = crate::ThreadPool::new(2).expect("pool");
        let mut taken = 0;
        for case in 0..300 {
            let k = if case % 2 == 0 { 5 } else { 7 };
            let h = 1 + r.below(if case % 7 == 0 { 60 } else { 24 });
            let w = 1 + r.below(if case % 5 == 0 { 600 } else { 80 });
            let (pt, pl, pb, pr) = (r.below(k), r.below(k), r.below(k), r.below(k));
            let (ph, pw) = (h + pt + pb, w + pl + pr);
            if ph < k || pw < k {
                continue;
            }
            let (oh, ow) = ((ph - k) / 2 + 1, (pw - k) / 2 + 1);
            let c = 1 + r.below(5);
            let mut g = Lcg(case as u64 + 5100);
            let special = case % 4 == 1;
            let edge = [f32::NAN, -0.0, 0.0, f32::INFINITY, f32::NEG_INFINITY];
            let mut data = |len: usize| -> Vec<f32> {
                (0..len)
                    .map(|i| match i % 23 {
                        0..5 if special && g.below(4) == 0 => edge[i % 23],
                        _ => g.next(),
                    })
                    .collect()
            };
            let x = data(c * h * w);
            let f = data(c * k * k);
            let bias = data(c);
            let res = data(c * oh * ow);
            let with_res = case % 3 == 0;
            let a = dense(
                [1, c, h, w, oh, ow],
                [k, k, 2, 2, 1, 1, pt, pl],
                &x,
                f.as_ptr(),
                bias.as_ptr(),
                with_res.then_some(&res[..]),
                case % 6,
            );
            if ow <= 16 * avx512::MAX_BLOCKS {
                taken += 1;
            }
            let mut y = vec![f32::NAN; c * oh * ow];
            let args = DwArgs {
                y: y.as_mut_ptr(),
                ..a
            };
            // SAFETY: AVX-512F (selected); buffers of the described extents.
            unsafe { avx512::blocks(&args, 0, c) };
            if !special {
                let want = naive(&a, &x, &f, &bias, with_res.then_some(&res[..]));
                let bad = y
                    .iter()
                    .zip(&want)
                    .position(|(p, q)| (p - q).abs() > 1e-5 * q.abs().max(1.0));
                assert!(bad.is_none(), "case {case}: element {bad:?}: {a:?}");
            }
            let runs = serial_and_pooled_runs(y.len(), &pool, case, |out, par| {
                let args = DwArgs {
                    y: out.as_mut_ptr(),
                    ..a
                };
                unsafe { nnefc_dwconv(&args, par) };
            });
            if !crate::dwconv_lanes::takes(&a) {
                let same = y
                    .iter()
                    .zip(&runs[0])
                    .all(|(p, q)| p.to_bits() == q.to_bits());
                assert!(same, "case {case}: blocks and nnefc_dwconv differ: {a:?}");
            }
        }
        assert!(taken > 200, "only {taken} layers took the stride-2 bands");
    }

    /// Layers whose planes the AVX-512 path runs as pairs of output rows (at most 8 columns
    /// and 16 rows out, 16 columns in; strides 1 and 2, paddings 0..=2 on each side,
    /// residuals, every activation, NaN, ±0 and ±∞ among the inputs) give the bits of its
    /// 16-column blocks.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn dwconv_row_pairs_give_the_blocks_bits() {
        if !crate::gemm::avx512_selected() {
            return;
        }
        let mut r = Lcg(29);
        let mut taken = 0;
        for case in 0..600 {
            let s = 1 + r.below(2);
            let (h, w) = (1 + r.below(16 * s + 2), 1 + r.below(16));
            let (pt, pl, pb, pr) = (r.below(3), r.below(3), r.below(3), r.below(3));
            let Some((oh, ow)) = out_3x3([h, w], [pt, pl, pb, pr], s) else {
                continue;
            };
            let (n, c) = (1 + r.below(2), 1 + r.below(5));
            let mut g = Lcg(case as u64 + 900);
            let special = [f32::NAN, -0.0, 0.0, f32::INFINITY, f32::NEG_INFINITY];
            let mut data = |len: usize| -> Vec<f32> {
                (0..len)
                    .map(|i| match i % 23 {
                        0..5 if g.below(4) == 0 => special[i % 23],
                        _ => g.next(),
                    })
                    .collect()
            };
            let x = data(n * c * h * w);
            let f = data(c * 9);
            let bias = data(c);
            let res = data(n * c * oh * ow);
            let with_res = case % 3 == 0;
            let a = dense(
                [n, c, h, w, oh, ow],
                [3, 3, s, s, 1, 1, pt, pl],
                &x,
                f.as_ptr(),
                bias.as_ptr(),
                with_res.then_some(&res[..]),
                case % 3,
            );
            if !avx512::pairs_fit(&a) {
                continue;
            }
            taken += 1;
            let run = |f: unsafe fn(&DwArgs, usize, usize)| {
                let mut y = vec![f32::NAN; n * c * oh * ow];
                let args = DwArgs {
                    y: y.as_mut_ptr(),
                    ..a
                };
                // SAFETY: AVX-512F (selected); buffers of the described extents.
                unsafe { f(&args, 0, n * c) };
                y
            };
            let (pairs, blocks) = (run(avx512::planes), run(avx512::blocks));
            let same = pairs
                .iter()
                .zip(&blocks)
                .all(|(p, q)| p.to_bits() == q.to_bits());
            assert!(same, "case {case}: {a:?}");
        }
        assert!(taken > 200, "only {taken} layers took the pairs");
    }

    /// Random shapes (filters of 1–5 and 7 rows), strides, dilations, paddings and
    /// epilogues, with and without a pool, and the portable path on its own:
    /// matches the definition within rounding (the AVX-512 path fuses multiply-adds), and
    /// the pooled run equals the serial one bit for bit.
    #[test]
    fn dwconv_matches_the_definition() {
        let mut r = Lcg(3);
        let mut u = |m: usize| ((r.next() + 1.0) * 0.5 * m as f32) as usize % m;
        let pool = crate::ThreadPool::new(3).expect("pool");
        for case in 0..300 {
            // Filters of 1–5 rows, and of 7 in every tenth case (3, 5 and 7 rows take the
            // bands).
            let (kh, kw) = (if case % 10 == 3 { 7 } else { 1 + u(5) }, 1 + u(5));
            let (sh, sw) = (1 + u(3), 1 + u(3));
            let (dh, dw) = (1 + u(2), 1 + u(2));
            let (h, w) = (1 + u(20), 1 + u(300));
            let (pt, pl) = (u(kh * dh), u(kw * dw));
            let (pb, pr) = (u(kh * dh), u(kw * dw));
            let eh = (h + pt + pb) as isize - ((kh - 1) * dh + 1) as isize;
            let ew = (w + pl + pr) as isize - ((kw - 1) * dw + 1) as isize;
            if eh < 0 || ew < 0 {
                continue;
            }
            let (oh, ow) = (eh as usize / sh + 1, ew as usize / sw + 1);
            let (n, c) = (1 + u(2), 1 + u(7));
            let act = u(6);
            let layer = Layer::random(case as u64 + 100, [n, c, h, w, oh, ow], [kh, kw], u(2) == 1);
            let a = layer.args([kh, kw, sh, sw, dh, dw, pt, pl], act);
            let want = layer.want(&a);
            serial_and_pooled(&a, &want, &pool, case);
            // The portable path, whatever this CPU selects.
            let mut y = vec![f32::NAN; want.len()];
            let args = DwArgs {
                y: y.as_mut_ptr(),
                ..a
            };
            unsafe { planes_body(&args, 0, n * c) };
            let bad = y
                .iter()
                .zip(&want)
                .position(|(p, q)| (p - q).abs() > 1e-5 * q.abs().max(1.0));
            assert!(bad.is_none(), "case {case}: portable path: {a:?}");
        }
    }
}
