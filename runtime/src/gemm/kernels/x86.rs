//! x86-64 kernels: AVX2+FMA (6×16 tile, 12 ymm accumulators) and AVX-512F (6×64, 6×32 and
//! 6×16 tiles, the last columns of two or four row panels at once), plus the GEMV bodies compiled
//! for each. All read the same packed-A format (6-row panels) as every other kernel. CPU
//! detection uses `std`'s cached cpuid when available, otherwise the compile-time target
//! features. It does not choose which tile computes which columns; the driver does.

#[cfg(target_arch = "x86")]
use core::arch::x86::*;
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

use super::logistic::{sigmoid_avx2, sigmoid_avx512, swish_avx2, swish_avx512};
use super::{
    ACT_HARDSWISH, ACT_SIGMOID, ACT_SWISH, EdgePairFn, EdgeQuadFn, Gemv, Kernel, KernelId, TileEpi,
};
use crate::gemm::MR;
use crate::gemm::gemv::finish;

/// Whether the CPU (with `std`) or the compile-time target (without) has AVX2 and FMA.
pub(crate) fn has_avx2_fma() -> bool {
    #[cfg(feature = "std")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(feature = "std"))]
    {
        cfg!(all(target_feature = "avx2", target_feature = "fma"))
    }
}

/// Whether the CPU (with `std`) or the compile-time target (without) has AVX-512F (and
/// AVX2 + FMA, which the AVX-512 kernel's GEMV routines use).
pub(crate) fn has_avx512f() -> bool {
    #[cfg(feature = "std")]
    {
        std::is_x86_feature_detected!("avx512f") && has_avx2_fma()
    }
    #[cfg(not(feature = "std"))]
    {
        cfg!(target_feature = "avx512f") && has_avx2_fma()
    }
}

/// How many B rows ahead the tile loops prefetch.
const PF_ROWS: isize = 8;

pub(crate) static AVX2: Kernel = Kernel {
    id: KernelId::Avx2,
    nr: 16,
    tile: tile_avx2,
    edges: &[],
    edge_pair: None,
    edge_quad: None,
    gemv_axpy: axpy_avx2,
    gemv_dot: dot_avx2,
    gemv_panel: panel_avx2,
};

pub(crate) static AVX512W: Kernel = Kernel {
    id: KernelId::Avx512Wide,
    nr: 64,
    tile: tile_avx512w,
    edges: &[(32, tile_avx512), (16, tile_avx512_16)],
    edge_pair: EDGE_PAIR,
    edge_quad: EDGE_QUAD,
    gemv_axpy: axpy_avx2,
    gemv_dot: dot_avx2,
    gemv_panel: panel_avx2,
};

pub(crate) static AVX512: Kernel = Kernel {
    id: KernelId::Avx512,
    nr: 32,
    tile: tile_avx512,
    edges: &[(16, tile_avx512_16)],
    edge_pair: EDGE_PAIR,
    edge_quad: EDGE_QUAD,
    // GEMV is bound by memory bandwidth; the 256-bit routines are as fast and AVX-512
    // CPUs all have AVX2 + FMA (checked in `has_avx512f`).
    gemv_axpy: axpy_avx2,
    gemv_dot: dot_avx2,
    gemv_panel: panel_avx2,
};

/// 6×16 AVX2 tile.
///
/// # Safety
/// The CPU has AVX2 and FMA; `a` holds `kc·MR` floats, B rows `kk < kc` hold 16 floats at `b + kk·rsb`, C addresses a
/// 6×16 tile with row stride `rsc`, bias pointers (if non-null) address 6 / 16 floats.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2(
    kc: usize,
    a: *const f32,
    b: *const f32,
    rsb: isize,
    c: *mut f32,
    rsc: isize,
    epi: &TileEpi,
) {
    // SAFETY: every load/store below stays inside the panels, tile and bias described in
    // the contract; the target features are present.
    unsafe {
        // See the AVX-512 tile for why C and B are prefetched.
        for r in 0..MR {
            _mm_prefetch::<_MM_HINT_T0>(c.wrapping_offset(r as isize * rsc).cast());
        }
        let mut acc = [[_mm256_setzero_ps(); 2]; MR];
        let (mut ap, mut bp) = (a, b);
        for _ in 0..kc {
            _mm_prefetch::<_MM_HINT_T0>(bp.wrapping_offset(PF_ROWS * rsb).cast());
            let b0 = _mm256_loadu_ps(bp);
            let b1 = _mm256_loadu_ps(bp.add(8));
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let av = _mm256_broadcast_ss(&*ap.add(r));
                acc_r[0] = _mm256_fmadd_ps(av, b0, acc_r[0]);
                acc_r[1] = _mm256_fmadd_ps(av, b1, acc_r[1]);
            }
            ap = ap.add(MR);
            bp = bp.offset(rsb);
        }
        let zero = _mm256_setzero_ps();
        let (lo, hi) = (_mm256_set1_ps(epi.lo), _mm256_set1_ps(epi.hi));
        for (r, acc_r) in acc.iter().enumerate() {
            for (h, &s) in acc_r.iter().enumerate() {
                let cp = c.offset(r as isize * rsc).add(h * 8);
                let mut v = if epi.accumulate {
                    _mm256_add_ps(_mm256_loadu_ps(cp), s)
                } else {
                    s
                };
                if !epi.bias_row.is_null() {
                    v = _mm256_add_ps(v, _mm256_set1_ps(*epi.bias_row.add(r)));
                }
                if !epi.bias_col.is_null() {
                    v = _mm256_add_ps(v, _mm256_loadu_ps(epi.bias_col.add(h * 8)));
                }
                // NaN-propagating like the scalar `activate`. `maxps`/`minps` return their
                // second operand when either is NaN, so: ReLU = maxps(v, 0) (−0 gives +0)
                // with the unordered mask of v OR-ed in (all ones is a NaN); clamp =
                // maxps(minps(hi, v), lo) with the mask of (v, hi) OR-ed in (a NaN lo comes
                // through maxps). Two instructions more than without NaN handling.
                v = match epi.act {
                    1 => _mm256_or_ps(_mm256_max_ps(v, zero), _mm256_cmp_ps::<_CMP_UNORD_Q>(v, v)),
                    2 => clamp_avx2(v, lo, hi),
                    ACT_SIGMOID => sigmoid_avx2(v),
                    ACT_SWISH => swish_avx2(v),
                    ACT_HARDSWISH => {
                        let t = _mm256_add_ps(v, _mm256_set1_ps(3.0));
                        let c = clamp_avx2(t, zero, _mm256_set1_ps(6.0));
                        _mm256_mul_ps(_mm256_mul_ps(v, c), _mm256_set1_ps(super::SIXTH))
                    }
                    _ => v,
                };
                _mm256_storeu_ps(cp, v);
            }
        }
    }
}

/// The AVX2 tile's clamp of `v` to `[lo, hi]` (code 2, and inside hard swish), as
/// described there: `maxps(minps(hi, v), lo)` with the unordered mask of `(v, hi)` OR-ed in.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn clamp_avx2(v: __m256, lo: __m256, hi: __m256) -> __m256 {
    _mm256_or_ps(
        _mm256_max_ps(_mm256_min_ps(hi, v), lo),
        _mm256_cmp_ps::<_CMP_UNORD_Q>(v, hi),
    )
}

/// 6×32 AVX-512 tile.
///
/// # Safety
/// The CPU has AVX-512F; `a` holds `kc·MR` floats, B rows `kk < kc` hold 32 floats at `b + kk·rsb`, C addresses a 6×32
/// tile with row stride `rsc`, bias pointers (if non-null) address 6 / 32 floats.
unsafe fn tile_avx512(
    kc: usize,
    a: *const f32,
    b: *const f32,
    rsb: isize,
    c: *mut f32,
    rsc: isize,
    epi: &TileEpi,
) {
    // SAFETY: forwarded contract (32 columns: two vectors per row).
    unsafe { tile_avx512_body::<2, true>(kc, a, b, rsb, c, rsc, epi) }
}

/// 6×16 AVX-512 tile, for the last columns of a panel (the arithmetic of the wider
/// AVX-512 tiles, element for element).
///
/// # Safety
/// As for [`tile_avx512`], with 16 columns.
unsafe fn tile_avx512_16(
    kc: usize,
    a: *const f32,
    b: *const f32,
    rsb: isize,
    c: *mut f32,
    rsc: isize,
    epi: &TileEpi,
) {
    // SAFETY: forwarded contract (16 columns: one vector per row).
    unsafe { tile_avx512_body::<1, true>(kc, a, b, rsb, c, rsc, epi) }
}

/// 6×64 AVX-512 tile: 24 accumulators, so each k step issues 24 FMAs for 4 loads of B
/// and 6 broadcasts of A, enough to keep both FMA ports busy (the 6×32 tile's 12 FMAs per
/// 8 loads and 2 prefetches left them waiting on the load ports).
///
/// # Safety
/// The CPU has AVX-512F; `a` holds `kc·MR` floats, B rows `kk < kc` hold 64 floats at
/// `b + kk·rsb`, C addresses a 6×64 tile with row stride `rsc`, bias pointers (if
/// non-null) address 6 / 64 floats.
unsafe fn tile_avx512w(
    kc: usize,
    a: *const f32,
    b: *const f32,
    rsb: isize,
    c: *mut f32,
    rsc: isize,
    epi: &TileEpi,
) {
    // Packed B panels are contiguous (rsb == 64) and stream in without help; B read in
    // place (an im2col matrix, a weight matrix) jumps a row stride per k step.
    // SAFETY: forwarded contract (64 columns: four vectors per row).
    unsafe {
        if rsb == 64 {
            tile_avx512_body::<4, false>(kc, a, b, rsb, c, rsc, epi)
        } else {
            tile_avx512_body::<4, true>(kc, a, b, rsb, c, rsc, epi)
        }
    }
}

/// The AVX-512 tiles: `MR × 16·Q` outputs in `MR·Q` accumulators; `PREFETCH` fetches B
/// rows `PF_ROWS` ahead (B rows may still be in L3 or memory on the first A panel of a
/// block; the hint never faults, even past the end).
///
/// # Safety
/// The CPU has AVX-512F; `a` holds `kc·MR` floats, B rows `kk < kc` hold `16·Q` floats at
/// `b + kk·rsb`, C addresses an `MR × 16·Q` tile with row stride `rsc`, bias pointers (if
/// non-null) address `MR` / `16·Q` floats.
#[target_feature(enable = "avx512f")]
unsafe fn tile_avx512_body<const Q: usize, const PREFETCH: bool>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    rsb: isize,
    c: *mut f32,
    rsc: isize,
    epi: &TileEpi,
) {
    // SAFETY: every load/store below stays inside the panels, tile and bias described in
    // the contract; the target feature is present.
    unsafe {
        // The C tile is read (accumulate) or written only after the k loop: start
        // fetching its lines now so the epilogue does not wait for them.
        for r in 0..MR {
            let row = c.wrapping_offset(r as isize * rsc);
            for q in 0..Q {
                _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(16 * q).cast());
            }
        }
        let mut acc = [[_mm512_setzero_ps(); Q]; MR];
        let (mut ap, mut bp) = (a, b);
        for _ in 0..kc {
            if PREFETCH {
                let ahead = bp.wrapping_offset(PF_ROWS * rsb);
                for q in 0..Q {
                    _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(16 * q).cast());
                }
            }
            let bv: [__m512; Q] = core::array::from_fn(|q| _mm512_loadu_ps(bp.add(16 * q)));
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*ap.add(r));
                for q in 0..Q {
                    acc_r[q] = _mm512_fmadd_ps(av, bv[q], acc_r[q]);
                }
            }
            ap = ap.add(MR);
            bp = bp.offset(rsb);
        }
        // The epilogue's variant is picked once per tile, not per vector (a short k loop
        // makes the epilogue a fifth of the tile).
        let simple = !epi.accumulate && epi.bias_col.is_null() && !epi.bias_row.is_null();
        let mut code = gemm_act_code(epi.act, epi.lo, epi.hi);
        if simple {
            code = nonneg_code(code, epi.bias_row, MR);
        }
        match (simple, code) {
            (true, 0) => epilogue_row_bias::<Q, 0>(&acc, c, rsc, epi),
            (true, 1) => epilogue_row_bias::<Q, 1>(&acc, c, rsc, epi),
            (true, RELU_NZ) => epilogue_row_bias::<Q, RELU_NZ>(&acc, c, rsc, epi),
            (true, CLAMP_NONNEG) => epilogue_row_bias::<Q, CLAMP_NONNEG>(&acc, c, rsc, epi),
            (true, CLAMP_NONNEG_NZ) => epilogue_row_bias::<Q, CLAMP_NONNEG_NZ>(&acc, c, rsc, epi),
            (true, CLAMP_NEG) => epilogue_row_bias::<Q, CLAMP_NEG>(&acc, c, rsc, epi),
            (true, 2) => epilogue_row_bias_outlined::<Q, 2>(acc, c, rsc, epi),
            (true, ACT_SIGMOID) => epilogue_row_bias_outlined::<Q, ACT_SIGMOID>(acc, c, rsc, epi),
            (true, ACT_SWISH) => epilogue_row_bias_outlined::<Q, ACT_SWISH>(acc, c, rsc, epi),
            (true, ACT_HARDSWISH) => {
                epilogue_row_bias_outlined::<Q, ACT_HARDSWISH>(acc, c, rsc, epi)
            }
            // By value into a function of its own: indexing `acc` at run time here made
            // LLVM keep the accumulators in a stack array on every path, with a 1.5 KB
            // memset per tile and 24 spills after the k loop (see `epilogue_general`).
            _ => epilogue_general::<Q>(acc, c, rsc, epi, code),
        }
    }
}

/// [`epilogue_row_bias`] out of line, for the activations whose bodies LLVM would not
/// unroll inline (see [`epilogue_general`]).
///
/// # Safety
/// As for [`epilogue_row_bias`].
#[inline(never)]
#[target_feature(enable = "avx512f")]
unsafe fn epilogue_row_bias_outlined<const Q: usize, const ACT: u32>(
    acc: [[__m512; Q]; MR],
    c: *mut f32,
    rsc: isize,
    epi: &TileEpi,
) {
    // SAFETY: forwarded contract.
    unsafe { epilogue_row_bias::<Q, ACT>(&acc, c, rsc, epi) }
}

/// The general epilogue of [`tile_avx512_body`] (accumulating, column bias, activations
/// without a fast arm), one [`epilogue_vector`] per accumulator. Out of line and taking the
/// accumulators by value, so only this path stores them to memory: inlined, its run-time
/// indexing made LLVM keep them in a stack array on every path, zeroed by a 1.5 KB
/// `memset` call before the k loop and spilled after it, about 100 cycles of stores per
/// 6×64 tile, a fifth of the tile's time at k = 16 (Zen 4, `gemm_bench Avx512 custom 96
/// 64 16`: 77.6 GFLOP/s before).
///
/// # Safety
/// As for [`tile_avx512_body`].
#[inline(never)]
#[target_feature(enable = "avx512f")]
unsafe fn epilogue_general<const Q: usize>(
    acc: [[__m512; Q]; MR],
    c: *mut f32,
    rsc: isize,
    epi: &TileEpi,
    code: u32,
) {
    // SAFETY: the tile and bias vectors, by the caller's contract.
    unsafe {
        let (lo, hi) = (_mm512_set1_ps(epi.lo), _mm512_set1_ps(epi.hi));
        for (r, acc_r) in acc.iter().enumerate() {
            for (h, &s) in acc_r.iter().enumerate() {
                let bcol = if epi.bias_col.is_null() {
                    None
                } else {
                    Some(_mm512_loadu_ps(epi.bias_col.add(h * 16)))
                };
                let cp = c.offset(r as isize * rsc).add(h * 16);
                epilogue_vector(s, cp, u16::MAX, epi, r, bcol, code, lo, hi);
            }
        }
    }
}

/// One vector of the general epilogue of the 6-row tiles, in its order: the old C (when
/// `epi.accumulate`), row `r`'s bias, the column bias `bcol`, activation `code`, stored
/// at `cp`; C is read and written under `mask`. [`tile_avx512_body`] and
/// [`edge_pair_avx512`] both finish through it, so they apply the same operations.
///
/// # Safety
/// The CPU has AVX-512F; the `mask` lanes at `cp` are C's; `epi.bias_row`, if not null,
/// holds row `r`'s bias.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn epilogue_vector(
    s: __m512,
    cp: *mut f32,
    mask: u16,
    epi: &TileEpi,
    r: usize,
    bcol: Option<__m512>,
    code: u32,
    lo: __m512,
    hi: __m512,
) {
    // SAFETY: the caller's contract.
    unsafe {
        let mut v = if !epi.accumulate {
            s
        } else if mask == u16::MAX {
            _mm512_add_ps(_mm512_loadu_ps(cp), s)
        } else {
            _mm512_add_ps(_mm512_maskz_loadu_ps(mask, cp), s)
        };
        if !epi.bias_row.is_null() {
            v = _mm512_add_ps(v, _mm512_set1_ps(*epi.bias_row.add(r)));
        }
        if let Some(bc) = bcol {
            v = _mm512_add_ps(v, bc);
        }
        store16(cp, mask, gemm_activate(v, code, lo, hi));
    }
}

/// The last column vector of two consecutive full row panels, `cols ≤ 16` columns of a
/// packed B panel (rows `rsb` floats apart, zero past `cols`): 12 accumulators, so the
/// k loop keeps both FMA pipes busy where one panel's 16-column tile had 6 dependent
/// chains and waited on their latency, and the epilogue loads, adds and stores C under
/// the column mask instead of going through a zeroed stack tile. The arithmetic of
/// [`tile_avx512_body`] element for element (same k order, same epilogue operations), so
/// which path computes an element never changes its bits. Zen 5, one thread, a 96→576
/// 1×1 conv on 14×14 alone (`nnefc bench`): the 4 columns past 192 cost 0.012 ms of
/// 0.098 before.
///
/// # Safety
/// The CPU has AVX-512F; `a0` and `a1` hold `kc·MR` floats each; B rows `kk < kc` hold
/// 16 floats at `b + kk·rsb`; C addresses `2·MR` rows (stride `rsc`) of `cols ≤ 16`
/// columns; bias pointers (if non-null) address `2·MR` / `cols` floats.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
unsafe fn edge_pair_avx512(
    kc: usize,
    a0: *const f32,
    a1: *const f32,
    b: *const f32,
    rsb: isize,
    c: *mut f32,
    rsc: isize,
    cols: usize,
    epi: &TileEpi,
) {
    const ROWS: usize = 2 * MR;
    let mask = first_lanes(cols);
    // SAFETY: every access stays inside the panels, rows, columns and bias described in
    // the contract (C and the column bias under `mask`); the target feature is present.
    unsafe {
        for r in 0..ROWS {
            _mm_prefetch::<_MM_HINT_T0>(c.wrapping_offset(r as isize * rsc).cast());
        }
        let mut acc = [_mm512_setzero_ps(); ROWS];
        let (mut p0, mut p1, mut bp) = (a0, a1, b);
        for _ in 0..kc {
            let bv = _mm512_loadu_ps(bp);
            for (r, s) in acc.iter_mut().enumerate() {
                let a = if r < MR { p0.add(r) } else { p1.add(r - MR) };
                *s = _mm512_fmadd_ps(_mm512_set1_ps(*a), bv, *s);
            }
            p0 = p0.add(MR);
            p1 = p1.add(MR);
            bp = bp.offset(rsb);
        }
        // As in `tile_avx512_body`: the common epilogues unrolled on the registers, the
        // others out of line on a copy, so that the k loop's sums never live in memory.
        let simple = !epi.accumulate && epi.bias_col.is_null() && !epi.bias_row.is_null();
        let code = gemm_act_code(epi.act, epi.lo, epi.hi);
        match (simple, code) {
            (true, 0) => edge_pair_row_bias::<0>(&acc, c, rsc, mask, epi),
            (true, 1) => edge_pair_row_bias::<1>(&acc, c, rsc, mask, epi),
            (true, CLAMP_NONNEG) => edge_pair_row_bias::<CLAMP_NONNEG>(&acc, c, rsc, mask, epi),
            (true, CLAMP_NEG) => edge_pair_row_bias::<CLAMP_NEG>(&acc, c, rsc, mask, epi),
            _ => edge_pair_general(acc, c, rsc, mask, epi, code),
        }
    }
}

/// [`edge_pair_avx512`]'s epilogue for a row bias and activation `ACT` (no old C, no
/// column bias), unrolled: [`epilogue_vector`]'s operations for that case.
///
/// # Safety
/// As for [`edge_pair_avx512`]; `epi.bias_row` is not null.
#[inline(always)]
unsafe fn edge_pair_row_bias<const ACT: u32>(
    acc: &[__m512; 2 * MR],
    c: *mut f32,
    rsc: isize,
    mask: u16,
    epi: &TileEpi,
) {
    // SAFETY: the caller's contract.
    unsafe {
        let (lo, hi) = (_mm512_set1_ps(epi.lo), _mm512_set1_ps(epi.hi));
        for (r, &s) in acc.iter().enumerate() {
            let v = _mm512_add_ps(s, _mm512_set1_ps(*epi.bias_row.add(r)));
            store16(
                c.offset(r as isize * rsc),
                mask,
                gemm_activate(v, ACT, lo, hi),
            );
        }
    }
}

/// [`edge_pair_avx512`]'s general epilogue, out of line on a copy of the sums (see
/// [`epilogue_general`]).
///
/// # Safety
/// As for [`edge_pair_avx512`].
#[inline(never)]
#[target_feature(enable = "avx512f")]
unsafe fn edge_pair_general(
    acc: [__m512; 2 * MR],
    c: *mut f32,
    rsc: isize,
    mask: u16,
    epi: &TileEpi,
    code: u32,
) {
    // SAFETY: the caller's contract.
    unsafe {
        let (lo, hi) = (_mm512_set1_ps(epi.lo), _mm512_set1_ps(epi.hi));
        let bcol = if epi.bias_col.is_null() {
            None
        } else {
            Some(_mm512_maskz_loadu_ps(mask, epi.bias_col))
        };
        for (r, &s) in acc.iter().enumerate() {
            let cp = c.offset(r as isize * rsc);
            epilogue_vector(s, cp, mask, epi, r, bcol, code, lo, hi);
        }
    }
}

/// The last columns of four consecutive full row panels when they are at most 4 (14×14
/// maps: 196 = 3·64 + 4) and the product has neither an old C to add nor a column bias:
/// rows in the vector lanes instead of columns, two panels per vector (lanes 0..6 and
/// 6..12, merged by one two-source permute per k step), one accumulator per column. The
/// 24 rows then take 8 multiply-adds per k step, in 8 independent chains, where two
/// paired 16-column vectors ([`edge_pair_avx512`]) took 24, with 12 of each vector's 16
/// lanes past the columns. The sums are transposed into rows of 4 at the end and stored
/// under the column mask. Same k order and epilogue operations as [`tile_avx512_body`], so the same
/// bits. Zen 5, one thread, alone (`nnefc bench`): a 96→576 1×1 conv on 14×14 0.094 →
/// 0.090 ms, 64→384 0.043 → 0.041 (medians of three interleaved runs); in mobilenet_v2
/// (`nnefc bench --profile`, minima of three interleaved runs), with the driver running it
/// from the quad's last panel, those layers went a further 0.100 → 0.095 and 0.046 →
/// 0.044 (run from the first panel, it waited for the other three panels' filter rows).
///
/// # Safety
/// The CPU has AVX-512F; the four panels at `a + i·ps` (`i < 4`) hold `kc·MR` floats
/// each; B rows `kk < kc` hold `COLS ≤ 4` floats at `b + kk·rsb`; C addresses `4·MR` rows
/// (stride `rsc`) of `COLS` columns; `epi.bias_row`, if not null, addresses `4·MR`
/// floats; `epi.accumulate` is false and `epi.bias_col` null.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx512f")]
unsafe fn edge_quad_body<const COLS: usize>(
    kc: usize,
    a: *const f32,
    ps: usize,
    b: *const f32,
    rsb: isize,
    c: *mut f32,
    rsc: isize,
    epi: &TileEpi,
) {
    const PANEL: u16 = (1 << MR) - 1;
    // Lanes 0..6 from the first source's lanes 0..6, lanes 6..12 from the second's.
    let merge = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 16, 17, 18, 19, 20, 21, 0, 0, 0, 0);
    // SAFETY (whole body): loads stay inside the four panels (8 floats only where 8
    // remain in the panel, else masked to its 6), the B rows and the bias; stores cover
    // the 4·MR rows' first `COLS` columns only.
    unsafe {
        for r in 0..4 * MR {
            _mm_prefetch::<_MM_HINT_T0>(c.wrapping_offset(r as isize * rsc).cast());
        }
        let mut acc = [[_mm512_setzero_ps(); 4]; 2];
        // A k step's 6 floats by a 256-bit load (a 512-bit one at a 24-byte stride crossed
        // a cache line almost every time), masked where 8 would run past the panel.
        let panel = |i: usize, kk: usize| {
            let p = a.add(i * ps + kk * MR);
            if kk * MR + 8 <= kc * MR {
                _mm512_castps256_ps512(_mm256_loadu_ps(p))
            } else {
                _mm512_maskz_loadu_ps(PANEL, p)
            }
        };
        for kk in 0..kc {
            let v = [
                _mm512_permutex2var_ps(panel(0, kk), merge, panel(1, kk)),
                _mm512_permutex2var_ps(panel(2, kk), merge, panel(3, kk)),
            ];
            let bp = b.offset(kk as isize * rsb);
            for j in 0..COLS {
                let bj = _mm512_set1_ps(*bp.add(j));
                for (acc_h, &vh) in acc.iter_mut().zip(&v) {
                    acc_h[j] = _mm512_fmadd_ps(vh, bj, acc_h[j]);
                }
            }
        }
        let code = gemm_act_code(epi.act, epi.lo, epi.hi);
        let (lo, hi) = (_mm512_set1_ps(epi.lo), _mm512_set1_ps(epi.hi));
        let cmask: u16 = (1 << COLS) - 1;
        for (h, acc_h) in acc.iter().enumerate() {
            let row0 = 2 * MR * h;
            // The general epilogue of `tile_avx512_body` (no old C, no column bias).
            let brow = if epi.bias_row.is_null() {
                None
            } else {
                Some(_mm512_maskz_loadu_ps(0x0FFF, epi.bias_row.add(row0)))
            };
            let x: [__m512; 4] = core::array::from_fn(|j| {
                let v = match brow {
                    Some(br) => _mm512_add_ps(acc_h[j], br),
                    None => acc_h[j],
                };
                gemm_activate(v, code, lo, hi)
            });
            // Rows of 4: u[i]'s 128-bit lane g holds row 4g + i.
            let (t0, t1) = (
                _mm512_unpacklo_ps(x[0], x[1]),
                _mm512_unpackhi_ps(x[0], x[1]),
            );
            let (t2, t3) = (
                _mm512_unpacklo_ps(x[2], x[3]),
                _mm512_unpackhi_ps(x[2], x[3]),
            );
            let u = [
                _mm512_shuffle_ps::<0x44>(t0, t2),
                _mm512_shuffle_ps::<0xEE>(t0, t2),
                _mm512_shuffle_ps::<0x44>(t1, t3),
                _mm512_shuffle_ps::<0xEE>(t1, t3),
            ];
            for g in 0..3 {
                for (i, &ui) in u.iter().enumerate() {
                    let r = row0 + 4 * g + i;
                    // The vector placed so that its lane group g lands on the row's first
                    // columns; the other lanes are masked off (never touched).
                    let at = c.wrapping_offset(r as isize * rsc).wrapping_sub(4 * g);
                    _mm512_mask_storeu_ps(at, cmask << (4 * g), ui);
                }
            }
        }
    }
}

/// [`edge_quad_body`] as an [`EdgeQuadFn`].
///
/// # Safety
/// As for [`edge_quad_body`].
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn edge_quad_avx512(
    kc: usize,
    a: *const f32,
    ps: usize,
    b: *const f32,
    rsb: isize,
    c: *mut f32,
    rsc: isize,
    cols: usize,
    epi: &TileEpi,
) {
    // SAFETY: forwarded contract.
    unsafe {
        match cols {
            1 => edge_quad_body::<1>(kc, a, ps, b, rsb, c, rsc, epi),
            2 => edge_quad_body::<2>(kc, a, ps, b, rsb, c, rsc, epi),
            3 => edge_quad_body::<3>(kc, a, ps, b, rsb, c, rsc, epi),
            _ => edge_quad_body::<4>(kc, a, ps, b, rsb, c, rsc, epi),
        }
    }
}

/// The AVX-512 kernels' [`Kernel::edge_quad`].
#[cfg(target_arch = "x86_64")]
const EDGE_QUAD: Option<EdgeQuadFn> = Some(edge_quad_avx512);
#[cfg(not(target_arch = "x86_64"))]
const EDGE_QUAD: Option<EdgeQuadFn> = None;

/// The AVX-512 kernels' [`Kernel::edge_pair`].
#[cfg(target_arch = "x86_64")]
const EDGE_PAIR: Option<EdgePairFn> = Some(edge_pair_avx512);
#[cfg(not(target_arch = "x86_64"))]
const EDGE_PAIR: Option<EdgePairFn> = None;

/// [`gemm_activate`]'s codes for the shorter clamps ([`clamp_short`]).
/// (Internal codes, apart from the public `ACT_*` ones.)
pub(crate) const CLAMP_NONNEG: u32 = 0x10;
pub(crate) const CLAMP_NEG: u32 = 0x11;
/// [`CLAMP_NONNEG`] and ReLU without the `+ 0` that turns a −0 sum into +0, for sums that
/// cannot be −0: sum plus a row bias none of whose values is −0 (under round-to-nearest
/// `x + y` is −0 only when both are −0), so the same bits as the full forms. Chosen per
/// tile by [`nonneg_code`].
pub(crate) const CLAMP_NONNEG_NZ: u32 = 0x12;
pub(crate) const RELU_NZ: u32 = 0x13;

/// Whether none of the `n ≤ 16` floats at `b` is −0 (compared as bits, so a NaN is not).
///
/// # Safety
/// The CPU has AVX-512F; `n` floats from `b` are readable.
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn no_neg_zero(b: *const f32, n: usize) -> bool {
    // SAFETY: the masked-off lanes are not read (and load as +0 bits).
    let v = unsafe { _mm512_maskz_loadu_epi32(first_lanes(n), b.cast()) };
    _mm512_cmpeq_epi32_mask(v, _mm512_set1_epi32(i32::MIN)) == 0
}

/// The code for a tile whose every sum gets one of the `n` row biases at `bias` (not
/// null) added before activation `code`: the `_NZ` form of ReLU and of [`CLAMP_NONNEG`]
/// when no bias is −0 (the `+ 0` is then a no-op: same bits, one instruction less per
/// vector), else `code`. The 6-row tiles with ReLU6 and 16 to 32 terms per sum (a
/// network's 1×1 expansions), Zen 4, one core (`gemm_bench Avx512 custom M N K relu6`,
/// three interleaved runs, GFLOP/s): 96×12544×16 93.8–94.1 → 95.5–95.9, 144×3136×24
/// 100.6–101.1 → 101.7–102.3, 192×784×32 104.7–105.2 → 105.5–106.0 (96.9, 102.1–102.7
/// and 105.4–105.9 without the `+ 0` and without this check).
///
/// # Safety
/// The CPU has AVX-512F; `n ≤ 16` floats from `bias` are readable.
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn nonneg_code(code: u32, bias: *const f32, n: usize) -> u32 {
    // SAFETY: forwarded.
    match code {
        1 if unsafe { no_neg_zero(bias, n) } => RELU_NZ,
        CLAMP_NONNEG if unsafe { no_neg_zero(bias, n) } => CLAMP_NONNEG_NZ,
        _ => code,
    }
}

/// The code the GEMM routes (6-row tiles, lane panels, few-row tiles) compute activation
/// `act` (`GemmEpilogue::activation`) with for bounds `lo`, `hi`: a shorter clamp where
/// [`short_clamp`] allows one, else `act`. Worked out once per tile or call, and by every
/// route alike, so that the routes apply the same operations to every element.
pub(crate) fn gemm_act_code(act: u32, lo: f32, hi: f32) -> u32 {
    if act != 2 {
        return act;
    }
    match short_clamp(lo, hi) {
        Some(true) => CLAMP_NONNEG,
        Some(false) => CLAMP_NEG,
        None => act,
    }
}

/// The activation of the GEMM routes: `code` from [`gemm_act_code`].
///
/// # Safety
/// The CPU has AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn gemm_activate(v: __m512, code: u32, lo: __m512, hi: __m512) -> __m512 {
    // SAFETY: forwarded.
    unsafe {
        match code {
            1 => relu_short(v),
            RELU_NZ => _mm512_max_ps(_mm512_setzero_ps(), v),
            CLAMP_NONNEG => clamp_short::<true>(v, lo, hi),
            CLAMP_NONNEG_NZ => _mm512_max_ps(lo, _mm512_min_ps(hi, v)),
            CLAMP_NEG => clamp_short::<false>(v, lo, hi),
            _ => activate_avx512(v, code, lo, hi),
        }
    }
}

/// Whether [`clamp_short`] computes the clamp to `[lo, hi]` exactly, and with which
/// `NONNEG`: `Some(lo ≥ 0)` when neither bound is NaN or −0, else `None`.
pub(crate) fn short_clamp(lo: f32, hi: f32) -> Option<bool> {
    let plain = |b: f32| !b.is_nan() && b.to_bits() != (-0.0f32).to_bits();
    (plain(lo) && plain(hi)).then_some(lo >= 0.0)
}

/// The clamp of `v` to `[lo, hi]` in two or three instructions, for the bounds
/// [`short_clamp`] accepts (`NONNEG` as it says); the same bits as
/// [`activate`](super::activate). `vminps`/`vmaxps` return their second operand when
/// either is NaN or both are zeros, so `max(lo, min(hi, v))` passes a NaN `v` through,
/// and with bounds that are not −0 it can go wrong only on a tie of two zeros: none when
/// `lo < 0`; when `lo ≥ +0` a −0 result that should be +0, which adding +0 mends (`x + 0
/// = x` for every other `x`). [`activate_avx512`]'s general clamp takes four.
///
/// # Safety
/// The CPU has AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn clamp_short<const NONNEG: bool>(v: __m512, lo: __m512, hi: __m512) -> __m512 {
    let c = _mm512_max_ps(lo, _mm512_min_ps(hi, v));
    if NONNEG {
        _mm512_add_ps(c, _mm512_setzero_ps())
    } else {
        c
    }
}

/// ReLU in two instructions, the same bits as [`activate`](super::activate): `max(0, v)`
/// passes a NaN `v` through and gives −0 for −0, which adding +0 makes +0 (`x + 0 = x`
/// for every other `x`). [`activate_avx512`]'s takes three.
///
/// # Safety
/// The CPU has AVX-512F.
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn relu_short(v: __m512) -> __m512 {
    let zero = _mm512_setzero_ps();
    _mm512_add_ps(_mm512_max_ps(zero, v), zero)
}

/// The tile epilogue of a plain product with a row bias (a conv layer): sums plus bias,
/// activation `ACT` (a constant, so its dispatch folds away; `CLAMP_NONNEG` and
/// `CLAMP_NEG` are [`clamp_short`]), store. Picked once per tile: with a short k loop the
/// general epilogue's per-vector tests and four-instruction clamp were a fifth of the
/// tile. Zen 5, one thread: a 16→96 1×1 conv with ReLU6 on 112×112 alone (`nnefc bench
/// -n 1500`, medians of three interleaved runs) 0.213 → 0.205 ms; in mobilenet_v2
/// (`nnefc bench --profile`, minima of three interleaved runs) that layer 0.242 → 0.230
/// ms, its 24→144 layers 0.112 → 0.107, its 32→192 ones 0.046 → 0.045.
///
/// # Safety
/// As for [`tile_avx512_body`]; `epi.bias_row` is not null.
#[inline(always)]
unsafe fn epilogue_row_bias<const Q: usize, const ACT: u32>(
    acc: &[[__m512; Q]; MR],
    c: *mut f32,
    rsc: isize,
    epi: &TileEpi,
) {
    // SAFETY: the tile and its bias rows, by the caller's contract.
    unsafe {
        let (lo, hi) = (_mm512_set1_ps(epi.lo), _mm512_set1_ps(epi.hi));
        for (r, acc_r) in acc.iter().enumerate() {
            let b = _mm512_set1_ps(*epi.bias_row.add(r));
            let row = c.offset(r as isize * rsc);
            for (h, &s) in acc_r.iter().enumerate() {
                let v = _mm512_add_ps(s, b);
                _mm512_storeu_ps(row.add(h * 16), gemm_activate(v, ACT, lo, hi));
            }
        }
    }
}

/// The activation of every AVX-512 route (6-row tiles, lane panels, few-row tiles), so
/// they agree bit for bit: 0 none, 1 ReLU, 2 clamp to `[lo, hi]`, NaN propagated as
/// [`activate`](super::activate) (as the AVX2 tile, with a mask move instead of OR, which
/// needs AVX512DQ); 3 sigmoid and 4 swish, the scalar [`sigmoid`](super::sigmoid)'s bits;
/// 5 hard swish, its clamp as 2's.
///
/// # Safety
/// The CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn activate_avx512(v: __m512, act: u32, lo: __m512, hi: __m512) -> __m512 {
    match act {
        1 => _mm512_mask_mov_ps(
            _mm512_max_ps(v, _mm512_setzero_ps()),
            _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v),
            v,
        ),
        2 => clamp_avx512(v, lo, hi),
        // SAFETY: AVX-512F, as this function requires.
        ACT_SIGMOID => unsafe { sigmoid_avx512(v) },
        // SAFETY: AVX-512F, as this function requires.
        ACT_SWISH => unsafe { swish_avx512(v) },
        ACT_HARDSWISH => {
            let t = _mm512_add_ps(v, _mm512_set1_ps(3.0));
            let c = clamp_avx512(t, _mm512_setzero_ps(), _mm512_set1_ps(6.0));
            _mm512_mul_ps(_mm512_mul_ps(v, c), _mm512_set1_ps(super::SIXTH))
        }
        _ => v,
    }
}

/// [`activate_avx512`]'s clamp of `v` to `[lo, hi]` (code 2, and inside hard swish),
/// NaN-propagating: `maxps(minps(hi, v), lo)`, NaN where `v` or `hi` is one (a NaN `lo`
/// comes through `maxps`).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
fn clamp_avx512(v: __m512, lo: __m512, hi: __m512) -> __m512 {
    _mm512_mask_mov_ps(
        _mm512_max_ps(_mm512_min_ps(hi, v), lo),
        _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, hi),
        _mm512_set1_ps(f32::NAN),
    )
}

/// Stores the `mask` lanes of `v` at `p`, with a plain store when all 16 are: AVX-512
/// masked stores are slower on AMD cores, and the loads that follow wait on them longer
/// (the depthwise kernel's stores took a third of its time). Every AVX-512 route that
/// stores whole vectors of C or of an output row goes through it.
///
/// # Safety
/// The CPU has AVX-512F; the `mask` lanes from `p` are writable.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn store16(p: *mut f32, mask: u16, v: __m512) {
    // SAFETY: the caller's contract.
    unsafe {
        if mask == 0xFFFF {
            _mm512_storeu_ps(p, v)
        } else {
            _mm512_mask_storeu_ps(p, mask, v)
        }
    }
}

/// The mask of lanes `0..n` of a 16-lane vector (all of them for `n ≥ 16`): the columns
/// of a last, partial vector.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn first_lanes(n: usize) -> u16 {
    if n >= 16 { u16::MAX } else { (1u16 << n) - 1 }
}

/// Horizontal sum of a 256-bit vector.
///
/// # Safety
/// The CPU has AVX2 + FMA.
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn hsum256(v: __m256) -> f32 {
    let q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let d = _mm_add_ps(q, _mm_movehl_ps(q, q));
    _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)))
}

/// GEMV, axpy form (`stride_out == 1`): 64 outputs in 8 ymm accumulators per pass over k.
///
/// # Safety
/// The CPU has AVX2 + FMA; `g` describes valid memory and `g.stride_out == 1`.
#[target_feature(enable = "avx2,fma")]
unsafe fn axpy_avx2(g: &Gemv) {
    const V: usize = 8;
    // SAFETY (whole body): row kk of M has outputs o0.. contiguous for kk < k, x[kk] exists;
    // every vector load covers outputs < len.
    unsafe {
        let xk = |kk: usize| *g.x.offset(kk as isize * g.incx);
        let row = |kk: usize, o: usize| g.mat.offset(kk as isize * g.stride_k + o as isize);
        let mut o0 = 0;
        while o0 + 8 * V <= g.len {
            let mut acc = [_mm256_setzero_ps(); V];
            for kk in 0..g.k {
                let xv = _mm256_set1_ps(xk(kk));
                let r = row(kk, o0);
                for (v, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(xv, _mm256_loadu_ps(r.add(8 * v)), *a);
                }
            }
            let mut out = [0.0f32; 8 * V];
            for (v, a) in acc.iter().enumerate() {
                _mm256_storeu_ps(out.as_mut_ptr().add(8 * v), *a);
            }
            for (j, &s) in out.iter().enumerate() {
                finish(g, o0 + j, s);
            }
            o0 += 8 * V;
        }
        while o0 + 8 <= g.len {
            let mut acc = [_mm256_setzero_ps(); 2];
            for kk in 0..g.k {
                acc[kk & 1] = _mm256_fmadd_ps(
                    _mm256_set1_ps(xk(kk)),
                    _mm256_loadu_ps(row(kk, o0)),
                    acc[kk & 1],
                );
            }
            let mut out = [0.0f32; 8];
            _mm256_storeu_ps(out.as_mut_ptr(), _mm256_add_ps(acc[0], acc[1]));
            for (j, &s) in out.iter().enumerate() {
                finish(g, o0 + j, s);
            }
            o0 += 8;
        }
        while o0 < g.len {
            let mut s = 0.0f32;
            for kk in 0..g.k {
                s += xk(kk) * *row(kk, o0);
            }
            finish(g, o0, s);
            o0 += 1;
        }
    }
}

/// How far ahead (in floats) [`dot_avx2`] prefetches each of its four columns: a linear
/// layer's weights are read once per inference, usually from memory, and four streams
/// 4·k bytes apart get too few lines in flight from the hardware prefetchers alone.
/// mobilenet_v2's 1000×1280 classifier (Zen 5, in the network, `nnefc bench
/// --profile`): 0.21 ms without, 0.20 at 128, 0.18 at 256, 0.175 at 512, 0.22 at 1024.
const DOT_PF: usize = 512;

/// GEMV, dot form (`stride_k == 1`, `incx == 1`): four outputs at a time, each with two
/// ymm partial sums, sharing the loads of x.
///
/// # Safety
/// The CPU has AVX2 + FMA; `g` describes valid memory, `g.stride_k == 1`, `g.incx == 1`.
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2(g: &Gemv) {
    const COLS: usize = 4;
    let k16 = g.k & !15;
    // SAFETY (whole body): columns o < len have k contiguous elements; x has k elements.
    unsafe {
        let col = |o: usize| g.mat.offset(o as isize * g.stride_out);
        let mut o = 0;
        while o < g.len {
            let cols = COLS.min(g.len - o);
            let ptrs: [*const f32; COLS] = core::array::from_fn(|c| col(o + c.min(cols - 1)));
            let mut acc = [[_mm256_setzero_ps(); 2]; COLS];
            let mut kk = 0;
            while kk < k16 {
                let x0 = _mm256_loadu_ps(g.x.add(kk));
                let x1 = _mm256_loadu_ps(g.x.add(kk + 8));
                for (a, p) in acc.iter_mut().zip(ptrs) {
                    // A hint: it never faults, whatever the address.
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(kk + DOT_PF).cast());
                    a[0] = _mm256_fmadd_ps(x0, _mm256_loadu_ps(p.add(kk)), a[0]);
                    a[1] = _mm256_fmadd_ps(x1, _mm256_loadu_ps(p.add(kk + 8)), a[1]);
                }
                kk += 16;
            }
            for (c, (a, p)) in acc.iter().zip(ptrs).enumerate().take(cols) {
                let mut s = hsum256(_mm256_add_ps(a[0], a[1]));
                for t in k16..g.k {
                    s += *g.x.add(t) * *p.add(t);
                }
                finish(g, o + c, s);
            }
            o += cols;
        }
    }
}

/// GEMV over packed A: per 6-row panel, four k steps (24 contiguous floats, three ymm
/// loads) per iteration against x broadcast into the matching lane pattern.
///
/// # Safety
/// The CPU has AVX2 + FMA; `g.mat` holds `packed_a_len(len, k)` floats of packed A; x, y and
/// bias are valid.
#[target_feature(enable = "avx2,fma")]
unsafe fn panel_avx2(g: &Gemv) {
    // Lane l of the three vectors holds k step (8v + l) / 6 of the group.
    let idx = [
        _mm256_setr_epi32(0, 0, 0, 0, 0, 0, 1, 1),
        _mm256_setr_epi32(1, 1, 1, 1, 2, 2, 2, 2),
        _mm256_setr_epi32(2, 2, 3, 3, 3, 3, 3, 3),
    ];
    let k4 = g.k & !3;
    let panels = g.len.div_ceil(MR);
    // SAFETY (whole body): panel p is k·MR floats at p·k·MR; each 24-float group at kk·MR with
    // kk + 4 ≤ k lies inside it; x[kk] exists for kk < k.
    unsafe {
        let xk = |kk: usize| *g.x.offset(kk as isize * g.incx);
        for p in 0..panels {
            let pan = g.mat.add(p * g.k * MR);
            let mut acc = [[_mm256_setzero_ps(); 3]; 2];
            let mut kk = 0;
            while kk < k4 {
                let xs = if g.incx == 1 {
                    _mm_loadu_ps(g.x.add(kk))
                } else {
                    _mm_setr_ps(xk(kk), xk(kk + 1), xk(kk + 2), xk(kk + 3))
                };
                let xs = _mm256_castps128_ps256(xs);
                let a = &mut acc[(kk >> 2) & 1];
                let grp = pan.add(kk * MR);
                for (v, (av, &ix)) in a.iter_mut().zip(&idx).enumerate() {
                    let xv = _mm256_permutevar8x32_ps(xs, ix);
                    *av = _mm256_fmadd_ps(_mm256_loadu_ps(grp.add(8 * v)), xv, *av);
                }
                kk += 4;
            }
            let mut lanes = [0.0f32; 24];
            for (v, (&a0, &a1)) in acc[0].iter().zip(&acc[1]).enumerate() {
                _mm256_storeu_ps(lanes.as_mut_ptr().add(8 * v), _mm256_add_ps(a0, a1));
            }
            let mut rows = [0.0f32; MR];
            for (l, s) in lanes.iter().enumerate() {
                rows[l % MR] += s;
            }
            for t in k4..g.k {
                for (r, row) in rows.iter_mut().enumerate() {
                    *row += *pan.add(t * MR + r) * xk(t);
                }
            }
            for (r, &s) in rows.iter().enumerate().take(MR.min(g.len - p * MR)) {
                finish(g, p * MR + r, s);
            }
        }
    }
}
