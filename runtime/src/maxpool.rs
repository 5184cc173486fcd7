//! Window maximum (NNEF `max_pool` with the `ignore` border) over planes of an NCHW
//! tensor: compiled models call [`nnefc_maxpool`] for 3×3 pools with strides of 1 or 2,
//! the ones CNNs use after their first layers. It takes the depthwise convolution's
//! argument struct ([`DwArgs`], filter and bias unused) and its split of planes over
//! threads.
//!
//! # Semantics
//! For every plane and output, `y = act(max over the window's taps inside the input
//! (+ res))`, where the maximum is IEEE 754-2019 `maximum`: NaN if any tap is NaN, +0
//! above −0. Taps outside the input are skipped; a window with none inside gives −∞.
//! The result does not depend on the CPU or the number of threads (a maximum is exact).
//!
//! # The AVX-512 kernel
//! The 3×3 maximum is separable: per group of up to four 16-column strips of a plane it
//! walks down the output rows. At stride 1 it keeps, in registers, the row-wise maxima of
//! the two input rows the next output row shares with this one, so each input row is
//! loaded and reduced once per strip. At stride 2 it takes the column maxima first: the
//! group's input columns reduced down the window's three rows (the last row's loads kept
//! for the next output row), then each strip's even columns, odd columns and even
//! columns from the next, so the horizontal step runs once per output row. Either way
//! each input row is read whole, row after row, and at stride 2 a range of planes of one
//! group each (maps up to 129 columns) is one call. The maxima are `vrangeps`
//! (AVX-512DQ), which orders +0 above −0 but drops NaN; the loads are summed as they go
//! (a NaN, or +∞ meeting −∞, makes the sum NaN), and an output row whose sum is NaN is
//! computed again, output by output, before it is stored.
//!
//! Not here: windows other than 3×3 or with dilation, unequal strides, strides above 2
//! (a portable per-output loop, which the compiler does not call: it keeps loop nests
//! for those), and borders other than `ignore`.

use crate::DwArgs;
use crate::dwconv::{plane_ptrs, run};
use crate::gemm::{activate, maximum};
use crate::parallel::Parallel;

/// The window maximum `args` describes, in parallel over planes when `par` offers several
/// workers (see the module doc for the semantics). `filter` and `bias` are not read (they
/// may be null).
///
/// # Safety
/// `args` points to a valid [`DwArgs`] whose pointers and strides address buffers of the
/// described extents; `y` does not overlap `x` (`res` may equal `y`); `par` is null or a
/// valid [`Parallel`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nnefc_maxpool(args: *const DwArgs, par: *const Parallel) {
    // SAFETY: the caller's contract.
    unsafe { run(args, par, planes) }
}

/// Planes `[lo, hi)` with the widest code the CPU supports.
unsafe fn planes(a: &DwArgs, lo: usize, hi: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512::takes(a) && has_avx512dq() && crate::gemm::avx512_selected() {
            // SAFETY: the CPU has AVX-512F (that is what selected the kernel) and DQ.
            return unsafe { avx512::planes(a, lo, hi) };
        }
    }
    // SAFETY: the caller's contract.
    unsafe { portable(a, lo, hi) }
}

/// AVX-512DQ (`vrangeps`, the maximum with +0 above −0), which every AVX-512 CPU since
/// Skylake-SP has.
#[cfg(target_arch = "x86_64")]
pub(crate) fn has_avx512dq() -> bool {
    #[cfg(feature = "std")]
    {
        std::is_x86_feature_detected!("avx512dq")
    }
    #[cfg(not(feature = "std"))]
    {
        cfg!(target_feature = "avx512dq")
    }
}

/// The portable window maximum: every output its own loop over the taps.
unsafe fn portable(a: &DwArgs, lo: usize, hi: usize) {
    for p in lo..hi {
        // SAFETY: plane `p` of the caller's buffers.
        let (x, y, res, _, _) = unsafe { plane_ptrs(a, p / a.c, p % a.c) };
        for oy in 0..a.oh {
            for ox in 0..a.ow {
                // SAFETY: an output of this plane.
                unsafe { output(a, x, y, res, oy, ox) };
            }
        }
    }
}

/// Output `(oy, ox)` of one plane (`x`, `y`, `res` its pointers): the maximum of the taps
/// inside the input, NaN if any is NaN, then the epilogue.
///
/// # Safety
/// The pointers address the plane's buffers as `a` describes; `(oy, ox)` is an output.
#[inline(always)]
unsafe fn output(a: &DwArgs, x: *const f32, y: *mut f32, res: *const f32, oy: usize, ox: usize) {
    let mut m = f32::NEG_INFINITY;
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
            // SAFETY: an input element of this plane.
            let v = unsafe { *x.offset(iy * a.x_sh + ix) };
            m = maximum(m, v);
        }
    }
    let at = oy as isize * a.y_sh + ox as isize;
    let mut v = m;
    if !res.is_null() {
        // SAFETY: the residual element of this output.
        v += unsafe { *res.offset(at) };
    }
    let v = activate(v, a.act as u32, a.lo, a.hi);
    // SAFETY: this output.
    unsafe { *y.offset(at) = v };
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{DwArgs, output};
    use crate::dwconv::avx512::finish_with;
    use crate::dwconv::{lanes, plane_ptrs, prefetch_row};
    use core::arch::x86_64::*;

    /// 3×3 windows with equal strides of 1 or 2 and no dilation.
    pub(super) fn takes(a: &DwArgs) -> bool {
        a.kh == 3 && a.kw == 3 && a.dh == 1 && a.dw == 1 && a.sh == a.sw && matches!(a.sh, 1 | 2)
    }

    /// Range select 01: the maximum, its sign from the comparison (+0 above −0).
    #[inline(always)]
    fn max(p: __m512, q: __m512) -> __m512 {
        // SAFETY: only called from functions compiled for AVX-512DQ.
        unsafe { _mm512_range_ps::<0b0101>(p, q) }
    }

    /// One strip of 16 output columns at stride 1: its first column, live lanes, the
    /// first input column its windows read, and which of the (up to 18) input elements
    /// from there are taps inside the row, as the masks of two 16-wide loads.
    struct Strip {
        ox0: usize,
        live: u16,
        ix0: isize,
        m: [u16; 2],
    }

    impl Strip {
        fn new(a: &DwArgs, ox0: usize) -> Strip {
            let cnt = (a.ow - ox0).min(16) as isize;
            let ix0 = ox0 as isize - a.pl as isize;
            // The windows read elements 0..cnt + 2 from ix0.
            let lo = (-ix0).max(0);
            let hi = (a.w as isize - ix0).min(cnt + 2);
            Strip {
                ox0,
                live: lanes(0, cnt),
                ix0,
                m: [lanes(lo, hi), lanes(lo - 16, hi - 16)],
            }
        }
    }

    /// Strips walked down a plane together: the group's input rows are then read one
    /// after the other, whole (up to 4·16 + 2 columns at stride 1, 4·32 + 1 at stride
    /// 2), which the hardware prefetchers
    /// follow, instead of 33 columns a row stride apart per strip, which they do not, and
    /// which reads planes larger than L1 again from L2 for every strip. Pools alone (Zen 5,
    /// `nnefc bench`, ms, strip by strip → grouped): 64 planes of 111×111 0.085 → 0.077,
    /// 128 of 55×55 0.039 → 0.036, 64 of 112×112 (padded) 0.088 → 0.080.
    const GROUP: usize = 4;

    /// Input planes smaller than this are not prefetched: the prefetches cost more than
    /// they save. Pools alone (as above): 256 planes of 27×27 0.019 → 0.0155 without, 128
    /// of 55×55 even, 64 of 111×111 0.079 → 0.076 with.
    const PREFETCH_MIN_PLANE_BYTES: usize = 16 * 1024;

    /// Rows `first..end` of the next plane (`pf`: its input pointer and the rows),
    /// prefetched into L2 spread evenly over a plane's output rows: `r` the next one,
    /// `due` what is owed in units of 1/oh row (no division per row).
    struct NextPlane {
        pf: Option<(*const f32, usize, usize)>,
        r: usize,
        due: usize,
    }

    impl NextPlane {
        fn new(pf: Option<(*const f32, usize, usize)>) -> NextPlane {
            NextPlane {
                pf,
                r: pf.map_or(0, |p| p.1),
                due: 0,
            }
        }

        /// One of `oh` output rows done: prefetch the rows owed by now (`x_sh` floats
        /// apart, `w` wide).
        #[inline(always)]
        fn row(&mut self, oh: usize, x_sh: isize, w: usize) {
            if let Some((nx, first, end)) = self.pf {
                self.due += end - first;
                while self.due >= oh {
                    prefetch_row::<_MM_HINT_T1>(nx.wrapping_offset(self.r as isize * x_sh), w);
                    self.r += 1;
                    self.due -= oh;
                }
            }
        }
    }

    /// Planes `[lo, hi)` of a pool [`takes`] accepts.
    ///
    /// # Safety
    /// As for `nnefc_maxpool`; the CPU has AVX-512F and DQ.
    #[target_feature(enable = "avx512f,avx512dq")]
    pub(super) unsafe fn planes(a: &DwArgs, lo: usize, hi: usize) {
        let strips = a.ow.div_ceil(16);
        let groups = strips.div_ceil(GROUP);
        let prefetch = a.h * a.w * 4 >= PREFETCH_MIN_PLANE_BYTES;
        if a.sw == 2 {
            // SAFETY: these planes of the caller's buffers.
            unsafe {
                if groups == 1 {
                    // One call for the range: its masks are worked out once.
                    return stride2(a, 0, strips, lo, hi, (0, 1), prefetch);
                }
                for p in lo..hi {
                    for gi in 0..groups {
                        let s0 = gi * GROUP;
                        let ns = (strips - s0).min(GROUP);
                        stride2(a, 16 * s0, ns, p, p + 1, (gi, groups), prefetch);
                    }
                }
            }
            return;
        }
        for p in lo..hi {
            // SAFETY: plane `p` of the caller's buffers.
            let (x, y, res, _, _) = unsafe { plane_ptrs(a, p / a.c, p % a.c) };
            // The next plane (the first of the next call's range, at the end of this one),
            // prefetched into L2 as this one is computed: the input (a first layer's
            // output) is usually in L3 or memory.
            let next = if prefetch && p + 1 < a.n * a.c {
                // SAFETY: plane p + 1 of the caller's buffers (its pointers only).
                Some(unsafe { plane_ptrs(a, (p + 1) / a.c, (p + 1) % a.c) }.0)
            } else {
                None
            };
            let mut s0 = 0;
            let mut gi = 0;
            while s0 < strips {
                let ns = (strips - s0).min(GROUP);
                // This group's share of the next plane's rows.
                let pf = next.map(|nx| (nx, gi * a.h / groups, (gi + 1) * a.h / groups));
                let ox0 = 16 * s0;
                // SAFETY: these strips of the plane.
                unsafe {
                    match ns {
                        1 => group::<1>(a, ox0, x, y, res, pf),
                        2 => group::<2>(a, ox0, x, y, res, pf),
                        3 => group::<3>(a, ox0, x, y, res, pf),
                        _ => group::<4>(a, ox0, x, y, res, pf),
                    }
                }
                s0 += ns;
                gi += 1;
            }
        }
    }

    /// [`group2`] for `ns` strips (1 to [`GROUP`]).
    ///
    /// # Safety
    /// As for [`group2`].
    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn stride2(
        a: &DwArgs,
        ox0: usize,
        ns: usize,
        lo: usize,
        hi: usize,
        group: (usize, usize),
        prefetch: bool,
    ) {
        // SAFETY: forwarded.
        unsafe {
            match ns {
                1 => group2::<1, 3>(a, ox0, lo, hi, group, prefetch),
                2 => group2::<2, 5>(a, ox0, lo, hi, group, prefetch),
                3 => group2::<3, 7>(a, ox0, lo, hi, group, prefetch),
                _ => group2::<4, 9>(a, ox0, lo, hi, group, prefetch),
            }
        }
    }

    /// Every output row of the `NS` strips from output column `ox0` of one plane (`x`,
    /// `y`, `res` its pointers), stride 1: output row `oy` of a strip is the maximum of
    /// the row-wise maxima of input rows `oy − pt + (0, 1, 2)`, the first two kept from
    /// the previous output row.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn group<const NS: usize>(
        a: &DwArgs,
        ox0: usize,
        x: *const f32,
        y: *mut f32,
        res: *const f32,
        pf: Option<(*const f32, usize, usize)>,
    ) {
        // What the loops read per row or per vector, copied out of `a` first: through the
        // reference the compiler reloaded it after every store to the output. Pools alone
        // (Zen 5, one thread, scratch benchmark of `nnefc_maxpool`, best of three), µs:
        // 128×55² 36.0 → 35.5, 256×27² 16.6 → 16.2, 64×111² 77.4 → 76.8.
        let (h, x_sh, y_sh, oh) = (a.h as isize, a.x_sh, a.y_sh, a.oh);
        let (act, lo, hi) = (a.act as u32, _mm512_set1_ps(a.lo), _mm512_set1_ps(a.hi));
        let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
        let strips: [Strip; NS] = core::array::from_fn(|i| Strip::new(a, ox0 + 16 * i));
        // The row-wise maxima of input row `iy` for strip `s`'s 16 outputs (−∞ for rows
        // outside the input, and in lanes whose taps are all outside), and the sum of its
        // loads: NaN in some lane if one of its taps is NaN (or, harmlessly, if +∞ meets
        // −∞). A sum is one vector instruction where a compare into a mask register and
        // the masks' OR cost more: squeezenet1_1's first pool alone (Zen 5, `nnefc bench
        // --profile`, with the division-free prefetch below) 0.091–0.092 → 0.083–0.087 ms.
        let row_max = |s: &Strip, iy: isize| -> (__m512, __m512) {
            if iy < 0 || iy >= h {
                return (ninf, ninf);
            }
            let src = x.wrapping_offset(iy * x_sh + s.ix0);
            // SAFETY: masked-off lanes are not read; the others are taps in this row.
            let (v0, v1) = unsafe {
                (
                    _mm512_mask_loadu_ps(ninf, s.m[0], src),
                    _mm512_mask_loadu_ps(ninf, s.m[1], src.wrapping_add(16)),
                )
            };
            let nan = _mm512_add_ps(v0, v1);
            let t1 = _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(
                _mm512_castps_si512(v1),
                _mm512_castps_si512(v0),
            ));
            let t2 = _mm512_castsi512_ps(_mm512_alignr_epi32::<2>(
                _mm512_castps_si512(v1),
                _mm512_castps_si512(v0),
            ));
            (max(max(v0, t1), t2), nan)
        };
        let iy0 = -(a.pt as isize);
        // The row-wise maxima of the two input rows the next output row shares.
        let mut h0 = [ninf; NS];
        let mut n0 = [ninf; NS];
        let mut h1 = [ninf; NS];
        let mut n1 = [ninf; NS];
        for i in 0..NS {
            (h0[i], n0[i]) = row_max(&strips[i], iy0);
            (h1[i], n1[i]) = row_max(&strips[i], iy0 + 1);
        }
        let mut next = NextPlane::new(pf);
        for oy in 0..oh {
            next.row(oh, x_sh, a.w);
            let iy = iy0 + oy as isize;
            let mut v = [ninf; NS];
            let mut nan = _mm512_setzero_ps();
            for i in 0..NS {
                let (h2, n2) = row_max(&strips[i], iy + 2);
                v[i] = max(max(h0[i], h1[i]), h2);
                nan = _mm512_add_ps(nan, _mm512_add_ps(_mm512_add_ps(n0[i], n1[i]), n2));
                (h0[i], n0[i], h1[i], n1[i]) = (h1[i], n1[i], h2, n2);
            }
            let at = oy as isize * y_sh;
            if _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(nan, nan) == 0 {
                for i in 0..NS {
                    let s = &strips[i];
                    // SAFETY: the live lanes of this output row of the strip.
                    unsafe { finish_with(v[i], act, lo, hi, y, res, at + s.ox0 as isize, s.live) };
                }
            } else {
                for s in &strips {
                    for ox in s.ox0..s.ox0 + s.live.count_ones() as usize {
                        // SAFETY: an output of this strip.
                        unsafe { output(a, x, y, res, oy, ox) };
                    }
                }
            }
        }
    }
    /// Every output row of the `NS` strips from output column `ox0` of one plane at
    /// stride 2, column maxima first: the `NV = 2·NS + 1` vectors of input columns the
    /// strips' windows start in (16 columns each from `2·ox0 − pl`, the last one for its
    /// first column only) are reduced down the window's three rows, the last row's loads
    /// kept for the next output row (its first), then each strip's 16 outputs are the
    /// maximum of its even columns, its odd ones and the even ones from the next (two
    /// permutes and a lane shift). Each input row is loaded once per group and the
    /// horizontal step runs once per output row, where reducing each row first (the
    /// stride-1 path) runs it for 1.5 rows per output row and loads each row's 33-column
    /// window per strip; and a range of planes of one group each is one call, its masks
    /// worked out once. Pools alone (Zen 5, one thread, scratch benchmark of
    /// `nnefc_maxpool`, best of seven, against reducing rows first, one call per
    /// plane), µs: 128×55² 36.2–37.0 → 31.5, 64×111² 76.2–76.7 → 65.8–66.4, 256×27² 16.4
    /// → 16.3–16.6; two threads, cores far apart (a cache line round trip of 0.5 µs), 128×55²
    /// 17.5–19.1 → 15.4–16.4, 256×27² 9.1–9.4 → 9.3–9.7. In squeezenet1_1 (`nnefc bench
    /// --profile`, per-layer minima of three interleaved runs) its 128×55² pool 0.0407 →
    /// 0.0366 ms on one thread, 0.0202 → 0.0177 on two.
    #[inline]
    #[target_feature(enable = "avx512f,avx512dq")]
    unsafe fn group2<const NS: usize, const NV: usize>(
        a: &DwArgs,
        ox0: usize,
        first: usize,
        end: usize,
        (gi, groups): (usize, usize),
        prefetch: bool,
    ) {
        let (h, x_sh, y_sh, oh) = (a.h as isize, a.x_sh, a.y_sh, a.oh);
        let (act, lo, hi) = (a.act as u32, _mm512_set1_ps(a.lo), _mm512_set1_ps(a.hi));
        let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
        // Vector j covers input columns c0 + 16·j .. + 16, masked to the row.
        let c0 = (2 * ox0) as isize - a.pl as isize;
        let masks: [u16; NV] = core::array::from_fn(|j| {
            lanes(-(c0 + 16 * j as isize), a.w as isize - c0 - 16 * j as isize)
        });
        let live: [u16; NS] =
            core::array::from_fn(|i| lanes(0, a.ow as isize - (ox0 + 16 * i) as isize));
        // Input row `iy`'s vectors (−∞ where masked and for rows outside the input) and the
        // sum of its loads: NaN in some lane if one of them is NaN (or, harmlessly, if +∞
        // meets −∞ or a sum overflows), as on the stride-1 path.
        let load = |x: *const f32, iy: isize| -> ([__m512; NV], __m512) {
            if iy < 0 || iy >= h {
                return ([ninf; NV], ninf);
            }
            let src = x.wrapping_offset(iy * x_sh + c0);
            // SAFETY: masked-off lanes are not read; the others are elements of this row.
            let v: [__m512; NV] = core::array::from_fn(|j| unsafe {
                _mm512_mask_loadu_ps(ninf, masks[j], src.wrapping_add(16 * j))
            });
            let mut nan = v[0];
            for vj in &v[1..] {
                nan = _mm512_add_ps(nan, *vj);
            }
            (v, nan)
        };
        let total = a.n * a.c;
        let (mut n, mut c) = (first / a.c, first % a.c);
        for p in first..end {
            // SAFETY: plane `p` of the caller's buffers.
            let (x, y, res, _, _) = unsafe { plane_ptrs(a, n, c) };
            (n, c) = if c + 1 == a.c { (n + 1, 0) } else { (n, c + 1) };
            // The next plane (the first of the next call's range, at the end of this one),
            // this group's share of its rows prefetched into L2 as this one is computed.
            let pf = (prefetch && p + 1 < total).then(|| {
                // SAFETY: plane p + 1 of the caller's buffers (its pointers only).
                let nx = unsafe { plane_ptrs(a, n, c) }.0;
                (nx, gi * a.h / groups, (gi + 1) * a.h / groups)
            });
            let iy0 = -(a.pt as isize);
            let (mut top, mut top_nan) = load(x, iy0);
            let mut next = NextPlane::new(pf);
            for oy in 0..oh {
                next.row(oh, x_sh, a.w);
                let iy = iy0 + 2 * oy as isize;
                let (mid, mid_nan) = load(x, iy + 1);
                let (bot, bot_nan) = load(x, iy + 2);
                let col: [__m512; NV] = core::array::from_fn(|j| max(top[j], max(mid[j], bot[j])));
                let nan = _mm512_add_ps(top_nan, _mm512_add_ps(mid_nan, bot_nan));
                (top, top_nan) = (bot, bot_nan);
                let at = oy as isize * y_sh;
                if _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(nan, nan) == 0 {
                    for i in 0..NS {
                        let e = _mm512_permutex2var_ps(col[2 * i], even, col[2 * i + 1]);
                        let o = _mm512_permutex2var_ps(col[2 * i], odd, col[2 * i + 1]);
                        // Even columns from the third: e's lanes 1.., then the next vector's
                        // first column.
                        let e2 = _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(
                            _mm512_castps_si512(col[2 * i + 2]),
                            _mm512_castps_si512(e),
                        ));
                        let v = max(max(e, o), e2);
                        // SAFETY: the live lanes of this output row of the strip.
                        unsafe {
                            finish_with(
                                v,
                                act,
                                lo,
                                hi,
                                y,
                                res,
                                at + (ox0 + 16 * i) as isize,
                                live[i],
                            )
                        };
                    }
                } else {
                    for (i, l) in live.iter().enumerate() {
                        let ox = ox0 + 16 * i;
                        for ox in ox..ox + l.count_ones() as usize {
                            // SAFETY: an output of this strip.
                            unsafe { output(a, x, y, res, oy, ox) };
                        }
                    }
                }
            }
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::dwconv::tests::{Lcg, dense};

    /// The window maximum by its definition (IEEE 754-2019 `maximum` over the taps inside
    /// the input).
    fn naive(a: &DwArgs, x: &[f32], res: Option<&[f32]>) -> Vec<f32> {
        let mut y = vec![0.0; a.n * a.c * a.oh * a.ow];
        for p in 0..a.n * a.c {
            for oy in 0..a.oh {
                for ox in 0..a.ow {
                    let mut m = f32::NEG_INFINITY;
                    for ky in 0..a.kh {
                        for kx in 0..a.kw {
                            let iy = (oy * a.sh + ky * a.dh) as isize - a.pt as isize;
                            let ix = (ox * a.sw + kx * a.dw) as isize - a.pl as isize;
                            if iy < 0 || ix < 0 || iy >= a.h as isize || ix >= a.w as isize {
                                continue;
                            }
                            let v = x[(p * a.h + iy as usize) * a.w + ix as usize];
                            m = if m.is_nan() || v.is_nan() {
                                f32::NAN
                            } else if m == v {
                                f32::from_bits(m.to_bits() & v.to_bits())
                            } else {
                                m.max(v)
                            };
                        }
                    }
                    let o = (p * a.oh + oy) * a.ow + ox;
                    if let Some(r) = res {
                        m += r[o];
                    }
                    y[o] = activate(m, a.act as u32, a.lo, a.hi);
                }
            }
        }
        y
    }

    /// `nnefc_maxpool` on random shapes (3×3 with strides 1 and 2, the vector path, and
    /// other windows, the portable one), inputs with NaNs, signed zeros and ±∞, residuals
    /// (also in place: `res == y`) and activations: bit for bit the definition, serial and
    /// pooled.
    #[test]
    fn maxpool_matches_the_definition() {
        let mut r = Lcg(5);
        let mut u = |m: usize| ((r.next() + 1.0) * 0.5 * m as f32) as usize % m;
        let pool = crate::ThreadPool::new(2).expect("pool");
        for case in 0..400 {
            let (k, s) = if case % 4 == 3 {
                (1 + u(4), 1 + u(3))
            } else {
                (3, 1 + u(2))
            };
            let h = 1 + u(if case % 7 == 0 { 40 } else { 16 });
            let w = 1 + u(if case % 5 == 0 { 300 } else { 70 });
            // Every window keeps a tap inside: padding below the window size.
            let (pt, pl, pb, pr) = (u(k), u(k), u(k), u(k));
            let eh = (h + pt + pb) as isize - k as isize;
            let ew = (w + pl + pr) as isize - k as isize;
            if eh < 0 || ew < 0 {
                continue;
            }
            let (oh, ow) = (eh as usize / s + 1, ew as usize / s + 1);
            let c = 1 + u(5);
            let mut g = Lcg(case as u64 + 9000);
            // Every other case has no NaN, so the vector path's results are stored
            // straight (with NaNs, rows holding one are recomputed output by output).
            let nans = case % 2 == 0;
            let x: Vec<f32> = (0..c * h * w)
                .map(|_| match u(40) {
                    0 if nans => f32::NAN,
                    1 => -0.0,
                    2 => 0.0,
                    3 => f32::NEG_INFINITY,
                    // +∞ beside the −∞ of masked lanes and padding sums to NaN: the row
                    // is recomputed exactly.
                    4 => f32::INFINITY,
                    _ => g.next(),
                })
                .collect();
            let res: Vec<f32> = (0..c * oh * ow).map(|_| g.next()).collect();
            let with_res = case % 3 == 0;
            let a = dense(
                [1, c, h, w, oh, ow],
                [k, k, s, s, 1, 1, pt, pl],
                &x,
                core::ptr::null(),
                core::ptr::null(),
                with_res.then_some(&res[..]),
                case % 3,
            );
            let want = naive(&a, &x, with_res.then_some(&res[..]));
            let same = |p: &[f32]| {
                p.iter()
                    .zip(&want)
                    .position(|(p, q)| p.to_bits() != q.to_bits() && !(p.is_nan() && q.is_nan()))
            };
            for par in [core::ptr::null(), &pool.parallel() as *const Parallel] {
                let mut y = vec![1.5f32; want.len()];
                let args = DwArgs {
                    y: y.as_mut_ptr(),
                    ..a
                };
                unsafe { nnefc_maxpool(&args, par) };
                if let Some(i) = same(&y) {
                    panic!("case {case}: {a:?}: element {i}: {} vs {}", y[i], want[i]);
                }
            }
            if with_res {
                // In place: the residual is the output buffer.
                let mut y = res.clone();
                let args = DwArgs {
                    y: y.as_mut_ptr(),
                    res: y.as_ptr(),
                    ..a
                };
                unsafe { nnefc_maxpool(&args, core::ptr::null()) };
                assert!(same(&y).is_none(), "case {case}: in place: {a:?}");
            }
            let mut y = vec![1.5f32; want.len()];
            let args = DwArgs {
                y: y.as_mut_ptr(),
                ..a
            };
            unsafe { portable(&args, 0, c) };
            assert!(same(&y).is_none(), "case {case}: portable path: {a:?}");
        }
    }
}
