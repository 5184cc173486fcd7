//! A Winograd F(4×4, 3×3) layer computed band by band of tile rows
//! ([`nnefc_winograd_banded`]): each band's input transform goes into the worker's own
//! scratch and the fused products and output transform ([`nnefc_winograd_fused`]) read it
//! there, so the transformed input `V` is never shared between workers. Run as two calls,
//! the input transform splits over planes and the products over tile blocks, so every
//! line of `V` one core writes the other reads, and the next layer's `V` lands on lines
//! the other core held: squeezenet1_1's 55×55 and 27×27 layers ran slower on two threads
//! than on one when the VM placed its two cores far apart (ARCHITECTURE.md, "Two threads
//! on cores far apart"). In bands, a worker transforms the input rows of its tile rows
//! (which the layer before wrote split by pixels, mostly on the same core) and writes
//! its output rows.
//!
//! # Semantics
//! Exactly the two calls' (`nnefc_winograd_in` with 6×6 tiles, then
//! `nnefc_winograd_fused`): every tile is transformed and summed by the same operations
//! whatever band holds it (a lane of the fused kernel is one tile), so the bits do not
//! depend on the band or the worker count (the test compares them with the two calls').
//!
//! Not here: choosing the band (the compiler's `back::select::winograd`), F(2×2).

use crate::parallel::{self, Parallel};
use crate::{ConvArgs, DwArgs, nnefc_winograd_fused, nnefc_winograd_in};

/// Products per tile (F(4×4): 6×6 transformed elements).
const PLANES: usize = 36;

/// `nnefc_winograd_band_args`: one banded Winograd layer. `fused` is the products' and
/// output transform's call for the whole layer (`fused.geo.x` and its strides are not
/// read: each band's `V` is in the scratch); `input` the input transform's for the whole
/// layer (`kh = 6`; its `y` and strides are not read). 496 bytes on 64-bit targets: a
/// `ConvArgs`, a `DwArgs`, then three pointer-sized fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WinogradBandArgs {
    /// The fused products and output transform of the whole layer.
    pub fused: ConvArgs,
    /// The input transform of the whole layer.
    pub input: DwArgs,
    /// Tile rows per band (≥ 1).
    pub band: usize,
    /// Per-worker scratch: worker `w` uses [`winograd_band_scratch_bytes`] bytes at
    /// `scratch + w·scratch_stride` (64-byte aligned).
    pub scratch: *mut u8,
    /// Bytes between the workers' scratch.
    pub scratch_stride: usize,
}

/// Floats from one plane of a band's `V` to the next: the band's tiles and 16 more (the
/// transforms store and load whole vectors past a plane's last tile), odd (see the
/// compiler's `winograd::conv3x3`: power-of-two strides put a tile's 36 elements in one
/// set of the L1 cache).
fn plane_floats(tiles: usize) -> usize {
    (tiles + 16) | 1
}

/// Bytes of scratch each worker needs for a layer of `cin` input channels and
/// `tile_rows` rows of `tiles_per_row` tiles in bands of `band` tile rows.
pub fn winograd_band_scratch_bytes(
    cin: usize,
    tiles_per_row: usize,
    tile_rows: usize,
    band: usize,
) -> usize {
    let rows = band.max(1).min(tile_rows);
    (PLANES * cin * plane_floats(rows * tiles_per_row) * 4).div_ceil(64) * 64
}

/// Tile rows `[lo, hi)` (counted over samples, then tile rows) with worker `worker`'s
/// scratch, in bands of at most `band` tile rows from `lo` that stay within a sample.
///
/// # Safety
/// As for [`nnefc_winograd_banded`]; no other call uses this worker's scratch.
unsafe fn bands(a: &WinogradBandArgs, lo: usize, hi: usize, worker: usize) {
    let v = a
        .scratch
        .wrapping_add(worker * a.scratch_stride)
        .cast::<f32>();
    let (f, i) = (&a.fused.geo, &a.input);
    let mut u = lo;
    while u < hi {
        let (s, t0) = (u / f.oh, u % f.oh);
        let t1 = (t0 + a.band).min(f.oh).min(t0 + (hi - u));
        u += t1 - t0;
        let tp = plane_floats((t1 - t0) * f.ow);
        // Tile row `t0` reads input rows from `4·t0 − pt`: the band starts there, the rows
        // above the input being its zero padding.
        let top = (4 * t0) as isize - i.pt as isize;
        let skip = (top.max(0) as usize).min(i.h);
        let input = DwArgs {
            n: 1,
            h: i.h - skip,
            oh: t1 - t0,
            pt: (-top).max(0) as usize,
            x: i.x
                .wrapping_offset(s as isize * i.x_sn + skip as isize * i.x_sh),
            x_sn: 0,
            y: v,
            y_sn: 0,
            y_sc: tp as isize,
            y_sh: f.ow as isize,
            ..*i
        };
        // SAFETY: the band's input rows; its V planes fit the worker's scratch
        // (`winograd_band_scratch_bytes`); a null `par` runs on this thread.
        unsafe { nnefc_winograd_in(&input, core::ptr::null()) };
        let out = (s as isize * f.y_sn) + (4 * t0) as isize * f.y_sh;
        let fused = ConvArgs {
            geo: DwArgs {
                n: 1,
                h: (4 * (t1 - t0)).min(f.h - 4 * t0),
                oh: t1 - t0,
                x: v,
                x_sn: 0,
                x_sc: tp as isize,
                x_sh: f.ow as isize,
                y: f.y.wrapping_offset(out),
                y_sn: 0,
                res: if f.res.is_null() {
                    f.res
                } else {
                    f.res.wrapping_offset(out)
                },
                ..*f
            },
            ..a.fused
        };
        // SAFETY: the band's V, its output rows; a null `par` runs on this thread.
        unsafe { nnefc_winograd_fused(&fused, core::ptr::null()) };
    }
}

/// Runs the banded Winograd layer `args` describes (see the module doc), one contiguous
/// range of tile rows per worker of `par`, each range in bands of at most `band` tile
/// rows. Ranges of whole bands left two workers 4 and 3 of a 56×56 map's 7 bands of 2
/// tile rows (resnet18's 64-channel layers took 1.60–1.63 times less time on two threads
/// than on one, its other layers 1.73–1.94).
///
/// # Safety
/// `args` points to a valid [`WinogradBandArgs`] whose `fused` and `input` are valid
/// arguments of `nnefc_winograd_fused` and `nnefc_winograd_in` for the same layer
/// (`input.oh`, `input.ow` the tile counts `fused.geo.oh`, `fused.geo.ow`; `input.c ==
/// fused.cin`) but for `V`; the scratch holds `scratch_stride` bytes (≥
/// [`winograd_band_scratch_bytes`] of its dims, a multiple of 64) per worker of `par`, 64-byte
/// aligned; `par` is null or a valid [`Parallel`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nnefc_winograd_banded(
    args: *const WinogradBandArgs,
    par: *const Parallel,
) {
    // SAFETY: valid by the caller's contract.
    let a = unsafe { &*args };
    let f = &a.fused.geo;
    if a.band == 0 || f.n == 0 || f.oh == 0 || f.ow == 0 || f.c == 0 || a.input.kh != 6 {
        return;
    }
    let units = f.n * f.oh;
    // SAFETY: `par` is null or valid.
    let tasks = units.min(unsafe { parallel::workers(par) });
    // SAFETY: tasks run disjoint ranges of tile rows, each in its worker's scratch.
    unsafe { parallel::worker_ranges(par, a, units, tasks, bands) }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::dwconv::tests::Lcg;
    use crate::winograd::tests::geometry;

    /// Random layers (maps narrower and wider than 16 tiles a row, one to 20 input
    /// channels, two samples, paddings, residual, each activation) in bands of one tile
    /// row to more than the map, serially and on a pool of three workers: the same bits
    /// as the input transform and the fused call over the whole layer.
    #[test]
    fn banded_winograd_matches_the_two_calls() {
        let mut r = Lcg(31);
        let pool = crate::ThreadPool::new(3).expect("pool");
        for case in 0..40 {
            let (n, cin, c) = (1 + r.below(2), 1 + r.below(20), 1 + r.below(19));
            let (h, w) = (
                1 + r.below(40),
                1 + r.below(if case % 3 == 0 { 90 } else { 40 }),
            );
            let (pt, pl) = (r.below(3), r.below(3));
            let (ih, iw) = (h + 2 - pt.min(2), w + 2 - pl.min(2));
            let (th, tw) = (h.div_ceil(4), w.div_ceil(4));
            let tp = plane_floats(th * tw);
            let x: Vec<f32> = (0..n * cin * ih * iw).map(|_| r.next()).collect();
            let u: Vec<f32> = (0..PLANES * c * cin).map(|_| r.next()).collect();
            let bias: Vec<f32> = (0..c).map(|_| r.next()).collect();
            let res: Vec<f32> = (0..n * c * h * w).map(|_| r.next()).collect();
            let with_res = case % 2 == 0;
            let input = DwArgs {
                kh: 6,
                kw: 6,
                sh: 4,
                sw: 4,
                pt,
                pl,
                x: x.as_ptr(),
                x_sn: (cin * ih * iw) as isize,
                x_sc: (ih * iw) as isize,
                x_sh: iw as isize,
                y_sn: (PLANES * cin * tp) as isize,
                y_sc: tp as isize,
                y_sh: tw as isize,
                ..geometry([n, cin, ih, iw, th, tw])
            };
            let fused = |v: *const f32, y: &mut [f32]| ConvArgs {
                geo: DwArgs {
                    n,
                    c,
                    h,
                    w,
                    oh: th,
                    ow: tw,
                    x: v,
                    x_sn: (PLANES * cin * tp) as isize,
                    x_sc: tp as isize,
                    x_sh: tw as isize,
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
                    act: case % 6,
                    lo: -0.5,
                    hi: 0.75,
                    ..input
                },
                cin,
                filter_sn: 0,
                bias_sn: 0,
            };
            // The two calls over the whole layer.
            let mut v = vec![0f32; n * PLANES * cin * tp];
            let mut want = vec![f32::NAN; n * c * h * w];
            // SAFETY: V holds every plane of every sample; the output and the operands
            // hold the extents stated.
            unsafe {
                nnefc_winograd_in(
                    &DwArgs {
                        y: v.as_mut_ptr(),
                        ..input
                    },
                    core::ptr::null(),
                );
                nnefc_winograd_fused(&fused(v.as_ptr(), &mut want), core::ptr::null());
            }
            assert!(
                want.iter().all(|v| v.is_finite()),
                "case {case}: the two calls left outputs unwritten"
            );
            let band = 1 + r.below(th + 1);
            for pooled in [false, true] {
                let mut y = vec![f32::NAN; want.len()];
                let mut a = WinogradBandArgs {
                    fused: fused(core::ptr::null(), &mut y),
                    input,
                    band,
                    scratch: core::ptr::null_mut(),
                    scratch_stride: 0,
                };
                let stride = winograd_band_scratch_bytes(cin, tw, th, band);
                let mut scratch = vec![0u64; stride * 3 / 8 + 8];
                let base = scratch.as_mut_ptr().cast::<u8>();
                a.scratch = base.wrapping_add(base.align_offset(64));
                a.scratch_stride = stride;
                let p = pool.parallel();
                let par = if pooled {
                    &p as *const Parallel
                } else {
                    core::ptr::null()
                };
                // SAFETY: the layer's operands, three workers' scratch.
                unsafe { nnefc_winograd_banded(&a, par) };
                assert!(
                    y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "case {case} ({n}×{cin}→{c}, {h}×{w}, pads {pt},{pl}, band {band}, \
                     pooled {pooled}): differs from the two calls"
                );
            }
        }
    }
}
