//! Depthwise convolution with 16 planes in the lanes of a vector, for the geometries where
//! a plane's own rows fill vectors badly: small maps (a 7-wide output row leaves 9 of 16
//! lanes idle) and strides of 2 (every input row costs two loads and a permute per tap
//! column). A block of up to 16 planes is transposed into a stack copy of the padded
//! input, one vector per pixel holding that pixel of each plane; every output pixel is
//! then one multiply-add per tap with the tap's weights of the 16 planes, whatever the
//! stride or dilation; 16 output pixels are transposed back and stored as one vector per
//! plane, through the depthwise kernel's epilogue (residual, activation).
//!
//! Each lane's arithmetic depends only on its plane (bias, then the taps in row-major
//! order, each a fused multiply-add), so a plane's outputs do not depend on which block
//! or which thread's range holds it: bit-identical whatever the thread count. They are not
//! the bits of the row kernels in `dwconv.rs`, which sum in another order; [`takes`]
//! depends only on the geometry, so one layer always takes one of them.
//!
//! Not here: planes that are not contiguous rows (`x_sh != w`), maps whose padded input
//! exceeds [`MAX_PIXELS`], filters of more than 7×7 (all left to `dwconv.rs`).

use crate::dwconv::DwArgs;
use core::arch::x86_64::*;

/// Planes per block: the lanes of a vector.
const L: usize = 16;
/// Pixels of the padded input a block holds (24×24; 36 KB of stack, and as much again for
/// the outputs' sums at stride 1, `rows_sums`).
pub(crate) const MAX_PIXELS: usize = 576;
/// Taps of the largest filter.
const MAX_TAPS: usize = 49;
/// Taps of the smallest filter taken: with 3×3 filters the transposes cost as much as the
/// multiply-adds, and the row kernels were twice as fast (960 channels on 7×7, 0.026
/// against 0.041–0.047 ms; 576 channels at stride 2 from 14×14, 0.017 against 0.039).
const MIN_TAPS: usize = 20;

/// The padded input's extents `(rows, columns)`: the input at offset `(pt, pl)`, and
/// every tap of every output inside.
fn padded(a: &DwArgs) -> (usize, usize) {
    let reach = |o: usize, s: usize, k: usize, d: usize| (o - 1) * s + (k - 1) * d + 1;
    (
        (a.pt + a.h).max(reach(a.oh, a.sh, a.kh, a.dh)),
        (a.pl + a.w).max(reach(a.ow, a.sw, a.kw, a.dw)),
    )
}

/// Whether `nnefc_dwconv` computes these arguments here (on AVX-512 CPUs): contiguous
/// planes, a filter of [`MIN_TAPS`] to 7×7 taps, a padded input of at most [`MAX_PIXELS`], and a
/// geometry the row kernels handle worse: strides of 2, or output rows of at most 8
/// columns (measured in `benches/grouped_layers.py`'s layers; see the table in
/// ARCHITECTURE.md).
pub(crate) fn takes(a: &DwArgs) -> bool {
    if a.oh == 0 || a.ow == 0 || a.kh == 0 || a.kw == 0 || a.sh == 0 || a.sw == 0 {
        return false;
    }
    let (hp, wp) = padded(a);
    a.x_sh == a.w as isize
        && a.y_sh == a.ow as isize
        && a.kh * a.kw <= MAX_TAPS
        && hp.checked_mul(wp).is_some_and(|p| p <= MAX_PIXELS)
        && a.kh * a.kw >= MIN_TAPS
        && ((a.sh == 2 && a.sw == 2) || a.ow <= 8)
}

/// Planes `[lo, hi)`.
///
/// # Safety
/// As for `nnefc_dwconv`; the CPU has AVX-512F; [`takes`] holds.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn planes(a: &DwArgs, lo: usize, hi: usize) {
    let (hp, wp) = padded(a);
    // Zero once: every block writes the same interior pixels, so the border stays zero.
    // Only the hp·wp pixels used are zeroed (the whole array is a sixth of a 7×7 layer's
    // time).
    let mut buf = core::mem::MaybeUninit::<[__m512; MAX_PIXELS]>::uninit();
    let s = buf.as_mut_ptr().cast::<__m512>();
    for i in 0..hp * wp {
        // SAFETY: i < hp·wp ≤ MAX_PIXELS.
        unsafe { s.add(i).write(_mm512_setzero_ps()) };
    }
    // SAFETY: the first hp·wp pixels are initialized.
    let s = unsafe { core::slice::from_raw_parts_mut(s, hp * wp) };
    // Stride 1 with 5- or 7-wide filters: the blocks take every output's sum first, into
    // this buffer, row by row with each input row's pixels loaded once ([`rows_sums`]).
    // Here, once per call, as the padded copy: in `block` its frame cost stack probes on
    // every block.
    let mut sums_buf = core::mem::MaybeUninit::<[__m512; MAX_PIXELS]>::uninit();
    let by_rows =
        a.sh == 1 && a.sw == 1 && a.dh == 1 && a.dw == 1 && matches!(a.kw, 5 | 7) && a.ow <= 8;
    let done = by_rows.then(|| sums_buf.as_mut_ptr().cast::<__m512>());
    // Where each tap of the first output lies in the padded copy.
    let mut tap_at = [0usize; MAX_TAPS];
    for ky in 0..a.kh {
        for kx in 0..a.kw {
            tap_at[ky * a.kw + kx] = ky * a.dh * wp + kx * a.dw;
        }
    }
    let (mut n, mut c) = (lo / a.c, lo % a.c);
    let mut p0 = lo;
    while p0 < hi {
        let count = (hi - p0).min(L);
        // Lanes past `count` repeat the last plane (and are never stored).
        let mut ptrs = [(
            core::ptr::null(),
            core::ptr::null_mut(),
            core::ptr::null(),
            core::ptr::null(),
            0.0,
        ); L];
        for (l, pl) in ptrs.iter_mut().enumerate() {
            // SAFETY: plane (n, c) of the arguments.
            *pl = unsafe { crate::dwconv::plane_ptrs(a, n, c) };
            if l + 1 < count {
                c += 1;
                if c == a.c {
                    (n, c) = (n + 1, 0);
                }
            }
        }
        c += 1;
        if c == a.c {
            (n, c) = (n + 1, 0);
        }
        // SAFETY: forwarded; `s` holds hp·wp ≤ MAX_PIXELS pixels.
        unsafe { block(a, &ptrs, count, s, wp, &tap_at, done) };
        p0 += count;
    }
}

/// The pointers [`crate::dwconv::plane_ptrs`] gives for a plane: input, output, residual,
/// filter, bias.
type Plane = (*const f32, *mut f32, *const f32, *const f32, f32);

/// The planes of `ptrs` (`count ≤ 16` of them stored), the padded input in `s` (`wp`
/// columns), the taps' offsets in it `tap_at`; `done`, room for every output's sum when
/// they are taken by rows ([`rows_sums`]).
#[target_feature(enable = "avx512f")]
unsafe fn block(
    a: &DwArgs,
    ptrs: &[Plane; L],
    count: usize,
    s: &mut [__m512],
    wp: usize,
    tap_at: &[usize; MAX_TAPS],
    done: Option<*mut __m512>,
) {
    // The input, 16 pixels of the 16 planes at a time, transposed into pixel vectors
    // (the pixel's place in the padded copy followed along, not divided out).
    let pixels = a.h * a.w;
    let (mut y, mut x) = (0, 0);
    let mut i0 = 0;
    while i0 < pixels {
        let n = (pixels - i0).min(L);
        // (`gemm::first_lanes` computes the same mask; calling it in these three places
        // measured 1.5 % slower on 1152 channels 5×5 on 7×7, interleaved `nnefc bench`.)
        let m = if n == L { u16::MAX } else { (1u16 << n) - 1 };
        let mut v: [__m512; L] = core::array::from_fn(|l| {
            // SAFETY: pixels i0 .. i0 + n of plane l (contiguous rows).
            unsafe { _mm512_maskz_loadu_ps(m, ptrs[l].0.add(i0)) }
        });
        crate::gemm::lanes::avx512::transpose(&mut v);
        for &vj in v.iter().take(n) {
            s[(y + a.pt) * wp + x + a.pl] = vj;
            x += 1;
            if x == a.w {
                (y, x) = (y + 1, 0);
            }
        }
        i0 += n;
    }
    // The taps' weights, one lane per plane: 16 taps of each plane's filter at a time,
    // transposed.
    let taps = a.kh * a.kw;
    let mut wv = [_mm512_setzero_ps(); MAX_TAPS];
    let mut t0 = 0;
    while t0 < taps {
        let n = (taps - t0).min(L);
        let m = if n == L { u16::MAX } else { (1u16 << n) - 1 };
        let mut v: [__m512; L] = core::array::from_fn(|l| {
            // SAFETY: taps t0 .. t0 + n of plane l's filter.
            unsafe { _mm512_maskz_loadu_ps(m, ptrs[l].3.add(t0)) }
        });
        crate::gemm::lanes::avx512::transpose(&mut v);
        wv[t0..t0 + n].copy_from_slice(&v[..n]);
        t0 += n;
    }
    let bias = _mm512_setr_ps(
        ptrs[0].4, ptrs[1].4, ptrs[2].4, ptrs[3].4, ptrs[4].4, ptrs[5].4, ptrs[6].4, ptrs[7].4,
        ptrs[8].4, ptrs[9].4, ptrs[10].4, ptrs[11].4, ptrs[12].4, ptrs[13].4, ptrs[14].4,
        ptrs[15].4,
    );
    let (lo_v, hi_v) = (_mm512_set1_ps(a.lo), _mm512_set1_ps(a.hi));
    let act = a.act as u32;
    let outs = a.oh * a.ow;
    if let Some(done) = done {
        let sp = s.as_ptr();
        // SAFETY: every tap of every output lies in the padded input; `done` has room
        // for the oh·ow ≤ MAX_PIXELS outputs (the padded input holds at least as many
        // pixels).
        unsafe {
            macro_rules! by_width {
                ($kw:literal) => {
                    match a.ow {
                        1 => rows_sums::<1, $kw>(a, sp, wp, &wv, bias, done),
                        2 => rows_sums::<2, $kw>(a, sp, wp, &wv, bias, done),
                        3 => rows_sums::<3, $kw>(a, sp, wp, &wv, bias, done),
                        4 => rows_sums::<4, $kw>(a, sp, wp, &wv, bias, done),
                        5 => rows_sums::<5, $kw>(a, sp, wp, &wv, bias, done),
                        6 => rows_sums::<6, $kw>(a, sp, wp, &wv, bias, done),
                        7 => rows_sums::<7, $kw>(a, sp, wp, &wv, bias, done),
                        _ => rows_sums::<8, $kw>(a, sp, wp, &wv, bias, done),
                    }
                };
            }
            if a.kw == 5 {
                by_width!(5)
            } else {
                by_width!(7)
            }
        }
    }
    // The output, 16 pixels at a time: one accumulator per pixel, then transposed.
    let (mut oy, mut ox) = (0, 0);
    let mut o0 = 0;
    while o0 < outs {
        let n = (outs - o0).min(L);
        // Where each output's taps start in the padded copy (past the last output: the
        // last one again).
        let mut base = [0usize; L];
        for (j, b) in base.iter_mut().enumerate() {
            *b = oy * a.sh * wp + ox * a.sw;
            if j + 1 < n {
                ox += 1;
                if ox == a.ow {
                    (oy, ox) = (oy + 1, 0);
                }
            }
        }
        ox += 1;
        if ox == a.ow {
            (oy, ox) = (oy + 1, 0);
        }
        // A short last group keeps only as many sums as it has outputs (7×7 maps end
        // on one: 16 would make a quarter of the multiply-adds idle).
        let (sp, tw) = (s.as_ptr(), &wv[..taps]);
        // SAFETY: every tap of every output lies in the padded input (`padded`).
        let mut acc = unsafe {
            match n {
                _ if let Some(done) = done => core::array::from_fn(|j| {
                    if j < n {
                        *done.add(o0 + j)
                    } else {
                        _mm512_setzero_ps()
                    }
                }),
                9.. => sums::<16>(sp, tw, tap_at, &base, bias),
                5..=8 => sums::<8>(sp, tw, tap_at, &base, bias),
                3..=4 => sums::<4>(sp, tw, tap_at, &base, bias),
                2 => sums::<2>(sp, tw, tap_at, &base, bias),
                _ => sums::<1>(sp, tw, tap_at, &base, bias),
            }
        };
        crate::gemm::lanes::avx512::transpose(&mut acc);
        let m = if n == L { u16::MAX } else { (1u16 << n) - 1 };
        for (l, &v) in acc.iter().enumerate().take(count) {
            let (_, y, res, _, _) = ptrs[l];
            // SAFETY: outputs o0 .. o0 + n of plane l (contiguous rows), its residual
            // alike.
            unsafe {
                crate::dwconv::avx512::finish_with(v, act, lo_v, hi_v, y, res, o0 as isize, m)
            };
        }
        o0 += n;
    }
}

/// Every output's sum at stride 1 for a filter `KW` wide (5 or 7) on output rows `OW`
/// wide, into `done` (output `(oy, ox)` at `oy·OW + ox`): two output rows at a time (one
/// for 7-wide filters, whose sums and row would not fit the registers), each input row's
/// `OW + KW − 1` pixels loaded once and multiplied into every output of the pair whose
/// window holds the row. Each sum is the bias, then its taps in row-major order, one fused
/// multiply-add each: per lane the sequence of operations [`sums`] performs, with a load
/// per input pixel and row instead of one per multiply-add (and none of `sums`' offset
/// table). Zen 4, 1152 channels 5×5 on 7×7 (`nnefc bench --profile`, two interleaved
/// runs): in MnasNet-1.0 0.079–0.101 → 0.071–0.076 ms, in EfficientNet-B0 (with swish)
/// 0.089–0.092 → 0.077–0.084; alone (`benches/grouped_layers.py`'s `depthwise5_s1_7`,
/// `nnefc bench`) 0.071 → 0.061–0.067. The rest of the kernel's time is its transposes,
/// which a channel-blocked layout would not need.
///
/// # Safety
/// The CPU has AVX-512F; `a.ow == OW`, `a.kw == KW`, strides and dilations 1; `s` is
/// the padded input (`wp` columns) holding every tap of every output; `done` has room for
/// `a.oh·OW` vectors.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn rows_sums<const OW: usize, const KW: usize>(
    a: &DwArgs,
    s: *const __m512,
    wp: usize,
    wv: &[__m512; MAX_TAPS],
    bias: __m512,
    done: *mut __m512,
) {
    const { assert!(OW + KW - 1 <= 14) };
    let pair = if KW == 7 { 1 } else { 2 };
    let mut oy0 = 0;
    while oy0 < a.oh {
        let rows = pair.min(a.oh - oy0);
        let mut acc = [[bias; OW]; 2];
        for i in 0..rows - 1 + a.kh {
            // SAFETY: padded row oy0 + i, pixels 0..OW + KW − 1 (the caller's contract).
            let row: [__m512; 14] = core::array::from_fn(|q| {
                if q < OW + KW - 1 {
                    unsafe { *s.add((oy0 + i) * wp + q) }
                } else {
                    _mm512_setzero_ps()
                }
            });
            for (r, acc_r) in acc.iter_mut().enumerate().take(pair) {
                if r >= rows || i < r || i - r >= a.kh {
                    continue;
                }
                let ky = i - r;
                for kx in 0..KW {
                    let w = wv[ky * KW + kx];
                    for ox in 0..OW {
                        acc_r[ox] = _mm512_fmadd_ps(w, row[ox + kx], acc_r[ox]);
                    }
                }
            }
        }
        for (r, acc_r) in acc.iter().enumerate().take(rows) {
            for (ox, &v) in acc_r.iter().enumerate() {
                // SAFETY: output (oy0 + r, ox) < oh·OW.
                unsafe { done.add((oy0 + r) * OW + ox).write(v) };
            }
        }
        oy0 += rows;
    }
}

/// The sums of the first `N` outputs whose taps start at `base` in the padded copy `s`:
/// the bias, then a multiply-add per tap (weights `wv`, offsets `tap_at`), in tap order;
/// the other vectors zero.
///
/// # Safety
/// The CPU has AVX-512F; every `base[j] + tap_at[t]` (`j < N`, `t < wv.len()`) is a pixel
/// of `s`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn sums<const N: usize>(
    s: *const __m512,
    wv: &[__m512],
    tap_at: &[usize; MAX_TAPS],
    base: &[usize; L],
    bias: __m512,
) -> [__m512; L] {
    let mut acc = [bias; N];
    for (t, &w) in wv.iter().enumerate() {
        // SAFETY: the caller's contract.
        let at = unsafe { s.add(tap_at[t]) };
        for j in 0..N {
            acc[j] = _mm512_fmadd_ps(w, unsafe { *at.add(base[j]) }, acc[j]);
        }
    }
    let mut out = [_mm512_setzero_ps(); L];
    out[..N].copy_from_slice(&acc);
    out
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::dwconv::tests::{Layer, Lcg, serial_and_pooled};

    /// Random layers this kernel takes (strides 2, or outputs of at most 8 columns;
    /// filters up to 7×7, dilations, paddings; 1–40 channels, so full and partial blocks
    /// and blocks across samples; residuals; every activation): the definition within
    /// rounding, and the same bits serially and on a 3-worker pool (whose ranges cut the
    /// planes into other blocks).
    #[test]
    fn lanes_match_the_definition() {
        if !crate::gemm::avx512_selected() {
            return;
        }
        let mut r = Lcg(17);
        let pool = crate::ThreadPool::new(3).expect("pool");
        let mut cases = 0;
        while cases < 80 {
            let (kh, kw) = (1 + r.below(7), 1 + r.below(7));
            let s = if r.below(2) == 0 { 2 } else { 1 + r.below(3) };
            let (sh, sw) = if s == 2 { (2, 2) } else { (s, 1 + r.below(3)) };
            let (dh, dw) = (1 + r.below(2), 1 + r.below(2));
            let (h, w) = (1 + r.below(20), 1 + r.below(20));
            let (pt, pl, pb, pr) = (r.below(kh), r.below(kw), r.below(kh), r.below(kw));
            let (eh, ew) = (
                (h + pt + pb) as isize - ((kh - 1) * dh + 1) as isize,
                (w + pl + pr) as isize - ((kw - 1) * dw + 1) as isize,
            );
            if eh < 0 || ew < 0 {
                continue;
            }
            let (oh, ow) = (eh as usize / sh + 1, ew as usize / sw + 1);
            let (n, c) = (1 + r.below(2), 1 + r.below(40));
            let with_res = r.below(2) == 1;
            let layer = Layer::random(cases as u64 + 500, [n, c, h, w, oh, ow], [kh, kw], with_res);
            let a = layer.args([kh, kw, sh, sw, dh, dw, pt, pl], r.below(6));
            if !takes(&a) {
                continue;
            }
            let want = layer.want(&a);
            serial_and_pooled(&a, &want, &pool, cases);
            cases += 1;
        }
    }

    /// Each output is the bias, then its taps in row-major order, one fused multiply-add
    /// each (taps in the padding multiply zero), then the residual and the activation:
    /// bit for bit, against that sequence in scalar `mul_add`s, on random layers of both
    /// sum forms (stride 1 with 5- and 7-wide filters, `rows_sums`; stride 2, `sums`).
    #[test]
    fn lanes_sum_taps_in_row_major_order() {
        if !crate::gemm::avx512_selected() {
            return;
        }
        let mut r = Lcg(23);
        let (mut rows_cases, mut cases) = (0, 0);
        while cases < 120 {
            let s = if cases % 3 == 2 { 2 } else { 1 };
            let kw = if r.below(2) == 0 { 5 } else { 7 };
            let kh = 3 + r.below(5);
            let (h, w) = (1 + r.below(14), 1 + r.below(12));
            let (pt, pl, pb, pr) = (r.below(kh), r.below(kw), r.below(kh), r.below(kw));
            let (ph, pw) = (h + pt + pb, w + pl + pr);
            if ph < kh || pw < kw {
                continue;
            }
            let (oh, ow) = ((ph - kh) / s + 1, (pw - kw) / s + 1);
            let (n, c) = (1 + r.below(2), 1 + r.below(40));
            let mut g = Lcg(cases as u64 + 900);
            let mut take = |len: usize| -> Vec<f32> { (0..len).map(|_| g.next()).collect() };
            let (x, f, bias) = (take(n * c * h * w), take(c * kh * kw), take(c));
            let res = take(n * c * oh * ow);
            let with_res = r.below(2) == 1;
            let a = crate::dwconv::tests::dense(
                [n, c, h, w, oh, ow],
                [kh, kw, s, s, 1, 1, pt, pl],
                &x,
                f.as_ptr(),
                bias.as_ptr(),
                with_res.then_some(&res[..]),
                r.below(3),
            );
            if !takes(&a) {
                continue;
            }
            let mut y = vec![f32::NAN; n * c * oh * ow];
            let args = DwArgs {
                y: y.as_mut_ptr(),
                ..a
            };
            // SAFETY: AVX-512F (selected); `takes` holds; buffers of the described extents.
            unsafe { planes(&args, 0, n * c) };
            for (o, &got) in y.iter().enumerate() {
                let (ox, oy, plane) = (o % ow, o / ow % oh, o / (ow * oh));
                let mut v = bias[plane % c];
                for ky in 0..kh {
                    for kx in 0..kw {
                        let (iy, ix) = (
                            (oy * s + ky) as isize - pt as isize,
                            (ox * s + kx) as isize - pl as isize,
                        );
                        let xv = if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                            0.0
                        } else {
                            x[(plane * h + iy as usize) * w + ix as usize]
                        };
                        v = f[((plane % c) * kh + ky) * kw + kx].mul_add(xv, v);
                    }
                }
                if with_res {
                    v += res[o];
                }
                let want = crate::gemm::activate(v, a.act as u32, a.lo, a.hi);
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "case {cases}, output {o}: {a:?}"
                );
            }
            rows_cases += usize::from(s == 1);
            cases += 1;
        }
        assert!(rows_cases > 60, "only {rows_cases} stride-1 layers");
    }
}
