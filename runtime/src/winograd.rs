//! The input transform of the Winograd F(2×2, 3×3) convolution: compiled models call
//! [`nnefc_winograd_in`] for it (the compiler's `back::select::winograd` emits the call,
//! then the 16 tap products as one batched GEMM call, then the output transform). Both
//! entry points also run F(4×4, 3×3) when their arguments say 6×6 tiles (`kh = 6`; the
//! transforms are in `winograd4.rs`), and F(2×2) when they say 4×4.
//!
//! # Semantics
//! The input is a plane of `h × w` elements seen with `pt` zero rows above and `pl` zero
//! columns to its left, and zeros below and to the right as far as the tiles reach (the
//! caller's padding needs no copy): cut into `oh × ow` tiles `d` of 4×4 elements, two
//! apart, tile `(ty, tx)` reading rows `2·ty − pt + (0..4)` and columns `2·tx − pl +
//! (0..4)`. For every
//! sample `n`, channel `c` and tile `(ty, tx)` it writes the 16 elements of `V = Bᵀ d B`
//! (`Bᵀ` = [[1, 0, −1, 0], [0, 1, 1, 0], [0, −1, 1, 0], [0, 1, 0, −1]]), element
//! `t = 4a + b` to `y[n·y_sn + (t·c_count + c)·y_sc + ty·y_sh + tx]`: sixteen planes of
//! transformed tiles per sample, each holding every channel, the layout the tap products
//! read as their B operand. Each element is computed as `u_a(r_b)`: first along the rows,
//! `r0 = d0 − d2`, `r1 = d1 + d2`, `r2 = d2 − d1`, `r3 = d1 − d3`, then the same
//! combination down the columns of the `r`s; every path here computes those same
//! operations in that order, so the results do not depend on the CPU or the thread count.
//!
//! The AVX-512 path does 16 tiles of a tile row at a time: each input row's 34 elements
//! are loaded once and deinterleaved into the four tap columns (`d0 … d3` of the 16
//! tiles), instead of the sixteen strided passes of the compiler's loop nests. When the
//! planes of `V` (and, for the output transform, of the products) have room past their
//! last tile row (the compiler pads them by 16 floats), whole vectors are stored and
//! loaded where a row's last group of tiles would need masks.
//!
//! [`nnefc_winograd_out`] is the output transform: from the products `M` (laid out as
//! `V`, one plane per element and channel) it writes `Y = Aᵀ M A` (`Aᵀ` = [[1, 1, 1, 0],
//! [0, 1, −1, −1]]), the 2×2 outputs of every tile, plus the bias, the residual and the
//! activation: along the rows first, `s0 = m0 + m1 + m2`, `s1 = m1 − m2 − m3`, then down
//! the columns of the `s`s, then `+ bias`, `+ residual`, the activation (the GEMM
//! epilogue's). The AVX-512 path reads the 16 planes of 16 tiles once and interleaves the
//! two output columns of each tile into whole output rows.
//!
//! Not here: the filter transform (at compile time), the products, the F(4×4)
//! transforms (`winograd4.rs`).

use crate::DwArgs;
use crate::dwconv::{plane_ptrs, run};
use crate::parallel::Parallel;
use crate::winograd4;

/// The Winograd input transform `args` describes (see the module doc), in parallel over
/// planes when `par` offers several workers. `args.c` is the channel count, `args.h` and
/// `args.w` the input's extents, `args.pt` and `args.pl` its zero padding above and to
/// the left, `args.oh` and `args.ow` the tile counts; `kh` is the tile size: 6 for
/// F(4×4, 3×3) (tiles four apart, 36 planes per sample), anything else for F(2×2, 3×3)
/// (the compiler passes 4: tiles two apart, 16 planes); `kw`, strides, dilations,
/// filter, bias, residual and activation are not read (the compiler passes `kw = kh`,
/// strides `kh − 2`, dilations 1 and nulls). Rows and columns of the input no tile
/// reaches are not read.
///
/// # Safety
/// `args` points to a valid [`DwArgs`] whose `x` addresses the input planes and whose `y`
/// holds the 16 planes per sample it writes, each writable over its whole stride `y_sc`
/// (the transform may write past a plane's last tile up to there); they do not overlap;
/// `par` is null or a valid [`Parallel`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nnefc_winograd_in(args: *const DwArgs, par: *const Parallel) {
    // SAFETY: valid by the caller's contract.
    let f4 = unsafe { (*args).kh } == winograd4::TILE;
    // SAFETY: the caller's contract.
    unsafe { run(args, par, if f4 { in4_planes } else { in_planes }) }
}

/// The Winograd output transform `args` describes (see the module doc), in parallel over
/// planes when `par` offers several workers. `args.x` holds the products (`x_sn` floats
/// between samples, `x_sc` between planes, `x_sh` between tile rows; element `t` of
/// channel `c` at plane `t·channels + c`), `args.c` is the channel count, `args.kh` the
/// tile size as for [`nnefc_winograd_in`] (6: F(4×4), 4×4 outputs per tile; else F(2×2),
/// 2×2), `args.h` and `args.w` the output extents (`h` at most `oh` tiles' outputs and
/// more than `oh − 1` tiles', likewise for `w`), `args.oh` and `args.ow` the tile counts;
/// `bias` (stride `bias_sc`), `res`, `act`, `lo` and `hi` the epilogue as for
/// [`crate::nnefc_dwconv`]; `kw`, stride, dilation and padding fields are not read.
/// Extents that do not match do nothing.
///
/// # Safety
/// `args` points to a valid [`DwArgs`] whose pointers and strides address buffers of the
/// described extents, every plane of products readable over its whole stride `x_sc` (the
/// transform may read past a plane's last tile up to there); `y` does not overlap `x` or
/// the bias (`res` may equal `y`); `par` is null or a valid [`Parallel`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nnefc_winograd_out(args: *const DwArgs, par: *const Parallel) {
    // SAFETY: valid by the caller's contract.
    let a = unsafe { &*args };
    let f4 = a.kh == winograd4::TILE;
    let step = if f4 { winograd4::OUT } else { 2 };
    if a.h.div_ceil(step) != a.oh || a.w.div_ceil(step) != a.ow {
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { run(args, par, if f4 { out4_planes } else { out_planes }) }
}

/// Planes `[lo, hi)` (plane `p` = sample `p / c`, channel `p % c`) of a transform with
/// the widest code the CPU has: `vector` where it runs an AVX-512 kernel family, else
/// `portable`.
///
/// # Safety
/// As for the transform's entry point; `vector` may assume AVX-512F.
#[inline(always)]
unsafe fn widest(
    a: &DwArgs,
    lo: usize,
    hi: usize,
    vector: unsafe fn(&DwArgs, usize, usize),
    portable: unsafe fn(&DwArgs, usize, usize),
) {
    #[cfg(target_arch = "x86_64")]
    if crate::gemm::avx512_selected() {
        // SAFETY: the CPU has AVX-512F (that is what selected the kernel family).
        return unsafe { vector(a, lo, hi) };
    }
    let _ = vector;
    // SAFETY: the caller's contract.
    unsafe { portable(a, lo, hi) }
}

/// Output planes `[lo, hi)`.
unsafe fn out_planes(a: &DwArgs, lo: usize, hi: usize) {
    #[cfg(target_arch = "x86_64")]
    let vector = avx512::out_planes;
    #[cfg(not(target_arch = "x86_64"))]
    let vector = out_portable;
    // SAFETY: forwarded.
    unsafe { widest(a, lo, hi, vector, out_portable) }
}

/// F(4×4) output planes `[lo, hi)`.
unsafe fn out4_planes(a: &DwArgs, lo: usize, hi: usize) {
    #[cfg(target_arch = "x86_64")]
    let vector = winograd4::avx512::out_planes;
    #[cfg(not(target_arch = "x86_64"))]
    let vector = winograd4::out_portable;
    // SAFETY: forwarded.
    unsafe { widest(a, lo, hi, vector, winograd4::out_portable) }
}

/// F(4×4) input planes `[lo, hi)`.
unsafe fn in4_planes(a: &DwArgs, lo: usize, hi: usize) {
    #[cfg(target_arch = "x86_64")]
    let vector = winograd4::avx512::in_planes;
    #[cfg(not(target_arch = "x86_64"))]
    let vector = winograd4::in_portable;
    // SAFETY: forwarded.
    unsafe { widest(a, lo, hi, vector, winograd4::in_portable) }
}

/// Input planes `[lo, hi)`.
unsafe fn in_planes(a: &DwArgs, lo: usize, hi: usize) {
    #[cfg(target_arch = "x86_64")]
    let vector = avx512::planes;
    #[cfg(not(target_arch = "x86_64"))]
    let vector = portable;
    // SAFETY: forwarded.
    unsafe { widest(a, lo, hi, vector, portable) }
}

/// `Aᵀ` applied to four values (see the module doc for the order of the operations).
#[inline(always)]
fn at(m: [f32; 4]) -> [f32; 2] {
    [m[0] + m[1] + m[2], m[1] - m[2] - m[3]]
}

/// Every output, one tile at a time.
unsafe fn out_portable(a: &DwArgs, lo: usize, hi: usize) {
    // SAFETY: forwarded.
    unsafe { out_tiles::<4, 2>(a, lo, hi, at) }
}

/// Output planes `[lo, hi)` of a transform whose tiles hold `S × S` products and `O × O`
/// outputs, one tile at a time: `at` (its `Aᵀ`) along the rows, then down the columns,
/// then the bias, the residual and the activation (the order every path follows).
///
/// # Safety
/// As for `nnefc_winograd_out`.
pub(crate) unsafe fn out_tiles<const S: usize, const O: usize>(
    a: &DwArgs,
    lo: usize,
    hi: usize,
    at: fn([f32; S]) -> [f32; O],
) {
    let t_step = a.c as isize * a.x_sc;
    for p in lo..hi {
        // SAFETY: plane p of the caller's buffers; `m0` its products' element 0.
        let (m0, y, res, _, b) = unsafe { plane_ptrs(a, p / a.c, p % a.c) };
        for ty in 0..a.oh {
            for tx in 0..a.ow {
                let tile = ty as isize * a.x_sh + tx as isize;
                // SAFETY: element t of this tile's products; the plane's outputs.
                unsafe {
                    store_tile::<S, O>(a, y, res, b, (ty, tx), at, |t| {
                        *m0.wrapping_offset(t as isize * t_step + tile)
                    })
                };
            }
        }
    }
}

/// The outputs of tile `(ty, tx)` inside `a.h × a.w`, from its `S × S` products (`m(t)`
/// for `t = S·a + b`): `at` (`Aᵀ`) along the rows, then down the columns, then `+ b`,
/// `+ res`, the activation, stored to the output plane at `y` (`res` its residual, or
/// null). The order every path of the output transforms follows.
///
/// # Safety
/// `y` (and `res`, when not null) address an output plane of `a`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn store_tile<const S: usize, const O: usize>(
    a: &DwArgs,
    y: *mut f32,
    res: *const f32,
    b: f32,
    (ty, tx): (usize, usize),
    at: fn([f32; S]) -> [f32; O],
    m: impl Fn(usize) -> f32,
) {
    let s: [[f32; O]; S] = core::array::from_fn(|aa| at(core::array::from_fn(|bb| m(S * aa + bb))));
    for j in 0..O {
        let v = at(s.map(|row| row[j]));
        for (i, &vi) in v.iter().enumerate() {
            let (oy, ox) = (O * ty + i, O * tx + j);
            if oy >= a.h || ox >= a.w {
                continue;
            }
            let off = oy as isize * a.y_sh + ox as isize;
            let mut o = vi + b;
            if !res.is_null() {
                // SAFETY: the residual of this output.
                o += unsafe { *res.wrapping_offset(off) };
            }
            let o = crate::gemm::activate(o, a.act as u32, a.lo, a.hi);
            // SAFETY: an output of this plane.
            unsafe { *y.wrapping_offset(off) = o };
        }
    }
}

/// `Bᵀ` applied to four values (see the module doc for the order of the operations).
#[inline(always)]
fn bt(d: [f32; 4]) -> [f32; 4] {
    [d[0] - d[2], d[1] + d[2], d[2] - d[1], d[1] - d[3]]
}

/// Every tile, one at a time.
unsafe fn portable(a: &DwArgs, lo: usize, hi: usize) {
    // SAFETY: forwarded.
    unsafe { in_tiles::<4>(a, lo, hi, bt) }
}

/// Input planes `[lo, hi)` of a transform with `S × S` tiles (`S − 2` apart), one tile
/// at a time: `bt` (its `Bᵀ`) along the rows, then down the columns.
///
/// # Safety
/// As for `nnefc_winograd_in`.
pub(crate) unsafe fn in_tiles<const S: usize>(
    a: &DwArgs,
    lo: usize,
    hi: usize,
    bt: fn([f32; S]) -> [f32; S],
) {
    let t_step = a.c as isize * a.y_sc;
    for p in lo..hi {
        // SAFETY: plane p of the caller's buffers; `y` its element 0's plane (element
        // `t` is `t·c·y_sc` further).
        let (x, y, ..) = unsafe { plane_ptrs(a, p / a.c, p % a.c) };
        for ty in 0..a.oh {
            for tx in 0..a.ow {
                let r: [[f32; S]; S] = core::array::from_fn(|i| {
                    let iy = ((S - 2) * ty + i) as isize - a.pt as isize;
                    bt(core::array::from_fn(|j| {
                        let ix = ((S - 2) * tx + j) as isize - a.pl as isize;
                        if iy < 0 || ix < 0 || iy >= a.h as isize || ix >= a.w as isize {
                            return 0.0;
                        }
                        // SAFETY: an element of the plane.
                        unsafe { *x.wrapping_offset(iy * a.x_sh + ix) }
                    }))
                });
                for b in 0..S {
                    let v = bt(r.map(|row| row[b]));
                    for (aa, &va) in v.iter().enumerate() {
                        let at =
                            (S * aa + b) as isize * t_step + ty as isize * a.y_sh + tx as isize;
                        // SAFETY: element (aa, b) of this tile's output.
                        unsafe { *y.wrapping_offset(at) = va };
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::DwArgs;
    use crate::dwconv::avx512::finish;
    use crate::dwconv::{lanes, lanes3, plane_ptrs};
    use crate::gemm::store16;
    use core::arch::x86_64::*;

    /// `Aᵀ` applied to four vectors, lane by lane (the operations of [`super::at`]).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn at(m: [__m512; 4]) -> [__m512; 2] {
        [
            _mm512_add_ps(_mm512_add_ps(m[0], m[1]), m[2]),
            _mm512_sub_ps(_mm512_sub_ps(m[1], m[2]), m[3]),
        ]
    }

    /// Output planes `[lo, hi)`: 16 tiles of a tile row (two output rows of 32 columns)
    /// at a time.
    ///
    /// # Safety
    /// As for `nnefc_winograd_out`; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn out_planes(a: &DwArgs, lo: usize, hi: usize) {
        // Output column 2l + j of 16 tiles: lanes l of the j = 0 and j = 1 vectors.
        let zip_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        let zip_hi = _mm512_add_epi32(zip_lo, _mm512_set1_epi32(8));
        let t_step = a.c as isize * a.x_sc;
        let w = a.w as isize;
        let whole = super::room(a.x_sh, a.x_sc, a.oh, a.ow);
        for p in lo..hi {
            // SAFETY: plane p of the caller's buffers; `m0` its products' element 0.
            let (m0, y, res, _, b) = unsafe { plane_ptrs(a, p / a.c, p % a.c) };
            let bias = _mm512_set1_ps(b);
            let mut tx0 = 0;
            while tx0 < a.ow {
                // Lanes past the tiles (read whole when the planes have room) only reach
                // output columns the stores leave out.
                let live = if whole {
                    0xFFFF
                } else {
                    lanes(0, (a.ow - tx0) as isize)
                };
                let c0 = (2 * tx0) as isize;
                let cols = [lanes(0, w - c0), lanes(0, w - c0 - 16)];
                for ty in 0..a.oh {
                    let tile = ty as isize * a.x_sh + tx0 as isize;
                    // SAFETY: the live tiles of the 16 products, or 16 within the plane
                    // (`room`).
                    let m = |t: usize| unsafe {
                        let src = m0.wrapping_offset(t as isize * t_step + tile);
                        if whole {
                            _mm512_loadu_ps(src)
                        } else {
                            _mm512_maskz_loadu_ps(live, src)
                        }
                    };
                    let s: [[__m512; 2]; 4] = core::array::from_fn(|aa| {
                        at([m(4 * aa), m(4 * aa + 1), m(4 * aa + 2), m(4 * aa + 3)])
                    });
                    // Output row i: column j = 0 of the tiles, and j = 1.
                    let (j0, j1) = (at(s.map(|r| r[0])), at(s.map(|r| r[1])));
                    let v = [[j0[0], j1[0]], [j0[1], j1[1]]];
                    for (i, [e, o]) in v.into_iter().enumerate() {
                        let oy = 2 * ty + i;
                        if oy >= a.h {
                            continue;
                        }
                        let (e, o) = (_mm512_add_ps(e, bias), _mm512_add_ps(o, bias));
                        let row = oy as isize * a.y_sh + c0;
                        // SAFETY: the output columns of this row the tiles cover.
                        unsafe {
                            finish(
                                _mm512_permutex2var_ps(e, zip_lo, o),
                                a,
                                y,
                                res,
                                row,
                                cols[0],
                            );
                            finish(
                                _mm512_permutex2var_ps(e, zip_hi, o),
                                a,
                                y,
                                res,
                                row + 16,
                                cols[1],
                            );
                        }
                    }
                }
                tx0 += 16;
            }
        }
    }

    /// `Bᵀ` applied to four vectors, lane by lane (the operations of [`super::bt`]).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn bt(d: [__m512; 4]) -> [__m512; 4] {
        [
            _mm512_sub_ps(d[0], d[2]),
            _mm512_add_ps(d[1], d[2]),
            _mm512_sub_ps(d[2], d[1]),
            _mm512_sub_ps(d[1], d[3]),
        ]
    }

    /// Planes `[lo, hi)`: 16 tiles of a tile row at a time.
    ///
    /// # Safety
    /// As for `nnefc_winograd_in`; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn planes(a: &DwArgs, lo: usize, hi: usize) {
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
        let t_step = a.c as isize * a.y_sc;
        let w = a.w as isize;
        let whole = super::room(a.y_sh, a.y_sc, a.oh, a.ow);
        for p in lo..hi {
            // SAFETY: plane p of the caller's buffers.
            let (x, y, ..) = unsafe { plane_ptrs(a, p / a.c, p % a.c) };
            // Tile rows in order, so that a whole-vector store past a row's last tile
            // lands on tiles of the next row, written after it.
            for ty in 0..a.oh {
                let mut tx0 = 0;
                while tx0 < a.ow {
                    // Tiles tx0.. read columns 2·tx0 − pl + (0..34) (the plane's, as far
                    // as it goes; zeros elsewhere).
                    let c0 = (2 * tx0) as isize - a.pl as isize;
                    let m = lanes3(-c0, w - c0);
                    let live = if whole {
                        0xFFFF
                    } else {
                        lanes(0, (a.ow - tx0) as isize)
                    };
                    let r: [[__m512; 4]; 4] = core::array::from_fn(|i| {
                        let iy = (2 * ty + i) as isize - a.pt as isize;
                        let zero = _mm512_setzero_ps();
                        if iy < 0 || iy >= a.h as isize {
                            return bt([zero; 4]);
                        }
                        let src = x.wrapping_offset(iy * a.x_sh + c0);
                        // SAFETY: masked-off lanes are not read; the others are in the row.
                        let (v0, v1, v2) = unsafe {
                            (
                                _mm512_maskz_loadu_ps(m[0], src),
                                _mm512_maskz_loadu_ps(m[1], src.wrapping_add(16)),
                                _mm512_maskz_loadu_ps(m[2], src.wrapping_add(32)),
                            )
                        };
                        // Tap column j of tile l is column 2l + j: evens, odds, and both
                        // shifted by one tile (their 16th from the third load).
                        let e = _mm512_permutex2var_ps(v0, even, v1);
                        let o = _mm512_permutex2var_ps(v0, odd, v1);
                        let shift = |lo: __m512, hi: __m512| {
                            _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(
                                _mm512_castps_si512(hi),
                                _mm512_castps_si512(lo),
                            ))
                        };
                        let (e2, o2) = (
                            shift(e, _mm512_permutexvar_ps(even, v2)),
                            shift(o, _mm512_permutexvar_ps(odd, v2)),
                        );
                        bt([e, o, e2, o2])
                    });
                    let at = ty as isize * a.y_sh + tx0 as isize;
                    for b in 0..4 {
                        let v = bt(r.map(|row| row[b]));
                        for (aa, &va) in v.iter().enumerate() {
                            let dst = y.wrapping_offset((4 * aa + b) as isize * t_step + at);
                            // SAFETY: the live tiles of element (aa, b) of this tile row,
                            // or 16 within the plane (`room`).
                            unsafe { store16(dst, live, va) };
                        }
                    }
                    tx0 += 16;
                }
            }
        }
    }
}

/// Whether planes of `oh` rows of `ow` tiles, `row` floats apart, `plane` floats apart,
/// have room for whole 16-lane accesses from every group of 16 tiles: the last row's
/// last group ends inside the plane, and rows do not overlap. The transforms then load
/// and store whole vectors, the lanes past a row's tiles landing on the next row's or on
/// the plane's padding, where masked accesses of partial groups cost AMD's Zen cores
/// several times a whole one (resnet18's 7×7 layers: 512 planes of 4×4 tiles).
pub(crate) fn room(row: isize, plane: isize, oh: usize, ow: usize) -> bool {
    oh > 0 && row >= ow as isize && plane >= (oh as isize - 1) * row + 16 * ow.div_ceil(16) as isize
}

#[cfg(all(test, feature = "std"))]
pub(crate) mod tests {
    use super::*;
    use crate::dwconv::tests::Lcg;

    /// The arguments of a transform of `[n, c, h, w, oh, ow]` with every pointer null and
    /// every stride 0 (the tests fill in theirs).
    pub(crate) fn geometry([n, c, h, w, oh, ow]: [usize; 6]) -> DwArgs {
        DwArgs {
            n,
            c,
            h,
            w,
            oh,
            ow,
            kh: 4,
            kw: 4,
            sh: 2,
            sw: 2,
            dh: 1,
            dw: 1,
            pt: 0,
            pl: 0,
            x: core::ptr::null(),
            x_sn: 0,
            x_sc: 0,
            x_sh: 0,
            filter: core::ptr::null(),
            bias: core::ptr::null(),
            bias_sc: 0,
            res: core::ptr::null(),
            y: core::ptr::null_mut(),
            y_sn: 0,
            y_sc: 0,
            y_sh: 0,
            act: 0,
            lo: 0.0,
            hi: 0.0,
        }
    }

    /// Runs `kernel` serially, on `pool` and as 3 workers in reverse task order, and
    /// `portable` over every plane, each into a fresh output of NaNs that `args`
    /// describes; asserts that the four agree bit for bit (a task that stores over
    /// another's outputs shows in the reverse order) and are within `tol` of `want`,
    /// relative to `scale` (the magnitude of the terms each element sums, or of the
    /// element itself where `scale` is empty; absolute below 1), at the elements `keep`
    /// accepts (the others are padding the vector path may write).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check(
        case: usize,
        want: &[f64],
        scale: &[f64],
        tol: f64,
        pool: &crate::ThreadPool,
        args: &dyn Fn(&mut [f32]) -> DwArgs,
        kernel: unsafe extern "C" fn(*const DwArgs, *const Parallel),
        portable: unsafe fn(&DwArgs, usize, usize),
        keep: &dyn Fn(usize) -> bool,
    ) {
        let mut runs = Vec::new();
        let reverse = crate::gemm::tests::reversed(3);
        for par in [
            core::ptr::null(),
            &pool.parallel() as *const Parallel,
            &reverse,
        ] {
            let mut y = vec![f32::NAN; want.len()];
            let a = args(&mut y);
            unsafe { kernel(&a, par) };
            runs.push(y);
        }
        let mut y = vec![f32::NAN; want.len()];
        let a = args(&mut y);
        unsafe { portable(&a, 0, a.n * a.c) };
        runs.push(y);
        for (k, got) in runs.iter().enumerate() {
            assert!(
                got.iter()
                    .zip(&runs[0])
                    .enumerate()
                    .all(|(i, (p, q))| !keep(i) || p.to_bits() == q.to_bits()),
                "case {case}: run {k} differs from the serial vector run"
            );
        }
        for (i, (&g, &v)) in runs[0].iter().zip(want).enumerate() {
            if !keep(i) {
                continue;
            }
            assert!(
                (f64::from(g) - v).abs() <= tol * scale.get(i).map_or(v.abs(), |m| *m).max(1.0),
                "case {case}: element {i}: {g} vs {v}"
            );
        }
    }

    /// Random tile counts (rows narrower and wider than 16 tiles, strided planes and
    /// samples): the vector path (where the CPU has it), a pool of workers and the portable
    /// path give the same bits, within rounding of the definition.
    #[test]
    fn winograd_input_transform_matches_the_definition() {
        let bt = [
            [1.0, 0.0, -1.0, 0.0],
            [0.0, 1.0, 1.0, 0.0],
            [0.0, -1.0, 1.0, 0.0],
            [0.0, 1.0, 0.0, -1.0],
        ]
        .map(|r| r.to_vec());
        check_input_transform(5, &bt, 1e-6, &geometry, portable);
    }

    /// Sixty random cases of an input transform with `Bᵀ = bt` (`side × side`, tiles
    /// `side − 2` apart) against its definition in f64, within `tol` relative (absolute
    /// below 1): `geometry` gives its arguments,
    /// `portable` its portable path. Tile rows narrower and wider than 16 tiles, six cases
    /// of 64–79 channels and 6–10 rows of 5–16 tiles (cut over threads), zero
    /// padding of 0–2 above and to the left, inputs that stop short of the tiles' last
    /// rows and columns (read as zeros), strided rows, planes and samples, and output
    /// planes dense or padded by 16 (every other case).
    pub(crate) fn check_input_transform(
        seed: u64,
        bt: &[Vec<f64>],
        tol: f64,
        geometry: &dyn Fn([usize; 6]) -> DwArgs,
        portable: unsafe fn(&DwArgs, usize, usize),
    ) {
        let side = bt.len();
        let (step, planes) = (side - 2, side * side);
        let mut r = Lcg(seed);
        let pool = crate::ThreadPool::new(3).expect("pool");
        for case in 0..60 {
            // Every tenth case has enough work to be cut over threads (the smaller ones
            // run on the calling thread).
            let big = case % 10 == 9;
            let (n, c) = (
                1 + r.below(2),
                if big {
                    64 + r.below(16)
                } else {
                    1 + r.below(5)
                },
            );
            let (th, tw) = if big {
                (6 + r.below(5), 5 + r.below(12))
            } else {
                (
                    1 + r.below(9),
                    1 + r.below(if case % 3 == 0 { 40 } else { 12 }),
                )
            };
            let (pt, pl) = (r.below(3), r.below(3));
            // Tiles reach row step·th + 2; inputs stop up to `step` short of that.
            let h = step * th + 2 - pt - r.below(step + 1).min(step * th + 1 - pt);
            let w = step * tw + 2 - pl - r.below(step + 1).min(step * tw + 1 - pl);
            let (x_sh, x_sc) = (w + r.below(3), (h + r.below(2)) * (w + 2));
            let x_sn = c * x_sc + r.below(5);
            let x: Vec<f32> = (0..n * x_sn).map(|_| r.next()).collect();
            let tiles = th * tw;
            let yp = if case % 2 == 1 { tiles + 16 } else { tiles };
            let mut want = vec![0.0f64; n * planes * c * yp];
            for ni in 0..n {
                for ci in 0..c {
                    for ty in 0..th {
                        for tx in 0..tw {
                            let d = |i: usize, j: usize| {
                                let (iy, ix) = (step * ty + i, step * tx + j);
                                if iy < pt || ix < pl || iy - pt >= h || ix - pl >= w {
                                    return 0.0;
                                }
                                f64::from(x[ni * x_sn + ci * x_sc + (iy - pt) * x_sh + ix - pl])
                            };
                            for (aa, ba) in bt.iter().enumerate() {
                                for (b, bb) in bt.iter().enumerate() {
                                    let mut s = 0.0;
                                    for (i, bai) in ba.iter().enumerate() {
                                        for (j, bbj) in bb.iter().enumerate() {
                                            s += bai * bbj * d(i, j);
                                        }
                                    }
                                    let t = side * aa + b;
                                    want[((ni * planes + t) * c + ci) * yp + ty * tw + tx] = s;
                                }
                            }
                        }
                    }
                }
            }
            let args = |y: &mut [f32]| DwArgs {
                x: x.as_ptr(),
                x_sn: x_sn as isize,
                x_sc: x_sc as isize,
                x_sh: x_sh as isize,
                y: y.as_mut_ptr(),
                y_sn: (planes * c * yp) as isize,
                y_sc: yp as isize,
                y_sh: tw as isize,
                pt,
                pl,
                ..geometry([n, c, h, w, th, tw])
            };
            check(
                case,
                &want,
                &[],
                tol,
                &pool,
                &args,
                nnefc_winograd_in,
                portable,
                &|i| i % yp < tiles,
            );
        }
    }

    /// Random tile counts, odd output extents, strided products, bias, residual and each
    /// activation: the vector path, a pool and the portable path give the same bits,
    /// within rounding of `bias + Aᵀ M A (+ res)` then the activation.
    #[test]
    fn winograd_output_transform_matches_the_definition() {
        let at = [[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, -1.0, -1.0]].map(|r| r.to_vec());
        check_output_transform(9, &at, &geometry, out_portable, &|r, case| {
            let w = 1 + r.below(if case % 3 == 0 { 80 } else { 24 });
            (w, w.div_ceil(2) + r.below(3))
        });
    }

    /// Sixty random cases of an output transform with `Aᵀ = at` (`out × side`, tiles
    /// `out` outputs apart, `side²` products per tile) against its definition in f64:
    /// `geometry` gives its arguments, `portable` its portable path, and `width(r, case)`
    /// the output width and the products' row stride. Odd output extents, padded and
    /// unpadded planes, strided samples, bias, residual (every other case) and each
    /// activation.
    pub(crate) fn check_output_transform(
        seed: u64,
        at: &[Vec<f64>],
        geometry: &dyn Fn([usize; 6]) -> DwArgs,
        portable: unsafe fn(&DwArgs, usize, usize),
        width: &dyn Fn(&mut Lcg, usize) -> (usize, usize),
    ) {
        let (out, side) = (at.len(), at[0].len());
        let mut r = Lcg(seed);
        let pool = crate::ThreadPool::new(3).expect("pool");
        for case in 0..60 {
            let (n, c) = (1 + r.below(2), 1 + r.below(5));
            let h = 1 + r.below(5 * out + 7);
            let (w, x_sh) = width(&mut r, case);
            let (th, tw) = (h.div_ceil(out), w.div_ceil(out));
            // Odd cases pad each plane of products by 16 (room for whole-vector loads).
            let x_sc = th * x_sh + r.below(4) + if case % 2 == 1 { 16 } else { 0 };
            let x_sn = side * side * c * x_sc + r.below(5);
            let m: Vec<f32> = (0..n * x_sn).map(|_| r.next()).collect();
            let bias: Vec<f32> = (0..c).map(|_| r.next()).collect();
            let res: Vec<f32> = (0..n * c * h * w).map(|_| r.next()).collect();
            let with_res = case % 2 == 0;
            let act = case % 6;
            let (lo, hi) = (-0.5f32, 0.75f32);
            let mut want = vec![0.0f64; n * c * h * w];
            // The magnitude of the terms each output sums: F(4×4)'s `Aᵀ` reaches 8, so
            // its sums cancel terms far larger than themselves.
            let mut mag = vec![0.0f64; n * c * h * w];
            for ni in 0..n {
                for ci in 0..c {
                    for oy in 0..h {
                        for ox in 0..w {
                            let (ty, tx, i, j) = (oy / out, ox / out, oy % out, ox % out);
                            let mut s = f64::from(bias[ci]);
                            let mut sm = s.abs();
                            for (aa, ra) in at[i].iter().enumerate() {
                                for (bb, rb) in at[j].iter().enumerate() {
                                    let t = side * aa + bb;
                                    let term = ra
                                        * rb
                                        * f64::from(
                                            m[ni * x_sn + (t * c + ci) * x_sc + ty * x_sh + tx],
                                        );
                                    s += term;
                                    sm += term.abs();
                                }
                            }
                            let at = ((ni * c + ci) * h + oy) * w + ox;
                            if with_res {
                                s += f64::from(res[at]);
                                sm += f64::from(res[at]).abs();
                            }
                            mag[at] = sm;
                            want[at] = crate::gemm::tests::activate_f64(s, act as u32, lo, hi);
                        }
                    }
                }
            }
            let args = |y: &mut [f32]| DwArgs {
                x: m.as_ptr(),
                x_sn: x_sn as isize,
                x_sc: x_sc as isize,
                x_sh: x_sh as isize,
                bias: bias.as_ptr(),
                bias_sc: 1,
                res: if with_res {
                    res.as_ptr()
                } else {
                    core::ptr::null()
                },
                y: y.as_mut_ptr(),
                y_sn: (c * h * w) as isize,
                y_sc: (h * w) as isize,
                y_sh: w as isize,
                act,
                lo,
                hi,
                ..geometry([n, c, h, w, th, tw])
            };
            check(
                case,
                &want,
                &mag,
                1e-6,
                &pool,
                &args,
                nnefc_winograd_out,
                portable,
                &|_| true,
            );
        }
    }
}
