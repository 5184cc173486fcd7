//! A network's first convolution fused with the 3×3 max pool that follows it
//! ([`nnefc_conv_pool`]): squeezenet1_1's and resnet18's stems (3 → 64 channels, stride
//! 2, then a stride-2 pool). The conv's output never reaches memory. A task walks chunks
//! of 32 pool columns down a band of pool rows; for each it computes the conv rows the
//! windows read (only the chunk's 65 conv columns), 64 output channels at a time with the
//! channels in the vector lanes (4 channel vectors × 6 pixels of sums, each input value
//! broadcast into 4 sums, each weight vector loaded once for 6 pixels), keeps the last
//! three in a 50 KB stack ring, and pools them: with channels in the lanes a window's
//! maximum is nine plain loads a vector, no permutes. One 16×16 transpose per 16
//! channels writes the chunk's outputs in NCHW.
//!
//! # Semantics
//! With `c = conv` (as [`nnefc_conv`](crate::nnefc_conv) computes it for `args.conv`:
//! sum in `(c, ky, kx)` order from 0, taps outside the input skipped, plus the bias,
//! through `conv.geo`'s activation) and the pool window of `args.pool` (`kh × kw` taps,
//! stride `sh`, padding `pt`, `pl`, taps outside the conv's output skipped), every pool
//! output is `act(maximum over the window's taps of c)`, where the maximum is IEEE
//! 754-2019 `maximum` (NaN if any tap is NaN, +0 above −0), a window with no tap gives
//! −∞, and `act` is `args.pool`'s activation. Fused multiply-adds on AVX-512, a multiply
//! then an add elsewhere: results may differ in the last bits between CPUs, never between
//! runs or thread counts on one CPU.
//!
//! # Threads
//! Tasks are (sample, block of 64 output channels, band of pool rows). A band computes
//! the conv rows its pool rows read, so neighbouring bands share one or two conv rows,
//! computed twice (identically), and so do neighbouring chunks one or two conv columns.
//!
//! Not here: residuals (neither the conv nor the pool may have one), dilation, pools other
//! than 3×3 (the compiler keeps the conv and the pool apart for those), grouped
//! convolutions.

use crate::parallel::{self, Parallel, workers};
use crate::{ConvArgs, DwArgs, conv_supported};

/// Output channels per block of the packed filter (and per task).
pub const CONV_POOL_CO_TILE: usize = 64;
/// Channel vectors per block.
#[cfg(target_arch = "x86_64")]
const VECS: usize = CONV_POOL_CO_TILE / 16;
/// Pixels per register block of the conv: 4 channel vectors × 6 pixels = 24 sums.
#[cfg(target_arch = "x86_64")]
const PIXELS: usize = 6;
/// Most taps (`cin · kh · kw`) [`nnefc_conv_pool`] takes: 8 channels of 7×7.
pub(crate) const MAX_TAPS: usize = 8 * 49;
/// Tasks per worker when splitting.
const TASKS_PER_WORKER: usize = 2;

/// `nnefc_conv_pool_args`: a convolution and the max pool over its output.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ConvPoolArgs {
    /// The convolution as for `nnefc_conv`, except that `geo.filter` is packed by
    /// [`pack_conv_pool_filter`], `geo.oh × geo.ow` are the conv's output extents, and
    /// `geo.y`, `geo.res` and the output strides are not read; `geo.act`, `lo`, `hi` are
    /// the conv's activation. No groups (`filter_sn`, `bias_sn` are not read).
    pub conv: ConvArgs,
    /// The pool: `kh × kw` (3×3) window, strides `sh == sw` (1 or 2), padding `pt`, `pl`,
    /// output `oh × ow`, written at `y` with strides `y_sn`, `y_sc`, `y_sh`, then `act`,
    /// `lo`, `hi`. `n`, `c`, `h`, `w` equal the conv's samples, output channels and output
    /// extents; `x`, `filter`, `bias` are not read; `res` must be null.
    pub pool: DwArgs,
}

/// The shapes [`nnefc_conv_pool`] takes: a conv (`[kh, kw, sh, sw, dh, dw]`) that
/// `conv_supported` takes, of at most 392 taps (`cin · kh · kw`), and a 3×3
/// pool (`[kh, kw, sh, sw, dh, dw]`) with equal strides of 1 or 2 and no dilation.
pub fn conv_pool_takes(conv: [usize; 6], cin: usize, pool: [usize; 6]) -> bool {
    let [kh, kw, sh, sw, dh, dw] = conv;
    conv_supported(kh, kw, sh, sw, dh, dw)
        && cin.saturating_mul(kh * kw) <= MAX_TAPS
        && pool[..2] == [3, 3]
        && pool[2] == pool[3]
        && matches!(pool[2], 1 | 2)
        && pool[4..] == [1, 1]
}

/// Whether `args` describes a call [`nnefc_conv_pool`] computes: shapes
/// [`conv_pool_takes`] takes, the pool over the conv's output, no residuals.
fn conv_pool_supported(a: &ConvPoolArgs) -> bool {
    let (conv, pool) = (&a.conv.geo, &a.pool);
    let shape = |g: &DwArgs| [g.kh, g.kw, g.sh, g.sw, g.dh, g.dw];
    conv_pool_takes(shape(conv), a.conv.cin, shape(pool))
        && pool.h == conv.oh
        && pool.w == conv.ow
        && pool.n == conv.n
        && pool.c == conv.c
        && pool.res.is_null()
        && conv.res.is_null()
}

/// Floats of [`pack_conv_pool_filter`]'s output: `ceil(cout / 64) · cin · kh · kw · 64`.
pub fn conv_pool_filter_len(cout: usize, cin: usize, kh: usize, kw: usize) -> usize {
    cout.div_ceil(CONV_POOL_CO_TILE) * cin * kh * kw * CONV_POOL_CO_TILE
}

/// Packs a dense `[cout, cin, kh, kw]` filter for [`nnefc_conv_pool`]: `ceil(cout / 64)`
/// blocks, block `b` holding for every `(c, ky, kx)` in that order the 64 values of output
/// channels `64b..64b + 64` (0 past `cout`). Part of the ABI: compiled objects hold filters
/// in this format, whatever CPU runs them.
///
/// Returns [`Status::ShapeMismatch`](crate::Status::ShapeMismatch) if `f` is not
/// `cout·cin·kh·kw` floats long.
#[cfg(feature = "std")]
pub fn pack_conv_pool_filter(
    cout: usize,
    cin: usize,
    kh: usize,
    kw: usize,
    f: &[f32],
) -> Result<std::vec::Vec<f32>, crate::Error> {
    crate::conv::pack_channel_tiles::<CONV_POOL_CO_TILE>(cout, cin * kh * kw, f)
}

/// Runs the fused convolution and max pool `args` describes (see the module doc), in
/// parallel over (sample, channel block, band of pool rows) when `par` offers several
/// workers. Calls of shapes [`conv_pool_takes`] rejects, or whose pool is not over the
/// conv's output, do nothing.
///
/// # Safety
/// `args` points to a valid [`ConvPoolArgs`] whose pointers and strides address buffers
/// of the described extents, `conv.geo.filter` holding [`conv_pool_filter_len`] packed
/// floats; the pool's `y` does not overlap the conv's input, filter or bias; `par` is
/// null or a valid [`Parallel`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nnefc_conv_pool(args: *const ConvPoolArgs, par: *const Parallel) {
    // SAFETY: valid by the caller's contract.
    let a = unsafe { &*args };
    let (g, p) = (&a.conv.geo, &a.pool);
    if !conv_pool_supported(a) || g.n == 0 || g.c == 0 || p.oh == 0 || p.ow == 0 {
        return;
    }
    let blocks = g.n * g.c.div_ceil(CONV_POOL_CO_TILE);
    // SAFETY: `par` is null or valid.
    let w = unsafe { workers(par) };
    let bands = if w > 1 {
        (w * TASKS_PER_WORKER).div_ceil(blocks).min(p.oh)
    } else {
        1
    };
    let units = Units { bands };
    // SAFETY: tasks write disjoint outputs.
    unsafe { parallel::ranges(par, &(a, units), blocks * bands, blocks * bands, run_units) }
}

/// The tasks of a call: (sample, channel block) pairs × `bands` bands of pool rows each.
#[derive(Clone, Copy)]
struct Units {
    bands: usize,
}

impl Units {
    /// Task `u` as (sample, first channel, first pool row, pool row past the last).
    fn at(self, a: &ConvPoolArgs, u: usize) -> (usize, usize, usize, usize) {
        let (blk, band) = (u / self.bands, u % self.bands);
        let per = a.conv.geo.c.div_ceil(CONV_POOL_CO_TILE);
        let oh = a.pool.oh;
        (
            blk / per,
            (blk % per) * CONV_POOL_CO_TILE,
            band * oh / self.bands,
            (band + 1) * oh / self.bands,
        )
    }
}

/// Tasks `[lo, hi)` with the widest code the CPU has.
unsafe fn run_units(&(a, units): &(&ConvPoolArgs, Units), lo: usize, hi: usize) {
    for u in lo..hi {
        let task = units.at(a, u);
        #[cfg(target_arch = "x86_64")]
        if crate::gemm::avx512_selected() && crate::maxpool::has_avx512dq() {
            // SAFETY: the CPU has AVX-512F (that is what selected the kernel family) and
            // DQ.
            unsafe { avx512::task(a, task) };
            continue;
        }
        // SAFETY: the caller's contract.
        unsafe { portable(a, task) };
    }
}

/// The conv output `(o, cy, cx)` of sample `n` through the conv's activation, a multiply
/// then an add per term.
///
/// # Safety
/// The caller's contract; `(o, cy, cx)` is a conv output.
unsafe fn conv_at(a: &ConvPoolArgs, n: usize, o: usize, cy: usize, cx: usize) -> f32 {
    let g = &a.conv.geo;
    let (kh, kw) = (g.kh, g.kw);
    let mut s = 0.0f32;
    for c in 0..a.conv.cin {
        for ky in 0..kh {
            let iy = (cy * g.sh + ky) as isize - g.pt as isize;
            if iy < 0 || iy >= g.h as isize {
                continue;
            }
            for kx in 0..kw {
                let ix = (cx * g.sw + kx) as isize - g.pl as isize;
                if ix < 0 || ix >= g.w as isize {
                    continue;
                }
                let wi = ((o / CONV_POOL_CO_TILE) * a.conv.cin * kh * kw + (c * kh + ky) * kw + kx)
                    * CONV_POOL_CO_TILE
                    + o % CONV_POOL_CO_TILE;
                // SAFETY: a weight and an input element.
                unsafe {
                    s += *g.filter.add(wi)
                        * *g.x
                            .offset(n as isize * g.x_sn + c as isize * g.x_sc + iy * g.x_sh + ix);
                }
            }
        }
    }
    // SAFETY: channel `o`'s bias.
    let b = unsafe { *g.bias.offset(o as isize * g.bias_sc) };
    crate::gemm::activate(s + b, g.act as u32, g.lo, g.hi)
}

/// One task, one pool output at a time, each conv output of its window computed anew.
unsafe fn portable(a: &ConvPoolArgs, (n, co0, py0, py1): (usize, usize, usize, usize)) {
    let (g, p) = (&a.conv.geo, &a.pool);
    for o in co0..(co0 + CONV_POOL_CO_TILE).min(g.c) {
        for py in py0..py1 {
            for px in 0..p.ow {
                let mut m = f32::NEG_INFINITY;
                for dy in 0..3 {
                    let cy = (py * p.sh + dy) as isize - p.pt as isize;
                    if cy < 0 || cy >= g.oh as isize {
                        continue;
                    }
                    for dx in 0..3 {
                        let cx = (px * p.sw + dx) as isize - p.pl as isize;
                        if cx < 0 || cx >= g.ow as isize {
                            continue;
                        }
                        // SAFETY: a conv output of this sample.
                        let v = unsafe { conv_at(a, n, o, cy as usize, cx as usize) };
                        m = crate::gemm::maximum(m, v);
                    }
                }
                let at = n as isize * p.y_sn + o as isize * p.y_sc + py as isize * p.y_sh;
                // SAFETY: this pool output.
                unsafe {
                    *p.y.offset(at + px as isize) =
                        crate::gemm::activate(m, p.act as u32, p.lo, p.hi)
                };
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{CONV_POOL_CO_TILE, ConvPoolArgs, MAX_TAPS, PIXELS, VECS};
    use crate::dwconv::lanes;
    use crate::gemm::{activate_avx512, maximum};
    use core::arch::x86_64::*;

    /// Pool outputs per column chunk (two transposes' worth).
    const CHUNK: usize = 32;
    /// Conv columns a chunk reads at most (`31·2 + 3` at stride 2), rounded up to whole
    /// register blocks.
    const COLS: usize = (CHUNK * 2 + 1).div_ceil(PIXELS) * PIXELS;
    /// Floats of one conv row of a chunk in the ring: `[cx][64 channels]`.
    const ROW: usize = COLS * CONV_POOL_CO_TILE;
    /// Floats of an edge block's padded input copy: `cin · kh · edge_width` is at most
    /// `MAX_TAPS · (1 + 10 / 3)` (`edge_width ≤ kw + 10`, `kw ≥ 3`).
    const EDGE: usize = MAX_TAPS * 5;

    /// Input columns the [`PIXELS`] outputs of a block read: `(PIXELS − 1)·s + kw`.
    fn edge_width(kw: usize, s: usize) -> usize {
        (PIXELS - 1) * s + kw
    }

    /// What every conv row of a task reads: its sample's input, its channel block's
    /// packed filter, the tap offsets in the input and in an edge block's padded copy
    /// (`[c][ky][edge_width]`), and the block's biases.
    struct Block<'t> {
        xs: *const f32,
        wb: *const f32,
        taps: &'t [isize],
        edge_taps: &'t [isize],
        bias: [__m512; VECS],
    }

    /// One task: per chunk of 32 pool columns, walking down its pool rows, the conv
    /// rows (of the chunk's conv columns) its windows read, three at a time in a ring,
    /// then the pooled chunk row, transposed into the output planes.
    ///
    /// # Safety
    /// As for `nnefc_conv_pool`, for a call `conv_pool_supported` accepts; the CPU has
    /// AVX-512F and DQ.
    #[target_feature(enable = "avx512f,avx512dq")]
    pub(super) unsafe fn task(a: &ConvPoolArgs, (n, co0, py0, py1): (usize, usize, usize, usize)) {
        let (g, p) = (&a.conv.geo, &a.pool);
        let mut ring = [[0.0f32; ROW]; 3];
        let mut out = [[0.0f32; CONV_POOL_CO_TILE]; CHUNK];
        // Tap (c, ky, kx) of an output, from its first tap: in the input, and in an edge
        // block's zero-padded copy (`[c][ky][edge_width]`).
        let (mut offs, mut edge_offs) = ([0isize; MAX_TAPS], [0isize; MAX_TAPS]);
        let ntaps = a.conv.cin * g.kh * g.kw;
        let ew = edge_width(g.kw, g.sw) as isize;
        for t in 0..ntaps {
            let (c, ky, kx) = (t / (g.kh * g.kw), t / g.kw % g.kh, t % g.kw);
            offs[t] = c as isize * g.x_sc + ky as isize * g.x_sh + kx as isize;
            edge_offs[t] = (c * g.kh + ky) as isize * ew + kx as isize;
        }
        let blk = Block {
            xs: g.x.wrapping_offset(n as isize * g.x_sn),
            wb: g
                .filter
                .wrapping_add((co0 / CONV_POOL_CO_TILE) * ntaps * CONV_POOL_CO_TILE),
            taps: &offs[..ntaps],
            edge_taps: &edge_offs[..ntaps],
            bias: core::array::from_fn(|h| {
                let mut b = [0.0f32; 16];
                for (i, bi) in b.iter_mut().enumerate() {
                    let o = co0 + 16 * h + i;
                    if o < g.c {
                        // SAFETY: channel `o`'s bias.
                        *bi = unsafe { *g.bias.offset(o as isize * g.bias_sc) };
                    }
                }
                // SAFETY: 16 floats on the stack.
                unsafe { _mm512_loadu_ps(b.as_ptr()) }
            }),
        };
        // A relu'd conv output is never −0, so where it holds no NaN either the maximum
        // is `vmaxps` (two a cycle) rather than `vrangeps`.
        let relu = g.act == 1;
        for px0 in (0..p.ow).step_by(CHUNK) {
            let npx = CHUNK.min(p.ow - px0);
            // The conv columns the chunk's windows read.
            let cx_lo = ((px0 * p.sw) as isize - p.pl as isize).max(0) as usize;
            let cx_hi =
                ((((px0 + npx - 1) * p.sw + 3) as isize - p.pl as isize).max(0) as usize).min(g.ow);
            // The conv row each ring slot holds (none yet), and whether it holds a NaN.
            let mut held = [usize::MAX; 3];
            let mut nans = [false; 3];
            for py in py0..py1 {
                let mut rows = [None; 3];
                let mut nan = false;
                for (dy, r) in rows.iter_mut().enumerate() {
                    let cy = (py * p.sh + dy) as isize - p.pt as isize;
                    if cy < 0 || cy >= g.oh as isize || cx_lo >= cx_hi {
                        continue;
                    }
                    let cy = cy as usize;
                    let slot = cy % 3;
                    if held[slot] != cy {
                        // SAFETY: conv row `cy` of this task's sample and channels.
                        nans[slot] =
                            unsafe { conv_row(a, &blk, cy, (cx_lo, cx_hi), &mut ring[slot]) };
                        held[slot] = cy;
                    }
                    nan |= nans[slot];
                    *r = Some(slot);
                }
                // SAFETY: the held rows.
                unsafe {
                    let pool = match (nan, relu) {
                        (true, _) => pool_row::<true, false>,
                        (false, true) => pool_row::<false, true>,
                        (false, false) => pool_row::<false, false>,
                    };
                    pool(a, &ring, rows, px0, npx, cx_lo, &mut out)
                };
                // SAFETY: pool row `py` of this task's sample and channels.
                unsafe { store_chunk(a, n, co0, py, px0, npx, &out) };
            }
        }
    }

    /// Conv row `cy`, columns `cx_lo..cx_hi` (at most [`COLS`]), of channels `co0..co0 +
    /// 64` into `dst` (`[cx − cx_lo][64]`), plus `bias` (those channels'), through the
    /// conv's activation; whether any of it is NaN.
    ///
    /// # Safety
    /// As for [`task`].
    #[inline(never)]
    #[target_feature(enable = "avx512f")]
    unsafe fn conv_row(
        a: &ConvPoolArgs,
        blk: &Block<'_>,
        cy: usize,
        (cx_lo, cx_hi): (usize, usize),
        dst: &mut [f32; ROW],
    ) -> bool {
        let g = &a.conv.geo;
        let (lo, hi) = (_mm512_set1_ps(g.lo), _mm512_set1_ps(g.hi));
        let mut nan: __mmask16 = 0;
        let top = (cy * g.sh) as isize - g.pt as isize;
        let rows_inside = top >= 0 && top + (g.kh as isize) <= g.h as isize;
        let mut next = cx_lo;
        while next < cx_hi {
            // A last block short of outputs starts further left instead, where the
            // chunk has them, recomputing some (identically): full blocks stay on the
            // fast path.
            let ox0 = if next + PIXELS > cx_hi && cx_hi - cx_lo >= PIXELS {
                cx_hi - PIXELS
            } else {
                next
            };
            next = ox0 + PIXELS;
            let np = PIXELS.min(cx_hi - ox0);
            let first = (ox0 * g.sw) as isize - g.pl as isize;
            let last = ((ox0 + PIXELS - 1) * g.sw + g.kw - 1) as isize - g.pl as isize;
            let inside = np == PIXELS && first >= 0 && last < g.w as isize && rows_inside;
            let at = blk.xs.wrapping_offset(top * g.x_sh + first);
            // SAFETY: forwarded; every tap of an `inside` block is in the input.
            let acc = unsafe {
                match (inside, g.sw) {
                    (true, 1) => inside_block::<1>(blk.wb, at, blk.taps),
                    (true, _) => inside_block::<2>(blk.wb, at, blk.taps),
                    (false, s) => {
                        let mut pad = [0.0f32; EDGE];
                        edge_copy(a, blk.xs, cy, first, &mut pad);
                        if s == 1 {
                            inside_block::<1>(blk.wb, pad.as_ptr(), blk.edge_taps)
                        } else {
                            inside_block::<2>(blk.wb, pad.as_ptr(), blk.edge_taps)
                        }
                    }
                }
            };
            for (q, acc_q) in acc.iter().enumerate().take(np) {
                for (h, &sum) in acc_q.iter().enumerate() {
                    let pre = _mm512_add_ps(sum, blk.bias[h]);
                    // Every activation keeps NaN NaN and makes nothing else NaN (but for a
                    // clamp to NaN bounds, below): the check on the sum is the ReLU's own
                    // (one compare, not two).
                    nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(pre, pre);
                    // SAFETY: the CPU has AVX-512F.
                    let v = unsafe { activate_avx512(pre, g.act as u32, lo, hi) };
                    let at = (ox0 - cx_lo + q) * CONV_POOL_CO_TILE + 16 * h;
                    // SAFETY: within the chunk's row (`cx_hi − cx_lo ≤ COLS`).
                    unsafe { _mm512_storeu_ps(dst.as_mut_ptr().add(at), v) };
                }
            }
        }
        // A clamp to NaN bounds (possible through the C ABI, never from the compiler)
        // makes every output NaN.
        nan != 0 || (g.act == 2 && (g.lo.is_nan() || g.hi.is_nan()))
    }

    /// The sums of the [`PIXELS`] conv outputs whose taps all lie in the input, stride
    /// `S`, the first one's tap `(c, ky, kx)` at `at + taps[(c·kh + ky)·kw + kx]`: one
    /// loop over the taps (6 broadcasts at constant offsets, 4 weight vectors, 24
    /// multiply-adds each). Unrolling the taps instead (constant filter sizes) made LLVM
    /// keep some sums on the stack: squeezenet1_1's stem took 0.35 ms, 0.3 with this loop.
    ///
    /// # Safety
    /// As for [`task`]; the taps of all 6 outputs are in the input.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn inside_block<const S: usize>(
        wb: *const f32,
        at: *const f32,
        taps: &[isize],
    ) -> [[__m512; VECS]; PIXELS] {
        let mut acc = [[_mm512_setzero_ps(); PIXELS]; VECS];
        for (t, &off) in taps.iter().enumerate() {
            let col = at.wrapping_offset(off);
            let mut xv = [_mm512_setzero_ps(); PIXELS];
            unroll!(q in [0, 1, 2, 3, 4, 5] {
                // SAFETY: a tap in the input.
                xv[q] = _mm512_set1_ps(unsafe { *col.add(q * S) });
            });
            let wp = wb.wrapping_add(t * CONV_POOL_CO_TILE);
            unroll!(h in [0, 1, 2, 3] {
                // SAFETY: 16 floats of the packed filter.
                let w = unsafe { _mm512_loadu_ps(wp.add(16 * h)) };
                unroll!(q in [0, 1, 2, 3, 4, 5] {
                    acc[h][q] = _mm512_fmadd_ps(w, xv[q], acc[h][q]);
                });
            });
        }
        // Copied with constant indices, so that the sums stay in registers through the
        // multiply-adds.
        let mut out = [[_mm512_setzero_ps(); VECS]; PIXELS];
        unroll!(q in [0, 1, 2, 3, 4, 5] {
            out[q] = [acc[0][q], acc[1][q], acc[2][q], acc[3][q]];
        });
        out
    }

    /// Copies the input (the sample's, from `xs`) an edge block of conv row `cy` reads
    /// (its [`PIXELS`] outputs' taps from column `first`) into `pad` as `[c][ky][edge_width]`, zeros where the taps
    /// fall outside the input, so that [`inside_block`] computes it from there: the
    /// blocks at the borders then cost a copy of a few hundred floats more than the
    /// others, not a loop with a bounds check per tap.
    ///
    /// # Safety
    /// As for [`task`].
    #[inline(never)]
    #[target_feature(enable = "avx512f")]
    unsafe fn edge_copy(
        a: &ConvPoolArgs,
        xs: *const f32,
        cy: usize,
        first: isize,
        pad: &mut [f32; EDGE],
    ) {
        let g = &a.conv.geo;
        let ew = edge_width(g.kw, g.sw);
        for c in 0..a.conv.cin {
            for ky in 0..g.kh {
                let iy = (cy * g.sh + ky) as isize - g.pt as isize;
                let dst = &mut pad[(c * g.kh + ky) * ew..][..ew];
                if iy < 0 || iy >= g.h as isize {
                    dst.fill(0.0);
                    continue;
                }
                let row = xs.wrapping_offset(c as isize * g.x_sc + iy * g.x_sh);
                for (j, d) in dst.iter_mut().enumerate() {
                    let ix = first + j as isize;
                    *d = if ix >= 0 && ix < g.w as isize {
                        // SAFETY: an input element of this row.
                        unsafe { *row.offset(ix) }
                    } else {
                        0.0
                    };
                }
            }
        }
    }

    /// Pool row outputs `px0..px0 + npx` from the ring slots `rows` (the window's three
    /// conv rows, `None` outside the conv's output; column `cx` at `cx − cx_lo`) into
    /// `out` (`[px − px0][64]`), through the pool's activation. The maxima are `vrangeps`
    /// (AVX-512DQ), which orders +0 above −0 but drops NaN, or `vmaxps` where no −0 can
    /// occur (`PLAIN`, see [`max`]): when a row holds a NaN (`NAN`), the loads are also
    /// summed, and an output whose sum is NaN (a NaN tap, or +∞ meeting −∞) is recomputed
    /// lane by lane. Windows with all three rows and columns take the column maxima
    /// first (stride 2: the last column is the next window's first).
    ///
    /// # Safety
    /// As for [`task`].
    #[inline(never)]
    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn pool_row<const NAN: bool, const PLAIN: bool>(
        a: &ConvPoolArgs,
        ring: &[[f32; ROW]; 3],
        rows: [Option<usize>; 3],
        px0: usize,
        npx: usize,
        cx_lo: usize,
        out: &mut [[f32; CONV_POOL_CO_TILE]; CHUNK],
    ) {
        let (g, p) = (&a.conv.geo, &a.pool);
        let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
        let (lo, hi) = (_mm512_set1_ps(p.lo), _mm512_set1_ps(p.hi));
        let slots: [Option<*const f32>; 3] = rows.map(|r| r.map(|s| ring[s].as_ptr()));
        // Windows with all three rows and columns (and no NaN in the rows) take the
        // column maxima first, outputs `i_lo..i_hi` of the chunk.
        let (i_lo, i_hi) = if NAN || slots.iter().any(|r| r.is_none()) {
            (0, 0)
        } else {
            let first = p.pl.div_ceil(p.sw).saturating_sub(px0);
            // Outputs whose last column `(px0 + i)·s − pl + 2` is below `ow`.
            let end = (g.ow + p.pl)
                .saturating_sub(2)
                .div_ceil(p.sw)
                .saturating_sub(px0);
            (first.min(npx), end.clamp(first.min(npx), npx))
        };
        if i_lo < i_hi
            && let [Some(r0), Some(r1), Some(r2)] = slots
        {
            let c0 = ((px0 + i_lo) * p.sw) as isize - p.pl as isize - cx_lo as isize;
            // SAFETY: the held rows cover these windows' columns.
            unsafe {
                if p.sw == 1 {
                    interior::<1, PLAIN>([r0, r1, r2], c0 as usize, &mut out[i_lo..i_hi]);
                } else {
                    interior::<2, PLAIN>([r0, r1, r2], c0 as usize, &mut out[i_lo..i_hi]);
                }
            }
            if p.act != 0 {
                for o in &mut out[i_lo..i_hi] {
                    for h in 0..VECS {
                        // SAFETY: 16 floats of this output's 64; the CPU has AVX-512F.
                        unsafe {
                            let v = _mm512_loadu_ps(o.as_ptr().add(16 * h));
                            let v = activate_avx512(v, p.act as u32, lo, hi);
                            _mm512_storeu_ps(o.as_mut_ptr().add(16 * h), v);
                        }
                    }
                }
            }
        }
        for (i, o) in out.iter_mut().enumerate().take(npx) {
            if (i_lo..i_hi).contains(&i) {
                continue;
            }
            let cx0 = ((px0 + i) * p.sw) as isize - p.pl as isize;
            let (dx0, dx1) = ((-cx0).max(0), (g.ow as isize - cx0).min(3));
            let mut m = [ninf; VECS];
            let mut sum = [_mm512_setzero_ps(); VECS];
            for src in slots.iter().flatten() {
                for dx in dx0..dx1 {
                    let at = (cx0 + dx) as usize - cx_lo;
                    for h in 0..VECS {
                        // SAFETY: a held conv output.
                        let v =
                            unsafe { _mm512_loadu_ps(src.add(at * CONV_POOL_CO_TILE + 16 * h)) };
                        m[h] = _mm512_range_ps::<0b0101>(m[h], v);
                        if NAN {
                            sum[h] = _mm512_add_ps(sum[h], v);
                        }
                    }
                }
            }
            for h in 0..VECS {
                let nan = if NAN {
                    _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(sum[h], sum[h])
                } else {
                    0
                };
                if nan != 0 {
                    let mut e = [0.0f32; 16];
                    // SAFETY: 16 floats on the stack.
                    unsafe { _mm512_storeu_ps(e.as_mut_ptr(), m[h]) };
                    for (l, el) in e.iter_mut().enumerate() {
                        if nan & (1 << l) == 0 {
                            continue;
                        }
                        let mut x = f32::NEG_INFINITY;
                        for src in slots.iter().flatten() {
                            for dx in dx0..dx1 {
                                let at = ((cx0 + dx) as usize - cx_lo) * CONV_POOL_CO_TILE;
                                // SAFETY: a held conv output.
                                x = maximum(x, unsafe { *src.add(at + 16 * h + l) });
                            }
                        }
                        *el = x;
                    }
                    // SAFETY: as above.
                    m[h] = unsafe { _mm512_loadu_ps(e.as_ptr()) };
                }
                // SAFETY: the CPU has AVX-512F.
                let v = unsafe { activate_avx512(m[h], p.act as u32, lo, hi) };
                // SAFETY: 16 floats of this output's 64.
                unsafe { _mm512_storeu_ps(o.as_mut_ptr().add(16 * h), v) };
            }
        }
    }

    /// Pool row `py`, outputs `px0..px0 + npx`, of channels `co0..co0 + 64` from `out`
    /// (`[px − px0][64]`) to the output planes: one 16×16 transpose per 16 channels.
    ///
    /// # Safety
    /// As for [`task`].
    #[inline(never)]
    #[target_feature(enable = "avx512f")]
    unsafe fn store_chunk(
        a: &ConvPoolArgs,
        n: usize,
        co0: usize,
        py: usize,
        px0: usize,
        npx: usize,
        out: &[[f32; CONV_POOL_CO_TILE]; CHUNK],
    ) {
        let p = &a.pool;
        for q0 in (0..npx).step_by(16) {
            let nq = 16.min(npx - q0);
            let live = lanes(0, nq as isize);
            for h in 0..VECS {
                if co0 + 16 * h >= p.c {
                    break;
                }
                let mut r = [_mm512_setzero_ps(); 16];
                for (i, ri) in r.iter_mut().enumerate() {
                    // Outputs past the chunk's repeat the last (not stored).
                    let q = q0 + i.min(nq - 1);
                    // SAFETY: 16 floats of a pooled output.
                    *ri = unsafe { _mm512_loadu_ps(out[q].as_ptr().add(16 * h)) };
                }
                transpose16(&mut r);
                for (j, &rj) in r.iter().enumerate() {
                    let o = co0 + 16 * h + j;
                    if o >= p.c {
                        break;
                    }
                    let at = n as isize * p.y_sn
                        + o as isize * p.y_sc
                        + py as isize * p.y_sh
                        + (px0 + q0) as isize;
                    // SAFETY: the live outputs of this row.
                    unsafe { _mm512_mask_storeu_ps(p.y.offset(at), live, rj) };
                }
            }
        }
    }

    /// Outputs of windows whose three rows `rows` and three columns (from ring column
    /// `c0`, stride `S`) all exist and hold no NaN, into `out`: the maxima down each
    /// column first, then across, stride 2 reusing a window's last column as the next
    /// one's first.
    ///
    /// # Safety
    /// The rows hold the columns `c0 .. c0 + (out.len() − 1)·S + 3` of the ring.
    #[inline(never)]
    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn interior<const S: usize, const PLAIN: bool>(
        rows: [*const f32; 3],
        c0: usize,
        out: &mut [[f32; CONV_POOL_CO_TILE]],
    ) {
        let column = |c: usize, h: usize| {
            let at = c * CONV_POOL_CO_TILE + 16 * h;
            // SAFETY: held conv outputs (the caller's contract).
            unsafe {
                max::<PLAIN>(
                    max::<PLAIN>(
                        _mm512_loadu_ps(rows[0].add(at)),
                        _mm512_loadu_ps(rows[1].add(at)),
                    ),
                    _mm512_loadu_ps(rows[2].add(at)),
                )
            }
        };
        let mut prev = [_mm512_setzero_ps(); VECS];
        unroll!(h in [0, 1, 2, 3] {
            prev[h] = column(c0, h);
        });
        for (i, o) in out.iter_mut().enumerate() {
            let c = c0 + i * S;
            unroll!(h in [0, 1, 2, 3] {
                let first = if S == 2 { prev[h] } else { column(c, h) };
                let (mid, last) = (column(c + 1, h), column(c + 2, h));
                prev[h] = last;
                let m = max::<PLAIN>(max::<PLAIN>(first, mid), last);
                // SAFETY: 16 floats of this output's 64.
                unsafe { _mm512_storeu_ps(o.as_mut_ptr().add(16 * h), m) };
            });
        }
    }

    /// The maximum of two vectors without NaN: `vmaxps` when `PLAIN` (neither holds −0),
    /// else `vrangeps` (+0 above −0).
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    fn max<const PLAIN: bool>(a: __m512, b: __m512) -> __m512 {
        if PLAIN {
            _mm512_max_ps(a, b)
        } else {
            _mm512_range_ps::<0b0101>(a, b)
        }
    }

    /// Transposes 16 vectors of 16 lanes in place: lane `j` of vector `i` becomes lane
    /// `i` of vector `j`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn transpose16(r: &mut [__m512; 16]) {
        let mut t = [_mm512_setzero_ps(); 16];
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        for i in 0..4 {
            let (a, b) = (_mm512_castps_pd(t[4 * i]), _mm512_castps_pd(t[4 * i + 2]));
            let (c, d) = (
                _mm512_castps_pd(t[4 * i + 1]),
                _mm512_castps_pd(t[4 * i + 3]),
            );
            r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
            r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
            r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
            r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
        }
        for i in 0..2 {
            for j in 0..4 {
                let (a, b) = (r[8 * i + j], r[8 * i + 4 + j]);
                t[8 * i + j] = _mm512_shuffle_f32x4::<0x88>(a, b);
                t[8 * i + 4 + j] = _mm512_shuffle_f32x4::<0xdd>(a, b);
            }
        }
        for j in 0..8 {
            let (a, b) = (t[j], t[8 + j]);
            r[j] = _mm512_shuffle_f32x4::<0x88>(a, b);
            r[8 + j] = _mm512_shuffle_f32x4::<0xdd>(a, b);
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::dwconv::tests::{Lcg, serial_and_pooled_runs};
    use crate::winograd::tests::geometry;

    /// Random stems (3×3 and 7×7 filters, strides 1 and 2 for conv and pool, conv and
    /// pool padding, channel counts that do not fill a block, two samples, rows longer
    /// than a register block, a NaN in some inputs), every activation on either side:
    /// serial and pooled runs give the same bits, and the vector path (where the CPU has
    /// it) and the portable one match the definition in f64 (NaN where it is NaN).
    #[test]
    fn conv_pool_matches_the_definition() {
        let mut r = Lcg(31);
        let pool = crate::ThreadPool::new(3).expect("pool");
        for case in 0..30 {
            let k = if case % 3 == 2 { 7 } else { 3 };
            let (cs, ps) = (1 + r.below(2), 1 + r.below(2));
            let (n, cin, c) = (1 + r.below(2), 1 + r.below(4), 1 + r.below(70));
            let (h, w) = (
                k + r.below(40),
                k + r.below(if case % 4 == 0 { 120 } else { 40 }),
            );
            let (cpt, cpl) = (r.below(k / 2 + 1), r.below(k / 2 + 1));
            let (coh, cow) = ((h + 2 * cpt - k) / cs + 1, (w + 2 * cpl - k) / cs + 1);
            let (ppt, ppl) = (r.below(2), r.below(2));
            if coh + ppt < 3 || cow + ppl < 3 {
                continue;
            }
            let (poh, pow) = ((coh + ppt - 3) / ps + 1, (cow + ppl - 3) / ps + 1);
            let mut x: Vec<f32> = (0..n * cin * h * w).map(|_| r.next()).collect();
            if case % 5 == 1 {
                let at = r.below(x.len());
                x[at] = f32::NAN;
            }
            let f: Vec<f32> = (0..c * cin * k * k).map(|_| r.next()).collect();
            let bias: Vec<f32> = (0..c).map(|_| r.next()).collect();
            let packed = pack_conv_pool_filter(c, cin, k, k, &f).expect("pack");
            let (cact, pact) = (case % 6, (case / 6) % 3);
            let (lo, hi) = (-0.5f32, 0.75f32);
            // NaN stays NaN through either activation.
            let act = |v: f64, a: usize| crate::gemm::tests::activate_f64(v, a as u32, lo, hi);
            // The conv (f64, through its activation), then the pool.
            let mut conv = vec![0.0f64; n * c * coh * cow];
            for ni in 0..n {
                for o in 0..c {
                    for oy in 0..coh {
                        for ox in 0..cow {
                            let mut s = f64::from(bias[o]);
                            for ci in 0..cin {
                                for ky in 0..k {
                                    for kx in 0..k {
                                        let iy = (oy * cs + ky) as isize - cpt as isize;
                                        let ix = (ox * cs + kx) as isize - cpl as isize;
                                        if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize
                                        {
                                            continue;
                                        }
                                        s += f64::from(f[((o * cin + ci) * k + ky) * k + kx])
                                            * f64::from(
                                                x[((ni * cin + ci) * h + iy as usize) * w
                                                    + ix as usize],
                                            );
                                    }
                                }
                            }
                            conv[((ni * c + o) * coh + oy) * cow + ox] = act(s, cact);
                        }
                    }
                }
            }
            let mut want = vec![0.0f64; n * c * poh * pow];
            for ni in 0..n {
                for o in 0..c {
                    for py in 0..poh {
                        for px in 0..pow {
                            let mut m = f64::NEG_INFINITY;
                            for dy in 0..3 {
                                for dx in 0..3 {
                                    let cy = (py * ps + dy) as isize - ppt as isize;
                                    let cx = (px * ps + dx) as isize - ppl as isize;
                                    if cy >= 0 && cx >= 0 && cy < coh as isize && cx < cow as isize
                                    {
                                        let v = conv[((ni * c + o) * coh + cy as usize) * cow
                                            + cx as usize];
                                        m = if v.is_nan() || m.is_nan() {
                                            f64::NAN
                                        } else {
                                            m.max(v)
                                        };
                                    }
                                }
                            }
                            want[((ni * c + o) * poh + py) * pow + px] = act(m, pact);
                        }
                    }
                }
            }
            let args = |y: &mut [f32]| ConvPoolArgs {
                conv: ConvArgs {
                    geo: DwArgs {
                        kh: k,
                        kw: k,
                        sh: cs,
                        sw: cs,
                        pt: cpt,
                        pl: cpl,
                        x: x.as_ptr(),
                        x_sn: (cin * h * w) as isize,
                        x_sc: (h * w) as isize,
                        x_sh: w as isize,
                        filter: packed.as_ptr(),
                        bias: bias.as_ptr(),
                        bias_sc: 1,
                        act: cact,
                        lo,
                        hi,
                        ..geometry([n, c, h, w, coh, cow])
                    },
                    cin,
                    filter_sn: 0,
                    bias_sn: 0,
                },
                pool: DwArgs {
                    kh: 3,
                    kw: 3,
                    sh: ps,
                    sw: ps,
                    pt: ppt,
                    pl: ppl,
                    y: y.as_mut_ptr(),
                    y_sn: (c * poh * pow) as isize,
                    y_sc: (poh * pow) as isize,
                    y_sh: pow as isize,
                    act: pact,
                    lo,
                    hi,
                    ..geometry([n, c, coh, cow, poh, pow])
                },
            };
            assert!(conv_pool_supported(&args(&mut [])));
            let mut runs = serial_and_pooled_runs(want.len(), &pool, case, |y, par| unsafe {
                nnefc_conv_pool(&args(y), par)
            });
            let mut y = vec![f32::NAN; want.len()];
            let a = args(&mut y);
            let units = Units { bands: 1 };
            for u in 0..n * c.div_ceil(CONV_POOL_CO_TILE) {
                unsafe { portable(&a, units.at(&a, u)) };
            }
            runs.push(y);
            let tol = 1e-5 * (cin * k * k) as f64;
            for (run, got) in runs.iter().enumerate() {
                for (i, (&g, &v)) in got.iter().zip(&want).enumerate() {
                    let ok = if v.is_nan() {
                        g.is_nan()
                    } else {
                        (f64::from(g) - v).abs() <= tol * v.abs().max(1.0)
                    };
                    assert!(ok, "case {case}, run {run}: element {i}: {g} vs {v}");
                }
            }
        }
    }
}
