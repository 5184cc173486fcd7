//! x86-64 kernels: AVX2+FMA (6×16 tile, 12 ymm accumulators) and AVX-512F (6×32 tile,
//! 12 zmm accumulators), plus the GEMV bodies compiled for each. Both read the same packed-A
//! format (6-row panels) as every other kernel. CPU detection uses `std`'s cached cpuid when
//! available, otherwise the compile-time target features. It does not handle edge tiles.

#[cfg(target_arch = "x86")]
use core::arch::x86::*;
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

use super::{Gemv, Kernel, KernelId, TileEpi};
use crate::gemm::{MR, gemv};

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

/// Whether the CPU (with `std`) or the compile-time target (without) has AVX-512F.
pub(crate) fn has_avx512f() -> bool {
    #[cfg(feature = "std")]
    {
        std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(feature = "std"))]
    {
        cfg!(target_feature = "avx512f")
    }
}

pub(crate) static AVX2: Kernel = Kernel {
    id: KernelId::Avx2,
    nr: 16,
    tile: tile_avx2,
    gemv_axpy: axpy_avx2,
    gemv_dot: dot_avx2,
    gemv_panel: panel_avx2,
};

pub(crate) static AVX512: Kernel = Kernel {
    id: KernelId::Avx512,
    nr: 32,
    tile: tile_avx512,
    gemv_axpy: axpy_avx512,
    gemv_dot: dot_avx512,
    gemv_panel: panel_avx512,
};

/// 6×16 AVX2 tile.
///
/// # Safety
/// The CPU has AVX2 and FMA; `a` holds `kc·MR` floats, B rows `kk < kc` hold 16 floats at `b + kk·rsb`, C addresses a
/// 6×16 tile with row stride `rsc`, bias pointers (if non-null) address 6 / 16 floats.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2(kc: usize, a: *const f32, b: *const f32, rsb: isize, c: *mut f32, rsc: isize, epi: &TileEpi) {
    // SAFETY: every load/store below stays inside the panels, tile and bias described in
    // the contract; the target features are present.
    unsafe {
        let mut acc = [[_mm256_setzero_ps(); 2]; MR];
        let (mut ap, mut bp) = (a, b);
        for _ in 0..kc {
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
                let mut v = if epi.accumulate { _mm256_add_ps(_mm256_loadu_ps(cp), s) } else { s };
                if !epi.bias_row.is_null() {
                    v = _mm256_add_ps(v, _mm256_set1_ps(*epi.bias_row.add(r)));
                }
                if !epi.bias_col.is_null() {
                    v = _mm256_add_ps(v, _mm256_loadu_ps(epi.bias_col.add(h * 8)));
                }
                // Operand order matches the scalar `activate` on NaN: max(0, NaN) = NaN,
                // clamp(NaN) = lo.
                v = match epi.act {
                    1 => _mm256_max_ps(zero, v),
                    2 => _mm256_min_ps(_mm256_max_ps(v, lo), hi),
                    _ => v,
                };
                _mm256_storeu_ps(cp, v);
            }
        }
    }
}

/// 6×32 AVX-512 tile.
///
/// # Safety
/// The CPU has AVX-512F; `a` holds `kc·MR` floats, B rows `kk < kc` hold 32 floats at `b + kk·rsb`, C addresses a 6×32
/// tile with row stride `rsc`, bias pointers (if non-null) address 6 / 32 floats.
#[target_feature(enable = "avx512f")]
unsafe fn tile_avx512(kc: usize, a: *const f32, b: *const f32, rsb: isize, c: *mut f32, rsc: isize, epi: &TileEpi) {
    // SAFETY: every load/store below stays inside the panels, tile and bias described in
    // the contract; the target feature is present.
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); 2]; MR];
        let (mut ap, mut bp) = (a, b);
        for _ in 0..kc {
            let b0 = _mm512_loadu_ps(bp);
            let b1 = _mm512_loadu_ps(bp.add(16));
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let av = _mm512_set1_ps(*ap.add(r));
                acc_r[0] = _mm512_fmadd_ps(av, b0, acc_r[0]);
                acc_r[1] = _mm512_fmadd_ps(av, b1, acc_r[1]);
            }
            ap = ap.add(MR);
            bp = bp.offset(rsb);
        }
        let zero = _mm512_setzero_ps();
        let (lo, hi) = (_mm512_set1_ps(epi.lo), _mm512_set1_ps(epi.hi));
        for (r, acc_r) in acc.iter().enumerate() {
            for (h, &s) in acc_r.iter().enumerate() {
                let cp = c.offset(r as isize * rsc).add(h * 16);
                let mut v = if epi.accumulate { _mm512_add_ps(_mm512_loadu_ps(cp), s) } else { s };
                if !epi.bias_row.is_null() {
                    v = _mm512_add_ps(v, _mm512_set1_ps(*epi.bias_row.add(r)));
                }
                if !epi.bias_col.is_null() {
                    v = _mm512_add_ps(v, _mm512_loadu_ps(epi.bias_col.add(h * 16)));
                }
                v = match epi.act {
                    1 => _mm512_max_ps(zero, v),
                    2 => _mm512_min_ps(_mm512_max_ps(v, lo), hi),
                    _ => v,
                };
                _mm512_storeu_ps(cp, v);
            }
        }
    }
}

/// Instantiates a GEMV body inside a `#[target_feature]` function.
macro_rules! gemv_for {
    ($name:ident, $body:ident, $features:literal) => {
        /// GEMV body compiled for the given target features.
        ///
        /// # Safety
        /// The CPU has the features; `g` satisfies the body's contract.
        #[target_feature(enable = $features)]
        unsafe fn $name(g: &Gemv) {
            // SAFETY: forwarded caller contract.
            unsafe { gemv::$body(g) }
        }
    };
}

gemv_for!(axpy_avx2, axpy_body, "avx2,fma");
gemv_for!(dot_avx2, dot_body, "avx2,fma");
gemv_for!(panel_avx2, panel_body, "avx2,fma");
gemv_for!(axpy_avx512, axpy_body, "avx512f");
gemv_for!(dot_avx512, dot_body, "avx512f");
gemv_for!(panel_avx512, panel_body, "avx512f");
