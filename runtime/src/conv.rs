//! Direct 2-D convolution for layers with few input channels: a network's first layer
//! (an RGB image into 32–64 filters of 3×3 or 7×7, stride 2). im2col + GEMM serves these
//! badly: the column matrix is as large as the image times the filter area (7.4 MB for
//! resnet18's first layer), is written once and packed again, and its short reduction
//! (27 or 147) leaves the GEMM tiles little work per load and store of C. Here the image
//! is read in place: 16 output columns per vector register and weights broadcast from a
//! filter packed at compile time ([`pack_conv_filter`]) into the sums of 8 output channels
//! at once. Groups of two or three column blocks run one output row at a time, each weight
//! broadcast feeding every block of the group (a core with two 512-bit FMA pipes runs out
//! of loads otherwise); a block left alone runs in bands of 3 rows, each input row loaded
//! once per tap column for the rows it feeds. At stride 2 the input rows of a band are
//! first split into even and odd columns on the stack (36 KB at most), once for all its
//! output channels, so that each tap is a plain load; rows too long for that buffer are
//! deinterleaved with permutes as they are read.
//!
//! # Semantics
//! For every sample `n`, output channel `o` and output `(oy, ox)`:
//! `y = act(Σ_{c,ky,kx} w[o,c,ky,kx] · x[n,c, oy·sh + ky − pt, ox·sw + kx − pl] + bias[o]
//! (+ res[n,o,oy,ox]))`, taps outside the input reading 0 (zero padding), the sum taken in
//! `(c, ky, kx)` order from 0 with fused multiply-adds on AVX-512 (the order and rounding
//! of the GEMM path, whose reduction index is `(c·kh + ky)·kw + kx`), bias then residual
//! then activation. Other CPUs take a portable loop (two roundings per term): results may
//! differ in the last bits between CPUs, never between runs or thread counts on one CPU.
//!
//! # Threads
//! Tasks are (sample, tile of 8 output channels, band of output rows): disjoint outputs,
//! each computed exactly as in the serial run. Narrow maps at stride 1 (a padded row
//! narrower than the output row's vectors, such as 7×7) take `conv_flat`'s kernel
//! (vectors over the flattened padded plane), whose tasks are (sample, channel tile).
//!
//! Grouped convolutions of one image run as one call whose samples are the groups
//! ([`ConvArgs::filter_sn`], [`ConvArgs::bias_sn`]).
//!
//! Not here: dilation, unequal strides, strides above 2, filters other than 3×3, 5×5 and
//! 7×7 (the compiler keeps im2col + GEMM for those).

use crate::DwArgs;
use crate::gemm::activate;
use crate::parallel::{self, Parallel, workers};

/// Output channels per tile of the packed filter (and per register block of sums).
pub const CONV_CO_TILE: usize = 8;

/// `nnefc_conv_args`: one direct convolution. `geo` describes it as for a depthwise
/// convolution, with `geo.c` the number of *output* channels, `geo.x_sc` the input's
/// stride between its `cin` channels, `geo.filter` the packed filter
/// ([`pack_conv_filter`]) and `geo.bias` one value per output channel (stride
/// `geo.bias_sc`); `geo.dh`/`geo.dw` must be 1 and `geo.sh == geo.sw`. The "samples"
/// `0..geo.n` may also be the groups of a grouped convolution: sample `s` reads its filter
/// at `geo.filter + s·filter_sn` and its bias at `geo.bias + s·bias_sn` (both 0 for a
/// plain convolution). 248 bytes on 64-bit targets.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ConvArgs {
    /// Geometry, pointers and epilogue.
    pub geo: DwArgs,
    /// Input channels (per group).
    pub cin: usize,
    /// Floats between the packed filters of consecutive samples (groups).
    pub filter_sn: isize,
    /// Elements between the biases of consecutive samples (groups).
    pub bias_sn: isize,
}

/// Floats of [`pack_conv_filter`]'s output: `ceil(cout / 8) · cin · kh · kw · 8`.
pub fn conv_filter_len(cout: usize, cin: usize, kh: usize, kw: usize) -> usize {
    cout.div_ceil(CONV_CO_TILE) * cin * kh * kw * CONV_CO_TILE
}

/// Packs a dense `[cout, cin, kh, kw]` filter for [`nnefc_conv`]: `ceil(cout / 8)` tiles,
/// tile `t` holding for every `(c, ky, kx)` in that order the 8 values of output channels
/// `8t..8t + 8` (0 past `cout`). Element `(o, c, ky, kx)` is at
/// `(o / 8)·cin·kh·kw·8 + ((c·kh + ky)·kw + kx)·8 + o % 8`. Part of the ABI: compiled
/// objects hold filters in this format, whatever CPU runs them.
///
/// Returns [`Status::ShapeMismatch`](crate::Status::ShapeMismatch) if `f` is not
/// `cout·cin·kh·kw` floats long.
#[cfg(feature = "std")]
pub fn pack_conv_filter(
    cout: usize,
    cin: usize,
    kh: usize,
    kw: usize,
    f: &[f32],
) -> Result<std::vec::Vec<f32>, crate::Error> {
    pack_channel_tiles::<CONV_CO_TILE>(cout, cin * kh * kw, f)
}

/// A dense `[cout, taps]` filter as `ceil(cout / T)` tiles, tile `t` holding for every
/// tap in order the `T` values of output channels `T·t..T·t + T` (0 past `cout`): the
/// format of [`pack_conv_filter`] (`T` = 8) and `pack_conv_pool_filter` (64).
#[cfg(feature = "std")]
pub(crate) fn pack_channel_tiles<const T: usize>(
    cout: usize,
    taps: usize,
    f: &[f32],
) -> Result<std::vec::Vec<f32>, crate::Error> {
    if cout.checked_mul(taps) != Some(f.len()) {
        return Err(crate::Error::Status(crate::Status::ShapeMismatch));
    }
    let mut out = std::vec![0.0f32; cout.div_ceil(T) * taps * T];
    for o in 0..cout {
        let tile = (o / T) * taps * T;
        for t in 0..taps {
            out[tile + t * T + o % T] = f[o * taps + t];
        }
    }
    Ok(out)
}

/// Multiply-adds per task at least (the GEMM's part size): handing out a task costs a few
/// microseconds, and a small first layer (tiny_cnn's, 157 K multiply-adds) runs inline.
const TASK_MIN_MACS: usize = 1 << 17;
/// Tasks per worker when splitting.
const TASKS_PER_WORKER: usize = 4;
/// Output rows per band (per task unit and per register block of sums).
const BAND: usize = 3;

/// Whether [`nnefc_conv`] takes a convolution of this shape: square filters of 3, 5 or 7,
/// equal strides of 1 or 2, no dilation.
pub fn conv_supported(kh: usize, kw: usize, sh: usize, sw: usize, dh: usize, dw: usize) -> bool {
    kh == kw && matches!(kh, 3 | 5 | 7) && sh == sw && matches!(sh, 1 | 2) && dh == 1 && dw == 1
}

/// Runs the direct convolution `args` describes, in parallel over (sample, channel tile,
/// row band) when `par` offers several workers; narrow maps at stride 1 on AVX-512 CPUs
/// go to `conv_flat` (split over sample and channel tile). Shapes [`conv_supported`]
/// rejects do nothing.
///
/// # Safety
/// `args` points to a valid [`ConvArgs`] whose pointers and strides address buffers of the
/// described extents, `geo.filter` holding [`conv_filter_len`] packed floats; `y` does not
/// overlap `x`, the filter or the bias (`res` may equal `y`); `par` is null or a valid
/// [`Parallel`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nnefc_conv(args: *const ConvArgs, par: *const Parallel) {
    // SAFETY: valid by the caller's contract.
    let a = unsafe { &*args };
    let g = &a.geo;
    if !conv_supported(g.kh, g.kw, g.sh, g.sw, g.dh, g.dw)
        || g.n == 0
        || g.c == 0
        || g.oh == 0
        || g.ow == 0
    {
        return;
    }
    let macs = [g.c, g.oh, g.ow, g.kh, g.kw, a.cin]
        .iter()
        .fold(g.n, |m, &e| m.saturating_mul(e));
    // SAFETY: `par` is null or valid.
    let tasks = |units: usize| {
        units
            .min(unsafe { workers(par) } * TASKS_PER_WORKER)
            .min(macs / TASK_MIN_MACS)
            .max(1)
    };
    // Narrow maps at stride 1: vectors over the flattened padded plane (`conv_flat`).
    #[cfg(target_arch = "x86_64")]
    if crate::gemm::avx512_selected() && crate::conv_flat::takes(a) {
        let units = crate::conv_flat::units(a);
        // SAFETY: tasks write disjoint outputs (whole channel tiles); the CPU has
        // AVX-512F.
        unsafe { parallel::ranges(par, a, units, tasks(units), crate::conv_flat::run_units) };
        return;
    }
    let units = g.n * g.c.div_ceil(CONV_CO_TILE) * g.oh.div_ceil(BAND);
    // SAFETY: tasks write disjoint outputs.
    unsafe { parallel::ranges(par, a, units, tasks(units), run_units) }
}

/// One unit of work: sample, tile of output channels, first output row and row count.
#[derive(Clone, Copy)]
struct Unit {
    n: usize,
    tile: usize,
    oy: usize,
    rows: usize,
}

impl Unit {
    /// Input channel `c` of the unit's sample.
    fn input(self, a: &ConvArgs, c: usize) -> *const f32 {
        let g = &a.geo;
        g.x.wrapping_offset(self.n as isize * g.x_sn + c as isize * g.x_sc)
    }

    /// The unit's packed filter taps for input channel `c` of a `k`×`k` filter: `k·k`
    /// taps of its tile's 8 output channels ([`pack_conv_filter`]).
    fn taps(self, a: &ConvArgs, c: usize, k: usize) -> *const f32 {
        a.geo.filter.wrapping_offset(
            self.n as isize * a.filter_sn
                + ((self.tile * a.cin + c) * k * k * CONV_CO_TILE) as isize,
        )
    }

    /// Unit `u` of `a`, in (sample, band, tile) order: the tiles of a band follow each
    /// other, so its input rows are read (and at stride 2 split) once for all of them.
    fn of(a: &ConvArgs, u: usize) -> Unit {
        let g = &a.geo;
        let tiles = g.c.div_ceil(CONV_CO_TILE);
        let per_sample = tiles * g.oh.div_ceil(BAND);
        let (n, rest) = (u / per_sample, u % per_sample);
        let oy = (rest / tiles) * BAND;
        Unit {
            n,
            tile: rest % tiles,
            oy,
            rows: BAND.min(g.oh - oy),
        }
    }

    /// Whether `other` reads the same input rows (same sample and band).
    fn same_band(self, other: Unit) -> bool {
        self.n == other.n && self.oy == other.oy
    }
}

/// Units `[lo, hi)` with the widest code the CPU has.
unsafe fn run_units(a: &ConvArgs, lo: usize, hi: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::gemm::avx512_selected() {
            let mut unit = Unit::of(a, lo);
            let mut split = avx512::Split::new();
            for u in lo..hi {
                let next = (u + 1 < hi).then(|| Unit::of(a, u + 1));
                // The next band's input rows, into L2 while this unit runs: the input (a
                // model's image) is usually in memory, and a band reads a dozen rows a
                // row stride apart, 16 columns at a time. First layers (Zen 5, in the
                // networks, `nnefc bench --profile`): resnet18 1.59–1.72 → 1.33–1.43 ms,
                // mobilenet_v2 0.33–0.40 → 0.26–0.32.
                if let Some(n) = next.filter(|n| !n.same_band(unit)) {
                    avx512::prefetch_input(a, n);
                }
                // SAFETY: the CPU has AVX-512F (that is what selected the kernel).
                unsafe { avx512::unit(a, unit, &mut split) };
                if let Some(n) = next {
                    unit = n;
                }
            }
            return;
        }
    }
    for u in lo..hi {
        // SAFETY: the caller's contract.
        unsafe { unit_body(a, Unit::of(a, u)) };
    }
}

/// Adds the bias and residual to `v`, the sum of output `(n, o, oy, ox)`, applies the
/// activation and stores it (the portable path).
#[inline(always)]
unsafe fn finish(a: &ConvArgs, n: usize, o: usize, oy: usize, ox: usize, v: f32) {
    let g = &a.geo;
    let mut v = v;
    if !g.bias.is_null() {
        // SAFETY: channel `o` of sample `n`'s bias.
        v += unsafe {
            *g.bias
                .offset(n as isize * a.bias_sn + o as isize * g.bias_sc)
        };
    }
    let at = n as isize * g.y_sn + o as isize * g.y_sc + oy as isize * g.y_sh + ox as isize;
    if !g.res.is_null() {
        // SAFETY: an element of the described residual.
        v += unsafe { *g.res.offset(at) };
    }
    let v = activate(v, g.act as u32, g.lo, g.hi);
    // SAFETY: an element of the described output.
    unsafe { *g.y.offset(at) = v };
}

/// The portable path: every output its own sum in `(c, ky, kx)` order.
unsafe fn unit_body(a: &ConvArgs, u: Unit) {
    let g = &a.geo;
    let (kh, kw) = (g.kh, g.kw);
    let taps = a.cin * kh * kw;
    for o in u.tile * CONV_CO_TILE..g.c.min((u.tile + 1) * CONV_CO_TILE) {
        let wt = g.filter.wrapping_offset(
            u.n as isize * a.filter_sn + (u.tile * taps * CONV_CO_TILE + o % CONV_CO_TILE) as isize,
        );
        for oy in u.oy..u.oy + u.rows {
            for ox in 0..g.ow {
                let mut s = 0.0f32;
                for c in 0..a.cin {
                    for ky in 0..kh {
                        let iy = (oy * g.sh + ky) as isize - g.pt as isize;
                        for kx in 0..kw {
                            let ix = (ox * g.sw + kx) as isize - g.pl as isize;
                            if iy < 0 || ix < 0 || iy >= g.h as isize || ix >= g.w as isize {
                                continue;
                            }
                            // SAFETY: in-bounds input element and packed filter tap.
                            let (xv, wv) = unsafe {
                                (
                                    *g.x.offset(
                                        u.n as isize * g.x_sn
                                            + c as isize * g.x_sc
                                            + iy * g.x_sh
                                            + ix,
                                    ),
                                    *wt.add(((c * kh + ky) * kw + kx) * CONV_CO_TILE),
                                )
                            };
                            s += wv * xv;
                        }
                    }
                }
                // SAFETY: the caller's contract.
                unsafe { finish(a, u.n, o, oy, ox, s) };
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{CONV_CO_TILE, ConvArgs, Unit};
    use crate::dwconv::avx512::finish_act;
    use crate::dwconv::{lanes, lanes3, prefetch_row};
    use core::arch::x86_64::*;

    /// Prefetches into L2 the input rows unit `u` reads (every input channel).
    #[inline]
    pub(super) fn prefetch_input(a: &ConvArgs, u: Unit) {
        let g = &a.geo;
        let first = ((u.oy * g.sh) as isize - g.pt as isize).max(0);
        let end = ((u.oy * g.sh) as isize - g.pt as isize + ((u.rows - 1) * g.sh + g.kh) as isize)
            .min(g.h as isize);
        for c in 0..a.cin {
            let xc = u.input(a, c);
            for iy in first..end {
                prefetch_row::<_MM_HINT_T1>(xc.wrapping_offset(iy * g.x_sh), g.w);
            }
        }
    }

    /// One unit ([`Unit`]) of the convolution; `split` holds (or is given) the split
    /// rows of its band at stride 2.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn unit(a: &ConvArgs, u: Unit, split: &mut Split) {
        let g = &a.geo;
        // SAFETY: the unit's band of a valid convolution.
        let rows = unsafe { split.rows(a, u) };
        // SAFETY: forwarded; `conv_supported` holds.
        unsafe {
            match (g.kh, g.sh, u.rows) {
                (3, 1, 3) => blocks::<3, 1, 3>(a, u, rows),
                (3, 1, 2) => blocks::<3, 1, 2>(a, u, rows),
                (3, 1, _) => blocks::<3, 1, 1>(a, u, rows),
                (3, _, 3) => blocks::<3, 2, 3>(a, u, rows),
                (3, _, 2) => blocks::<3, 2, 2>(a, u, rows),
                (3, _, _) => blocks::<3, 2, 1>(a, u, rows),
                (5, 1, 3) => blocks::<5, 1, 3>(a, u, rows),
                (5, 1, 2) => blocks::<5, 1, 2>(a, u, rows),
                (5, 1, _) => blocks::<5, 1, 1>(a, u, rows),
                (5, _, 3) => blocks::<5, 2, 3>(a, u, rows),
                (5, _, 2) => blocks::<5, 2, 2>(a, u, rows),
                (5, _, _) => blocks::<5, 2, 1>(a, u, rows),
                (_, 1, 3) => blocks::<7, 1, 3>(a, u, rows),
                (_, 1, 2) => blocks::<7, 1, 2>(a, u, rows),
                (_, 1, _) => blocks::<7, 1, 1>(a, u, rows),
                (_, _, 3) => blocks::<7, 2, 3>(a, u, rows),
                (_, _, 2) => blocks::<7, 2, 2>(a, u, rows),
                (_, _, _) => blocks::<7, 2, 1>(a, u, rows),
            }
        }
    }

    /// Floats of [`Split`]'s buffer: a band of resnet18's first layer (3 channels, 11
    /// rows of 7×7 taps, 2 × 128 split columns) fits; 36 KB of the caller's stack.
    const SPLIT_CAP: usize = 9 * 1024;

    /// Stride 2: the input rows of one band, every channel, each split into its even and
    /// its odd columns (zero padding included, as far as the blocks read), so that every
    /// tap column is one plain load: tap `kx = 2m` of output column `ox` reads even column
    /// `ox + m`, tap `2m + 1` odd column `ox + m`. Built once per band for all its tiles
    /// (units run band by band); the kernels that read it are those of stride 1. Replaces
    /// a deinterleave (three loads, four permutes) per input row, block and output row.
    pub(super) struct Split {
        /// Left uninitialized: zeroing 36 KB for every call cost a few percent of a small
        /// model (unetish), and the kernels read only the rows [`Split::rows`] wrote.
        buf: core::mem::MaybeUninit<[f32; SPLIT_CAP]>,
        /// The (sample, first output row) of the band `buf` holds.
        band: Option<(usize, usize)>,
    }

    impl Split {
        pub(super) fn new() -> Split {
            Split {
                buf: core::mem::MaybeUninit::uninit(),
                band: None,
            }
        }

        /// The split rows of `u`'s band, built unless `buf` holds them; `None` when the
        /// layer is not stride 2, has a single column block (the band kernel takes it)
        /// or the band does not fit (the deinterleaving kernels take it).
        ///
        /// # Safety
        /// `u` is a unit of the valid convolution `a`.
        #[target_feature(enable = "avx512f")]
        unsafe fn rows(&mut self, a: &ConvArgs, u: Unit) -> Option<Rows> {
            let g = &a.geo;
            let blocks = g.ow.div_ceil(16);
            // Split columns read: up to 16·blocks − 1 + (K − 1)/2, in whole vectors.
            let half = 16 * blocks + 16;
            let n_in = (u.rows - 1) * 2 + g.kh;
            if g.sh != 2 || blocks < 2 || a.cin * n_in * 2 * half > SPLIT_CAP {
                return None;
            }
            let iy0 = (2 * u.oy) as isize - g.pt as isize;
            if self.band != Some((u.n, u.oy)) {
                let even =
                    _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
                let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
                let w = g.w as isize;
                // Chunk `j` (split columns 16j..) reads padded columns 32j.., input
                // columns from `32j − pl`: the masks of its two loads, the same in every
                // row.
                let mut masks = [[0u16; 2]; SPLIT_CAP / 32];
                for (j, m) in masks[..half / 16].iter_mut().enumerate() {
                    let ix = (32 * j) as isize - g.pl as isize;
                    *m = [lanes(-ix, w - ix), lanes(-ix - 16, w - ix - 16)];
                }
                for c in 0..a.cin {
                    let xc = u.input(a, c);
                    for i in 0..n_in {
                        let iy = iy0 + i as isize;
                        if iy < 0 || iy >= g.h as isize {
                            continue;
                        }
                        let row = xc.wrapping_offset(iy * g.x_sh - g.pl as isize);
                        let dst = (c * n_in + i) * 2 * half;
                        for (j, m) in masks[..half / 16].iter().enumerate() {
                            // SAFETY: masked-off lanes are not read; the others are in the
                            // row. The stores are inside `buf` (checked above).
                            unsafe {
                                let src = row.wrapping_add(32 * j);
                                let v0 = _mm512_maskz_loadu_ps(m[0], src);
                                let v1 = _mm512_maskz_loadu_ps(m[1], src.wrapping_add(16));
                                let p = self.buf.as_mut_ptr().cast::<f32>().add(dst + 16 * j);
                                _mm512_storeu_ps(p, _mm512_permutex2var_ps(v0, even, v1));
                                _mm512_storeu_ps(p.add(half), _mm512_permutex2var_ps(v0, odd, v1));
                            }
                        }
                    }
                }
                self.band = Some((u.n, u.oy));
            }
            Some(Rows {
                base: self.buf.as_ptr().cast::<f32>(),
                c_step: (n_in * 2 * half) as isize,
                row_step: (2 * half) as isize,
                iy_base: iy0,
                half: half as isize,
            })
        }
    }

    /// Where the row kernels read input row `iy` of channel `c` of the unit's sample, and
    /// tap column `kx`: the input itself (stride 1) or a band's [`Split`] rows (stride 2).
    #[derive(Clone, Copy)]
    pub(super) struct Rows {
        base: *const f32,
        c_step: isize,
        row_step: isize,
        /// The input row at `base`.
        iy_base: isize,
        /// Split rows: floats from the even columns to the odd ones.
        half: isize,
    }

    impl Rows {
        /// The unit's input, read in place.
        fn input(a: &ConvArgs, u: Unit) -> Rows {
            Rows {
                base: u.input(a, 0),
                c_step: a.geo.x_sc,
                row_step: a.geo.x_sh,
                iy_base: 0,
                half: 0,
            }
        }

        /// Input row `iy` of channel `c`.
        #[inline(always)]
        fn row(&self, c: usize, iy: isize) -> *const f32 {
            self.base
                .wrapping_offset(c as isize * self.c_step + (iy - self.iy_base) * self.row_step)
        }

        /// Offset of tap column `kx` at stride `S` (from a block's [`Taps::ix0`]).
        #[inline(always)]
        fn tap<const S: usize>(&self, kx: usize) -> isize {
            (kx % S) as isize * self.half + (kx / S) as isize
        }
    }

    /// Every 16-column block of the unit's rows: `K`×`K` filter, stride `S`, `R` rows.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn blocks<const K: usize, const S: usize, const R: usize>(
        a: &ConvArgs,
        u: Unit,
        split: Option<Rows>,
    ) {
        let g = &a.geo;
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        // Groups of blocks take a one-row kernel in which each broadcast of a weight feeds
        // one multiply-add per block: two or three blocks at stride 1 and at stride 2 over
        // the band's split rows, pairs at stride 2 when the rows did not fit the split
        // buffer (which deinterleave each input row once per block and row); a last
        // single block the band kernel below. Measured on Zen 5 (`nnefc bench --profile`, one
        // layer, best of three or four): 16→64 3×3 at 55×55 0.313 → 0.281 ms; 3→64 3×3
        // stride 2 at 111×111 0.303 → 0.290; resnet18's 7×7 stride 2 1.18 → 1.13. (At
        // stride 2 three blocks with one permute per tap and block measured 0.321.)
        let blocks = g.ow.div_ceil(16);
        let mut bi = 0;
        let rows = if S == 1 {
            Some(Rows::input(a, u))
        } else {
            split
        };
        while let Some(rows) = rows.filter(|_| blocks - bi >= 2) {
            // Pairs, and a triple where the count is odd: a block left alone would take
            // the band kernel, slower per block (squeezenet's 55-wide fire convs, four
            // blocks: 0.30–0.31 ms as 3 + 1, 0.28–0.29 as 2 + 2).
            let left = blocks - bi;
            let nb = if left % 2 == 1 { 3 } else { 2 };
            let t: [Taps; 3] = core::array::from_fn(|j| {
                if j >= nb {
                    Taps::default()
                } else if S == 1 {
                    Taps::new(a, K, 1, 16 * (bi + j))
                } else {
                    Taps::split(a, 16 * (bi + j))
                }
            });
            let next = 16 * (bi + nb);
            let plain = t[..nb].iter().all(|t| t.plain);
            for r in 0..R {
                let oy = u.oy + r;
                prefetch_out(a, u, oy, next);
                // SAFETY: row oy of these blocks of the unit.
                unsafe {
                    match (nb, plain) {
                        (3, true) => row_blocks::<K, S, 3, true>(a, u, oy, &t, &rows),
                        (3, false) => row_blocks::<K, S, 3, false>(a, u, oy, &t, &rows),
                        (_, true) => row_blocks::<K, S, 2, true>(a, u, oy, &t, &rows),
                        (_, false) => row_blocks::<K, S, 2, false>(a, u, oy, &t, &rows),
                    }
                }
            }
            bi += nb;
        }
        while S == 2 && blocks - bi >= 2 {
            let t: [Taps; 2] = core::array::from_fn(|j| Taps::new(a, K, 2, 16 * (bi + j)));
            let next = 16 * (bi + 2);
            for r in 0..R {
                let oy = u.oy + r;
                prefetch_out(a, u, oy, next);
                // SAFETY: row oy of these blocks of the unit.
                unsafe { row_pair_s2::<K>(a, u, oy, &t, even) };
            }
            bi += 2;
        }
        let mut ox0 = 16 * bi;
        while ox0 < g.ow {
            let t = Taps::new(a, K, S, ox0);
            for r in 0..R {
                prefetch_out(a, u, u.oy + r, ox0 + 16);
            }
            // SAFETY: this block of the unit.
            unsafe { block::<K, S, R>(a, u, &t, even) };
            ox0 += 16;
        }
    }

    /// Output rows `u.oy..u.oy + R` of the block of 16 columns `t` describes, the unit's 8
    /// output channels: input row `i` of the band (all `cin` channels in turn), loaded
    /// once per tap column, feeds output row `r` through filter row `i − r·S`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn block<const K: usize, const S: usize, const R: usize>(
        a: &ConvArgs,
        u: Unit,
        t: &Taps,
        even: __m512i,
    ) {
        let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
        let g = &a.geo;
        let n_in = (R - 1) * S + K;
        let iy0 = (u.oy * S) as isize - g.pt as isize;
        let mut acc = [[_mm512_setzero_ps(); R]; CONV_CO_TILE];
        for c in 0..a.cin {
            let (xc, wc) = (u.input(a, c), u.taps(a, c, K));
            // Unrolled by hand so that the sums, indexed by the row, stay in registers.
            unroll!(i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10] {
                let iy = iy0 + i as isize;
                if i < n_in && iy >= 0 && iy < g.h as isize {
                    let row = xc.wrapping_offset(iy * g.x_sh);
                    // Stride 2: the row's elements e (from tap 0's first column) in three
                    // loads, deinterleaved once; tap kx = 2m reads evens m.., kx = 2m + 1
                    // odds m.. (a lane shift of the first 16 with the next few).
                    let d = if S == 2 {
                        // SAFETY: a row of the input.
                        unsafe { deinterleave(row, t, even, odd) }
                    } else {
                        [_mm512_setzero_si512(); 4]
                    };
                    unroll!(kx in [0, 1, 2, 3, 4, 5, 6] {
                      if kx < K {
                        let tv = if S == 1 {
                            // SAFETY: masked-off lanes are not read; the others are in
                            // the row.
                            unsafe {
                                _mm512_maskz_loadu_ps(t.m[kx], row.wrapping_offset(t.ix0 + kx as isize))
                            }
                        } else {
                            s2_tap(&d, kx)
                        };
                        unroll!(r in [0, 1, 2] {
                            if r < R && i >= r * S && i - r * S < K {
                                let ky = i - r * S;
                                let wp = wc.wrapping_add((ky * K + kx) * CONV_CO_TILE);
                                unroll!(o in [0, 1, 2, 3, 4, 5, 6, 7] {
                                    // SAFETY: a tap of the packed filter.
                                    let wv = _mm512_set1_ps(unsafe { *wp.add(o) });
                                    acc[o][r] = _mm512_fmadd_ps(wv, tv, acc[o][r]);
                                });
                            }
                        });
                      }
                    });
                }
            });
        }
        // Unrolled by hand (as are the multiply-adds): a sum indexed by a loop variable
        // when SROA runs stays in memory, stored after every multiply-add.
        // Copied with constant indices: the sums stay in registers through the
        // multiply-adds (an array indexed by a loop variable, or whose address is taken,
        // would be kept in memory and stored after every multiply-add).
        let mut out = [[_mm512_setzero_ps(); R]; CONV_CO_TILE];
        unroll!(o in [0, 1, 2, 3, 4, 5, 6, 7] {
            unroll!(r in [0, 1, 2] {
                if r < R { out[o][r] = acc[o][r]; }
            });
        });
        let at: [isize; R] =
            core::array::from_fn(|r| (u.oy + r) as isize * g.y_sh + t.ox0 as isize);
        // SAFETY: this block's live outputs.
        unsafe { finish_tile::<R>(a, u, &out, at, [t.live; R]) };
    }

    /// The lines of output row `oy`, columns `next..next + 16` (the next block's), in each
    /// of the unit's channels, for writing: a model's outputs are usually out of cache
    /// (the arena is larger than L3), and a store that misses waits for the line to be
    /// read (resnet18's first layer: 2.2 ms warm, 2.6 ms cold).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn prefetch_out(a: &ConvArgs, u: Unit, oy: usize, next: usize) {
        let g = &a.geo;
        if next >= g.ow {
            return;
        }
        let at = u.n as isize * g.y_sn + next as isize + oy as isize * g.y_sh;
        for o in u.tile * CONV_CO_TILE..g.c.min((u.tile + 1) * CONV_CO_TILE) {
            let p = g.y.wrapping_offset(at + o as isize * g.y_sc);
            // Hints: they never fault. 16 floats span two lines unless aligned.
            _mm_prefetch::<_MM_HINT_ET0>(p.cast());
            _mm_prefetch::<_MM_HINT_ET0>(p.wrapping_add(15).cast());
        }
    }

    /// What one block of 16 output columns reads from each input row, for every kernel
    /// here.
    #[derive(Clone, Copy, Default)]
    struct Taps {
        /// The block's first output column and its live lanes.
        ox0: usize,
        live: u16,
        /// Input column of tap 0's lane 0 (may be negative).
        ix0: isize,
        /// Stride 1: `m[kx]`, the lanes of tap `kx`'s load from `ix0 + kx` that are in the
        /// row. Stride 2: `m[..3]`, the elements of three loads of 16 from `ix0` that are
        /// in the row and needed (below 2·count + K − 2), which [`deinterleave`] reads.
        /// Eight, not seven: a 14-byte array is copied in overlapping 8-byte moves whose
        /// loads wait on the stores (store-forwarding stalls, 5 % of a first layer).
        m: [u16; 8],
        /// Stride 1: every load of every tap (16 elements from `ix0 + kx`) is inside the
        /// row, so loads need no masks.
        plain: bool,
    }

    impl Taps {
        /// The block from output column `ox0` of a `k`-wide filter with stride `s`.
        fn new(a: &ConvArgs, k: usize, s: usize, ox0: usize) -> Taps {
            let g = &a.geo;
            let w = g.w as isize;
            let cnt = (g.ow - ox0).min(16) as isize;
            let ix0 = (ox0 * s) as isize - g.pl as isize;
            let mut t = Taps {
                ox0,
                live: lanes(0, cnt),
                ix0,
                ..Taps::default()
            };
            if s == 1 {
                t.plain = ix0 >= 0 && ix0 + (k - 1) as isize + 16 <= w;
                for kx in 0..k {
                    let e0 = ix0 + kx as isize;
                    t.m[kx] = lanes(-e0, (w - e0).min(cnt));
                }
            } else {
                let (lo, hi) = ((-ix0).max(0), (w - ix0).min(2 * cnt + k as isize - 2));
                t.m[..3].copy_from_slice(&lanes3(lo, hi));
            }
            t
        }

        /// The block from output column `ox0` of a stride-2 filter over [`Split`] rows:
        /// every load is inside the split row.
        fn split(a: &ConvArgs, ox0: usize) -> Taps {
            Taps {
                ox0,
                live: lanes(0, (a.geo.ow - ox0).min(16) as isize),
                ix0: ox0 as isize,
                plain: true,
                ..Taps::default()
            }
        }
    }

    /// Stride 2: the elements of input row `row` that block `t` reads, in three loads,
    /// deinterleaved once: the even ones from `ix0`, the odd ones, and the even and odd
    /// ones past the first 32 (for [`s2_tap`]).
    ///
    /// # Safety
    /// `row` is an input row of the convolution `t` was made for.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn deinterleave(row: *const f32, t: &Taps, even: __m512i, odd: __m512i) -> [__m512i; 4] {
        let src = row.wrapping_offset(t.ix0);
        // SAFETY: masked-off lanes are not read; the others are in the row.
        let (v0, v1, v2) = unsafe {
            (
                _mm512_maskz_loadu_ps(t.m[0], src),
                _mm512_maskz_loadu_ps(t.m[1], src.wrapping_add(16)),
                _mm512_maskz_loadu_ps(t.m[2], src.wrapping_add(32)),
            )
        };
        [
            _mm512_castps_si512(_mm512_permutex2var_ps(v0, even, v1)),
            _mm512_castps_si512(_mm512_permutex2var_ps(v0, odd, v1)),
            _mm512_castps_si512(_mm512_permutexvar_ps(even, v2)),
            _mm512_castps_si512(_mm512_permutexvar_ps(odd, v2)),
        ]
    }

    /// Stride 2: what tap column `kx` reads, from [`deinterleave`]'s vectors: tap `2m`
    /// the even elements from `m`, tap `2m + 1` the odd ones (a lane shift of the first
    /// 16 with the next few).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn s2_tap(d: &[__m512i; 4], kx: usize) -> __m512 {
        let [e0, o0, eh, oh] = *d;
        _mm512_castsi512_ps(match kx {
            0 => e0,
            1 => o0,
            2 => _mm512_alignr_epi32::<1>(eh, e0),
            3 => _mm512_alignr_epi32::<1>(oh, o0),
            4 => _mm512_alignr_epi32::<2>(eh, e0),
            5 => _mm512_alignr_epi32::<2>(oh, o0),
            _ => _mm512_alignr_epi32::<3>(eh, e0),
        })
    }

    /// Output row `oy` of a stride-2 conv, the unit's 8 output channels over two blocks of
    /// 16 columns: each input row is loaded and deinterleaved once per block
    /// ([`deinterleave`]), and each weight broadcast feeds both blocks. Same `(c, ky, kx)` order,
    /// so the same bits as [`block`].
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn row_pair_s2<const K: usize>(
        a: &ConvArgs,
        u: Unit,
        oy: usize,
        t: &[Taps; 2],
        even: __m512i,
    ) {
        let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
        let g = &a.geo;
        let iy0 = (2 * oy) as isize - g.pt as isize;
        let mut acc = [[_mm512_setzero_ps(); 2]; CONV_CO_TILE];
        for c in 0..a.cin {
            let (xc, wc) = (u.input(a, c), u.taps(a, c, K));
            unroll!(ky in [0, 1, 2, 3, 4, 5, 6] {
                let iy = iy0 + ky as isize;
                if ky < K && iy >= 0 && iy < g.h as isize {
                    let row = xc.wrapping_offset(iy * g.x_sh);
                    // SAFETY: a row of the input.
                    let d = unsafe {
                        [deinterleave(row, &t[0], even, odd), deinterleave(row, &t[1], even, odd)]
                    };
                    unroll!(kx in [0, 1, 2, 3, 4, 5, 6] {
                      if kx < K {
                        let tv = [s2_tap(&d[0], kx), s2_tap(&d[1], kx)];
                        let wp = wc.wrapping_add((ky * K + kx) * CONV_CO_TILE);
                        unroll!(o in [0, 1, 2, 3, 4, 5, 6, 7] {
                            // SAFETY: a tap of the packed filter.
                            let wv = _mm512_set1_ps(unsafe { *wp.add(o) });
                            acc[o][0] = _mm512_fmadd_ps(wv, tv[0], acc[o][0]);
                            acc[o][1] = _mm512_fmadd_ps(wv, tv[1], acc[o][1]);
                        });
                      }
                    });
                }
            });
        }
        // Copied with constant indices: the sums stay in registers through the
        // multiply-adds (an array indexed by a loop variable, or whose address is taken,
        // would be kept in memory and stored after every multiply-add).
        let mut out = [[_mm512_setzero_ps(); 2]; CONV_CO_TILE];
        unroll!(o in [0, 1, 2, 3, 4, 5, 6, 7] {
            unroll!(b in [0, 1] {
                out[o][b] = acc[o][b];
            });
        });
        let at: [isize; 2] = core::array::from_fn(|b| oy as isize * g.y_sh + t[b].ox0 as isize);
        // SAFETY: these blocks' live outputs.
        unsafe { finish_tile::<2>(a, u, &out, at, [t[0].live, t[1].live]) };
    }

    /// Output row `oy` of the unit's 8 output channels over the `NB` blocks of 16
    /// columns `t` describes: per `(c, ky, kx)` one tap vector per block, and each weight
    /// broadcast once for all blocks (24 sums for three blocks). The sums take the same
    /// `(c, ky, kx)` order as in [`block`], so the two kernels agree bit for bit. `PLAIN`:
    /// no load needs a mask ([`Taps::plain`]). Stride `S` reads `rows`: the input at
    /// stride 1, a band's [`Split`] rows at stride 2.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn row_blocks<const K: usize, const S: usize, const NB: usize, const PLAIN: bool>(
        a: &ConvArgs,
        u: Unit,
        oy: usize,
        t: &[Taps; 3],
        rows: &Rows,
    ) {
        let g = &a.geo;
        let iy0 = (oy * S) as isize - g.pt as isize;
        let mut acc = [[_mm512_setzero_ps(); NB]; CONV_CO_TILE];
        for c in 0..a.cin {
            let wc = u.taps(a, c, K);
            // Unrolled by hand so that the sums, indexed by block and channel, stay in
            // registers.
            unroll!(ky in [0, 1, 2, 3, 4, 5, 6] {
                let iy = iy0 + ky as isize;
                if ky < K && iy >= 0 && iy < g.h as isize {
                    let row = rows.row(c, iy);
                    unroll!(kx in [0, 1, 2, 3, 4, 5, 6] {
                      if kx < K {
                        let mut tv = [_mm512_setzero_ps(); NB];
                        unroll!(b in [0, 1, 2] {
                            if b < NB {
                                let src = row.wrapping_offset(t[b].ix0 + rows.tap::<S>(kx));
                                // SAFETY: masked-off lanes are not read; the others are in
                                // the row.
                                tv[b] = unsafe {
                                    if PLAIN {
                                        _mm512_loadu_ps(src)
                                    } else {
                                        _mm512_maskz_loadu_ps(t[b].m[kx], src)
                                    }
                                };
                            }
                        });
                        let wp = wc.wrapping_add((ky * K + kx) * CONV_CO_TILE);
                        unroll!(o in [0, 1, 2, 3, 4, 5, 6, 7] {
                            // SAFETY: a tap of the packed filter.
                            let wv = _mm512_set1_ps(unsafe { *wp.add(o) });
                            unroll!(b in [0, 1, 2] {
                                if b < NB {
                                    acc[o][b] = _mm512_fmadd_ps(wv, tv[b], acc[o][b]);
                                }
                            });
                        });
                      }
                    });
                }
            });
        }
        // Copied with constant indices: the sums stay in registers through the
        // multiply-adds (an array indexed by a loop variable, or whose address is taken,
        // would be kept in memory and stored after every multiply-add).
        let mut out = [[_mm512_setzero_ps(); NB]; CONV_CO_TILE];
        unroll!(o in [0, 1, 2, 3, 4, 5, 6, 7] {
            unroll!(b in [0, 1, 2] {
                if b < NB { out[o][b] = acc[o][b]; }
            });
        });
        let at: [isize; NB] = core::array::from_fn(|b| oy as isize * g.y_sh + t[b].ox0 as isize);
        // SAFETY: these blocks' live outputs.
        unsafe { finish_tile::<NB>(a, u, &out, at, core::array::from_fn(|b| t[b].live)) };
    }

    /// The epilogue of a register tile: for each of the unit's output channels `o` and
    /// each `k < N`, sum `acc[o][k]` plus the bias, plus the residual, through the
    /// activation, stored to the `live[k]` lanes at `at[k]` within channel `o`'s plane of
    /// sample `u.n`. The activation is dispatched once per tile and the bias read once per
    /// channel, where they were per vector: a 3→64 stride-2 first layer alone went from
    /// 0.256–0.263 to 0.244–0.247 ms (Zen 5, `nnefc bench`, interleaved); with no
    /// epilogue at all it takes 0.22.
    #[inline(never)]
    #[target_feature(enable = "avx512f")]
    unsafe fn finish_tile<const N: usize>(
        a: &ConvArgs,
        u: Unit,
        acc: &[[__m512; N]; CONV_CO_TILE],
        at: [isize; N],
        live: [u16; N],
    ) {
        // SAFETY: forwarded.
        unsafe {
            crate::gemm::by_act!(a.geo.act, A => finish_tile_act::<N, A>(a, u, acc, at, live))
        }
    }

    /// [`finish_tile`] with the activation `ACT` (`DwArgs::act`).
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn finish_tile_act<const N: usize, const ACT: u32>(
        a: &ConvArgs,
        u: Unit,
        acc: &[[__m512; N]; CONV_CO_TILE],
        at: [isize; N],
        live: [u16; N],
    ) {
        let g = &a.geo;
        let o0 = u.tile * CONV_CO_TILE;
        for (o, acc_o) in acc.iter().enumerate() {
            if o0 + o >= g.c {
                break;
            }
            let plane = u.n as isize * g.y_sn + (o0 + o) as isize * g.y_sc;
            // SAFETY: channel `o0 + o` of sample `n`'s bias.
            let bias = (!g.bias.is_null()).then(|| unsafe {
                *g.bias
                    .offset(u.n as isize * a.bias_sn + (o0 + o) as isize * g.bias_sc)
            });
            for k in 0..N {
                let mut v = acc_o[k];
                if let Some(b) = bias {
                    v = _mm512_add_ps(v, _mm512_set1_ps(b));
                }
                // SAFETY: these outputs' live lanes (and their residual's).
                unsafe { finish_act(v, g, ACT, g.y, g.res, plane + at[k], live[k]) };
            }
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    use crate::dwconv::tests::{Lcg, serial_and_pooled_runs};

    /// The definition over the dense filter, summed in f64.
    #[allow(clippy::too_many_arguments)]
    /// `f` is dense, sample (group) `n`'s filter `f_sn` floats after sample `n − 1`'s.
    fn naive(
        a: &ConvArgs,
        x: &[f32],
        f: &[f32],
        f_sn: usize,
        bias: &[f32],
        res: Option<&[f32]>,
    ) -> Vec<f32> {
        let g = &a.geo;
        let mut y = vec![0.0; g.n * g.c * g.oh * g.ow];
        for n in 0..g.n {
            for o in 0..g.c {
                for oy in 0..g.oh {
                    for ox in 0..g.ow {
                        let mut s = 0.0f64;
                        for c in 0..a.cin {
                            for ky in 0..g.kh {
                                for kx in 0..g.kw {
                                    let iy = (oy * g.sh + ky) as isize - g.pt as isize;
                                    let ix = (ox * g.sw + kx) as isize - g.pl as isize;
                                    if iy < 0 || ix < 0 || iy >= g.h as isize || ix >= g.w as isize
                                    {
                                        continue;
                                    }
                                    let xv = x
                                        [((n * a.cin + c) * g.h + iy as usize) * g.w + ix as usize];
                                    let wv =
                                        f[n * f_sn + ((o * a.cin + c) * g.kh + ky) * g.kw + kx];
                                    s += f64::from(xv) * f64::from(wv);
                                }
                            }
                        }
                        let at = ((n * g.c + o) * g.oh + oy) * g.ow + ox;
                        let mut v = s as f32 + bias[n * a.bias_sn as usize + o];
                        if let Some(r) = res {
                            v += r[at];
                        }
                        y[at] = match g.act {
                            1 => v.max(0.0),
                            2 => v.max(g.lo).min(g.hi),
                            _ => crate::gemm::activate(v, g.act as u32, g.lo, g.hi),
                        };
                    }
                }
            }
        }
        y
    }

    /// Random shapes (3×3, 5×5, 7×7; strides 1 and 2; paddings; 1–4 input channels and,
    /// in every eighth case, 17–64; output channel counts that do not fill a tile; rows
    /// that do not fill a block; rows too long for the split buffer),
    /// epilogues: the vector path (where the
    /// CPU has it), a pool of workers and the portable path match the definition, and the
    /// pooled run equals the serial one bit for bit.
    #[test]
    fn conv_matches_the_definition() {
        let mut r = Lcg(17);
        let pool = crate::ThreadPool::new(3).expect("pool");
        let mut done = 0;
        for case in 0..200 {
            let k = [3, 5, 7][r.below(3)];
            let s = 1 + r.below(2);
            // Every eighth case has long rows: at stride 2 some bands then fit the split
            // buffer and some take the deinterleaving kernels.
            let (h, w) = if case % 8 == 2 {
                (1 + r.below(8), 300 + r.below(400))
            } else {
                (
                    1 + r.below(24),
                    1 + r.below(if case % 4 == 0 { 90 } else { 40 }),
                )
            };
            let Some(([pt, pl], oh, ow)) = window(&mut r, k, s, h, w) else {
                continue;
            };
            done += 1;
            // Every fourth case is grouped: its "samples" are 2–3 groups of one image, each
            // with its own filter and bias.
            let grouped = case % 4 == 1;
            let (n, cin, cout) = (
                if grouped {
                    2 + r.below(2)
                } else {
                    1 + r.below(2)
                },
                // Every eighth case has the 17–64 channels of grouped layers and of
                // wide maps (the compiler's `direct_pays`).
                if case % 8 == 5 {
                    17 + r.below(48)
                } else {
                    1 + r.below(4)
                },
                1 + r.below(20),
            );
            check_case(
                &mut r,
                &pool,
                case,
                Case {
                    k,
                    s,
                    h,
                    w,
                    pads: [pt, pl],
                    oh,
                    ow,
                    grouped,
                    n,
                    cin,
                    cout,
                },
            );
        }
        assert!(done > 100, "only {done} cases");
    }

    /// Narrow maps at stride 1 (`conv_flat`'s): 1–13 output columns, 3×3, 5×5 and 7×7,
    /// every padding, 1–40 input channels (16 in every third case: RegNetX's groups),
    /// output channel counts that do not fill a tile, up to 25 groups, residuals and
    /// every activation; as in `conv_matches_the_definition`.
    #[test]
    fn conv_flat_matches_the_definition() {
        let mut r = Lcg(29);
        let pool = crate::ThreadPool::new(3).expect("pool");
        let mut flat = 0;
        for case in 0..150 {
            let k = [3, 5, 7][r.below(3)];
            let (h, w) = (1 + r.below(14), 1 + r.below(14));
            let Some((pads, oh, ow)) = window(&mut r, k, 1, h, w) else {
                continue;
            };
            let grouped = case % 2 == 1;
            let c = Case {
                k,
                s: 1,
                h,
                w,
                pads,
                oh,
                ow,
                grouped,
                n: if grouped {
                    2 + r.below(24)
                } else {
                    1 + r.below(2)
                },
                cin: if case % 3 == 0 { 16 } else { 1 + r.below(40) },
                cout: 1 + r.below(20),
            };
            let _a = check_case(&mut r, &pool, case, c);
            #[cfg(target_arch = "x86_64")]
            {
                flat += usize::from(crate::conv_flat::takes(&_a));
            }
        }
        #[cfg(target_arch = "x86_64")]
        assert!(flat > 60, "only {flat} cases take the flat path");
        let _ = flat;
    }

    /// Random paddings (each below `k`) of an `h`×`w` input for a `k`×`k` filter at
    /// stride `s`: the top and left ones and the output's extents, or `None` where the
    /// padded input is smaller than the filter.
    fn window(
        r: &mut Lcg,
        k: usize,
        s: usize,
        h: usize,
        w: usize,
    ) -> Option<([usize; 2], usize, usize)> {
        let (pt, pl, pb, pr) = (r.below(k), r.below(k), r.below(k), r.below(k));
        let eh = (h + pt + pb).checked_sub(k)?;
        let ew = (w + pl + pr).checked_sub(k)?;
        Some(([pt, pl], eh / s + 1, ew / s + 1))
    }

    /// One convolution's shape in the tests.
    struct Case {
        k: usize,
        s: usize,
        h: usize,
        w: usize,
        pads: [usize; 2],
        oh: usize,
        ow: usize,
        grouped: bool,
        n: usize,
        cin: usize,
        cout: usize,
    }

    /// Random data, filter, bias and residual for `c`, number `case` (which picks the
    /// residual and the activation): the vector path (where the CPU has it), a pool of
    /// workers and the portable path match the definition, and the pooled run equals the
    /// serial one bit for bit. Returns the arguments.
    fn check_case(r: &mut Lcg, pool: &crate::ThreadPool, case: usize, c: Case) -> ConvArgs {
        let Case {
            k,
            s,
            h,
            w,
            pads: [pt, pl],
            oh,
            ow,
            grouped,
            n,
            cin,
            cout,
        } = c;
        let filters = if grouped { n } else { 1 };
        let x: Vec<f32> = (0..n * cin * h * w).map(|_| r.next()).collect();
        let f: Vec<f32> = (0..filters * cout * cin * k * k)
            .map(|_| r.next())
            .collect();
        let bias: Vec<f32> = (0..filters * cout).map(|_| r.next()).collect();
        let res: Vec<f32> = (0..n * cout * oh * ow).map(|_| r.next()).collect();
        let f_sn = if grouped { cout * cin * k * k } else { 0 };
        let packed: Vec<f32> = f
            .chunks(cout * cin * k * k)
            .flat_map(|g| pack_conv_filter(cout, cin, k, k, g).expect("pack"))
            .collect();
        let with_res = case.is_multiple_of(3);
        let a = ConvArgs {
            geo: DwArgs {
                n,
                c: cout,
                h,
                w,
                oh,
                ow,
                kh: k,
                kw: k,
                sh: s,
                sw: s,
                dh: 1,
                dw: 1,
                pt,
                pl,
                x: x.as_ptr(),
                x_sn: (cin * h * w) as isize,
                x_sc: (h * w) as isize,
                x_sh: w as isize,
                filter: packed.as_ptr(),
                bias: bias.as_ptr(),
                bias_sc: 1,
                res: if with_res {
                    res.as_ptr()
                } else {
                    core::ptr::null()
                },
                y: core::ptr::null_mut(),
                y_sn: (cout * oh * ow) as isize,
                y_sc: (oh * ow) as isize,
                y_sh: ow as isize,
                act: case % 6,
                lo: -0.5,
                hi: 0.75,
            },
            cin,
            filter_sn: if grouped {
                conv_filter_len(cout, cin, k, k) as isize
            } else {
                0
            },
            bias_sn: if grouped { cout as isize } else { 0 },
        };
        let want = naive(&a, &x, &f, f_sn, &bias, with_res.then_some(&res[..]));
        let tol = 1e-5 * (cin * k * k) as f32;
        let check = |y: &[f32], what: &str| {
            let bad = y
                .iter()
                .zip(&want)
                .position(|(p, q)| (p - q).abs() > tol * q.abs().max(1.0));
            if let Some(i) = bad {
                panic!(
                    "case {case} {what}: {a:?}: element {i}: {} vs {}",
                    y[i], want[i]
                );
            }
        };
        let runs = serial_and_pooled_runs(want.len(), pool, case, |y, par| {
            let mut args = a;
            args.geo.y = y.as_mut_ptr();
            unsafe { nnefc_conv(&args, par) };
        });
        for y in &runs {
            check(y, "vector");
        }
        let mut y = vec![f32::NAN; want.len()];
        let mut args = a;
        args.geo.y = y.as_mut_ptr();
        let units = n * cout.div_ceil(CONV_CO_TILE) * oh.div_ceil(BAND);
        for u in 0..units {
            unsafe { unit_body(&args, Unit::of(&args, u)) };
        }
        check(&y, "portable");
        a
    }

    #[test]
    fn packing_rejects_a_short_filter() {
        assert!(pack_conv_filter(2, 3, 3, 3, &[0.0; 53]).is_err());
        assert_eq!(
            pack_conv_filter(2, 1, 1, 1, &[1.0, 2.0]).unwrap(),
            vec![1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        );
    }
}
