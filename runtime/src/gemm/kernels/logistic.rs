//! The logistic function σ(x) = 1/(1 + e⁻ˣ) behind activation codes 3 (sigmoid) and 4
//! (swish, x·σ(x)), once as scalar code and once per vector width, all computing the same
//! sequence of IEEE operations (separate multiplies and adds, no fused multiply-add, which
//! the scalar code cannot count on), so that every route gives the same bits for an
//! element whether a vector or a scalar edge computes it, and outputs stay bit-identical
//! whatever the thread count.
//!
//! e⁻ˣ is Cephes' `expf` scheme, the compiler's `emit::math::Cx::exp` without fused
//! multiply-adds: the argument is clamped to ±87 (so 2ⁿ stays a normal number; σ is
//! 1 or below 1.7e-38 there), n = round(t·log₂e) by adding and subtracting 1.5·2²³, a
//! two-part ln 2 reduction, a degree-7 polynomial. Measured max abs error of σ against
//! f64: see `logistic_is_accurate` (below 1.2e-7). NaN gives NaN (the input itself);
//! σ(+∞) = 1, σ(−∞) ≈ 1.6e-38, so swish(−∞) = −∞ as the compiler's unfused `x·sigmoid(x)`
//! gives.
//!
//! Not here: the dispatch on activation codes (`activate`, `activate_avx512`).

#[cfg(target_arch = "x86")]
use core::arch::x86::*;
#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

const LOG2E: f32 = core::f32::consts::LOG2_E;
/// 1.5·2²³: adding it rounds a float of magnitude below 2²² to an integer in the low bits.
const MAGIC: f32 = 12_582_912.0;
/// ln 2 in two parts; the first has 9 significant bits, so n·LN2_HI is exact.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// The clamp of the exponent's argument.
const BOUND: f32 = 87.0;
/// Cephes `expf` polynomial, highest degree first.
const P: [f32; 6] = [
    1.987_569_1e-4,
    1.398_2e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    0.166_666_65,
    0.5,
];
/// What to subtract from the bits of `n + MAGIC` to get the exponent field of 2ⁿ.
const EXP_BIAS: i32 = MAGIC.to_bits() as i32 - 127;

/// σ(x).
#[inline(always)]
pub(crate) fn sigmoid(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let t = (-x).clamp(-BOUND, BOUND);
    let k = t * LOG2E + MAGIC;
    let n = k - MAGIC;
    let r = t - n * LN2_HI;
    let r = r - n * LN2_LO;
    let mut p = P[0];
    for c in &P[1..] {
        p = p * r + c;
    }
    let y = p * (r * r) + r + 1.0;
    let scale = f32::from_bits(((k.to_bits() as i32 - EXP_BIAS) << 23) as u32);
    1.0 / (1.0 + y * scale)
}

/// σ of every lane, the same bits as [`sigmoid`].
///
/// # Safety
/// The CPU has AVX-512F.
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
#[inline]
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn sigmoid_avx512(x: __m512) -> __m512 {
    let c = _mm512_set1_ps;
    let t = _mm512_sub_ps(_mm512_setzero_ps(), x);
    // Neither bound is NaN or zero, so min/max clamp exactly as `f32::clamp` on non-NaN
    // lanes; NaN lanes are put back at the end.
    let t = _mm512_max_ps(_mm512_min_ps(t, c(BOUND)), c(-BOUND));
    let k = _mm512_add_ps(_mm512_mul_ps(t, c(LOG2E)), c(MAGIC));
    let n = _mm512_sub_ps(k, c(MAGIC));
    let r = _mm512_sub_ps(t, _mm512_mul_ps(n, c(LN2_HI)));
    let r = _mm512_sub_ps(r, _mm512_mul_ps(n, c(LN2_LO)));
    let mut p = c(P[0]);
    for &pc in &P[1..] {
        p = _mm512_add_ps(_mm512_mul_ps(p, r), c(pc));
    }
    let y = _mm512_add_ps(
        _mm512_add_ps(_mm512_mul_ps(p, _mm512_mul_ps(r, r)), r),
        c(1.0),
    );
    let bits = _mm512_slli_epi32::<23>(_mm512_sub_epi32(
        _mm512_castps_si512(k),
        _mm512_set1_epi32(EXP_BIAS),
    ));
    let e = _mm512_mul_ps(y, _mm512_castsi512_ps(bits));
    let s = _mm512_div_ps(c(1.0), _mm512_add_ps(c(1.0), e));
    _mm512_mask_mov_ps(s, _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x), x)
}

/// σ of every lane, the same bits as [`sigmoid`].
///
/// # Safety
/// The CPU has AVX2.
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
#[inline]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn sigmoid_avx2(x: __m256) -> __m256 {
    let c = _mm256_set1_ps;
    let t = _mm256_sub_ps(_mm256_setzero_ps(), x);
    let t = _mm256_max_ps(_mm256_min_ps(t, c(BOUND)), c(-BOUND));
    let k = _mm256_add_ps(_mm256_mul_ps(t, c(LOG2E)), c(MAGIC));
    let n = _mm256_sub_ps(k, c(MAGIC));
    let r = _mm256_sub_ps(t, _mm256_mul_ps(n, c(LN2_HI)));
    let r = _mm256_sub_ps(r, _mm256_mul_ps(n, c(LN2_LO)));
    let mut p = c(P[0]);
    for &pc in &P[1..] {
        p = _mm256_add_ps(_mm256_mul_ps(p, r), c(pc));
    }
    let y = _mm256_add_ps(
        _mm256_add_ps(_mm256_mul_ps(p, _mm256_mul_ps(r, r)), r),
        c(1.0),
    );
    let bits = _mm256_slli_epi32::<23>(_mm256_sub_epi32(
        _mm256_castps_si256(k),
        _mm256_set1_epi32(EXP_BIAS),
    ));
    let e = _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
    let s = _mm256_div_ps(c(1.0), _mm256_add_ps(c(1.0), e));
    _mm256_blendv_ps(s, x, _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every float from −100 to 100 in steps of 1/1024, and the specials, through the
    /// scalar function: max abs error against f64.
    #[test]
    fn logistic_is_accurate() {
        let mut worst = 0f64;
        for i in -102_400..=102_400 {
            let x = i as f32 / 1024.0;
            let want = 1.0 / (1.0 + (-(x as f64)).exp());
            worst = worst.max((sigmoid(x) as f64 - want).abs());
        }
        assert!(worst < 1.2e-7, "max abs error {worst:e}");
        assert_eq!(sigmoid(f32::INFINITY), 1.0);
        assert!(sigmoid(f32::NEG_INFINITY) < 2e-38);
        assert!(sigmoid(f32::NAN).is_nan());
        assert_eq!(sigmoid(0.0), 0.5);
        assert_eq!(sigmoid(-0.0), 0.5);
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
        while xs.len() % 16 != 0 {
            xs.push(1.5);
        }
        let want: Vec<u32> = xs.iter().map(|&x| sigmoid(x).to_bits()).collect();
        if std::is_x86_feature_detected!("avx512f") {
            for (ch, w) in xs.chunks(16).zip(want.chunks(16)) {
                let mut got = [0f32; 16];
                // SAFETY: AVX-512F is present; 16 floats in and out.
                unsafe {
                    _mm512_storeu_ps(
                        got.as_mut_ptr(),
                        sigmoid_avx512(_mm512_loadu_ps(ch.as_ptr())),
                    )
                };
                for (i, g) in got.iter().enumerate() {
                    assert_eq!(g.to_bits(), w[i], "avx512 at {:e}", ch[i]);
                }
            }
        }
        if std::is_x86_feature_detected!("avx2") {
            for (ch, w) in xs.chunks(8).zip(want.chunks(8)) {
                let mut got = [0f32; 8];
                // SAFETY: AVX2 is present; 8 floats in and out.
                unsafe {
                    _mm256_storeu_ps(got.as_mut_ptr(), sigmoid_avx2(_mm256_loadu_ps(ch.as_ptr())))
                };
                for (i, g) in got.iter().enumerate() {
                    assert_eq!(g.to_bits(), w[i], "avx2 at {:e}", ch[i]);
                }
            }
        }
    }
}
