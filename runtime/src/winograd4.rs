//! The transforms of the Winograd F(4×4, 3×3) convolution, reached through
//! `nnefc_winograd_in` / `nnefc_winograd_out` when their arguments say 6×6 tiles
//! (`kh = kw = 6`, see `winograd.rs`). Against F(2×2, 3×3) the tap products shrink from
//! 16 planes per 4 outputs to 36 per 16 (2.25 against 4 multiply-adds per output and input
//! channel, against 9 directly), and so do the planes the transforms write and read.
//!
//! # Semantics
//! Input: the plane is seen as in the F(2×2) transform (`pt` zero rows above, `pl` zero
//! columns to the left, zeros past it), cut into `oh × ow` tiles `d` of 6×6 elements four
//! apart: tile `(ty, tx)` reads rows `4·ty − pt + (0..6)` and columns `4·tx − pl + (0..6)`.
//! It writes the 36 elements of `V = Bᵀ d B`, element `t = 6a + b` to
//! `y[n·y_sn + (t·c_count + c)·y_sc + ty·y_sh + tx]`, with
//! `Bᵀ` = [[4, 0, −5, 0, 1, 0], [0, −4, −4, 1, 1, 0], [0, 4, −4, −1, 1, 0],
//! [0, −2, −1, 2, 1, 0], [0, 2, −1, −2, 1, 0], [0, 4, 0, −5, 0, 1]] (Lavin's points 0, ±1,
//! ±2). Each element is `u_a(r_b)`, first along the rows (`r = bt(d_row)`), then the same
//! combination down the columns of the `r`s, where `bt` is, in this order:
//! `t2 = d4 − d2`, `r0 = 4·(d0 − d2) + t2`, `t0 = d4 − 4·d2`, `t1 = d3 − 4·d1`,
//! `r1 = t0 + t1`, `r2 = t0 − t1`, `t3 = 2·(d3 − d1)`, `r3 = t2 + t3`, `r4 = t2 − t3`,
//! `r5 = 4·(d1 − d3) + (d5 − d3)` (multiplications by powers of two are exact).
//!
//! Output: from the products `M` (laid out as `V`) it writes `Y = Aᵀ M A`, with
//! `Aᵀ` = [[1, 1, 1, 1, 1, 0], [0, 1, −1, 2, −2, 0], [0, 1, 1, 4, 4, 0],
//! [0, 1, −1, 8, −8, 1]], the 4×4 outputs of every tile that fall inside `h × w`, plus
//! the bias, the residual and the activation. `at` is, in this order: `p = m1 + m2`,
//! `q = m1 − m2`, `s = m3 + m4`, `d = m3 − m4`, `y0 = (m0 + p) + s`, `y1 = q + 2·d`,
//! `y2 = p + 4·s`, `y3 = (q + 8·d) + m5`; along the rows first, then down the columns,
//! then `+ bias`, `+ residual`, the activation. Every path computes those operations in
//! that order (no fused multiply-adds), so results do not depend on the CPU or the thread
//! count. The filter transform `U = G g Gᵀ` is the compiler's.
//!
//! The AVX-512 paths take 16 tiles of a tile row at a time: the input transform loads each
//! of its 6 input rows' 66 columns once and splits them into the 6 tap columns with eight
//! two-source permutes (even/odd twice) and two shifts; the output transform reads the 36
//! planes of 16 tiles once and interleaves the four output columns of each tile into
//! whole output rows. Where a tile row is dense and narrow, a step takes 16 tiles across
//! rows instead, so small maps fill their vectors: two rows of at most 7 tiles (both
//! transforms), or the next 16 tiles of rows a multiple of 4 tiles wide (the output
//! transform).
//!
//! Not here: the entry points and the F(2×2) transforms (`winograd.rs`), the products.

use crate::DwArgs;

/// Elements of a tile side (input) and outputs per tile side.
pub(crate) const TILE: usize = 6;
/// Outputs per tile side.
pub(crate) const OUT: usize = 4;

/// `Bᵀ` applied to six values (see the module doc for the order of the operations).
#[inline(always)]
fn bt(d: [f32; 6]) -> [f32; 6] {
    let t2 = d[4] - d[2];
    let r0 = 4.0 * (d[0] - d[2]) + t2;
    let t0 = d[4] - 4.0 * d[2];
    let t1 = d[3] - 4.0 * d[1];
    let t3 = 2.0 * (d[3] - d[1]);
    let r5 = 4.0 * (d[1] - d[3]) + (d[5] - d[3]);
    [r0, t0 + t1, t0 - t1, t2 + t3, t2 - t3, r5]
}

/// `Aᵀ` applied to six values (see the module doc for the order of the operations).
#[inline(always)]
pub(crate) fn at(m: [f32; 6]) -> [f32; 4] {
    let (p, q, s, d) = (m[1] + m[2], m[1] - m[2], m[3] + m[4], m[3] - m[4]);
    [
        (m[0] + p) + s,
        q + 2.0 * d,
        p + 4.0 * s,
        (q + 8.0 * d) + m[5],
    ]
}

/// Input planes `[lo, hi)`, one tile at a time.
pub(crate) unsafe fn in_portable(a: &DwArgs, lo: usize, hi: usize) {
    // SAFETY: forwarded.
    unsafe { crate::winograd::in_tiles::<TILE>(a, lo, hi, bt) }
}

/// Output planes `[lo, hi)`, one tile at a time.
pub(crate) unsafe fn out_portable(a: &DwArgs, lo: usize, hi: usize) {
    // SAFETY: forwarded.
    unsafe { crate::winograd::out_tiles::<TILE, OUT>(a, lo, hi, at) }
}

/// How a plane's tiles are taken 16 at a time (one vector) by the AVX-512 output paths
/// (the output transform and the fused products, `winograd_fused.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Walk {
    /// 16 tiles of one tile row: vector `j` is tile row `j % oh`, tiles from
    /// `16·(j / oh)`.
    Rows,
    /// Dense rows a multiple of 4 tiles wide: vector `j` is tiles `16·j .. 16·j + 16` in
    /// order, whatever rows they span (four tiles always share a row). A 13×13 map's 4×4
    /// tiles take one vector instead of four of 4 live lanes each (a 64→256 conv alone,
    /// Zen 5, `nnefc bench --profile --per-step`: output transform 0.038 → 0.017 ms).
    Flat,
    /// Dense rows of 5–7 tiles: vector `j` is tile rows `2·j` and `2·j + 1`, one load of
    /// 16 consecutive tiles spread by a permute into 8 lanes each, where each row alone
    /// would fill 7 of 16 lanes at most. A 32→128 conv on a 27×27 map (Zen 5, one layer,
    /// `nnefc bench --profile --per-step`): output transform 0.038–0.040 → 0.025 ms.
    Pairs,
}

/// The vectors of a plane of `a`'s tiles (`oh × ow`, rows `x_sh` apart in planes of
/// `x_sc`): which [`Walk`], how many, and where each starts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Vectors {
    pub(crate) walk: Walk,
    oh: usize,
    ow: usize,
    x_sh: isize,
    tiles: usize,
    /// Whether every vector may be loaded whole (16 lanes within the plane).
    pub(crate) whole: bool,
    /// Vectors per plane.
    pub(crate) count: usize,
}

impl Vectors {
    pub(crate) fn of(a: &DwArgs) -> Vectors {
        let (oh, ow) = (a.oh, a.ow);
        let tiles = oh * ow;
        let dense = a.x_sh == ow as isize;
        let (walk, count, whole) = if dense && ow.is_multiple_of(4) {
            let count = tiles.div_ceil(16);
            (Walk::Flat, count, a.x_sc >= (16 * count) as isize)
        } else if dense
            && (5..8).contains(&ow)
            && a.x_sc >= (oh.saturating_sub(1) * ow + 16) as isize
        {
            (Walk::Pairs, oh.div_ceil(2), true)
        } else {
            let whole = crate::winograd::room(a.x_sh, a.x_sc, oh, ow);
            (Walk::Rows, oh * ow.div_ceil(16), whole)
        };
        Vectors {
            walk,
            oh,
            ow,
            x_sh: a.x_sh,
            tiles,
            whole,
            count,
        }
    }

    /// Where vector `j`'s first tile sits in a plane.
    pub(crate) fn base(&self, j: usize) -> isize {
        match self.walk {
            Walk::Rows => (j % self.oh) as isize * self.x_sh + (16 * (j / self.oh)) as isize,
            Walk::Flat => (16 * j) as isize,
            Walk::Pairs => (2 * j * self.ow) as isize,
        }
    }

    /// The lanes of vector `j` to load: its tiles, or all 16 when [`Vectors::whole`].
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn live(&self, j: usize) -> u16 {
        use crate::dwconv::lanes;
        match self.walk {
            _ if self.whole => 0xFFFF,
            Walk::Rows => lanes(0, (self.ow - 16 * (j / self.oh)) as isize),
            Walk::Flat => lanes(0, (self.tiles - 16 * j) as isize),
            Walk::Pairs => 0xFFFF,
        }
    }

    /// The tiles `(ty, tx)` of vector `j`.
    pub(crate) fn tiles(&self, j: usize) -> impl Iterator<Item = (usize, usize)> + use<> {
        let ow = self.ow;
        let (lo, hi) = match self.walk {
            Walk::Rows => {
                let (ty, tx0) = (j % self.oh, 16 * (j / self.oh));
                (ty * ow + tx0, ty * ow + (tx0 + 16).min(ow))
            }
            Walk::Flat => (16 * j, (16 * j + 16).min(self.tiles)),
            Walk::Pairs => (2 * j * ow, (2 * j + 2).min(self.oh) * ow),
        };
        (lo..hi).map(move |f| (f / ow, f % ow))
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    use super::{DwArgs, OUT, TILE, Vectors, Walk};
    use crate::dwconv::avx512::finish_act;
    use crate::dwconv::{lanes, plane_ptrs};
    use crate::gemm::store16;
    use core::arch::x86_64::*;

    /// `Bᵀ` applied to six vectors, lane by lane (the operations of [`super::bt`]).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn bt(d: [__m512; 6]) -> [__m512; 6] {
        let (two, four) = (_mm512_set1_ps(2.0), _mm512_set1_ps(4.0));
        let t2 = _mm512_sub_ps(d[4], d[2]);
        let r0 = _mm512_add_ps(_mm512_mul_ps(four, _mm512_sub_ps(d[0], d[2])), t2);
        let t0 = _mm512_sub_ps(d[4], _mm512_mul_ps(four, d[2]));
        let t1 = _mm512_sub_ps(d[3], _mm512_mul_ps(four, d[1]));
        let t3 = _mm512_mul_ps(two, _mm512_sub_ps(d[3], d[1]));
        let r5 = _mm512_add_ps(
            _mm512_mul_ps(four, _mm512_sub_ps(d[1], d[3])),
            _mm512_sub_ps(d[5], d[3]),
        );
        [
            r0,
            _mm512_add_ps(t0, t1),
            _mm512_sub_ps(t0, t1),
            _mm512_add_ps(t2, t3),
            _mm512_sub_ps(t2, t3),
            r5,
        ]
    }

    /// `Aᵀ` applied to six vectors, lane by lane (the operations of [`super::at`]).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn at(m: [__m512; 6]) -> [__m512; 4] {
        let p = _mm512_add_ps(m[1], m[2]);
        let q = _mm512_sub_ps(m[1], m[2]);
        let s = _mm512_add_ps(m[3], m[4]);
        let d = _mm512_sub_ps(m[3], m[4]);
        [
            _mm512_add_ps(_mm512_add_ps(m[0], p), s),
            _mm512_add_ps(q, _mm512_mul_ps(_mm512_set1_ps(2.0), d)),
            _mm512_add_ps(p, _mm512_mul_ps(_mm512_set1_ps(4.0), s)),
            _mm512_add_ps(
                _mm512_add_ps(q, _mm512_mul_ps(_mm512_set1_ps(8.0), d)),
                m[5],
            ),
        ]
    }

    /// Input planes `[lo, hi)`: 16 tiles of a tile row at a time.
    ///
    /// # Safety
    /// As for `nnefc_winograd_in`; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn in_planes(a: &DwArgs, lo: usize, hi: usize) {
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
        let t_step = a.c as isize * a.y_sc;
        let w = a.w as isize;
        if a.ow <= 7 && a.y_sh == a.ow as isize && a.y_sc >= ((a.oh - 1) * a.ow + 16) as isize {
            // SAFETY: forwarded; the planes have room for the paired rows (checked).
            return unsafe { in_pairs(a, lo, hi) };
        }
        let whole = crate::winograd::room(a.y_sh, a.y_sc, a.oh, a.ow);
        for p in lo..hi {
            // SAFETY: plane p of the caller's buffers.
            let (x, y, ..) = unsafe { plane_ptrs(a, p / a.c, p % a.c) };
            // Tile rows in order, so that a whole-vector store past a row's last tile
            // lands on tiles of the next row, written after it.
            for ty in 0..a.oh {
                let mut tx0 = 0;
                while tx0 < a.ow {
                    // Tiles tx0.. read columns 4·tx0 − pl + (0..66) (the plane's, as far
                    // as it goes; zeros elsewhere).
                    let c0 = (OUT * tx0) as isize - a.pl as isize;
                    let live = if whole {
                        0xFFFF
                    } else {
                        lanes(0, (a.ow - tx0) as isize)
                    };
                    // Closures would not inherit AVX-512 (and be called, not inlined):
                    // plain loops.
                    let mut r = [[_mm512_setzero_ps(); 6]; 6];
                    for (i, ri) in r.iter_mut().enumerate() {
                        let iy = (OUT * ty + i) as isize - a.pt as isize;
                        if iy < 0 || iy >= a.h as isize {
                            *ri = bt([_mm512_setzero_ps(); 6]);
                            continue;
                        }
                        let src = x.wrapping_offset(iy * a.x_sh + c0);
                        let mut v = [_mm512_setzero_ps(); 5];
                        for (k, vk) in v.iter_mut().enumerate() {
                            let o = 16 * k as isize;
                            // SAFETY: masked-off lanes are not read; the others are in the
                            // row.
                            *vk = unsafe {
                                _mm512_maskz_loadu_ps(
                                    lanes(-c0 - o, w - c0 - o),
                                    src.wrapping_offset(o),
                                )
                            };
                        }
                        // Tap column j of tile l is column 4l + j: split even and odd
                        // columns twice (columns 4l, 4l + 2 from the evens, 4l + 1,
                        // 4l + 3 from the odds); columns 4l + 4 and 4l + 5 are taps 0
                        // and 1 shifted by one tile, their 16th from the fifth load.
                        let e01 = _mm512_permutex2var_ps(v[0], even, v[1]);
                        let e23 = _mm512_permutex2var_ps(v[2], even, v[3]);
                        let o01 = _mm512_permutex2var_ps(v[0], odd, v[1]);
                        let o23 = _mm512_permutex2var_ps(v[2], odd, v[3]);
                        let d0 = _mm512_permutex2var_ps(e01, even, e23);
                        let d2 = _mm512_permutex2var_ps(e01, odd, e23);
                        let d1 = _mm512_permutex2var_ps(o01, even, o23);
                        let d3 = _mm512_permutex2var_ps(o01, odd, o23);
                        let v4 = _mm512_castps_si512(v[4]);
                        let d4 = _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(
                            v4,
                            _mm512_castps_si512(d0),
                        ));
                        let d5 = _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(
                            _mm512_alignr_epi32::<1>(v4, v4),
                            _mm512_castps_si512(d1),
                        ));
                        *ri = bt([d0, d1, d2, d3, d4, d5]);
                    }
                    let at = ty as isize * a.y_sh + tx0 as isize;
                    // Column b of every row (an iterator's closure would not inherit
                    // AVX-512).
                    #[allow(clippy::needless_range_loop)]
                    for b in 0..TILE {
                        let v = bt([r[0][b], r[1][b], r[2][b], r[3][b], r[4][b], r[5][b]]);
                        for (aa, &va) in v.iter().enumerate() {
                            let dst = y.wrapping_offset((TILE * aa + b) as isize * t_step + at);
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

    /// Input planes `[lo, hi)` whose tile rows are dense and at most 7 tiles wide, two
    /// tile rows per step: lane `l` is tile `l` of the two rows in the plane's order
    /// (row `ty`'s `ow` tiles, then row `ty + 1`'s; the lanes past them belong to the
    /// next rows, stored now and again, correctly, by the next step). Each input row of
    /// the pair is loaded once (32 columns cover 7 tiles) and split into even and odd
    /// columns; one two-source permute per tap column then picks both rows' taps. A row
    /// alone would fill at most 7 of 16 lanes: a 32→128 conv on a 27×27 map (Zen 5, one
    /// layer, `nnefc bench --profile --per-step`): 0.011 → 0.0063 ms; a 64→256 conv on
    /// 13×13 (4 tiles a row): 0.012 → 0.006 ms.
    ///
    /// # Safety
    /// As for `nnefc_winograd_in`; the CPU has AVX-512F; `a.ow ≤ 7`, `a.y_sh == a.ow`,
    /// and each plane of the output holds `(oh − 1)·ow + 16` floats.
    #[target_feature(enable = "avx512f")]
    unsafe fn in_pairs(a: &DwArgs, lo: usize, hi: usize) {
        let t_step = a.c as isize * a.y_sc;
        let (w, ow) = (a.w as isize, a.ow as i32);
        // Lane l < ow: lane 2l + s of the first row's evens (odds), else lane
        // 2(l − ow) + s of the second's (indices ≥ 16 pick the second source; lanes past
        // the pair take any in-range index).
        let l = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        let second = _mm512_cmpge_epi32_mask(l, _mm512_set1_epi32(ow));
        let base = _mm512_mask_sub_epi32(
            _mm512_add_epi32(l, l),
            second,
            _mm512_add_epi32(l, l),
            _mm512_set1_epi32(2 * ow - 16),
        );
        let pick: [__m512i; 3] = [
            _mm512_and_si512(base, _mm512_set1_epi32(31)),
            _mm512_and_si512(
                _mm512_add_epi32(base, _mm512_set1_epi32(1)),
                _mm512_set1_epi32(31),
            ),
            _mm512_and_si512(
                _mm512_add_epi32(base, _mm512_set1_epi32(2)),
                _mm512_set1_epi32(31),
            ),
        ];
        for p in lo..hi {
            // SAFETY: plane p of the caller's buffers.
            let (x, y, ..) = unsafe { plane_ptrs(a, p / a.c, p % a.c) };
            let c0 = -(a.pl as isize);
            let m = [lanes(-c0, w - c0), lanes(-c0 - 16, w - c0 - 16)];
            for ty in (0..a.oh).step_by(2) {
                let mut r = [[_mm512_setzero_ps(); 6]; 6];
                for (i, ri) in r.iter_mut().enumerate() {
                    let iy0 = (OUT * ty + i) as isize - a.pt as isize;
                    // SAFETY: rows of this plane (or none).
                    let (e0, o0) = unsafe { split_row(a, x, iy0, c0, m) };
                    let (e1, o1) = unsafe { split_row(a, x, iy0 + OUT as isize, c0, m) };
                    *ri = bt([
                        _mm512_permutex2var_ps(e0, pick[0], e1),
                        _mm512_permutex2var_ps(o0, pick[0], o1),
                        _mm512_permutex2var_ps(e0, pick[1], e1),
                        _mm512_permutex2var_ps(o0, pick[1], o1),
                        _mm512_permutex2var_ps(e0, pick[2], e1),
                        _mm512_permutex2var_ps(o0, pick[2], o1),
                    ]);
                }
                let at = (ty * a.ow) as isize;
                #[allow(clippy::needless_range_loop)]
                for b in 0..TILE {
                    let v = bt([r[0][b], r[1][b], r[2][b], r[3][b], r[4][b], r[5][b]]);
                    for (aa, &va) in v.iter().enumerate() {
                        let dst = y.wrapping_offset((TILE * aa + b) as isize * t_step + at);
                        // SAFETY: 16 tiles within the plane (the caller's room).
                        unsafe { _mm512_storeu_ps(dst, va) };
                    }
                }
            }
        }
    }

    /// The even and odd columns of the 32 from `c0` of input row `iy` of the plane at
    /// `x` (`m`: the masks of the columns inside the row), zeros for a row outside it.
    ///
    /// # Safety
    /// `x` is an input plane of `a`; the `m` lanes are inside its row `iy`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn split_row(
        a: &DwArgs,
        x: *const f32,
        iy: isize,
        c0: isize,
        m: [u16; 2],
    ) -> (__m512, __m512) {
        if iy < 0 || iy >= a.h as isize {
            return (_mm512_setzero_ps(), _mm512_setzero_ps());
        }
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
        let src = x.wrapping_offset(iy * a.x_sh + c0);
        // SAFETY: masked-off lanes are not read; the others are in the row.
        let (v0, v1) = unsafe {
            (
                _mm512_maskz_loadu_ps(m[0], src),
                _mm512_maskz_loadu_ps(m[1], src.wrapping_add(16)),
            )
        };
        (
            _mm512_permutex2var_ps(v0, even, v1),
            _mm512_permutex2var_ps(v0, odd, v1),
        )
    }

    /// Output rows of 16 tiles whose products start at `m0 + tile` (`t_step` floats
    /// between elements; loads of the `live` lanes, or whole when `whole`), plus `bias`:
    /// `[i][q]` holds row `i` of tiles `4q .. 4q + 4`, their four columns each in order.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn tile_rows(
        m0: *const f32,
        t_step: isize,
        tile: isize,
        whole: bool,
        live: u16,
        bias: __m512,
        gather: Option<__m512i>,
    ) -> [[__m512; 4]; 4] {
        // Interleaving two vectors lane by lane: lanes 0..8 of each, then lanes 8..16.
        let zip_lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        let zip_hi = _mm512_add_epi32(zip_lo, _mm512_set1_epi32(8));
        let mut s = [[_mm512_setzero_ps(); 4]; 6];
        for (aa, sa) in s.iter_mut().enumerate() {
            let mut row = [_mm512_setzero_ps(); 6];
            for (bb, mb) in row.iter_mut().enumerate() {
                let src = m0.wrapping_offset((TILE * aa + bb) as isize * t_step + tile);
                // SAFETY: the caller's contract.
                *mb = unsafe {
                    if whole {
                        _mm512_loadu_ps(src)
                    } else {
                        _mm512_maskz_loadu_ps(live, src)
                    }
                };
                if let Some(idx) = gather {
                    *mb = _mm512_permutexvar_ps(idx, *mb);
                }
            }
            *sa = at(row);
        }
        // cj[j][i]: output row i, column j of the 16 tiles.
        let mut cj = [[_mm512_setzero_ps(); 4]; 4];
        for (j, c) in cj.iter_mut().enumerate() {
            *c = at([s[0][j], s[1][j], s[2][j], s[3][j], s[4][j], s[5][j]]);
        }
        let mut out = [[_mm512_setzero_ps(); 4]; 4];
        for (i, o) in out.iter_mut().enumerate() {
            let v = [
                _mm512_add_ps(cj[0][i], bias),
                _mm512_add_ps(cj[1][i], bias),
                _mm512_add_ps(cj[2][i], bias),
                _mm512_add_ps(cj[3][i], bias),
            ];
            // Columns 4l + j: zip columns 0 and 2, 1 and 3, then those pairs.
            let (p02l, p02h) = (
                _mm512_permutex2var_ps(v[0], zip_lo, v[2]),
                _mm512_permutex2var_ps(v[0], zip_hi, v[2]),
            );
            let (p13l, p13h) = (
                _mm512_permutex2var_ps(v[1], zip_lo, v[3]),
                _mm512_permutex2var_ps(v[1], zip_hi, v[3]),
            );
            *o = [
                _mm512_permutex2var_ps(p02l, zip_lo, p13l),
                _mm512_permutex2var_ps(p02l, zip_hi, p13l),
                _mm512_permutex2var_ps(p02h, zip_lo, p13h),
                _mm512_permutex2var_ps(p02h, zip_hi, p13h),
            ];
        }
        out
    }

    /// Output planes `[lo, hi)`: 16 tiles at a time, as [`Vectors`] walks them.
    ///
    /// # Safety
    /// As for `nnefc_winograd_out`; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn out_planes(a: &DwArgs, lo: usize, hi: usize) {
        // SAFETY: forwarded.
        unsafe { crate::gemm::by_act!(a.act, A => out_planes_act::<A>(a, lo, hi)) }
    }

    /// [`out_planes`] with the activation `ACT` (`DwArgs::act`): the epilogue of each
    /// vector then branches on nothing but the residual. With the row loops of
    /// [`store_rows`] free of early exits (so they unroll), a 16→64 conv on 55×55 (one
    /// layer, Zen 5, `nnefc bench --profile --per-step`): transform 0.048 → 0.043 ms.
    ///
    /// # Safety
    /// As for [`out_planes`]; `ACT == a.act`.
    #[target_feature(enable = "avx512f")]
    unsafe fn out_planes_act<const ACT: u32>(a: &DwArgs, lo: usize, hi: usize) {
        let t_step = a.c as isize * a.x_sc;
        let vs = Vectors::of(a);
        let gather = gather(&vs);
        for p in lo..hi {
            // SAFETY: plane p of the caller's buffers; `m0` its products' element 0.
            let (m0, y, res, _, b) = unsafe { plane_ptrs(a, p / a.c, p % a.c) };
            let bias = _mm512_set1_ps(b);
            for j in 0..vs.count {
                // SAFETY: the live tiles of the 36 products, or 16 within the plane
                // (`Vectors::whole`).
                let rows = unsafe {
                    tile_rows(m0, t_step, vs.base(j), vs.whole, vs.live(j), bias, gather)
                };
                // SAFETY: this plane's outputs.
                unsafe { store_rows::<ACT>(&vs, j, a, &rows, y, res) };
            }
        }
    }

    /// The permute [`tile_rows`] applies to the loads of a [`Walk::Pairs`] vector: lanes
    /// 0..8 take tiles 0..8 of the load (row `ty`, then lanes no output keeps), lanes
    /// 8..16 tiles `ow .. ow + 8` (row `ty + 1`, likewise).
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn gather(vs: &Vectors) -> Option<__m512i> {
        (vs.walk == Walk::Pairs).then(|| {
            _mm512_add_epi32(
                _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7),
                _mm512_mask_set1_epi32(_mm512_setzero_si512(), 0xFF00, vs.ow as i32),
            )
        })
    }

    /// Stores `rows` (what [`tile_rows`] made of vector `j` of `vs`, with [`gather`])
    /// to the output plane `y` (`res` its residual) through `a`'s epilogue.
    ///
    /// # Safety
    /// `y` and `res` address an output plane as `a` describes; `j < vs.count`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn store_rows<const ACT: u32>(
        vs: &Vectors,
        j: usize,
        a: &DwArgs,
        rows: &[[__m512; 4]; 4],
        y: *mut f32,
        res: *const f32,
    ) {
        let w = a.w as isize;
        match vs.walk {
            Walk::Rows => {
                let (ty, c0) = (j % vs.oh, (OUT * 16 * (j / vs.oh)) as isize);
                let cols: [u16; 4] = core::array::from_fn(|q| lanes(0, w - c0 - 16 * q as isize));
                // Constant trip counts (no early exit), so that the loops unroll and the
                // rows stay in registers.
                for (i, r) in rows.iter().enumerate() {
                    let oy = OUT * ty + i;
                    if oy >= a.h {
                        continue;
                    }
                    let row = oy as isize * a.y_sh + c0;
                    for (q, &vq) in r.iter().enumerate() {
                        if cols[q] == 0 {
                            continue;
                        }
                        // SAFETY: the output columns of this row the tiles cover.
                        unsafe { finish_act(vq, a, ACT, y, res, row + 16 * q as isize, cols[q]) };
                    }
                }
            }
            Walk::Flat => {
                // Four tiles always share a row: rows are a multiple of 4 tiles wide.
                for q in 0..4 {
                    let f = 16 * j + 4 * q;
                    if f >= vs.tiles {
                        break;
                    }
                    let (ty, tx) = (f / vs.ow, f % vs.ow);
                    let c0 = (OUT * tx) as isize;
                    let cols = lanes(0, w - c0);
                    for (i, r) in rows.iter().enumerate() {
                        let oy = OUT * ty + i;
                        if oy >= a.h {
                            continue;
                        }
                        let at = oy as isize * a.y_sh + c0;
                        // SAFETY: the output columns of this row the tiles cover.
                        unsafe { finish_act(r[q], a, ACT, y, res, at, cols) };
                    }
                }
            }
            Walk::Pairs => {
                let cols = [lanes(0, w), lanes(0, w - 16)];
                for (i, r) in rows.iter().enumerate() {
                    for (half, q) in [(0, 0), (0, 1), (1, 2), (1, 3)] {
                        let oy = OUT * (2 * j + half) + i;
                        if oy >= a.h || cols[q % 2] == 0 {
                            continue;
                        }
                        let at = oy as isize * a.y_sh + 16 * (q % 2) as isize;
                        // SAFETY: the output columns of this row the tiles cover.
                        unsafe { finish_act(r[q], a, ACT, y, res, at, cols[q % 2]) };
                    }
                }
            }
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::winograd::tests::{check_input_transform, check_output_transform, geometry};

    const BT: [[f64; 6]; 6] = [
        [4.0, 0.0, -5.0, 0.0, 1.0, 0.0],
        [0.0, -4.0, -4.0, 1.0, 1.0, 0.0],
        [0.0, 4.0, -4.0, -1.0, 1.0, 0.0],
        [0.0, -2.0, -1.0, 2.0, 1.0, 0.0],
        [0.0, 2.0, -1.0, -2.0, 1.0, 0.0],
        [0.0, 4.0, 0.0, -5.0, 0.0, 1.0],
    ];
    const AT: [[f64; 6]; 4] = [
        [1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
        [0.0, 1.0, -1.0, 2.0, -2.0, 0.0],
        [0.0, 1.0, 1.0, 4.0, 4.0, 0.0],
        [0.0, 1.0, -1.0, 8.0, -8.0, 1.0],
    ];

    /// F(4×4) arguments: [`geometry`] with 6×6 tiles four apart.
    fn geometry4(e: [usize; 6]) -> DwArgs {
        DwArgs {
            kh: TILE,
            kw: TILE,
            sh: OUT,
            sw: OUT,
            ..geometry(e)
        }
    }

    /// Random tile counts, zero padding, strided planes and samples, inputs stopping
    /// short of the tiles (`check_input_transform`): the vector path (with and without
    /// paired rows), a pool of workers and the portable path give the same bits, within
    /// rounding of `Bᵀ d B` in f64.
    #[test]
    fn winograd4_input_transform_matches_the_definition() {
        let bt = BT.map(|r| r.to_vec());
        check_input_transform(15, &bt, 1e-5, &geometry4, in_portable);
    }

    /// Random tile counts, output extents that cut the last tiles, strided products,
    /// bias, residual and each activation (`check_output_transform`); every fourth case
    /// has dense rows of a multiple of 4 tiles (the flat path), every other fourth dense
    /// rows of 5–7 tiles (the paired rows).
    #[test]
    fn winograd4_output_transform_matches_the_definition() {
        let at = AT.map(|r| r.to_vec());
        check_output_transform(19, &at, &geometry4, out_portable, &|r, case| {
            let w = match case % 4 {
                1 => 16 * (1 + r.below(3)) - r.below(4),
                3 => 17 + r.below(12),
                _ => 1 + r.below(if case % 3 == 0 { 150 } else { 40 }),
            };
            let tw = w.div_ceil(4);
            (w, if case % 2 == 1 { tw } else { tw + r.below(3) })
        });
    }
}
