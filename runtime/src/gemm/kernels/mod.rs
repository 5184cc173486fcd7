//! The micro-kernel table and the one-time choice among its entries by CPU detection.
//!
//! Each [`Kernel`] computes full `MR × nr` tiles of C from a packed A panel (`kc × MR`) and
//! a packed B panel (`kc × nr`), applying the tile epilogue in registers, and provides the
//! matrix-vector paths compiled for the same instruction set. It does not block for caches
//! or handle edge tiles (the driver does).

use core::sync::atomic::{AtomicU8, Ordering};

mod generic;
mod logistic;
#[cfg(target_arch = "aarch64")]
mod neon;
#[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
mod x86;
pub(crate) use logistic::{sigmoid, swish};
#[cfg(target_arch = "x86_64")]
pub(crate) use x86::{
    CLAMP_NEG, CLAMP_NONNEG, CLAMP_NONNEG_NZ, RELU_NZ, activate_avx512, first_lanes, gemm_act_code,
    gemm_activate, nonneg_code, store16,
};
#[cfg(all(test, target_arch = "x86_64"))]
pub(crate) use x86::{clamp_short, relu_short, short_clamp};

/// Activation code: none.
pub const ACT_NONE: u32 = 0;
/// Activation code: ReLU, IEEE 754-2019 `maximum(x, +0)`.
pub const ACT_RELU: u32 = 1;
/// Activation code: clamp to `[lo, hi]`, `maximum(minimum(x, hi), lo)`.
pub const ACT_CLAMP: u32 = 2;
/// Activation code: the logistic sigmoid 1/(1 + e⁻ˣ) (`logistic`).
pub const ACT_SIGMOID: u32 = 3;
/// Activation code: swish (SiLU), x·σ(x).
pub const ACT_SWISH: u32 = 4;
/// Activation code: hard swish, x·clamp(x + 3, 0, 6)·(1/6) (MobileNet v3), the clamp as
/// [`ACT_CLAMP`]'s.
pub const ACT_HARDSWISH: u32 = 5;
/// Evaluates `$body` with `$A` a `const u32` equal to activation code `$act` (any value
/// but the `ACT_*` codes as [`ACT_NONE`]): kernels generic over their activation are
/// instantiated for every code from this one list, so a new code is added here and not
/// at each call site.
macro_rules! by_act {
    ($act:expr, $A:ident => $body:expr) => {
        match $act as u32 {
            $crate::gemm::ACT_RELU => {
                const $A: u32 = $crate::gemm::ACT_RELU;
                $body
            }
            $crate::gemm::ACT_CLAMP => {
                const $A: u32 = $crate::gemm::ACT_CLAMP;
                $body
            }
            $crate::gemm::ACT_SIGMOID => {
                const $A: u32 = $crate::gemm::ACT_SIGMOID;
                $body
            }
            $crate::gemm::ACT_SWISH => {
                const $A: u32 = $crate::gemm::ACT_SWISH;
                $body
            }
            $crate::gemm::ACT_HARDSWISH => {
                const $A: u32 = $crate::gemm::ACT_HARDSWISH;
                $body
            }
            _ => {
                const $A: u32 = $crate::gemm::ACT_NONE;
                $body
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use by_act;

/// 1/6 rounded to f32: hard swish's last factor.
pub(crate) const SIXTH: f32 = 1.0 / 6.0;

/// The epilogue applied by a micro-kernel to one tile:
/// `C = act((accumulate ? C : 0) + A·B + bias_row[r] + bias_col[j])`.
pub(crate) struct TileEpi {
    /// Add the tile's current contents of C.
    pub accumulate: bool,
    /// Null, or `MR` values (one per tile row).
    pub bias_row: *const f32,
    /// Null, or `nr` values (one per tile column).
    pub bias_col: *const f32,
    /// An activation code (`ACT_*`), NaN-propagating as [`activate`].
    pub act: u32,
    /// Clamp lower bound.
    pub lo: f32,
    /// Clamp upper bound.
    pub hi: f32,
}

/// A micro-kernel: `tile(kc, a_panel, b, rsb, c, rsc, epi)` writes a full `MR × nr` tile
/// of C at `c` (row stride `rsc`, unit column stride). `kc ≥ 1`. B row `kk` is the `nr`
/// contiguous floats at `b + kk·rsb` (`rsb = nr` for a packed panel; B's own row stride
/// when the kernel reads an unpacked row-major B directly).
pub(crate) type TileFn = unsafe fn(usize, *const f32, *const f32, isize, *mut f32, isize, &TileEpi);

/// `edge_quad(kc, a, ps, b, rsb, c, rsc, cols, epi)`: rows `0..4·MR` of C at `c` from the
/// four A panels at `a + i·ps`, over `cols ≤ 4` columns of B (rows `rsb` floats apart);
/// `epi.bias_row`, if not null, holds `4·MR` values; no old C, no column bias.
pub(crate) type EdgeQuadFn =
    unsafe fn(usize, *const f32, usize, *const f32, isize, *mut f32, isize, usize, &TileEpi);

/// `edge_pair(kc, a0, a1, b, rsb, c, rsc, cols, epi)`: rows `0..MR` of C at `c` from the A
/// panel `a0` and rows `MR..2·MR` from `a1`, over `cols ≤ 16` columns of B (rows `rsb`
/// floats apart, 16 readable floats each); `epi.bias_row`, if not null, holds `2·MR`
/// values and `epi.bias_col` `cols`.
pub(crate) type EdgePairFn =
    unsafe fn(usize, *const f32, *const f32, *const f32, isize, *mut f32, isize, usize, &TileEpi);

/// A matrix-vector problem: `y[o] = act((acc ? y[o] : 0) + Σ_kk x[kk]·M[kk, o] + bias[o])`
/// for `o in 0..len`, with `x[kk]` at `x + kk·incx`, `M[kk, o]` at
/// `mat + kk·stride_k + o·stride_out`, `y[o]` at `y + o·incy`, `bias[o]` at
/// `bias + o·bias_inc` (`bias_inc = 0` broadcasts one value; null = no bias).
/// For the panel form, `mat` is packed A (`len` = m rows) and the strides are unused.
pub(crate) struct Gemv {
    pub len: usize,
    pub k: usize,
    pub x: *const f32,
    pub incx: isize,
    pub mat: *const f32,
    pub stride_k: isize,
    pub stride_out: isize,
    pub y: *mut f32,
    pub incy: isize,
    pub bias: *const f32,
    pub bias_inc: isize,
    pub accumulate: bool,
    pub act: u32,
    pub lo: f32,
    pub hi: f32,
}

/// A matrix-vector routine (see [`Gemv`] for which strides each form requires).
pub(crate) type GemvFn = unsafe fn(&Gemv);

/// One instruction-set flavour of the contraction engine.
pub(crate) struct Kernel {
    /// Which flavour.
    pub id: KernelId,
    /// Tile width (columns of C per micro-kernel call); divides `NR_MAX`.
    pub nr: usize,
    /// The micro-kernel.
    pub tile: TileFn,
    /// Narrower tiles with the same arithmetic per element (so which one computes an
    /// element never changes its bits), widest first: the columns of a panel past its
    /// last full tile go through them, so an edge of 4 columns costs a 16-wide tile, not
    /// a full one.
    pub edges: &'static [(usize, TileFn)],
    /// The last column vector (at most 16 columns) of two consecutive full row panels at
    /// once, with the arithmetic of the tiles; `None` where no such routine exists.
    pub edge_pair: Option<EdgePairFn>,
    /// The last columns (at most 4) of four consecutive full row panels at once, for
    /// products with no old C to add and no column bias; `None` where no such routine
    /// exists.
    pub edge_quad: Option<EdgeQuadFn>,
    /// GEMV with `stride_out == 1`: streams rows of M, vectorised along the output.
    pub gemv_axpy: GemvFn,
    /// GEMV with `stride_k == 1` and `incx == 1`: one dot product per output.
    pub gemv_dot: GemvFn,
    /// GEMV over packed A (`mat` in the packed-A format, `len = m`).
    pub gemv_panel: GemvFn,
}

/// Identifies a kernel flavour (for tests and benchmarks; generated code never names one).
#[doc(hidden)]
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelId {
    /// Portable Rust (auto-vectorised for the compile-time baseline, e.g. SSE2).
    Generic = 1,
    /// x86-64 AVX2 + FMA, 6×16 tiles.
    Avx2 = 2,
    /// x86-64 AVX-512F, 6×32 tiles.
    Avx512 = 3,
    /// aarch64 NEON, 6×16 tiles.
    Neon = 4,
    /// x86-64 AVX-512F, 6×64 tiles (products of 64 columns or more; narrower ones go to
    /// [`KernelId::Avx512`]).
    Avx512Wide = 5,
}

impl KernelId {
    /// One of the AVX-512 families.
    pub(crate) fn is_avx512(self) -> bool {
        matches!(self, KernelId::Avx512 | KernelId::Avx512Wide)
    }

    /// Every flavour, slowest first.
    pub const ALL: [KernelId; 5] = [
        KernelId::Generic,
        KernelId::Avx2,
        KernelId::Avx512,
        KernelId::Avx512Wide,
        KernelId::Neon,
    ];

    fn from_u8(v: u8) -> Option<KernelId> {
        KernelId::ALL.iter().copied().find(|id| *id as u8 == v)
    }

    /// Whether this flavour is compiled in and supported by the running CPU.
    pub fn is_available(self) -> bool {
        kernel(self).is_some()
    }
}

/// The flavours usable on this CPU, slowest first.
#[doc(hidden)]
pub fn available_kernels() -> impl Iterator<Item = KernelId> {
    KernelId::ALL.into_iter().filter(|id| id.is_available())
}

/// The kernel of flavour `id`, if compiled in and supported by the running CPU.
pub(crate) fn kernel(id: KernelId) -> Option<&'static Kernel> {
    match id {
        KernelId::Generic => Some(&generic::KERNEL),
        #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
        KernelId::Avx2 if x86::has_avx2_fma() => Some(&x86::AVX2),
        #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
        KernelId::Avx512 if x86::has_avx512f() => Some(&x86::AVX512),
        #[cfg(any(target_arch = "x86_64", target_arch = "x86"))]
        KernelId::Avx512Wide if x86::has_avx512f() => Some(&x86::AVX512W),
        #[cfg(target_arch = "aarch64")]
        KernelId::Neon => Some(&neon::KERNEL),
        _ => None,
    }
}

/// The cached choice: 0 = not chosen yet, else a `KernelId` value.
static SELECTED: AtomicU8 = AtomicU8::new(0);

/// The fastest kernel for this CPU, detected on first use and cached. Racing first calls
/// may both detect; they store the same value.
pub(crate) fn selected() -> &'static Kernel {
    let cached = SELECTED.load(Ordering::Relaxed);
    if let Some(k) = KernelId::from_u8(cached).and_then(kernel) {
        return k;
    }
    let best = KernelId::ALL
        .into_iter()
        .rev()
        .find_map(kernel)
        .unwrap_or(&generic::KERNEL);
    SELECTED.store(best.id as u8, Ordering::Relaxed);
    best
}

/// The kernel to use for a product with `n` columns: a narrow product wastes most of a
/// wide tile, so the 64-column AVX-512 tile hands `n ≤ 32` to the 32-column one, which
/// hands `n ≤ 16` to AVX2 (16 columns). (From 33 columns the wide tile, all edge, still
/// beat one 32-column tile plus an edge: 512×49×4608 at 116 against 111 GFLOP/s.) Wider
/// products keep the wide tile: their last columns go through its narrower tiles
/// (`Kernel::edges`), so 196 columns (14×14 layers) cost 208 lanes, not 256 (or 224 with
/// the 32-column tile, which this function picked for them before): on the AMD Zen 4
/// machine 256×196×2304 went from 91 to 97–101 GFLOP/s, 1000×169×512 from 98 to 106–108,
/// 192×784×32 from 94 to 104 (a scratch benchmark of `nnefc_sgemm_packed_a`).
pub(crate) fn for_width(kern: &'static Kernel, n: usize) -> &'static Kernel {
    let kern = if kern.id == KernelId::Avx512Wide && n <= 32 {
        kernel(KernelId::Avx512).unwrap_or(kern)
    } else {
        kern
    };
    if kern.id == KernelId::Avx512 && n <= 16 {
        kernel(KernelId::Avx2).unwrap_or(kern)
    } else {
        kern
    }
}

/// Applies activation `act` (`ACT_*`) to one value (scalar edge and GEMV paths). NaN
/// propagates: ReLU is IEEE 754-2019 `maximum(v, +0)` (NaN stays NaN, −0 gives +0) and
/// clamp is `maximum(minimum(v, hi), lo)` (NaN in `v` or a bound gives NaN), the
/// compiler's element-wise semantics, so a fused epilogue agrees with the unfused ops;
/// sigmoid and swish are [`sigmoid`]'s, which every vector route reproduces bit for bit;
/// hard swish is `(v · clamp(v + 3)) · (1/6)` in that order on every route.
#[inline(always)]
pub(crate) fn activate(v: f32, act: u32, lo: f32, hi: f32) -> f32 {
    match act {
        ACT_RELU => maximum(v, 0.0),
        ACT_CLAMP => maximum(minimum(v, hi), lo),
        ACT_SIGMOID => sigmoid(v),
        ACT_SWISH => swish(v),
        ACT_HARDSWISH => v * maximum(minimum(v + 3.0, 6.0), 0.0) * SIXTH,
        _ => v,
    }
}

/// IEEE 754-2019 `maximum`: NaN if either operand is NaN, +0 above −0.
#[inline(always)]
pub(crate) fn maximum(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        a + b
    } else if a == b {
        // Only ±0 compare equal with different bits: +0 wins.
        f32::from_bits(a.to_bits() & b.to_bits())
    } else if a > b {
        a
    } else {
        b
    }
}

/// IEEE 754-2019 `minimum`: NaN if either operand is NaN, −0 below +0.
#[inline(always)]
pub(crate) fn minimum(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        a + b
    } else if a == b {
        // Only ±0 compare equal with different bits: −0 wins.
        f32::from_bits(a.to_bits() | b.to_bits())
    } else if a < b {
        a
    } else {
        b
    }
}
