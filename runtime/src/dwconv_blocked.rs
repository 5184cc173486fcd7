//! Depthwise 2-D convolution of a channel-blocked input (`nnefc_dwconv_blocked`): the
//! input holds its channels in blocks of 16, the 16 channels of a pixel side by side, as
//! the lane-panel GEMM writes an expansion layer's output when the compiler gives that
//! value the blocked layout. One vector is then one pixel of 16 channels: each tap is a
//! plain load at any stride (no permutes, no masks) multiplied by a vector of 16
//! channels' weights, and the sums of 16 output pixels are transposed in registers into
//! 16 channels' rows of the ordinary (channel-major) output.
//!
//! Zen 5, one core, warm caches (scratch C benchmark of the same loop against
//! `nnefc_dwconv` on channel-major planes, 3×3, padding 1), µs: 144×56² stride 2 22 against
//! 41, 96×112² stride 2 54 against 107, 144×56² stride 1 48 against 89, 32×112² stride 1
//! 39 against 68: the channel-major kernel spends 12 (stride 1) and 23 (stride 2) cycles
//! per output vector on loads, permutes and masks around its 9 multiply-adds.
//!
//! # Semantics
//! Those of [`nnefc_dwconv`](crate::nnefc_dwconv), with `x`'s element `(n, c, iy, ix)` at
//! `x + n·x_sn + (c/16)·x_sc + iy·x_sh + 16·ix + c%16` (`x_sc` is the stride between
//! blocks of 16 channels; lanes of channels past `c` in the last block are read and
//! ignored, so they may hold anything). On AVX-512 every output is
//! `bias + Σ w·x` over the in-bounds taps in `(ky, kx)` order with fused multiply-adds,
//! then the residual, then the activation: the arithmetic of `nnefc_dwconv`'s AVX-512
//! 3×3 bands, so both give the same bits for such filters. Other CPUs take a portable
//! loop (two roundings per term, as `nnefc_dwconv`'s portable path).
//!
//! # Threads
//! Units are (sample, block of 16 channels, output row), handed out in contiguous ranges;
//! each output is computed as in the serial run whatever the split.
//!
//! Not here: writing a blocked output, filters larger than [`MAX_K`]×[`MAX_K`] (the
//! compiler gives such layers channel-major inputs), the choice of layouts (the
//! compiler's `layout` pass).

use crate::DwArgs;
use crate::gemm::activate;
use crate::parallel::{self, Parallel, workers};

/// Channels per block of the input layout (one AVX-512 vector of f32).
pub const DW_BLOCK: usize = 16;
/// Largest filter height and width the blocked kernel takes.
pub const MAX_K: usize = 7;
/// Most filter taps (`kh·kw`): a [`MAX_K`]×[`MAX_K`] window.
const MAX_TAPS: usize = MAX_K * MAX_K;
/// Multiply-adds below which a call runs on the calling thread.
const PARALLEL_MIN_MACS: usize = 1 << 16;
/// Tasks per worker when splitting.
const TASKS_PER_WORKER: usize = 4;

/// Runs the depthwise convolution `args` describes with its input channel-blocked (see
/// the module docs), in parallel over output rows when `par` offers several workers.
/// `y_blocked` 1: the output (and the residual) are channel-blocked too, `y_sc` being
/// the stride between their blocks of 16 channels, and every lane of the last block is
/// written (lanes past `c` with unspecified values); 0: the output is channel-major as
/// for `nnefc_dwconv`. Filters higher or wider than [`MAX_K`] compute nothing (the
/// compiler never asks).
///
/// # Safety
/// As for [`nnefc_dwconv`](crate::nnefc_dwconv), with `x` addressed as above and the
/// filter packed by [`pack_dw_filter_blocked`] (`ceil(c/16)` blocks): every block
/// of 16 channels of every pixel `x` reaches is readable, `ceil(c/16)` blocks, and
/// likewise every block of `y` (and `res`) written when `y_blocked` is 1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nnefc_dwconv_blocked(
    args: *const DwArgs,
    y_blocked: usize,
    par: *const Parallel,
) {
    // SAFETY: valid by the caller's contract.
    let job = Job {
        a: unsafe { *args },
        y_blocked: y_blocked == 1,
    };
    let a = &job.a;
    if a.kh > MAX_K || a.kw > MAX_K || a.kh == 0 || a.kw == 0 {
        return;
    }
    let units = a.n * a.c.div_ceil(DW_BLOCK) * a.oh;
    if units == 0 || a.ow == 0 {
        return;
    }
    let macs = [a.c, a.oh, a.ow, a.kh, a.kw]
        .iter()
        .fold(a.n, |m, &e| m.saturating_mul(e));
    // SAFETY: `par` is null or valid.
    let tasks = if macs >= PARALLEL_MIN_MACS {
        units.min(unsafe { workers(par) } * TASKS_PER_WORKER)
    } else {
        1
    };
    // SAFETY: tasks write disjoint output rows.
    unsafe { parallel::ranges(par, &job, units, tasks, rows) }
}

/// One call's arguments.
struct Job {
    a: DwArgs,
    /// The output and the residual are channel-blocked.
    y_blocked: bool,
}

/// Offset of output `(n, c, oy, ox)` (and of its residual).
#[inline(always)]
fn y_at(j: &Job, n: usize, c: usize, oy: usize, ox: usize) -> isize {
    let a = &j.a;
    let base = n as isize * a.y_sn + oy as isize * a.y_sh;
    if j.y_blocked {
        base + (c / DW_BLOCK) as isize * a.y_sc + (ox * DW_BLOCK + c % DW_BLOCK) as isize
    } else {
        base + c as isize * a.y_sc + ox as isize
    }
}

/// Output rows `[lo, hi)` of the units (sample, channel block, output row), in that
/// order, with the widest code the CPU supports.
unsafe fn rows(j: &Job, lo: usize, hi: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if crate::gemm::avx512_selected() {
            // SAFETY: the CPU has AVX-512F (that is what selected the kernel).
            return unsafe { avx512::rows(j, lo, hi) };
        }
    }
    // SAFETY: the caller's contract.
    unsafe { rows_portable(j, lo, hi) }
}

/// Floats of [`pack_dw_filter_blocked`]'s output: `ceil(c/16)·kh·kw·16`.
pub fn dw_filter_blocked_len(c: usize, kh: usize, kw: usize) -> usize {
    c.div_ceil(DW_BLOCK) * kh * kw * DW_BLOCK
}

/// Packs a dense `[c, 1, kh, kw]` depthwise filter for [`nnefc_dwconv_blocked`]: block
/// `b` holds, for every tap `(ky, kx)` in that order, the 16 values of channels
/// `16b..16b + 16` (0 past `c`): element `(ch, ky, kx)` at
/// `(ch/16)·kh·kw·16 + (ky·kw + kx)·16 + ch%16`. Part of the ABI: compiled objects hold
/// filters in this format.
///
/// Returns [`Status::ShapeMismatch`](crate::Status::ShapeMismatch) if `f` is not
/// `c·kh·kw` floats long.
#[cfg(feature = "std")]
pub fn pack_dw_filter_blocked(
    c: usize,
    kh: usize,
    kw: usize,
    f: &[f32],
) -> Result<std::vec::Vec<f32>, crate::Status> {
    let taps = kh * kw;
    if f.len() != c * taps {
        return Err(crate::Status::ShapeMismatch);
    }
    let mut out = std::vec![0.0f32; dw_filter_blocked_len(c, kh, kw)];
    for ch in 0..c {
        for t in 0..taps {
            out[(ch / DW_BLOCK) * taps * DW_BLOCK + t * DW_BLOCK + ch % DW_BLOCK] =
                f[ch * taps + t];
        }
    }
    Ok(out)
}

/// The biases of the 16 channels of block `cb` (0 past `c`, and without a bias).
fn block_bias(a: &DwArgs, cb: usize) -> [f32; DW_BLOCK] {
    let mut b = [0.0f32; DW_BLOCK];
    if !a.bias.is_null() {
        for (l, v) in b
            .iter_mut()
            .enumerate()
            .take(DW_BLOCK.min(a.c - cb * DW_BLOCK))
        {
            // SAFETY: channel 16·cb + l of the bias.
            *v = unsafe { *a.bias.offset((cb * DW_BLOCK + l) as isize * a.bias_sc) };
        }
    }
    b
}

/// Block `cb`'s packed taps ([`pack_dw_filter_blocked`]): tap `t` at `16·t`.
fn block_taps(a: &DwArgs, cb: usize) -> *const f32 {
    a.filter.wrapping_add(cb * a.kh * a.kw * DW_BLOCK)
}

/// The unit `u`'s sample, channel block and output row.
fn unit(a: &DwArgs, u: usize) -> (usize, usize, usize) {
    let blocks = a.c.div_ceil(DW_BLOCK);
    (u / (blocks * a.oh), u / a.oh % blocks, u % a.oh)
}

/// Portable rows: every output the bias plus its in-bounds taps in `(ky, kx)` order (a
/// product then a sum), then the residual, then the activation.
unsafe fn rows_portable(j: &Job, lo: usize, hi: usize) {
    let a = &j.a;
    let mut cached = usize::MAX;
    let mut b = [0.0f32; DW_BLOCK];
    for u in lo..hi {
        let (n, cb, oy) = unit(a, u);
        if cb != cached {
            b = block_bias(a, cb);
            cached = cb;
        }
        let w = block_taps(a, cb);
        let x =
            a.x.wrapping_offset(n as isize * a.x_sn + cb as isize * a.x_sc);
        for (l, &bl) in b.iter().enumerate().take(DW_BLOCK.min(a.c - cb * DW_BLOCK)) {
            let c = cb * DW_BLOCK + l;
            for ox in 0..a.ow {
                let mut s = bl;
                for ky in 0..a.kh {
                    let iy = (oy * a.sh + ky * a.dh) as isize - a.pt as isize;
                    if iy < 0 || iy >= a.h as isize {
                        continue;
                    }
                    for kx in 0..a.kw {
                        let ix = (ox * a.sw + kx * a.dw) as isize - a.pl as isize;
                        if ix < 0 || ix >= a.w as isize {
                            continue;
                        }
                        let at = iy * a.x_sh + ix * DW_BLOCK as isize + l as isize;
                        // SAFETY: an in-bounds pixel of this block.
                        // SAFETY: an in-bounds pixel of this block; tap (ky, kx) of lane l.
                        s += unsafe { *w.add((ky * a.kw + kx) * DW_BLOCK + l) * *x.offset(at) };
                    }
                }
                let at = y_at(j, n, c, oy, ox);
                if !a.res.is_null() {
                    // SAFETY: the residual is laid out like y.
                    s += unsafe { *a.res.offset(at) };
                }
                // SAFETY: output (n, c, oy, ox).
                unsafe { *a.y.offset(at) = activate(s, a.act as u32, a.lo, a.hi) };
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{DW_BLOCK, Job, MAX_K, MAX_TAPS, block_bias, block_taps, unit, y_at};
    use crate::DwArgs;
    use core::arch::x86_64::*;

    /// Output columns per tile: one transpose of 16 pixels × 16 channels.
    const TILE: usize = 16;

    /// What the tiles of one output row share, copied out of the arguments (through
    /// `&DwArgs` the compiler reloads fields after every store to the output).
    struct Ctx {
        /// The input rows of this output row inside the input, and their filter rows.
        rows: [*const f32; MAX_K],
        kys: [usize; MAX_K],
        nrows: usize,
        /// The output row at column 0 (block-major when blocked, else channel 0's row).
        y: *mut f32,
        res: *const f32,
        y_sc: isize,
        chans: usize,
        w: isize,
        pl: isize,
        act: u32,
        lo: __m512,
        hi: __m512,
        nan: __m512,
    }

    /// `nnefc_dwconv`'s activation (`activate_avx512`: ReLU for 1, clamp for 2, NaN
    /// propagating), the clamp's NaN given by the caller (in a register).
    #[inline(always)]
    fn activate(v: __m512, act: u32, lo: __m512, hi: __m512, nan: __m512) -> __m512 {
        // SAFETY (intrinsics): the callers run with AVX-512F enabled.
        unsafe {
            match act {
                1 => _mm512_mask_mov_ps(
                    _mm512_max_ps(v, _mm512_setzero_ps()),
                    _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v),
                    v,
                ),
                2 => _mm512_mask_mov_ps(
                    _mm512_max_ps(_mm512_min_ps(hi, v), lo),
                    _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, hi),
                    nan,
                ),
                _ => v,
            }
        }
    }

    /// The residual, activation and store of a tile's sums (`acc[t]`: pixel `ox0 + t`'s
    /// 16 channels; `live` pixels): blocked, each vector as it is; else transposed into
    /// 16 channels' rows, stored under the mask of the live columns. Loops have constant
    /// bounds so that the sums stay in registers.
    ///
    /// # Safety
    /// The live pixels of the tile's output row (and residual) are writable (readable).
    #[inline(always)]
    unsafe fn finish<const YB: bool>(mut acc: [__m512; TILE], c: &Ctx, ox0: usize, live: usize) {
        // SAFETY (whole body): the caller's contract; intrinsics under AVX-512F.
        unsafe {
            if YB {
                for (t, &v) in acc.iter().enumerate() {
                    if t < live {
                        let at = ((ox0 + t) * DW_BLOCK) as isize;
                        let mut v = v;
                        if !c.res.is_null() {
                            v = _mm512_add_ps(v, _mm512_loadu_ps(c.res.wrapping_offset(at)));
                        }
                        let v = activate(v, c.act, c.lo, c.hi, c.nan);
                        _mm512_storeu_ps(c.y.wrapping_offset(at), v);
                    }
                }
                return;
            }
            crate::gemm::lanes::avx512::transpose(&mut acc);
            let mask: u16 = if live >= TILE { !0 } else { (1u16 << live) - 1 };
            for (l, &v) in acc.iter().enumerate() {
                if l < c.chans {
                    let at = l as isize * c.y_sc + ox0 as isize;
                    let mut v = v;
                    if !c.res.is_null() {
                        v = _mm512_add_ps(
                            v,
                            _mm512_maskz_loadu_ps(mask, c.res.wrapping_offset(at)),
                        );
                    }
                    let v = activate(v, c.act, c.lo, c.hi, c.nan);
                    crate::gemm::store16(c.y.wrapping_offset(at), mask, v);
                }
            }
        }
    }

    /// One tile of a 3-wide filter (no column dilation, column stride `S`):
    /// `bias + Σ w[ky][kx] · x[row][(ox0 + t)·S + kx − pl]` over the rows in order, `kx`
    /// in order, unrolled with constant offsets, then [`finish`]. `CHECK`: the tile
    /// touches a border or ends early, so a tap is taken only for columns `t < live`
    /// whose input column is inside the row (the sums the unchecked form gives wherever
    /// that applies).
    ///
    /// # Safety
    /// The pixels the taken taps read are inside the input (every tap's, when not
    /// `CHECK`); the output as for [`finish`]; the CPU has AVX-512F.
    #[inline(never)]
    #[target_feature(enable = "avx512f")]
    unsafe fn tile3<const S: usize, const CHECK: bool, const YB: bool>(
        c: &Ctx,
        wv: &[__m512; MAX_TAPS],
        bv: __m512,
        ox0: usize,
        live: usize,
    ) {
        let mut acc = [bv; TILE];
        let ix0 = (ox0 * S) as isize - c.pl;
        for r in 0..c.nrows {
            let (row, ky) = (c.rows[r], c.kys[r]);
            let p = row.wrapping_offset(ix0 * DW_BLOCK as isize);
            let w = [wv[ky * 3], wv[ky * 3 + 1], wv[ky * 3 + 2]];
            for (kx, &wk) in w.iter().enumerate() {
                for (t, s) in acc.iter_mut().enumerate() {
                    let ix = ix0 + (t * S + kx) as isize;
                    if CHECK && (t >= live || ix < 0 || ix >= c.w) {
                        continue;
                    }
                    // SAFETY: an in-bounds pixel (checked, or the caller's contract).
                    let v = unsafe { _mm512_loadu_ps(p.wrapping_add((t * S + kx) * DW_BLOCK)) };
                    *s = _mm512_fmadd_ps(wk, v, *s);
                }
            }
        }
        // SAFETY: forwarded.
        unsafe { finish::<YB>(acc, c, ox0, live) }
    }

    /// Output pixels per tile of [`row3_blocked`]: 8 sums, 3 weights and the loads fit
    /// the registers with room to spare, and an 8-wide tile leaves fewer columns to the
    /// one-pixel form on narrow maps than a 16-wide one.
    const BT: usize = 8;

    /// The sums of pixels `ox..ox + N` of an output row for a 3-wide filter at column
    /// stride `S`, each a chain `bias + Σ w·x` over the rows in order and `kx` in order,
    /// then the residual, activation and store of each vector in the blocked output.
    /// `CHECK`: taps whose input column is outside the row are skipped.
    ///
    /// # Safety
    /// As for [`tile3`] (every tap of these pixels inside the row when not `CHECK`);
    /// `R3`: the context has 3 input rows.
    #[inline(never)]
    #[target_feature(enable = "avx512f")]
    unsafe fn pixels3<const S: usize, const N: usize, const CHECK: bool, const R3: bool>(
        c: &Ctx,
        wv: &[__m512; MAX_TAPS],
        bv: __m512,
        ox: usize,
    ) {
        let mut acc = [bv; N];
        let ix0 = (ox * S) as isize - c.pl;
        for r in 0..if R3 { 3 } else { c.nrows } {
            let (row, ky) = (c.rows[r], c.kys[r]);
            let p = row.wrapping_offset(ix0 * DW_BLOCK as isize);
            for kx in 0..3 {
                let w = wv[ky * 3 + kx];
                for (t, s) in acc.iter_mut().enumerate() {
                    let ix = ix0 + (t * S + kx) as isize;
                    if CHECK && (ix < 0 || ix >= c.w) {
                        continue;
                    }
                    // SAFETY: an in-bounds pixel (checked, or the caller's contract).
                    let v = unsafe { _mm512_loadu_ps(p.wrapping_add((t * S + kx) * DW_BLOCK)) };
                    // SAFETY: AVX-512F (the callers' target feature).
                    *s = _mm512_fmadd_ps(w, v, *s);
                }
            }
        }
        for (t, &v) in acc.iter().enumerate() {
            let at = ((ox + t) * DW_BLOCK) as isize;
            // SAFETY: pixel ox + t of the output row (and of the residual).
            unsafe {
                let mut v = v;
                if !c.res.is_null() {
                    v = _mm512_add_ps(v, _mm512_loadu_ps(c.res.wrapping_offset(at)));
                }
                let v = activate(v, c.act, c.lo, c.hi, c.nan);
                _mm512_storeu_ps(c.y.wrapping_offset(at), v);
            }
        }
    }

    /// One output row of a 3-wide filter at column stride `S` into the blocked output:
    /// the columns whose taps all fall inside the input row in tiles of up to [`BT`]
    /// pixels without checks (independent sums: a pixel alone is one chain of dependent
    /// multiply-adds, latency-bound), the one or two border columns at each end alone,
    /// with checks (checked tiles cost a compare and branch per tap, which on 14×14 maps
    /// made the layer half again as slow).
    ///
    /// # Safety
    /// As for [`tile3`]; `ow` output columns.
    #[inline(never)]
    #[target_feature(enable = "avx512f")]
    unsafe fn row3_blocked<const S: usize, const R3: bool>(
        c: &Ctx,
        wv: &[__m512; MAX_TAPS],
        bv: __m512,
        ow: usize,
    ) {
        // Inside: ox·S − pl ≥ 0 and ox·S + 2 − pl < w.
        let pl = c.pl as usize;
        let a = pl.div_ceil(S).min(ow);
        let b = if c.w as usize + pl >= 3 {
            ((c.w as usize + pl - 3) / S + 1).clamp(a, ow)
        } else {
            a
        };
        // SAFETY (all calls): the columns named; checked ones at the borders.
        unsafe {
            if ow > BT && ow <= 2 * BT {
                // Two checked tiles.
                pixels3::<S, BT, true, R3>(c, wv, bv, 0);
                match ow - BT {
                    BT => pixels3::<S, BT, true, R3>(c, wv, bv, BT),
                    7 => pixels3::<S, 7, true, R3>(c, wv, bv, BT),
                    6 => pixels3::<S, 6, true, R3>(c, wv, bv, BT),
                    5 => pixels3::<S, 5, true, R3>(c, wv, bv, BT),
                    4 => pixels3::<S, 4, true, R3>(c, wv, bv, BT),
                    3 => pixels3::<S, 3, true, R3>(c, wv, bv, BT),
                    2 => pixels3::<S, 2, true, R3>(c, wv, bv, BT),
                    _ => pixels3::<S, 1, true, R3>(c, wv, bv, BT),
                }
                return;
            }
            if ow <= BT {
                // A short row (7×7, 14×14 maps at stride 2): one checked tile, whose
                // pixels' chains run side by side.
                match ow {
                    BT => pixels3::<S, BT, true, R3>(c, wv, bv, 0),
                    7 => pixels3::<S, 7, true, R3>(c, wv, bv, 0),
                    6 => pixels3::<S, 6, true, R3>(c, wv, bv, 0),
                    5 => pixels3::<S, 5, true, R3>(c, wv, bv, 0),
                    4 => pixels3::<S, 4, true, R3>(c, wv, bv, 0),
                    3 => pixels3::<S, 3, true, R3>(c, wv, bv, 0),
                    2 => pixels3::<S, 2, true, R3>(c, wv, bv, 0),
                    _ => pixels3::<S, 1, true, R3>(c, wv, bv, 0),
                }
                return;
            }
            for ox in 0..a {
                pixels3::<S, 1, true, R3>(c, wv, bv, ox);
            }
            let mut ox = a;
            while ox < b {
                let n = BT.min(b - ox);
                match n {
                    BT => pixels3::<S, BT, false, R3>(c, wv, bv, ox),
                    7 => pixels3::<S, 7, false, R3>(c, wv, bv, ox),
                    6 => pixels3::<S, 6, false, R3>(c, wv, bv, ox),
                    5 => pixels3::<S, 5, false, R3>(c, wv, bv, ox),
                    4 => pixels3::<S, 4, false, R3>(c, wv, bv, ox),
                    3 => pixels3::<S, 3, false, R3>(c, wv, bv, ox),
                    2 => pixels3::<S, 2, false, R3>(c, wv, bv, ox),
                    _ => pixels3::<S, 1, false, R3>(c, wv, bv, ox),
                }
                ox += n;
            }
            for ox in b.max(a)..ow {
                pixels3::<S, 1, true, R3>(c, wv, bv, ox);
            }
        }
    }

    /// One tile of any window: the in-bounds taps of each live column in `(ky, kx)`
    /// order, then [`finish`].
    ///
    /// # Safety
    /// As for [`tile3`] with `CHECK`.
    #[inline(never)]
    #[target_feature(enable = "avx512f")]
    unsafe fn tile_any<const YB: bool>(
        c: &Ctx,
        a: &DwArgs,
        wv: &[__m512; MAX_TAPS],
        bv: __m512,
        ox0: usize,
        live: usize,
    ) {
        let mut acc = [bv; TILE];
        for r in 0..c.nrows {
            let (row, ky) = (c.rows[r], c.kys[r]);
            for kx in 0..a.kw {
                let w = wv[ky * a.kw + kx];
                for (t, s) in acc.iter_mut().enumerate() {
                    let ix = ((ox0 + t) * a.sw + kx * a.dw) as isize - c.pl;
                    if t < live && ix >= 0 && ix < c.w {
                        // SAFETY: an in-bounds pixel.
                        let v =
                            unsafe { _mm512_loadu_ps(row.wrapping_offset(ix * DW_BLOCK as isize)) };
                        *s = _mm512_fmadd_ps(w, v, *s);
                    }
                }
            }
        }
        // SAFETY: forwarded.
        unsafe { finish::<YB>(acc, c, ox0, live) }
    }

    /// AVX-512 rows `[lo, hi)`: tiles of 16 output pixels, each tap a vector load of one
    /// input pixel's 16 channels; 3-wide filters at column stride 1 or 2 take
    /// [`tile3`], whose interior tiles skip the column checks.
    ///
    /// # Safety
    /// As for `nnefc_dwconv_blocked`; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn rows(j: &Job, lo: usize, hi: usize) {
        let a = &j.a;
        let mut cached = usize::MAX;
        let mut wv = [_mm512_setzero_ps(); MAX_TAPS];
        let mut bv = _mm512_setzero_ps();
        let taps = a.kh * a.kw;
        let three = a.kw == 3 && a.dw == 1 && a.sw <= 2;
        let (mut n, mut cb, mut oy) = unit(a, lo);
        let blocks = a.c.div_ceil(DW_BLOCK);
        let (lo_v, hi_v, nan) = (
            _mm512_set1_ps(a.lo),
            _mm512_set1_ps(a.hi),
            _mm512_set1_ps(f32::NAN),
        );
        for _ in lo..hi {
            if cb != cached {
                let w = block_taps(a, cb);
                for (t, v) in wv.iter_mut().enumerate().take(taps) {
                    // SAFETY: the 16 floats of tap t of this block.
                    *v = unsafe { _mm512_loadu_ps(w.add(t * DW_BLOCK)) };
                }
                let b = block_bias(a, cb);
                // SAFETY: 16 floats.
                bv = unsafe { _mm512_loadu_ps(b.as_ptr()) };
                cached = cb;
            }
            let x =
                a.x.wrapping_offset(n as isize * a.x_sn + cb as isize * a.x_sc);
            let yo = y_at(j, n, cb * DW_BLOCK, oy, 0);
            let mut c = Ctx {
                rows: [core::ptr::null(); MAX_K],
                kys: [0; MAX_K],
                nrows: 0,
                y: a.y.wrapping_offset(yo),
                res: if a.res.is_null() {
                    a.res
                } else {
                    a.res.wrapping_offset(yo)
                },
                y_sc: a.y_sc,
                chans: DW_BLOCK.min(a.c - cb * DW_BLOCK),
                w: a.w as isize,
                pl: a.pl as isize,
                act: a.act as u32,
                lo: lo_v,
                hi: hi_v,
                nan,
            };
            for ky in 0..a.kh {
                let iy = (oy * a.sh + ky * a.dh) as isize - a.pt as isize;
                if iy >= 0 && iy < a.h as isize {
                    c.rows[c.nrows] = x.wrapping_offset(iy * a.x_sh);
                    c.kys[c.nrows] = ky;
                    c.nrows += 1;
                }
            }
            // The next unit (sample, block, row), without divisions.
            oy += 1;
            if oy == a.oh {
                oy = 0;
                cb += 1;
                if cb == blocks {
                    cb = 0;
                    n += 1;
                }
            }
            if three && j.y_blocked {
                // SAFETY: this output row.
                unsafe {
                    match (a.sw, c.nrows == 3) {
                        (1, true) => row3_blocked::<1, true>(&c, &wv, bv, a.ow),
                        (1, false) => row3_blocked::<1, false>(&c, &wv, bv, a.ow),
                        (_, true) => row3_blocked::<2, true>(&c, &wv, bv, a.ow),
                        (_, false) => row3_blocked::<2, false>(&c, &wv, bv, a.ow),
                    }
                }
                continue;
            }
            let mut ox0 = 0;
            while ox0 < a.ow {
                let live = TILE.min(a.ow - ox0);
                // Interior: every tap of every live column is inside the row.
                let first = (ox0 * a.sw) as isize - c.pl;
                let last = ((ox0 + live - 1) * a.sw + (a.kw - 1) * a.dw) as isize - c.pl;
                let interior = live == TILE && first >= 0 && last < c.w;
                // SAFETY: tiles of this output row; unchecked taps only for interior ones.
                unsafe {
                    match (three, a.sw, interior, j.y_blocked) {
                        (true, 1, true, _) => tile3::<1, false, false>(&c, &wv, bv, ox0, live),
                        (true, 1, false, _) => tile3::<1, true, false>(&c, &wv, bv, ox0, live),
                        (true, _, true, _) => tile3::<2, false, false>(&c, &wv, bv, ox0, live),
                        (true, _, false, _) => tile3::<2, true, false>(&c, &wv, bv, ox0, live),
                        (false, .., true) => tile_any::<true>(&c, a, &wv, bv, ox0, live),
                        (false, .., false) => tile_any::<false>(&c, a, &wv, bv, ox0, live),
                    }
                }
                ox0 += TILE;
            }
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::dwconv::tests::{Lcg, dense, serial_and_pooled_runs};
    use std::vec::Vec;

    /// `x` (`[n, c, h, w]`, channel-major) in the blocked layout, rows `w + 1` pixels apart
    /// and blocks a row apart more than needed; channels past `c` hold NaN, which must not
    /// reach any output.
    fn blocked(x: &[f32], [n, c, h, w]: [usize; 4]) -> (Vec<f32>, [isize; 3]) {
        let blocks = c.div_ceil(DW_BLOCK);
        let x_sh = (w + 1) * DW_BLOCK;
        let x_sc = h * x_sh + DW_BLOCK;
        let x_sn = blocks * x_sc;
        let mut out = std::vec![f32::NAN; n * x_sn];
        for s in 0..n {
            for ch in 0..c {
                for iy in 0..h {
                    for ix in 0..w {
                        out[s * x_sn
                            + (ch / DW_BLOCK) * x_sc
                            + iy * x_sh
                            + ix * DW_BLOCK
                            + ch % DW_BLOCK] = x[((s * c + ch) * h + iy) * w + ix];
                    }
                }
            }
        }
        (out, [x_sn as isize, x_sc as isize, x_sh as isize])
    }

    /// Random windows (filters 1×1 to 7×7, strides 1–3, dilations 1–2, paddings 0–2, maps
    /// narrower and wider than a tile of 16 columns, channel counts that do not fill a
    /// block), biases per channel, shared or absent, residuals and every activation:
    /// the blocked kernel against `nnefc_dwconv` on the channel-major input, within
    /// rounding in general and bit for bit for the 3×3 stride 1 and 2 windows (the same
    /// sums in the same order on AVX-512), serial and pooled bit for bit; and with the
    /// output and the residual blocked too.
    #[test]
    fn blocked_input_matches_channel_major() {
        let mut r = Lcg(5);
        let pool = crate::ThreadPool::new(3).expect("threads");
        let (mut cases, mut exact) = (0, 0);
        for case in 0..160 {
            let square3 = case % 2 == 0;
            let (kh, kw) = if square3 {
                (3, 3)
            } else {
                (1 + r.below(MAX_K), 1 + r.below(MAX_K))
            };
            let s = if square3 {
                1 + r.below(2)
            } else {
                1 + r.below(3)
            };
            let (sh, sw) = if square3 { (s, s) } else { (1 + r.below(3), s) };
            let (dh, dw) = if square3 {
                (1, 1)
            } else {
                (1 + r.below(2), 1 + r.below(2))
            };
            let (n, c) = (1 + r.below(2), 1 + r.below(40));
            let (h, w) = (1 + r.below(24), 1 + r.below(70));
            let (pt, pl, pb, pr) = (r.below(3), r.below(3), r.below(3), r.below(3));
            let (eh, ew) = ((kh - 1) * dh + 1, (kw - 1) * dw + 1);
            if h + pt + pb < eh || w + pl + pr < ew {
                continue;
            }
            let (oh, ow) = ((h + pt + pb - eh) / sh + 1, (w + pl + pr - ew) / sw + 1);
            let x: Vec<f32> = (0..n * c * h * w).map(|_| r.next()).collect();
            let f: Vec<f32> = (0..c * kh * kw).map(|_| r.next()).collect();
            let bias: Vec<f32> = (0..c).map(|_| r.next()).collect();
            let res: Vec<f32> = (0..n * c * oh * ow).map(|_| r.next()).collect();
            let with_res = case % 3 == 1;
            let act = case % 3;
            let mut a = dense(
                [n, c, h, w, oh, ow],
                [kh, kw, sh, sw, dh, dw, pt, pl],
                &x,
                f.as_ptr(),
                if case % 5 == 4 {
                    core::ptr::null()
                } else {
                    bias.as_ptr()
                },
                with_res.then_some(&res[..]),
                act,
            );
            if case % 7 == 6 {
                a.bias_sc = 0;
            }
            let len = n * c * oh * ow;
            let mut want = std::vec![f32::NAN; len];
            let wa = DwArgs {
                y: want.as_mut_ptr(),
                ..a
            };
            // SAFETY: buffers sized for the dense layout.
            unsafe { crate::nnefc_dwconv(&wa, core::ptr::null()) };
            let (xb, [x_sn, x_sc, x_sh]) = blocked(&x, [n, c, h, w]);
            let fb = pack_dw_filter_blocked(c, kh, kw, &f).expect("filter length");
            let bits = square3 && crate::gemm::avx512_selected();
            let same = |g: f32, w: f32, what: &str| {
                if bits {
                    assert_eq!(g.to_bits(), w.to_bits(), "case {case} {a:?}: {what}");
                } else {
                    assert!(
                        (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                        "case {case} {a:?}: {what}: {g} vs {w}"
                    );
                }
            };
            // Channel-major output.
            let runs = serial_and_pooled_runs(len, &pool, case, |y, par| {
                let args = DwArgs {
                    x: xb.as_ptr(),
                    x_sn,
                    x_sc,
                    x_sh,
                    filter: fb.as_ptr(),
                    y: y.as_mut_ptr(),
                    ..a
                };
                // SAFETY: the blocked input covers every block of every pixel; y is dense.
                unsafe { nnefc_dwconv_blocked(&args, 0, par) };
            });
            for (i, (&g, &w)) in runs[0].iter().zip(&want).enumerate() {
                same(g, w, &std::format!("element {i}"));
            }
            // Blocked output (and residual): the same values at the blocked places.
            let (rb, [y_sn, y_sc, y_sh]) = blocked(&res, [n, c, oh, ow]);
            let blen = rb.len();
            let runs = serial_and_pooled_runs(blen, &pool, case, |y, par| {
                let args = DwArgs {
                    x: xb.as_ptr(),
                    x_sn,
                    x_sc,
                    x_sh,
                    filter: fb.as_ptr(),
                    y: y.as_mut_ptr(),
                    y_sn,
                    y_sc,
                    y_sh,
                    res: if with_res {
                        rb.as_ptr()
                    } else {
                        core::ptr::null()
                    },
                    ..a
                };
                // SAFETY: as above, with y and the residual blocked alike.
                unsafe { nnefc_dwconv_blocked(&args, 1, par) };
            });
            for s in 0..n {
                for ch in 0..c {
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let at = s as isize * y_sn
                                + (ch / DW_BLOCK) as isize * y_sc
                                + oy as isize * y_sh
                                + (ox * DW_BLOCK + ch % DW_BLOCK) as isize;
                            let w = want[((s * c + ch) * oh + oy) * ow + ox];
                            same(
                                runs[0][at as usize],
                                w,
                                &std::format!("blocked ({s},{ch},{oy},{ox})"),
                            );
                        }
                    }
                }
            }
            cases += 1;
            exact += usize::from(bits);
        }
        assert!(cases >= 100, "{cases} cases ran");
        if crate::gemm::avx512_selected() {
            assert!(exact >= 50, "{exact} cases compared bit for bit");
        }
    }
}
