//! Lane panels: the second packed-A format and the GEMM routine that reads it, which
//! vectorizes over the rows of C (16 rows of A per AVX-512 register) instead of its
//! columns. A product with few columns (a 1×1 convolution on a 7×7 map: 49 pixels)
//! fills only part of the last 16-column vector of the 6-row kernels (49 columns cost
//! 64 lanes); here each column of B is a broadcast scalar, so no lane is wasted on
//! columns and only rows past `m` in the last panel are padding.
//!
//! # Format (see the `gemm` module docs: part of the ABI)
//! `ceil(m/16)` panels of [`LANES`] = 16 rows; panel `p` holds, for every `kk in 0..k`, the
//! 16 values `A[p·16 + r][kk]`; rows past `m` are zero. Element `(i, kk)` is at
//! `(i/16)·16·k + kk·16 + i%16`.
//!
//! # Arithmetic (what makes the result independent of the tile, the split and the format)
//! Every element of C is computed as the 6-row kernels compute it: k is cut into the
//! same equal blocks of at most `KC` (`driver::blocked`'s `kc_step`); each block's
//! product is one multiply-add chain over its `kk` in order, starting from zero; the block
//! sums are added in order to the old C (with `accumulate`) or to the first block's sum;
//! then the row bias or the column bias, then the activation, with the NaN rules of
//! `kernels::activate`. The AVX-512 tile fuses each multiply-add (as the AVX-512 and AVX2
//! 6-row kernels do), so on an AVX-512 CPU its C is bit-identical to
//! `nnefc_sgemm_packed_a`'s wherever that runs its blocked loops (`m ≥ 2`, `n ≥ 5`; its GEMV
//! forms sum differently). The portable tile multiplies then adds (two roundings, as the
//! portable 6-row kernel does), so it equals that kernel's C instead. No tile shape or
//! thread split changes which operations produce an element.
//!
//! # Tiles
//! The AVX-512 tile holds [`PANELS`] panels (32 rows) × up to [`COLS`] columns of C in
//! 28 accumulators: per `kk`, two panel loads, 14 broadcasts of `B[kk][j]` read straight
//! from B (no packing of B, so no scratch) and 28 fused multiply-adds. The columns of C
//! are cut into `ceil(n/COLS)` tiles of near-equal width (49 = 13 + 12 + 12 + 12), each
//! width a monomorphized copy. Block sums, the old C and the epilogue go through a
//! stack tile in lane order, which is then copied into C row by row (masked for the rows
//! of the last panel past `m`).
//!
//! Not here: choosing this format (the compiler does, per shape), threads (`split`).

use super::GemmEpilogue;
use super::KC;
use super::driver::Problem;
use super::kernels::activate;

/// Rows per lane panel: one AVX-512 vector of f32. Part of the format.
pub const LANES: usize = 16;
/// Panels per tile (the last odd panel of a product goes alone).
const PANELS: usize = 2;
/// Widest column tile: `PANELS · COLS` accumulators plus the panel loads and a broadcast
/// fit the 32 vector registers.
const COLS: usize = 14;

/// Which tile code runs (decided once per product from the CPU's 6-row kernel, so every
/// part of a split product uses the same one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Impl {
    /// Fused multiply-adds on 512-bit vectors.
    #[cfg(target_arch = "x86_64")]
    Avx512,
    /// Plain Rust, correct on any CPU.
    Portable,
}

impl Impl {
    /// The code for a CPU whose 6-row kernel is `id`.
    pub(crate) fn for_kernel(id: super::KernelId) -> Impl {
        #[cfg(target_arch = "x86_64")]
        if matches!(id, super::KernelId::Avx512 | super::KernelId::Avx512Wide) {
            return Impl::Avx512;
        }
        let _ = id;
        Impl::Portable
    }
}

/// Floats of the lane-panel format for an `m × k` matrix: `ceil(m/16)·16·k`, or `None`
/// if that overflows.
pub(crate) fn len(m: usize, k: usize) -> Option<usize> {
    m.div_ceil(LANES).checked_mul(LANES)?.checked_mul(k)
}

/// Packs A (`m × k`, element `(i, kk)` at `a[i·rsa + kk·csa]`) into lane panels at `dst`.
///
/// # Safety
/// `a` addresses every element of A; `dst` has room for [`len`]`(m, k)` floats and does
/// not overlap `a`.
pub(crate) unsafe fn pack(
    m: usize,
    k: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    dst: *mut f32,
) {
    for p in 0..m.div_ceil(LANES) {
        let rows = LANES.min(m - p * LANES);
        // SAFETY: panel p occupies dst[p·16·k .. (p+1)·16·k].
        let out = unsafe { dst.add(p * LANES * k) };
        for kk in 0..k {
            for r in 0..LANES {
                let v = if r < rows {
                    // SAFETY: (p·16 + r, kk) is an element of A.
                    unsafe { *a.offset((p * LANES + r) as isize * rsa + kk as isize * csa) }
                } else {
                    0.0
                };
                // SAFETY: inside panel p.
                unsafe { *out.add(kk * LANES + r) = v };
            }
        }
    }
}

/// The stack tile: column `j`'s `16·P` rows at `j·16·P` (`P ≤ PANELS`), 64-byte aligned.
#[repr(C, align(64))]
struct TileBuf([f32; LANES * PANELS * COLS]);

/// One tile: where it is and what its epilogue needs.
struct Tile {
    /// Panel 0 of the tile at `kk = 0`.
    a: *const f32,
    /// Floats between consecutive panels (`16·k`).
    pstride: usize,
    /// `B[0][j0]`.
    b: *const f32,
    rsb: isize,
    csb: isize,
    /// `C[row0][j0]`.
    c: *mut f32,
    rsc: isize,
    /// Valid rows (≤ 16·P) and columns (≤ COLS).
    rows: usize,
    cols: usize,
    /// Row bias at `row0` and column bias at `j0` (null: none).
    bias_row: *const f32,
    bias_col: *const f32,
}

/// `C = epilogue(A·B)` with A in lane panels at `ap` (`p.a` is ignored), computed by the
/// tiles of `imp`. `m`, `n`, `k` ≥ 1 (the driver routes the empty and `k = 0` cases).
///
/// # Safety
/// `ap` holds [`len`]`(m, k)` floats of lane panels; B, C and the bias are valid for the
/// problem (the `nnefc_sgemm` contract); `imp` is supported by the CPU.
pub(crate) unsafe fn run(imp: Impl, p: &Problem, ap: *const f32, epi: &GemmEpilogue) {
    let (m, n, k) = (p.m, p.n, p.k);
    let panels = m.div_ceil(LANES);
    let tiles = n.div_ceil(COLS);
    let pstride = LANES * k;
    let bias_row = if epi.bias_kind == 1 {
        epi.bias
    } else {
        core::ptr::null()
    };
    let bias_col = if epi.bias_kind == 2 {
        epi.bias
    } else {
        core::ptr::null()
    };
    let mut p0 = 0;
    while p0 < panels {
        let pp = PANELS.min(panels - p0);
        let row0 = p0 * LANES;
        for t in 0..tiles {
            let (j0, j1) = (t * n / tiles, (t + 1) * n / tiles);
            // SAFETY: panel p0 of A, column j0 of B, element (row0, j0) of C and the bias
            // entries row0 / j0 exist; the tile covers rows < m and columns < n only.
            unsafe {
                let tile = Tile {
                    a: ap.add(p0 * pstride),
                    pstride,
                    b: p.b.offset(j0 as isize * p.csb),
                    rsb: p.rsb,
                    csb: p.csb,
                    c: p.c.offset(row0 as isize * p.rsc).add(j0),
                    rsc: p.rsc,
                    rows: (pp * LANES).min(m - row0),
                    cols: j1 - j0,
                    bias_row: if bias_row.is_null() {
                        bias_row
                    } else {
                        bias_row.add(row0)
                    },
                    bias_col: if bias_col.is_null() {
                        bias_col
                    } else {
                        bias_col.add(j0)
                    },
                };
                run_tile(imp, pp, &tile, k, epi);
            }
        }
        p0 += pp;
    }
}

/// Calls `$f::<P, W>($args)` for the run-time `pp ∈ 1..=PANELS` and `w ∈ 1..=COLS`.
macro_rules! dispatch {
    ($pp:expr, $w:expr, $f:ident($($arg:expr),*)) => {
        match $pp {
            1 => dispatch!(@w 1, $w, $f($($arg),*)),
            _ => dispatch!(@w 2, $w, $f($($arg),*)),
        }
    };
    (@w $p:literal, $w:expr, $f:ident($($arg:expr),*)) => {
        match $w {
            1 => $f::<$p, 1>($($arg),*),
            2 => $f::<$p, 2>($($arg),*),
            3 => $f::<$p, 3>($($arg),*),
            4 => $f::<$p, 4>($($arg),*),
            5 => $f::<$p, 5>($($arg),*),
            6 => $f::<$p, 6>($($arg),*),
            7 => $f::<$p, 7>($($arg),*),
            8 => $f::<$p, 8>($($arg),*),
            9 => $f::<$p, 9>($($arg),*),
            10 => $f::<$p, 10>($($arg),*),
            11 => $f::<$p, 11>($($arg),*),
            12 => $f::<$p, 12>($($arg),*),
            13 => $f::<$p, 13>($($arg),*),
            _ => $f::<$p, 14>($($arg),*),
        }
    };
}

/// One tile: the old C (with `accumulate`) into the stack tile, then each k block added
/// to it, then the epilogue, then the copy into C.
///
/// # Safety
/// As for [`run`]; `t` describes a tile inside the problem, `pp ≤ PANELS`, `t.cols ≤ COLS`.
unsafe fn run_tile(imp: Impl, pp: usize, t: &Tile, k: usize, epi: &GemmEpilogue) {
    const _: () = assert!(PANELS == 2 && COLS == 14, "dispatch! covers these shapes");
    let mut buf = TileBuf([0.0; LANES * PANELS * COLS]);
    let h = pp * LANES;
    let accumulate = epi.accumulate != 0;
    // SAFETY (whole body): the tile's rows × cols of C exist; buf holds h·cols floats.
    unsafe {
        if accumulate {
            for r in 0..t.rows {
                let row = t.c.offset(r as isize * t.rsc);
                for j in 0..t.cols {
                    buf.0[j * h + r] = *row.add(j);
                }
            }
        }
        // The 6-row kernels' k blocks (`driver::blocked`): equal blocks of at most KC.
        let kc_step = k.div_ceil(k.div_ceil(KC));
        let mut pc = 0;
        while pc < k {
            let kc = kc_step.min(k - pc);
            let a = t.a.add(pc * LANES);
            let b = t.b.offset(pc as isize * t.rsb);
            let add = accumulate || pc > 0;
            let out = buf.0.as_mut_ptr();
            match imp {
                #[cfg(target_arch = "x86_64")]
                Impl::Avx512 => {
                    dispatch!(
                        pp,
                        t.cols,
                        block_avx512(kc, a, t.pstride, b, t.rsb, t.csb, out, add)
                    )
                }
                Impl::Portable => {
                    dispatch!(
                        pp,
                        t.cols,
                        block_portable(kc, a, t.pstride, b, t.rsb, t.csb, out, add)
                    )
                }
            }
            pc += kc;
        }
        match imp {
            #[cfg(target_arch = "x86_64")]
            Impl::Avx512 => finish_avx512(&mut buf, pp, t, epi),
            Impl::Portable => finish_portable(&mut buf, pp, t, epi),
        }
        for r in 0..t.rows {
            let row = t.c.offset(r as isize * t.rsc);
            for j in 0..t.cols {
                *row.add(j) = buf.0[j * h + r];
            }
        }
    }
}

/// `buf[j·16P + r] (+)= Σ_{kk < kc} A[r][kk]·B[kk][j]` for one k block, portable: each
/// product rounded, then added (the portable 6-row kernel's arithmetic).
///
/// # Safety
/// `a` is panel 0 of the tile at the block's first `kk` (panels `pstride` apart, `P` of
/// them, each with `kc·16` floats from there); `B[kk][j]` at `b + kk·rsb + j·csb` exists
/// for `kk < kc`, `j < W`; `buf` holds `16·P·W` floats.
#[allow(clippy::too_many_arguments)]
unsafe fn block_portable<const P: usize, const W: usize>(
    kc: usize,
    a: *const f32,
    pstride: usize,
    b: *const f32,
    rsb: isize,
    csb: isize,
    buf: *mut f32,
    add: bool,
) {
    let mut acc = [[[0.0f32; LANES]; P]; W];
    // SAFETY: the reads stay inside the panels and B rows the contract describes.
    unsafe {
        for kk in 0..kc {
            let bk = b.offset(kk as isize * rsb);
            for (j, acc_j) in acc.iter_mut().enumerate() {
                let bj = *bk.offset(j as isize * csb);
                for (p, acc_jp) in acc_j.iter_mut().enumerate() {
                    let av = a
                        .add(p * pstride + kk * LANES)
                        .cast::<[f32; LANES]>()
                        .read_unaligned();
                    for r in 0..LANES {
                        acc_jp[r] += av[r] * bj;
                    }
                }
            }
        }
        for (j, acc_j) in acc.iter().enumerate() {
            for (p, acc_jp) in acc_j.iter().enumerate() {
                let dst = buf.add((j * P + p) * LANES);
                for (r, &s) in acc_jp.iter().enumerate() {
                    let d = dst.add(r);
                    *d = if add { *d + s } else { s };
                }
            }
        }
    }
}

/// Bias and activation on the stack tile, portable (the order and NaN rules of the
/// 6-row kernels' tile epilogue).
fn finish_portable(buf: &mut TileBuf, pp: usize, t: &Tile, epi: &GemmEpilogue) {
    let h = pp * LANES;
    for j in 0..t.cols {
        for r in 0..t.rows {
            let v = &mut buf.0[j * h + r];
            // SAFETY: rows < t.rows and columns < t.cols of the bias exist when non-null.
            unsafe {
                if !t.bias_row.is_null() {
                    *v += *t.bias_row.add(r);
                }
                if !t.bias_col.is_null() {
                    *v += *t.bias_col.add(j);
                }
            }
            *v = activate(*v, epi.activation, epi.lo, epi.hi);
        }
    }
}

#[cfg(target_arch = "x86_64")]
use avx512::{block_avx512, finish_avx512};

/// The AVX-512 tile: 16 rows of C per register.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{LANES, Tile, TileBuf};
    use crate::gemm::GemmEpilogue;
    use core::arch::x86_64::*;

    /// As [`super::block_portable`], with one fused multiply-add per product (the AVX-512
    /// and AVX2 6-row kernels' arithmetic).
    ///
    /// # Safety
    /// As for [`super::block_portable`]; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn block_avx512<const P: usize, const W: usize>(
        kc: usize,
        a: *const f32,
        pstride: usize,
        b: *const f32,
        rsb: isize,
        csb: isize,
        buf: *mut f32,
        add: bool,
    ) {
        // SAFETY: the loads stay inside the panels and B rows of the contract.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); W]; P];
            let (mut ap, mut bp) = (a, b);
            for _ in 0..kc {
                let av: [__m512; P] =
                    core::array::from_fn(|p| _mm512_loadu_ps(ap.add(p * pstride)));
                for j in 0..W {
                    let bj = _mm512_set1_ps(*bp.offset(j as isize * csb));
                    for p in 0..P {
                        acc[p][j] = _mm512_fmadd_ps(av[p], bj, acc[p][j]);
                    }
                }
                ap = ap.add(LANES);
                bp = bp.offset(rsb);
            }
            for j in 0..W {
                for p in 0..P {
                    let dst = buf.add((j * P + p) * LANES);
                    let v = if add {
                        _mm512_add_ps(_mm512_loadu_ps(dst), acc[p][j])
                    } else {
                        acc[p][j]
                    };
                    _mm512_storeu_ps(dst, v);
                }
            }
        }
    }

    /// As [`super::finish_portable`], 16 rows at a time: the row bias is one (masked) vector
    /// load per panel, the activation the AVX-512 6-row kernel's NaN-propagating sequence.
    ///
    /// # Safety
    /// The CPU has AVX-512F; the bias pointers of `t` address its rows / columns.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn finish_avx512(buf: &mut TileBuf, pp: usize, t: &Tile, epi: &GemmEpilogue) {
        let h = pp * LANES;
        let zero = _mm512_setzero_ps();
        let nan = _mm512_set1_ps(f32::NAN);
        let (lo, hi) = (_mm512_set1_ps(epi.lo), _mm512_set1_ps(epi.hi));
        // SAFETY: buf holds h·cols floats; the row bias is read under the mask of valid
        // rows, the column bias for columns < cols.
        unsafe {
            for p in 0..pp {
                let valid = t.rows.saturating_sub(p * LANES).min(LANES);
                let mask: __mmask16 = if valid == LANES {
                    !0
                } else {
                    (1u16 << valid) - 1
                };
                let brow = if t.bias_row.is_null() {
                    None
                } else {
                    Some(_mm512_maskz_loadu_ps(mask, t.bias_row.add(p * LANES)))
                };
                for j in 0..t.cols {
                    let at = buf.0.as_mut_ptr().add(j * h + p * LANES);
                    let mut v = _mm512_load_ps(at);
                    if let Some(br) = brow {
                        v = _mm512_add_ps(v, br);
                    }
                    if !t.bias_col.is_null() {
                        v = _mm512_add_ps(v, _mm512_set1_ps(*t.bias_col.add(j)));
                    }
                    v = match epi.activation {
                        1 => _mm512_mask_mov_ps(
                            _mm512_max_ps(v, zero),
                            _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v),
                            v,
                        ),
                        2 => _mm512_mask_mov_ps(
                            _mm512_max_ps(_mm512_min_ps(hi, v), lo),
                            _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, hi),
                            nan,
                        ),
                        _ => v,
                    };
                    _mm512_store_ps(at, v);
                }
            }
        }
    }
}
