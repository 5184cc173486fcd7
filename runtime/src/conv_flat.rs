//! The direct convolution (`nnefc_conv`) on narrow maps, stride 1: vectors over the
//! *flattened, padded* output plane instead of over output columns. `conv`'s kernels put
//! 16 output columns in a vector, so on a 7×7 map (RegNetX's last stage: 400 channels in
//! groups of 16, 3×3) only 7 of its 16 lanes do work. Here each sample's input channels
//! are first copied, zero padding included, into planes `wp = ow + kw − 1` columns wide
//! on the stack; output position `q = oy·wp + ox` then reads tap `(ky, kx)` at
//! `q + ky·wp + kx` of its channel's plane, so 16 consecutive positions are one plain
//! load, whatever row they fall in. The `kw − 1` columns of each row past `ow` are
//! computed and dropped: 7 of every 9 lanes do work on a 7×7 map with a 3×3 filter. A
//! vector's live lanes are packed together (`vcompressps` in a register) and stored at
//! the output index of the first, since the flattened order is the output's row-major
//! order without the dropped columns.
//!
//! Each output is summed exactly as in `conv` ((c, ky, kx) order from 0 with fused
//! multiply-adds, padding taps adding `w·0`), then bias, residual and activation through
//! the same epilogue (`dwconv::avx512::finish_act`).
//!
//! Not here: stride 2 (its taps are not consecutive in the flattened plane; four phase
//! planes per channel make them so, but building those planes cost more than the lanes
//! gained: RegNetX's 400-channel 3×3 stride-2 layer to 7×7 went 0.126 → 0.155 ms), outputs
//! whose rows are not contiguous (`y_sh ≠ ow`), planes that do not fit [`CAP`], CPUs
//! without AVX-512 (`conv`'s kernels take all of those).

use crate::conv::{CONV_CO_TILE, ConvArgs};
use core::arch::x86_64::*;

/// Floats of the padded input planes of one sample (every input channel): 16 KB of the
/// caller's stack. RegNetX's 16 channels of 9×9 (plus slack) need 1,344.
const CAP: usize = 4096;

/// Output positions a pass computes at most: three vectors (24 sums of 8 channels).
const PASS: usize = 48;

/// The flattened geometry of one call.
#[derive(Clone, Copy)]
struct Flat {
    /// Columns of a padded plane (`ow + kw − 1`).
    wp: usize,
    /// Positions computed per channel: `oh·wp` rounded up to whole vectors.
    npos: usize,
    /// Floats between consecutive channels' planes (a multiple of 16).
    ps: usize,
}

/// Per vector of positions: the lanes that are real outputs, and the output index of the
/// first (the flattened order without the dropped columns is the output's).
type Lanes = [(u16, isize); CAP / 16];

impl Flat {
    /// The [`Lanes`] of every vector of positions (`npos / 16` of them), once per call
    /// and walked, not with a division per lane in every pass.
    fn lanes(self, oh: usize, ow: usize) -> Lanes {
        let mut out = [(0u16, 0isize); CAP / 16];
        let (mut oy, mut ox) = (0, 0);
        for o in out.iter_mut().take(self.npos / 16) {
            let mut first = None;
            for l in 0..16 {
                if oy < oh && ox < ow {
                    o.0 |= 1 << l;
                    first.get_or_insert((oy * ow + ox) as isize);
                }
                ox += 1;
                if ox == self.wp {
                    (oy, ox) = (oy + 1, 0);
                }
            }
            o.1 = first.unwrap_or(0);
        }
        out
    }

    fn of(a: &ConvArgs) -> Flat {
        let g = &a.geo;
        let wp = g.ow + g.kw - 1;
        let npos = (g.oh * wp).div_ceil(16) * 16;
        // The last position's last tap reads `npos − 1 + (kh − 1)·wp + kw − 1`.
        let ps = (npos + (g.kh - 1) * wp + g.kw - 1).div_ceil(16) * 16;
        Flat { wp, npos, ps }
    }
}

/// Whether `a` (already `conv_supported`) runs here: stride 1, contiguous output rows, a
/// map narrow enough that a padded row wastes fewer lanes than `conv`'s column vectors
/// do (`wp < 16·⌈ow/16⌉`: maps of 13 columns or fewer with a 3×3 filter), and one
/// sample's padded planes within [`CAP`].
pub(crate) fn takes(a: &ConvArgs) -> bool {
    let g = &a.geo;
    if g.sh != 1 || g.sw != 1 || g.y_sh != g.ow as isize {
        return false;
    }
    let f = Flat::of(a);
    f.wp < 16 * g.ow.div_ceil(16) && a.cin.checked_mul(f.ps).is_some_and(|n| n <= CAP)
}

/// Units of work: (sample, tile of 8 output channels), in that order.
pub(crate) fn units(a: &ConvArgs) -> usize {
    a.geo.n * a.geo.c.div_ceil(CONV_CO_TILE)
}

/// Units `[lo, hi)`; the padded planes are built once per sample.
///
/// # Safety
/// `a` is valid for `nnefc_conv`, [`takes`] holds, and the CPU has AVX-512F.
pub(crate) unsafe fn run_units(a: &ConvArgs, lo: usize, hi: usize) {
    let tiles = a.geo.c.div_ceil(CONV_CO_TILE);
    // Left uninitialized: `build` writes every float the passes read.
    let mut buf = core::mem::MaybeUninit::<[f32; CAP]>::uninit();
    let buf = buf.as_mut_ptr().cast::<f32>();
    let f = Flat::of(a);
    let lanes = f.lanes(a.geo.oh, a.geo.ow);
    let mut built = None;
    for u in lo..hi {
        let (n, tile) = (u / tiles, u % tiles);
        // SAFETY: the caller's contract; `buf` holds `CAP ≥ cin·ps` floats.
        unsafe {
            if built != Some(n) {
                build(a, f, n, buf);
                built = Some(n);
            }
            unit(a, f, &lanes, n, tile, buf);
        }
    }
}

/// Copies sample `n`'s input channels into `buf`: channel `c`'s plane at `c·ps`, padded
/// row `r` (input row `r − pt`) at `r·wp`, padded column `x` (input column `x − pl`),
/// zero outside the input and up to `ps`.
#[target_feature(enable = "avx512f")]
unsafe fn build(a: &ConvArgs, f: Flat, n: usize, buf: *mut f32) {
    let g = &a.geo;
    let zero = _mm512_setzero_ps();
    // Input columns `0 .. cols` land at padded columns `pl ..` (the rest are not read).
    let cols = g.w.min(f.wp.saturating_sub(g.pl));
    for c in 0..a.cin {
        // SAFETY: `cin·ps ≤ CAP` (`takes`); the rows copied are inside the input.
        unsafe {
            let plane = buf.add(c * f.ps);
            for i in (0..f.ps).step_by(16) {
                _mm512_storeu_ps(plane.add(i), zero);
            }
            let xc =
                g.x.wrapping_offset(n as isize * g.x_sn + c as isize * g.x_sc);
            for r in 0..g.oh + g.kh - 1 {
                let iy = r as isize - g.pt as isize;
                if iy < 0 || iy >= g.h as isize || cols == 0 {
                    continue;
                }
                core::ptr::copy_nonoverlapping(
                    xc.wrapping_offset(iy * g.x_sh),
                    plane.add(r * f.wp + g.pl),
                    cols,
                );
            }
        }
    }
}

/// Sample `n`, output channels `8·tile ..`: the positions in passes of up to [`PASS`].
#[target_feature(enable = "avx512f")]
unsafe fn unit(a: &ConvArgs, f: Flat, lanes: &Lanes, n: usize, tile: usize, buf: *const f32) {
    let mut q0 = 0;
    while q0 < f.npos {
        let rem = f.npos - q0;
        // Three vectors a pass, but two and two for 64 positions (7×7 with a 3×3 filter):
        // a lone vector's pass loads nine values per eight multiply-adds.
        let v = if rem >= PASS && rem != 64 {
            3
        } else if rem >= 32 {
            2
        } else {
            1
        };
        // SAFETY: forwarded; positions q0 .. q0 + 16v are inside `npos`.
        unsafe {
            crate::gemm::by_act!(a.geo.act, A => match v {
                3 => pass::<3, A>(a, f, &lanes[q0 / 16..], n, tile, buf, q0),
                2 => pass::<2, A>(a, f, &lanes[q0 / 16..], n, tile, buf, q0),
                _ => pass::<1, A>(a, f, &lanes[q0 / 16..], n, tile, buf, q0),
            })
        }
        q0 += 16 * v;
    }
}

/// Positions `q0 .. q0 + 16V` of 8 output channels: sums in registers over every input
/// channel and tap, then the epilogue with the activation `ACT`.
#[inline]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn pass<const V: usize, const ACT: u32>(
    a: &ConvArgs,
    f: Flat,
    lanes: &[(u16, isize)],
    n: usize,
    tile: usize,
    buf: *const f32,
    q0: usize,
) {
    let g = &a.geo;
    let (kh, kw) = (g.kh, g.kw);
    let taps = kh * kw;
    let mut acc = [[_mm512_setzero_ps(); V]; CONV_CO_TILE];
    // SAFETY (whole body): reads inside `buf`'s `cin` planes (`ps` covers the last
    // position's last tap) and the tile's packed filter (`pack_conv_filter`).
    unsafe {
        let filter = g
            .filter
            .wrapping_offset(n as isize * a.filter_sn)
            .add(tile * a.cin * taps * CONV_CO_TILE);
        for c in 0..a.cin {
            let xc = buf.add(c * f.ps + q0);
            let wc = filter.add(c * taps * CONV_CO_TILE);
            for ky in 0..kh {
                for kx in 0..kw {
                    let xp = xc.add(ky * f.wp + kx);
                    let mut xs = [_mm512_setzero_ps(); V];
                    for (i, x) in xs.iter_mut().enumerate() {
                        *x = _mm512_loadu_ps(xp.add(16 * i));
                    }
                    let wt = wc.add((ky * kw + kx) * CONV_CO_TILE);
                    for (o, acc_o) in acc.iter_mut().enumerate() {
                        let w = _mm512_set1_ps(*wt.add(o));
                        for (s, x) in acc_o.iter_mut().zip(&xs) {
                            *s = _mm512_fmadd_ps(w, *x, *s);
                        }
                    }
                }
            }
        }
    }
    let o0 = tile * CONV_CO_TILE;
    for (o, acc_o) in acc.iter().enumerate() {
        if o0 + o >= g.c {
            break;
        }
        let plane = n as isize * g.y_sn + (o0 + o) as isize * g.y_sc;
        // SAFETY: channel `o0 + o` of sample `n`'s bias.
        let bias = (!g.bias.is_null()).then(|| unsafe {
            *g.bias
                .offset(n as isize * a.bias_sn + (o0 + o) as isize * g.bias_sc)
        });
        for (s, &(keep, at)) in acc_o.iter().zip(lanes) {
            if keep == 0 {
                continue;
            }
            let mut v = *s;
            if let Some(b) = bias {
                v = _mm512_add_ps(v, _mm512_set1_ps(b));
            }
            let v = _mm512_maskz_compress_ps(keep, v);
            let live = crate::gemm::first_lanes(keep.count_ones() as usize);
            // SAFETY: `live` consecutive outputs (and residuals) from `at`, inside the
            // channel's plane.
            unsafe { crate::dwconv::avx512::finish_act(v, g, ACT, g.y, g.res, plane + at, live) };
        }
    }
}
