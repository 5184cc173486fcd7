//! The logistic function σ(x) = 1/(1 + e⁻ˣ) behind activation codes 3 (sigmoid) and 4
//! (swish, x·σ(x), computed as x/(1 + e⁻ˣ)), as AVX-512 and AVX2 vectors and as scalar
//! code, all computing the same sequence of correctly rounded operations (fused
//! multiply-adds included), so that every route gives the same bits for an element
//! whether a vector or a scalar edge computes it, and outputs stay bit-identical whatever
//! the thread count. On x86-64 CPUs with AVX2 and FMA the scalar functions run the AVX2
//! code on one lane; elsewhere they use `f32::mul_add` (without `std`, a multiply and an
//! add: no vector route exists there).
//!
//! e⁻ˣ follows Cephes' `expf` scheme, shortened where σ does not need it: x clamped to
//! ±87 (so 2ⁿ stays a normal number; σ is 1, or below 1.7e-38, out there), n =
//! round(−x·log₂e) (a fused multiply-add of 1.5·2²³ and a subtraction), r = −x − n·ln 2 in
//! one fused multiply-add (|r| ≤ ln 2 / 2; f32's ln 2 is off by 1.9e-9 relative, which
//! moves e⁻ˣ by 2.4e-7 relative at the clamp and 3e-8 at |x| = 10, where σ is 4.5e-5 from
//! 0 or 1: `expf`'s two-part constant matters for e⁻ˣ itself, not for σ), e^r ≈ 1 + r +
//! r²·q(r) with q of degree 3 (a near-minimax fit: relative error 1.1e-7 with its
//! coefficients rounded to f32, against 3.6e-9 for degree 4), then a scale by 2ⁿ.
//! Measured max abs error of σ against f64: see `logistic_is_accurate` (below 1.2e-7).
//! Per 16 lanes: 8 multiply-class vector instructions, 5 add-class ones (two are the
//! clamp) and a division. The multiply-class ones bound a GEMM tile's swish epilogue (Zen
//! 4 issues one 512-bit one per cycle, and the tile's own multiply-adds compete for the
//! same pipes): Cephes' form, with `vrndscaleps` and a multiply by x after 1/(1 + e⁻ˣ),
//! had 13 (Zen 4, `gemm_bench Avx512 custom 96 12544 16 swish`: 54.0 → 63.4 GFLOP/s, 94.6
//! with ReLU6). NaN gives NaN (the clamp lets it through); σ(+∞) = 1, σ(−∞) ≈ 1.6e-38;
//! swish(+∞) = +∞, swish(−∞) = −∞, as the compiler's unfused `x·sigmoid(x)` gives.
//!
//! Not here: the dispatch on activation codes (`activate`, `activate_avx512`).

#[cfg(target_arch = "x86")]
use core::arch::x86::*;
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

const LOG2E: f32 = core::f32::consts::LOG2_E;
const LN2: f32 = core::f32::consts::LN_2;
/// 1.5·2²³: adding it and subtracting it again rounds a float of magnitude below 2²² to
/// the nearest integer, ties to even.
const MAGIC: f32 = 12_582_912.0;
/// The clamp of the argument.
const BOUND: f32 = 87.0;
/// q(r) of e^r ≈ 1 + r + r²·q(r) on |r| ≤ ln 2 / 2, highest degree first (fitted by
/// iteratively reweighted least squares on the relative error).
const Q: [f32; 4] = [8.312_48e-3, 4.189_010_3e-2, 0.166_671_16, 0.499_992_3];

/// `a·b + c` rounded once.
#[inline(always)]
fn fma(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(feature = "std")]
    {
        a.mul_add(b, c)
    }
    #[cfg(not(feature = "std"))]
    {
        a * b + c
    }
}

/// σ(x).
#[inline]
pub(crate) fn sigmoid(x: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if super::x86::has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe { _mm_cvtss_f32(_mm256_castps256_ps128(sigmoid_avx2(_mm256_set1_ps(x)))) };
    }
    1.0 / denominator(x)
}

/// swish(x) = x·σ(x), as x/(1 + e⁻ˣ).
#[inline]
pub(crate) fn swish(x: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if super::x86::has_avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA.
        return unsafe { _mm_cvtss_f32(_mm256_castps256_ps128(swish_avx2(_mm256_set1_ps(x)))) };
    }
    x / denominator(x)
}

/// 1 + e⁻ˣ in scalar operations.
#[inline]
fn denominator(x: f32) -> f32 {
    let xc = x.clamp(-BOUND, BOUND);
    let n = fma(xc, -LOG2E, MAGIC) - MAGIC;
    let r = fma(-n, LN2, -xc);
    let mut q = Q[0];
    for &c in &Q[1..] {
        q = fma(q, r, c);
    }
    let y = fma(q, r * r, r) + 1.0;
    // 2ⁿ for n in [−126, 126]: exact, as `vscalefps`.
    1.0 + y * f32::from_bits(((n as i32 + 127) << 23) as u32)
}

/// 1 + e⁻ˣ of every lane, the same bits as [`denominator`].
///
/// # Safety
/// The CPU has AVX-512F.
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn denominator_avx512(x: __m512) -> __m512 {
    let c = _mm512_set1_ps;
    // `vminps`/`vmaxps` return the second operand when either is NaN: a NaN x comes
    // through (and every step after keeps it NaN).
    let xc = _mm512_max_ps(c(-BOUND), _mm512_min_ps(c(BOUND), x));
    let n = _mm512_sub_ps(_mm512_fmadd_ps(xc, c(-LOG2E), c(MAGIC)), c(MAGIC));
    let r = _mm512_fnmsub_ps(n, c(LN2), xc);
    let mut q = c(Q[0]);
    for &qc in &Q[1..] {
        q = _mm512_fmadd_ps(q, r, c(qc));
    }
    let y = _mm512_add_ps(_mm512_fmadd_ps(q, _mm512_mul_ps(r, r), r), c(1.0));
    _mm512_add_ps(c(1.0), _mm512_scalef_ps(y, n))
}

/// σ of every lane, the same bits as [`sigmoid`].
///
/// # Safety
/// The CPU has AVX-512F.
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn sigmoid_avx512(x: __m512) -> __m512 {
    // SAFETY: AVX-512F, as this function requires.
    _mm512_div_ps(_mm512_set1_ps(1.0), unsafe { denominator_avx512(x) })
}

/// swish of every lane, the same bits as [`swish`].
///
/// # Safety
/// The CPU has AVX-512F.
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn swish_avx512(x: __m512) -> __m512 {
    // SAFETY: AVX-512F, as this function requires.
    _mm512_div_ps(x, unsafe { denominator_avx512(x) })
}

/// 1 + e⁻ˣ of every lane, the same bits as [`denominator`].
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn denominator_avx2(x: __m256) -> __m256 {
    let c = _mm256_set1_ps;
    let xc = _mm256_max_ps(c(-BOUND), _mm256_min_ps(c(BOUND), x));
    let n = _mm256_sub_ps(_mm256_fmadd_ps(xc, c(-LOG2E), c(MAGIC)), c(MAGIC));
    let r = _mm256_fnmsub_ps(n, c(LN2), xc);
    let mut q = c(Q[0]);
    for &qc in &Q[1..] {
        q = _mm256_fmadd_ps(q, r, c(qc));
    }
    let y = _mm256_add_ps(_mm256_fmadd_ps(q, _mm256_mul_ps(r, r), r), c(1.0));
    // 2ⁿ from n's bits (n in [−126, 126], exact), as `vscalefps`.
    let bits = _mm256_slli_epi32::<23>(_mm256_add_epi32(
        _mm256_cvtps_epi32(n),
        _mm256_set1_epi32(127),
    ));
    _mm256_add_ps(c(1.0), _mm256_mul_ps(y, _mm256_castsi256_ps(bits)))
}

/// σ of every lane, the same bits as [`sigmoid`].
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn sigmoid_avx2(x: __m256) -> __m256 {
    // SAFETY: AVX2 and FMA, as this function requires.
    _mm256_div_ps(_mm256_set1_ps(1.0), unsafe { denominator_avx2(x) })
}

/// swish of every lane, the same bits as [`swish`].
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
#[inline]
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn swish_avx2(x: __m256) -> __m256 {
    // SAFETY: AVX2 and FMA, as this function requires.
    _mm256_div_ps(x, unsafe { denominator_avx2(x) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every float from −100 to 100 in steps of 1/1024, and the specials, through the
    /// scalar functions (and their portable forms): max abs error against f64, for swish
    /// relative to max(1, |x|).
    #[test]
    fn logistic_is_accurate() {
        let (mut worst, mut worst_swish) = (0f64, 0f64);
        for i in -102_400..=102_400 {
            let x = i as f32 / 1024.0;
            let want = 1.0 / (1.0 + (-(x as f64)).exp());
            worst = worst.max((sigmoid(x) as f64 - want).abs());
            worst = worst.max(((1.0 / denominator(x)) as f64 - want).abs());
            let scale = (x as f64).abs().max(1.0);
            worst_swish = worst_swish.max((swish(x) as f64 - x as f64 * want).abs() / scale);
            worst_swish =
                worst_swish.max(((x / denominator(x)) as f64 - x as f64 * want).abs() / scale);
        }
        assert!(worst < 1.2e-7, "max abs error {worst:e}");
        assert!(worst_swish < 1.2e-7, "swish: max error {worst_swish:e}");
        assert_eq!(sigmoid(f32::INFINITY), 1.0);
        assert!(sigmoid(f32::NEG_INFINITY) < 2e-38);
        assert!(sigmoid(f32::NAN).is_nan());
        assert_eq!(sigmoid(0.0), 0.5);
        assert_eq!(sigmoid(-0.0), 0.5);
        assert_eq!(swish(f32::INFINITY), f32::INFINITY);
        assert_eq!(swish(f32::NEG_INFINITY), f32::NEG_INFINITY);
        assert!(swish(f32::NAN).is_nan());
        assert_eq!(swish(0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(swish(-0.0).to_bits(), (-0.0f32).to_bits());
    }

    /// The vector versions give the scalar bits on a sweep and the specials.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vectors_give_the_scalar_bits() {
        let mut xs: Vec<f32> = (-4000..4000).map(|i| i as f32 * 0.0271).collect();
        xs.extend([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            1e-40,
            -1e-40,
            86.9,
            87.0,
            87.1,
            -87.1,
            88.7,
            -88.7,
            f32::from_bits(0x7fa0_0001), // signalling NaN
        ]);
        while !xs.len().is_multiple_of(16) {
            xs.push(1.5);
        }
        let same = |g: f32, w: f32| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
        for swish_too in [false, true] {
            let want: Vec<f32> = xs
                .iter()
                .map(|&x| {
                    if swish_too {
                        x / denominator(x)
                    } else {
                        1.0 / denominator(x)
                    }
                })
                .collect();
            let scalar = if swish_too { swish } else { sigmoid };
            for (&x, &w) in xs.iter().zip(&want) {
                assert!(same(scalar(x), w), "scalar at {x:e} (swish: {swish_too})");
            }
            if std::is_x86_feature_detected!("avx512f") {
                for (ch, w) in xs.chunks(16).zip(want.chunks(16)) {
                    let mut got = [0f32; 16];
                    // SAFETY: AVX-512F is present; 16 floats in and out.
                    unsafe {
                        let v = _mm512_loadu_ps(ch.as_ptr());
                        let f = if swish_too {
                            swish_avx512(v)
                        } else {
                            sigmoid_avx512(v)
                        };
                        _mm512_storeu_ps(got.as_mut_ptr(), f)
                    };
                    for (i, g) in got.iter().enumerate() {
                        assert!(same(*g, w[i]), "avx512 at {:e} (swish: {swish_too})", ch[i]);
                    }
                }
            }
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                for (ch, w) in xs.chunks(8).zip(want.chunks(8)) {
                    let mut got = [0f32; 8];
                    // SAFETY: AVX2 is present; 8 floats in and out.
                    unsafe {
                        let v = _mm256_loadu_ps(ch.as_ptr());
                        let f = if swish_too {
                            swish_avx2(v)
                        } else {
                            sigmoid_avx2(v)
                        };
                        _mm256_storeu_ps(got.as_mut_ptr(), f)
                    };
                    for (i, g) in got.iter().enumerate() {
                        assert!(same(*g, w[i]), "avx2 at {:e} (swish: {swish_too})", ch[i]);
                    }
                }
            }
        }
    }
}
