//! The Winograd F(4×4, 3×3) tap products fused with the output transform
//! ([`nnefc_winograd_fused`]): for a block of tiles and of output channels, the 36 products
//! `M_t = U_t · V_t` are summed in registers over the input channels, parked in a 36 KB
//! stack scratch that stays in L1, and transformed into outputs at once. The unfused path
//! writes every product to memory (2 MB for a 16→64 conv on a 55×55 map) and reads it
//! back from L2/L3 in the output transform. That layer alone (Zen 5, one thread, `nnefc
//! bench --profile --per-step`): products and output transform 0.113 + 0.047 ms →
//! 0.110–0.117 ms fused; in squeezenet1_1, 0.17 → 0.13 ms per such layer. Steps of 2 tile
//! rows × 8 channels (16 sums in registers, 36 KB of scratch) measured as fast as 3 × 8
//! (54 KB), and faster than 2 × 6 or 4 × 6. The vectors of 16 tiles are those the output
//! transform takes ([`Vectors`]: one tile row, or, on small maps, 16 tiles across rows or
//! two rows of 5–7 tiles), so squeezenet1_1's 27×27 layers fuse too (0.108 + 0.024 →
//! 0.110 ms); planes of a single vector take it with 16 channels.
//!
//! # Semantics
//! `args.geo` describes the output (`c` channels, `h × w`, `oh × ow` tiles of 4×4, `y`,
//! its strides, bias, residual and activation as for `nnefc_winograd_out`) and the
//! transformed input `x`: element `t` (of 36) of input channel `ci` at
//! `x + n·x_sn + (t·cin + ci)·x_sc + ty·x_sh + tx` (`nnefc_winograd_in`'s layout);
//! `args.cin` the input channels; `geo.filter` the transformed filter, `U_t[co][ci]` at
//! `filter + (t·c + co)·cin + ci`. For every output it computes
//! `act(Aᵀ M A + bias (+ res))` with `M_t = Σ_ci U_t[co][ci]·V_t[ci]` summed in `ci`
//! order (fused multiply-adds on AVX-512, a multiply then an add elsewhere), then the
//! F(4×4) output transform's operations in its order (`winograd4.rs`). Results do not
//! depend on the thread count; they may differ in the last bits between CPUs.
//!
//! Not here: the input transform, the filter transform (the compiler's), F(2×2).

use crate::ConvArgs;
use crate::parallel::{self, Parallel, workers};
use crate::winograd4::Vectors;

/// Sums a step keeps in registers: `V` vectors of 16 tiles × `C` output channels.
const SUMS: usize = 16;
/// Products per tile.
const PLANES: usize = 36;
/// Steps per worker when splitting, so that a slow worker does not hold up the rest.
const TASKS_PER_WORKER: usize = 4;

/// Runs the fused products and output transform `args` describes (see the module doc),
/// split over blocks of tiles and output channels when `par` offers several workers.
///
/// # Safety
/// `args` points to a valid [`ConvArgs`] whose pointers and strides address buffers of
/// the described extents, every plane of `x` readable over its whole stride `x_sc` (whole
/// 16-tile vectors are read); `y` does not overlap `x`, the filter or the bias (`res`
/// may equal `y`); `par` is null or a valid [`Parallel`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nnefc_winograd_fused(args: *const ConvArgs, par: *const Parallel) {
    // SAFETY: valid by the caller's contract.
    let a = unsafe { &*args };
    let g = &a.geo;
    if g.n == 0
        || g.c == 0
        || g.oh == 0
        || g.ow == 0
        || g.h.div_ceil(4) != g.oh
        || g.w.div_ceil(4) != g.ow
    {
        return;
    }
    // SAFETY: `par` is null or valid.
    let tasks = Units::of(a)
        .count
        .min(unsafe { workers(par) } * TASKS_PER_WORKER);
    // SAFETY: tasks write disjoint outputs.
    unsafe { parallel::ranges(par, a, Units::of(a).count, tasks, run_units) }
}

/// The steps of a call: sample × block of `v` vectors of 16 tiles (as [`Vectors`] walks
/// a plane) × block of [`Units::c`] output channels (innermost, so that a block of the
/// input is reused across them). Planes of one vector (a 13×13 map's 16 tiles) take it
/// with 16 channels, the others two vectors with 8.
#[derive(Clone, Copy)]
struct Units {
    vectors: Vectors,
    v: usize,
    blocks: usize,
    chans: usize,
    count: usize,
}

impl Units {
    fn of(a: &ConvArgs) -> Units {
        let g = &a.geo;
        let vectors = Vectors::of(g);
        let v = if vectors.count >= 2 { 2 } else { 1 };
        let (blocks, chans) = (vectors.count.div_ceil(v), g.c.div_ceil(SUMS / v));
        Units {
            vectors,
            v,
            blocks,
            chans,
            count: g.n * blocks * chans,
        }
    }

    /// Output channels per unit: the [`SUMS`] the registers hold, over the vectors.
    fn c(self) -> usize {
        SUMS / self.v
    }

    /// Unit `u` as (sample, first vector, first output channel).
    fn at(self, u: usize) -> (usize, usize, usize) {
        let cb = u % self.chans;
        let rest = u / self.chans;
        (
            rest / self.blocks,
            (rest % self.blocks) * self.v,
            cb * self.c(),
        )
    }
}

/// Units `[lo, hi)` with the widest code the CPU has.
unsafe fn run_units(a: &ConvArgs, lo: usize, hi: usize) {
    let units = Units::of(a);
    #[cfg(target_arch = "x86_64")]
    if crate::gemm::avx512_selected() {
        // SAFETY: the CPU has AVX-512F (that is what selected the kernel family).
        return unsafe {
            if units.v == 1 {
                crate::gemm::by_act!(a.geo.act, A => avx512::units::<A, 1, 16>(a, units, lo, hi))
            } else {
                crate::gemm::by_act!(a.geo.act, A => avx512::units::<A, 2, 8>(a, units, lo, hi))
            }
        };
    }
    for u in lo..hi {
        // SAFETY: the caller's contract.
        unsafe { portable(a, units, units.at(u)) };
    }
}

/// One unit, one output at a time (a multiply then an add per term).
unsafe fn portable(a: &ConvArgs, units: Units, (n, j0, co0): (usize, usize, usize)) {
    let g = &a.geo;
    let vs = units.vectors;
    for co in co0..(co0 + units.c()).min(g.c) {
        // SAFETY: channel `co`'s bias.
        let b = if g.bias.is_null() {
            0.0
        } else {
            unsafe { *g.bias.offset(co as isize * g.bias_sc) }
        };
        for j in j0..(j0 + units.v).min(vs.count) {
            for (ty, tx) in vs.tiles(j) {
                let mut m = [0.0f32; PLANES];
                for (t, mt) in m.iter_mut().enumerate() {
                    let v = g
                        .x
                        .wrapping_offset(n as isize * g.x_sn + ty as isize * g.x_sh + tx as isize);
                    let u = g.filter.wrapping_add((t * g.c + co) * a.cin);
                    for ci in 0..a.cin {
                        // SAFETY: a weight and a transformed input of this tile.
                        unsafe {
                            *mt +=
                                *u.add(ci) * *v.wrapping_offset((t * a.cin + ci) as isize * g.x_sc);
                        }
                    }
                }
                let plane = n as isize * g.y_sn + co as isize * g.y_sc;
                let res = if g.res.is_null() {
                    g.res
                } else {
                    g.res.wrapping_offset(plane)
                };
                // SAFETY: output plane `co` of sample `n`.
                unsafe {
                    crate::winograd::store_tile::<6, 4>(
                        g,
                        g.y.wrapping_offset(plane),
                        res,
                        b,
                        (ty, tx),
                        crate::winograd4::at,
                        |t| m[t],
                    )
                };
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{ConvArgs, PLANES, SUMS, Units};
    use crate::winograd4::avx512::{gather, store_rows, tile_rows};
    use core::arch::x86_64::*;

    /// Units `[lo, hi)` of `V` vectors × `C` channels (`V·C` = [`SUMS`]) with the
    /// activation `ACT` (`== a.geo.act`).
    ///
    /// # Safety
    /// As for `nnefc_winograd_fused`; the CPU has AVX-512F; `V == units.v`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn units<const ACT: u32, const V: usize, const C: usize>(
        a: &ConvArgs,
        units: Units,
        lo: usize,
        hi: usize,
    ) {
        let g = &a.geo;
        let vs = units.vectors;
        let idx = gather(&vs);
        // The products of one unit: [t][channel][vector], 16 tiles each (36 KB).
        let mut ms = [_mm512_setzero_ps(); PLANES * SUMS];
        for u in lo..hi {
            let (n, j0, co0) = units.at(u);
            let nv = V.min(vs.count - j0);
            let nc = C.min(g.c - co0);
            // A vector past the last repeats it (its sums are not stored).
            let base: [isize; V] = core::array::from_fn(|r| vs.base(j0 + r.min(nv - 1)));
            let live: [u16; V] = core::array::from_fn(|r| vs.live(j0 + r.min(nv - 1)));
            for t in 0..PLANES {
                let mut acc = [[_mm512_setzero_ps(); V]; C];
                let vb =
                    g.x.wrapping_offset(n as isize * g.x_sn + (t * a.cin) as isize * g.x_sc);
                let ub = g.filter.wrapping_add((t * g.c + co0) * a.cin);
                for k in 0..a.cin {
                    let row = vb.wrapping_offset(k as isize * g.x_sc);
                    let mut b = [_mm512_setzero_ps(); V];
                    for (r, br) in b.iter_mut().enumerate() {
                        let src = row.wrapping_offset(base[r]);
                        // SAFETY: the live tiles of this vector, or 16 within the plane
                        // (`Vectors::whole`).
                        *br = unsafe {
                            if vs.whole {
                                _mm512_loadu_ps(src)
                            } else {
                                _mm512_maskz_loadu_ps(live[r], src)
                            }
                        };
                    }
                    for (c, acc_c) in acc.iter_mut().enumerate() {
                        // A channel past the last repeats it (its sums are not stored).
                        // SAFETY: a weight of this call's filter.
                        let wv = _mm512_set1_ps(unsafe { *ub.add(c.min(nc - 1) * a.cin + k) });
                        for r in 0..V {
                            acc_c[r] = _mm512_fmadd_ps(wv, b[r], acc_c[r]);
                        }
                    }
                }
                for (c, acc_c) in acc.iter().enumerate() {
                    for (r, &v) in acc_c.iter().enumerate() {
                        ms[(t * C + c) * V + r] = v;
                    }
                }
            }
            let m0 = ms.as_ptr().cast::<f32>();
            let t_step = (SUMS * 16) as isize;
            for c in 0..nc {
                let co = co0 + c;
                let b = if g.bias.is_null() {
                    0.0
                } else {
                    // SAFETY: channel `co`'s bias.
                    unsafe { *g.bias.offset(co as isize * g.bias_sc) }
                };
                let plane = n as isize * g.y_sn + co as isize * g.y_sc;
                let (y, res) = (
                    g.y.wrapping_offset(plane),
                    if g.res.is_null() {
                        g.res
                    } else {
                        g.res.wrapping_offset(plane)
                    },
                );
                for r in 0..nv {
                    let tile = ((c * V + r) * 16) as isize;
                    // SAFETY: 16 tiles of the scratch per product; output plane `co`.
                    unsafe {
                        let rows =
                            tile_rows(m0, t_step, tile, true, 0xFFFF, _mm512_set1_ps(b), idx);
                        store_rows::<ACT>(&vs, j0 + r, g, &rows, y, res);
                    }
                }
            }
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::DwArgs;
    use crate::dwconv::tests::{Lcg, serial_and_pooled_runs};
    use crate::winograd::tests::geometry;

    const AT: [[f64; 6]; 4] = [
        [1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
        [0.0, 1.0, -1.0, 2.0, -2.0, 0.0],
        [0.0, 1.0, 1.0, 4.0, 4.0, 0.0],
        [0.0, 1.0, -1.0, 8.0, -8.0, 1.0],
    ];

    /// Random shapes (tile rows narrower and wider than 16 tiles, every walk of the tiles,
    /// channel counts that do not fill a block, two samples, padded and dense planes), bias, residual and each
    /// activation: serial and pooled runs give the same bits, and the vector path (where
    /// the CPU has it) and the portable one are within rounding of the definition in f64.
    #[test]
    fn winograd_fused_matches_the_definition() {
        let mut r = Lcg(23);
        let pool = crate::ThreadPool::new(3).expect("pool");
        let mut walks = std::collections::BTreeSet::new();
        for case in 0..40 {
            let (n, cin, c) = (1 + r.below(2), 1 + r.below(20), 1 + r.below(19));
            let (h, w) = (
                1 + r.below(30),
                1 + r.below(if case % 3 == 0 { 90 } else { 30 }),
            );
            // Every fourth case has dense rows of 5–7 tiles (paired rows, where the planes
            // have room) or a multiple of 4 tiles (the flat walk).
            let w = match case % 8 {
                1 | 5 => 17 + r.below(12),
                3 => [13, 29, 45][r.below(3)] + r.below(4),
                _ => w,
            };
            let (th, tw) = (h.div_ceil(4), w.div_ceil(4));
            let x_sh = tw + if case % 2 == 1 { 0 } else { r.below(2) };
            let x_sc = th * x_sh + r.below(3) + if case % 2 == 1 { 16 } else { 0 };
            let x_sn = PLANES * cin * x_sc + r.below(5);
            let x: Vec<f32> = (0..n * x_sn).map(|_| r.next()).collect();
            let u: Vec<f32> = (0..PLANES * c * cin).map(|_| r.next()).collect();
            let bias: Vec<f32> = (0..c).map(|_| r.next()).collect();
            let res: Vec<f32> = (0..n * c * h * w).map(|_| r.next()).collect();
            let with_res = case % 2 == 0;
            let act = case % 6;
            let (lo, hi) = (-0.5f32, 0.75f32);
            let mut want = vec![0.0f64; n * c * h * w];
            let mut mag = vec![0.0f64; n * c * h * w];
            for ni in 0..n {
                for co in 0..c {
                    for oy in 0..h {
                        for ox in 0..w {
                            let (ty, tx, i, j) = (oy / 4, ox / 4, oy % 4, ox % 4);
                            let (mut s, mut sm) = (f64::from(bias[co]), f64::from(bias[co]).abs());
                            for (aa, ra) in AT[i].iter().enumerate() {
                                for (bb, rb) in AT[j].iter().enumerate() {
                                    let t = 6 * aa + bb;
                                    for ci in 0..cin {
                                        let term = ra
                                            * rb
                                            * f64::from(u[(t * c + co) * cin + ci])
                                            * f64::from(
                                                x[ni * x_sn
                                                    + (t * cin + ci) * x_sc
                                                    + ty * x_sh
                                                    + tx],
                                            );
                                        s += term;
                                        sm += term.abs();
                                    }
                                }
                            }
                            let at = ((ni * c + co) * h + oy) * w + ox;
                            if with_res {
                                s += f64::from(res[at]);
                                sm += f64::from(res[at]).abs();
                            }
                            want[at] = crate::gemm::tests::activate_f64(s, act as u32, lo, hi);
                            mag[at] = sm;
                        }
                    }
                }
            }
            let args = |y: &mut [f32]| ConvArgs {
                geo: DwArgs {
                    kh: 6,
                    kw: 6,
                    sh: 4,
                    sw: 4,
                    x: x.as_ptr(),
                    x_sn: x_sn as isize,
                    x_sc: x_sc as isize,
                    x_sh: x_sh as isize,
                    filter: u.as_ptr(),
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
                },
                cin,
                filter_sn: 0,
                bias_sn: 0,
            };
            walks.insert(format!("{:?}", Units::of(&args(&mut [])).vectors.walk));
            let mut runs = serial_and_pooled_runs(want.len(), &pool, case, |y, par| unsafe {
                nnefc_winograd_fused(&args(y), par)
            });
            let mut y = vec![f32::NAN; want.len()];
            let a = args(&mut y);
            let units = Units::of(&a);
            for un in 0..units.count {
                unsafe { portable(&a, units, units.at(un)) };
            }
            runs.push(y);
            for (k, got) in runs.iter().enumerate() {
                for (i, (&g, &v)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (f64::from(g) - v).abs() <= 1e-6 * mag[i].max(1.0),
                        "case {case}, run {k}: element {i}: {g} vs {v}"
                    );
                }
            }
        }
        assert_eq!(walks.len(), 3, "walks covered: {walks:?}");
    }
}
