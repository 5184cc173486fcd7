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
//! portable 6-row kernel does), so it equals that kernel's C instead; it runs on CPUs
//! without AVX-512 (for which the compiler does not choose lane panels), whose AVX2 6-row
//! kernel fuses and so may differ from it in the last bit. No tile shape, tile order or
//! thread split changes which operations produce an element.
//!
//! # Tiles
//! The AVX-512 tile holds one panel (16 rows) × up to [`COLS`] = 28 columns of C in 28
//! accumulators: per `kk`, one panel load, 28 broadcasts of `B[kk][j]` read straight
//! from B (no packing of B, so no scratch) and 28 fused multiply-adds. The columns of C
//! are cut into `ceil(n/COLS)` tiles of near-equal width (49 = 25 + 24), each width a
//! monomorphized copy. Block sums, the old C and the epilogue go through a stack tile in
//! lane order (column `j` of the tile is one vector); 16×16 register transposes turn it
//! into rows of C, stored with the mask of the valid columns, for the valid rows only.
//! Tiles run panel-major (a panel stays in L1 while B streams from L2 per panel), or
//! column-tile-major when B does not fit in L2 but A does (B then streams once).
//!
//! On AVX-512 the panels run in pairs (an odd last panel alone, as above): a pair tile is
//! 2 panels × up to [`COLS2`] = 14 columns, 28 accumulators, and each broadcast of B feeds
//! two multiply-adds. Same sums, same order, so the same bits as the single-panel tile.
//! On a core with two 512-bit FMA pipes (AMD Zen 5) the single-panel tile's one load per
//! multiply-add is what limits it: mobilenet_v2's 1280×49×320 layer ran at 104 GFLOP/s
//! with single panels and 157 with pairs (`nnefc bench --profile`, in the network).
//!
//! Shape measured on the AMD Zen 4 machine (one core, scratch benchmark of
//! `nnefc_sgemm_parallel` against `nnefc_sgemm_packed_a`, GFLOP/s for 1280×49×320,
//! 960×49×160, 576×196×96, 16×12544×32): 2 panels × 14 columns 107.8, 100.6, 93.0, 61.0;
//! 3 × 9: 107.2, 99.7, 92.2, 58.0; 4 × 6: 104.2, 94.2, 83.6, 47.0; 1 × 16: 105.0, 95.5,
//! 88.5, 58.5; 1 × 24: 106.0, 97.0, 93.4, 65.9; 1 × 28: 108.7, 102.4, 96.1, 69.7 (before
//! the register transposes, with a scalar copy into C). One panel wins although it loads
//! more per multiply-add: the A panel of a tile stays in L1 across its column tiles.
//!
//! Not here: choosing this format (the compiler does, per shape), threads (`split`).

use super::GemmEpilogue;
use super::KC;
use super::driver::{Prefetch, Problem};
use super::kernels::activate;

/// Rows per lane panel: one AVX-512 vector of f32. Part of the format.
pub const LANES: usize = 16;
/// Widest column tile: `COLS` accumulators plus the panel load and a broadcast fit the
/// 32 vector registers.
const COLS: usize = 28;
/// Bytes an operand may take to be streamed from the L2 cache (half of a 1 MiB L2,
/// leaving room for the other operand and C).
const L2_BYTES: usize = 1 << 19;
/// Widest column tile of a panel pair (AVX-512): `2·COLS2` accumulators, two panel loads
/// and a broadcast fit the 32 vector registers.
const COLS2: usize = 14;
/// Largest pair of panels (bytes) whose successor the panel-major loop prefetches while
/// the pair's column tiles run, a slice per tile. A layer's packed filter comes from L3
/// (a network's weights exceed L2), and with a short k each pair's first tile waited for
/// it: the in-loop prefetch (`A_PF` k steps ahead) reaches only part of the next pair.
/// Larger pairs do not fit L1 beside the current one: with no bound, mobilenet_v2's
/// k = 960 layers lost 3–4 % and its classifier (1000×1×1280, a 160 KB pair prefetched
/// in one burst) 20 %. Zen 5, mobilenet_v2 on one thread (`nnefc bench --profile`,
/// per-layer minima of three interleaved runs): its 160→960 layers on 7×7 (k = 160,
/// 20 KB pairs) 0.085 → 0.075 ms, 320→1280 (40 KB) 0.192 → 0.186; a bound of 80 KB
/// gained nothing more on its k = 384–576 layers.
const NEXT_PAIR_BYTES: usize = 40 << 10;
/// Columns of the stack tile: `COLS` rounded up to whole 16×16 transposes.
const BUF_COLS: usize = COLS.div_ceil(LANES) * LANES;

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
#[cfg(feature = "std")]
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

/// The stack tile: column `j` of a tile (its 16 rows) at `j·16`, 64-byte aligned.
#[repr(C, align(64))]
struct TileBuf([f32; LANES * BUF_COLS]);

/// One tile: where it is and what its epilogue needs.
struct Tile {
    /// The tile's panel at `kk = 0`.
    a: *const f32,
    /// `B[0][j0]`.
    b: *const f32,
    rsb: isize,
    csb: isize,
    /// `C[row0][j0]`.
    c: *mut f32,
    rsc: isize,
    /// Valid rows (≤ 16) and columns (≤ COLS).
    rows: usize,
    cols: usize,
    /// Row bias at `row0` and column bias at `j0` (null: none).
    bias_row: *const f32,
    bias_col: *const f32,
}

/// Calls `$f::<W, ..>($args)` for the run-time width `w ∈ 1..=COLS2`.
#[cfg(target_arch = "x86_64")]
macro_rules! by_width2 {
    ($w:expr, $f:ident::<W, $c:tt, $x:tt>($($arg:expr),*)) => {
        match $w {
            1 => $f::<1, $c, $x>($($arg),*),
            2 => $f::<2, $c, $x>($($arg),*),
            3 => $f::<3, $c, $x>($($arg),*),
            4 => $f::<4, $c, $x>($($arg),*),
            5 => $f::<5, $c, $x>($($arg),*),
            6 => $f::<6, $c, $x>($($arg),*),
            7 => $f::<7, $c, $x>($($arg),*),
            8 => $f::<8, $c, $x>($($arg),*),
            9 => $f::<9, $c, $x>($($arg),*),
            10 => $f::<10, $c, $x>($($arg),*),
            11 => $f::<11, $c, $x>($($arg),*),
            12 => $f::<12, $c, $x>($($arg),*),
            13 => $f::<13, $c, $x>($($arg),*),
            _ => $f::<14, $c, $x>($($arg),*),
        }
    };
}

/// `C = epilogue(A·B)` with A in lane panels at `ap` (`p.a` is ignored), computed by the
/// tiles of `imp`. `m`, `n`, `k` ≥ 1 (the driver routes the empty and `k = 0` cases).
///
/// # Safety
/// `ap` holds [`len`]`(m, k)` floats of lane panels; B, C and the bias are valid for the
/// problem (the `nnefc_sgemm` contract); `imp` is supported by the CPU.
pub(crate) unsafe fn run(imp: Impl, p: &Problem, ap: *const f32, epi: &GemmEpilogue, pf: Prefetch) {
    let (m, n, k) = (p.m, p.n, p.k);
    let tiles = n.div_ceil(COLS);
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
    // Zeroed once: a tile reads columns past its width only into lanes it never stores.
    let mut buf = TileBuf([0.0; LANES * BUF_COLS]);
    let panels = m.div_ceil(LANES);
    // AVX-512 runs panels in pairs (each broadcast of B feeds two multiply-adds, so a
    // core with two 512-bit FMA pipes is not held back by its loads); an odd last panel
    // runs alone.
    let pairs = if imp == Impl::Portable { 0 } else { panels / 2 };
    let tiles2 = n.div_ceil(COLS2);
    // The tile of `panel` over columns `[j0, j1)`.
    let tile = |panel: usize, j0: usize, j1: usize| {
        let row0 = panel * LANES;
        // SAFETY: panel `panel` of A, column j0 of B, element (row0, j0) of C and the bias
        // entries row0 / j0 exist; the tile covers rows < m and columns < n only.
        unsafe {
            Tile {
                a: ap.add(panel * LANES * k),
                b: p.b.offset(j0 as isize * p.csb),
                rsb: p.rsb,
                csb: p.csb,
                c: p.c.offset(row0 as isize * p.rsc).add(j0),
                rsc: p.rsc,
                rows: LANES.min(m - row0),
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
            }
        }
    };
    // Both take the stack tile as an argument, so that they can share it.
    let tile_at = |buf: &mut TileBuf, panel: usize, t: usize| {
        let (j0, j1) = (t * n / tiles, (t + 1) * n / tiles);
        // SAFETY: a tile inside the problem.
        unsafe { run_tile(imp, buf, &tile(panel, j0, j1), k, epi) };
    };
    // The region to prefetch, a share per tile pair (the `i`-th of the product's
    // `pairs · tiles2`, whichever order they run in).
    let pf_of = |i: usize| pf.share(i, i + 1, pairs * tiles2);
    let pair_at = |buf: &mut TileBuf, pair: usize, t: usize| {
        let (j0, j1) = (t * n / tiles2, (t + 1) * n / tiles2);
        let (t0, t1) = (tile(2 * pair, j0, j1), tile(2 * pair + 1, j0, j1));
        // SAFETY: two tiles inside the problem; pairs exist only on AVX-512.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            run_pair(buf, &t0, &t1, k, epi, pf_of(pair * tiles2 + t))
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (buf, t0, t1, pf_of);
    };
    // Each order streams one operand once per tile of the other: panel-major reads all of
    // B per panel (a panel, 16·k floats, stays in L1 across its column tiles), column-
    // major all of A per column tile (a stripe of B stays in L1 across the panels). B read
    // per panel must come from L2 to keep up; when it does not fit there but A does, the
    // column-major order streams B once (and only the order changes: every element is
    // computed alike).
    let fits_l2 = |floats: usize| floats.saturating_mul(4) <= L2_BYTES;
    if panels > 1 && !fits_l2(k.saturating_mul(n)) && fits_l2(m.saturating_mul(k)) {
        for t in 0..tiles2 {
            for pair in 0..pairs {
                pair_at(&mut buf, pair, t);
            }
        }
        for t in 0..tiles {
            for panel in 2 * pairs..panels {
                tile_at(&mut buf, panel, t);
            }
        }
    } else {
        // Floats of a pair of panels (contiguous: panel p is at p·16·k), and of A.
        let (pair_len, a_len) = (2 * LANES * k, panels * LANES * k);
        let prefetch_next = pair_len * 4 <= NEXT_PAIR_BYTES;
        for pair in 0..pairs {
            // What follows this pair: the next pair, or the odd last panel.
            let next = (pair + 1) * pair_len;
            let next_len = pair_len.min(a_len - next);
            for t in 0..tiles2 {
                // A slice of what follows per column tile, so that the next pair's first
                // tile finds it in cache (see `NEXT_PAIR_BYTES`).
                #[cfg(target_arch = "x86_64")]
                if prefetch_next && next_len > 0 {
                    let (f0, f1) = (t * next_len / tiles2, (t + 1) * next_len / tiles2);
                    crate::dwconv::prefetch_row::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                        ap.wrapping_add(next + f0),
                        f1 - f0,
                    );
                }
                pair_at(&mut buf, pair, t);
            }
        }
        for panel in 2 * pairs..panels {
            for t in 0..tiles {
                tile_at(&mut buf, panel, t);
            }
        }
    }
}

/// Two tiles of one column range over consecutive panels (`t1`'s panel follows `t0`'s):
/// as [`run_tile`] for each, with every k block of both computed by one loop.
///
/// # Safety
/// As for [`run_tile`], for both tiles; `t0.cols == t1.cols ≤ COLS2`; the CPU has
/// AVX-512F.
#[cfg(target_arch = "x86_64")]
unsafe fn run_pair(
    buf: &mut TileBuf,
    t0: &Tile,
    t1: &Tile,
    k: usize,
    epi: &GemmEpilogue,
    pf: Prefetch,
) {
    let accumulate = epi.accumulate != 0;
    // The two tiles' sums share the stack tile: t0's columns at 0.., t1's at 16.. (each
    // loads and transposes whole 16-column blocks).
    const _: () = assert!(COLS2 <= LANES && 2 * LANES <= BUF_COLS);
    // SAFETY (whole body): as in `run_tile`.
    unsafe {
        let (b0, b1) = buf.0.split_at_mut(LANES * LANES);
        if accumulate {
            avx512::load_c_at(b0.as_mut_ptr(), t0);
            avx512::load_c_at(b1.as_mut_ptr(), t1);
        }
        let kc_step = k.div_ceil(k.div_ceil(KC));
        // Lines of the region to prefetch per k step (none without a region).
        let per = pf.len.div_ceil(16).div_ceil(k);
        let (o0, o1) = (b0.as_mut_ptr(), b1.as_mut_ptr());
        // Floats from t0's panel to t1's.
        let pk = k * LANES;
        let mut pc = 0;
        while pc < k {
            let kc = kc_step.min(k - pc);
            let a = t0.a.add(pc * LANES);
            let b = t0.b.offset(pc as isize * t0.rsb);
            let add = accumulate || pc > 0;
            // This k block's lines of the region to prefetch, `per` a k step.
            let ahead = pf.share(pc, pc + kc, k);
            let lines = (ahead.ptr, per, ahead.len.div_ceil(16));
            if t0.csb == 1 && pf.len > 0 {
                by_width2!(
                    t0.cols,
                    block2_avx512::<W, true, true>(kc, a, pk, b, t0.rsb, 1, o0, o1, add, lines)
                );
            } else if t0.csb == 1 {
                by_width2!(
                    t0.cols,
                    block2_avx512::<W, true, false>(kc, a, pk, b, t0.rsb, 1, o0, o1, add, lines)
                );
            } else {
                by_width2!(
                    t0.cols,
                    block2_avx512::<W, false, false>(
                        kc, a, pk, b, t0.rsb, t0.csb, o0, o1, add, lines
                    )
                );
            }
            pc += kc;
        }
        avx512::finish_at(b0.as_ptr(), t0, epi);
        avx512::finish_at(b1.as_ptr(), t1, epi);
    }
}

/// Calls `$f::<W>($args)` for the run-time width `w ∈ 1..=COLS`.
macro_rules! by_width {
    ($w:expr, $f:ident($($arg:expr),*)) => {
        match $w {
            1 => $f::<1>($($arg),*),
            2 => $f::<2>($($arg),*),
            3 => $f::<3>($($arg),*),
            4 => $f::<4>($($arg),*),
            5 => $f::<5>($($arg),*),
            6 => $f::<6>($($arg),*),
            7 => $f::<7>($($arg),*),
            8 => $f::<8>($($arg),*),
            9 => $f::<9>($($arg),*),
            10 => $f::<10>($($arg),*),
            11 => $f::<11>($($arg),*),
            12 => $f::<12>($($arg),*),
            13 => $f::<13>($($arg),*),
            14 => $f::<14>($($arg),*),
            15 => $f::<15>($($arg),*),
            16 => $f::<16>($($arg),*),
            17 => $f::<17>($($arg),*),
            18 => $f::<18>($($arg),*),
            19 => $f::<19>($($arg),*),
            20 => $f::<20>($($arg),*),
            21 => $f::<21>($($arg),*),
            22 => $f::<22>($($arg),*),
            23 => $f::<23>($($arg),*),
            24 => $f::<24>($($arg),*),
            25 => $f::<25>($($arg),*),
            26 => $f::<26>($($arg),*),
            27 => $f::<27>($($arg),*),
            _ => $f::<28>($($arg),*),
        }
    };
}

/// One tile: the old C (with `accumulate`) into the stack tile, then each k block added
/// to it, then the epilogue and the store into C.
///
/// # Safety
/// As for [`run`]; `t` describes a tile inside the problem, `t.cols ≤ COLS`.
unsafe fn run_tile(imp: Impl, buf: &mut TileBuf, t: &Tile, k: usize, epi: &GemmEpilogue) {
    const _: () = assert!(COLS == 28, "by_width! covers widths 1..=28");
    let accumulate = epi.accumulate != 0;
    // SAFETY (whole body): the tile's rows × cols of C exist; its panel holds 16·k floats
    // from t.a; B rows < k exist for its columns.
    unsafe {
        if accumulate {
            match imp {
                #[cfg(target_arch = "x86_64")]
                Impl::Avx512 => avx512::load_c(buf, t),
                Impl::Portable => load_c_portable(buf, t),
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
                Impl::Avx512 => by_width!(t.cols, block_avx512(kc, a, b, t.rsb, t.csb, out, add)),
                Impl::Portable => {
                    by_width!(t.cols, block_portable(kc, a, b, t.rsb, t.csb, out, add))
                }
            }
            pc += kc;
        }
        match imp {
            #[cfg(target_arch = "x86_64")]
            Impl::Avx512 => avx512::finish(buf, t, epi),
            Impl::Portable => finish_portable(buf, t, epi),
        }
    }
}

/// The old C of the tile into the stack tile (lane order), portable.
///
/// # Safety
/// The tile's rows × cols of C exist.
unsafe fn load_c_portable(buf: &mut TileBuf, t: &Tile) {
    for r in 0..t.rows {
        // SAFETY: row r < rows of the tile.
        let row = unsafe { t.c.offset(r as isize * t.rsc) };
        for j in 0..t.cols {
            // SAFETY: column j < cols of the tile.
            buf.0[j * LANES + r] = unsafe { *row.add(j) };
        }
    }
}

/// `buf[j·16 + r] (+)= Σ_{kk < kc} A[r][kk]·B[kk][j]` for one k block, portable: each
/// product rounded, then added (the portable 6-row kernel's arithmetic).
///
/// # Safety
/// `a` is the tile's panel at the block's first `kk` (`kc·16` floats from there);
/// `B[kk][j]` at `b + kk·rsb + j·csb` exists for `kk < kc`, `j < W`; `buf` holds `16·W`
/// floats.
unsafe fn block_portable<const W: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    rsb: isize,
    csb: isize,
    buf: *mut f32,
    add: bool,
) {
    let mut acc = [[0.0f32; LANES]; W];
    // SAFETY: the reads stay inside the panel and B rows the contract describes.
    unsafe {
        for kk in 0..kc {
            let av = a.add(kk * LANES).cast::<[f32; LANES]>().read_unaligned();
            let bk = b.offset(kk as isize * rsb);
            for (j, acc_j) in acc.iter_mut().enumerate() {
                let bj = *bk.offset(j as isize * csb);
                for (s, &x) in acc_j.iter_mut().zip(&av) {
                    *s += x * bj;
                }
            }
        }
        for (j, acc_j) in acc.iter().enumerate() {
            let dst = buf.add(j * LANES);
            for (r, &s) in acc_j.iter().enumerate() {
                let d = dst.add(r);
                *d = if add { *d + s } else { s };
            }
        }
    }
}

/// Bias, activation (the order and NaN rules of the 6-row kernels' tile epilogue) and the
/// store into C, portable.
///
/// # Safety
/// The tile's rows × cols of C exist, and its bias entries when non-null.
unsafe fn finish_portable(buf: &mut TileBuf, t: &Tile, epi: &GemmEpilogue) {
    for r in 0..t.rows {
        // SAFETY: row r < rows of the tile.
        let row = unsafe { t.c.offset(r as isize * t.rsc) };
        for j in 0..t.cols {
            let mut v = buf.0[j * LANES + r];
            // SAFETY: rows < t.rows and columns < t.cols of C and the bias exist.
            unsafe {
                if !t.bias_row.is_null() {
                    v += *t.bias_row.add(r);
                }
                if !t.bias_col.is_null() {
                    v += *t.bias_col.add(j);
                }
                *row.add(j) = activate(v, epi.activation, epi.lo, epi.hi);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
use avx512::{block_avx512, block2_avx512};

/// The AVX-512 tile: 16 rows of C per register.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    use super::{BUF_COLS, LANES, Tile, TileBuf};
    use crate::gemm::{GemmEpilogue, first_lanes};
    use core::arch::x86_64::*;

    /// As [`super::block_portable`], with one fused multiply-add per product (the AVX-512
    /// and AVX2 6-row kernels' arithmetic).
    ///
    /// # Safety
    /// As for [`super::block_portable`]; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn block_avx512<const W: usize>(
        kc: usize,
        a: *const f32,
        b: *const f32,
        rsb: isize,
        csb: isize,
        buf: *mut f32,
        add: bool,
    ) {
        // SAFETY: the loads stay inside the panel and B rows of the contract.
        unsafe {
            let mut acc = [_mm512_setzero_ps(); W];
            let (mut ap, mut bp) = (a, b);
            for _ in 0..kc {
                let av = _mm512_loadu_ps(ap);
                // Hints (never fault): see `A_PF` and `A_PF_L2`.
                _mm_prefetch::<_MM_HINT_T0>(ap.wrapping_add(A_PF * LANES).cast());
                if W >= A_PF_L2_MIN_W {
                    _mm_prefetch::<_MM_HINT_T1>(ap.wrapping_add(A_PF_L2 * LANES).cast());
                }
                for (j, s) in acc.iter_mut().enumerate() {
                    *s = _mm512_fmadd_ps(av, _mm512_set1_ps(*bp.offset(j as isize * csb)), *s);
                }
                ap = ap.add(LANES);
                bp = bp.offset(rsb);
            }
            store_sums(buf, &acc, add);
        }
    }

    /// Column `j` of a tile's k-block sums into the stack tile at `buf + 16·j`, added to
    /// what is there when `add`.
    ///
    /// # Safety
    /// `buf` holds `16·W` floats, 64-byte aligned; the CPU has AVX-512F.
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn store_sums<const W: usize>(buf: *mut f32, acc: &[__m512; W], add: bool) {
        for (j, &s) in acc.iter().enumerate() {
            // SAFETY: column j of the caller's buffer.
            unsafe {
                let dst = buf.add(j * LANES);
                let v = if add {
                    _mm512_add_ps(_mm512_load_ps(dst), s)
                } else {
                    s
                };
                _mm512_store_ps(dst, v);
            }
        }
    }

    /// [`block_avx512`] for two panels at once (`a` and `a + pk`), their sums into `buf0`
    /// and `buf1`: each broadcast of `B[kk][j]` feeds both. Every sum is the same chain
    /// of fused multiply-adds as in `block_avx512`. `CSB1`: `csb` is 1 (the addresses of
    /// a row of B are then constant offsets).
    ///
    /// # Safety
    /// As for [`block_avx512`], for both panels and buffers.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn block2_avx512<const W: usize, const CSB1: bool, const PF: bool>(
        kc: usize,
        a: *const f32,
        pk: usize,
        b: *const f32,
        rsb: isize,
        csb: isize,
        buf0: *mut f32,
        buf1: *mut f32,
        add: bool,
        (mut xp, per, mut lines): (*const f32, usize, usize),
    ) {
        let csb = if CSB1 { 1 } else { csb };
        // SAFETY: the loads stay inside the panels and B rows of the contract.
        unsafe {
            let mut acc0 = [_mm512_setzero_ps(); W];
            let mut acc1 = [_mm512_setzero_ps(); W];
            let (mut ap, mut bp) = (a, b);
            for _ in 0..kc {
                let a0 = _mm512_loadu_ps(ap);
                let a1 = _mm512_loadu_ps(ap.add(pk));
                // Hints (never fault): both panels A_PF k steps on, and into L2 A_PF_L2
                // steps on.
                _mm_prefetch::<_MM_HINT_T0>(ap.wrapping_add(A_PF * LANES).cast());
                _mm_prefetch::<_MM_HINT_T0>(ap.wrapping_add(pk + A_PF * LANES).cast());
                if W >= A_PF_L2_MIN_W {
                    _mm_prefetch::<_MM_HINT_T1>(ap.wrapping_add(A_PF_L2 * LANES).cast());
                    _mm_prefetch::<_MM_HINT_T1>(ap.wrapping_add(pk + A_PF_L2 * LANES).cast());
                }
                // `PF`: `per` lines of a later step's region (`Prefetch`) into L2, from
                // where they go to L3 when evicted.
                if PF {
                    for _ in 0..per.min(lines) {
                        _mm_prefetch::<_MM_HINT_T2>(xp.cast());
                        xp = xp.wrapping_add(16);
                    }
                    lines = lines.saturating_sub(per);
                }
                for j in 0..W {
                    let bv = _mm512_set1_ps(*bp.offset(j as isize * csb));
                    acc0[j] = _mm512_fmadd_ps(a0, bv, acc0[j]);
                    acc1[j] = _mm512_fmadd_ps(a1, bv, acc1[j]);
                }
                ap = ap.add(LANES);
                bp = bp.offset(rsb);
            }
            store_sums(buf0, &acc0, add);
            store_sums(buf1, &acc1, add);
        }
    }

    /// How many k steps ahead the tiles prefetch their panels. A layer's packed filter
    /// is usually out of cache (a network's weights exceed L3) and read once per
    /// inference, and two panels' streams 16·k floats apart get too few lines in flight
    /// from the hardware prefetchers alone: resnet18's 512×16×512 Winograd products
    /// (16 MB of transformed filter per layer; Zen 5, in the network, `nnefc bench
    /// --profile`) 1.13 ms without, 1.08 at 16 steps, 0.95 at 48 and 96, 0.98 at 192;
    /// mobilenet_v2's 1280×49×320 layer 0.24 → 0.19.
    const A_PF: usize = 96;

    /// How many k steps ahead the tiles also prefetch their panels into L2 (64 KB on;
    /// panels are contiguous, so past a panel's end this reaches the next ones). A
    /// layer's filter comes from L3 or memory, and the L1 hint `A_PF` steps ahead alone
    /// leaves too few lines in flight. Zen 4, mobilenet_v2 on one thread (`nnefc bench
    /// --profile -n 300`, two runs of each distance, ms): its 160→960 layers on 7×7
    /// 0.162–0.178 without → 0.154–0.157 at 256 steps, 0.147–0.149 at 512 and 1024,
    /// 320→1280 0.409–0.434 → 0.385–0.392 at 512, 0.375–0.379 at 1024 and 2048, 960→320
    /// 0.274–0.288 → 0.268–0.269.
    const A_PF_L2: usize = 1024;

    /// Narrowest tile that issues the `A_PF_L2` hints. A tile of one to three columns
    /// (a matrix-vector product: a classifier, an MLP at batch 1) does one to three
    /// multiply-adds per panel line, so the extra hint per line takes a load slot the
    /// tile is bound by: the shared mlp model 0.0126 → 0.0139 ms with the hints in every
    /// tile, and mobilenet_v2's classifier (one column) gained nothing from them.
    const A_PF_L2_MIN_W: usize = 4;

    /// Transposes a 16×16 block held as 16 vectors (unpack pairs, then 2×2, 4×4 and 8×8
    /// blocks of 128-bit lanes): `v[i][j]` becomes `v[j][i]`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn transpose(v: &mut [__m512; LANES]) {
        let mut t = [_mm512_setzero_ps(); LANES];
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
        }
        for g in (0..LANES).step_by(4) {
            v[g] = _mm512_shuffle_ps::<0x44>(t[g], t[g + 2]);
            v[g + 1] = _mm512_shuffle_ps::<0xEE>(t[g], t[g + 2]);
            v[g + 2] = _mm512_shuffle_ps::<0x44>(t[g + 1], t[g + 3]);
            v[g + 3] = _mm512_shuffle_ps::<0xEE>(t[g + 1], t[g + 3]);
        }
        for h in (0..LANES).step_by(8) {
            for i in 0..4 {
                t[h + i] = _mm512_shuffle_f32x4::<0x88>(v[h + i], v[h + i + 4]);
                t[h + i + 4] = _mm512_shuffle_f32x4::<0xDD>(v[h + i], v[h + i + 4]);
            }
        }
        for i in 0..8 {
            v[i] = _mm512_shuffle_f32x4::<0x88>(t[i], t[i + 8]);
            v[i + 8] = _mm512_shuffle_f32x4::<0xDD>(t[i], t[i + 8]);
        }
    }

    /// The old C of the tile into the stack tile: per 16 columns, the valid rows loaded
    /// under the column mask and transposed into lane order.
    ///
    /// # Safety
    /// The CPU has AVX-512F; the tile's rows × cols of C exist.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn load_c(buf: &mut TileBuf, t: &Tile) {
        // SAFETY: forwarded; the stack tile holds BUF_COLS columns.
        unsafe { load_c_at(buf.0.as_mut_ptr(), t) }
    }

    /// [`load_c`] into the columns at `buf` (room for the tile's columns rounded up to 16,
    /// 64-byte aligned).
    ///
    /// # Safety
    /// As for [`load_c`], and `buf` as described.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn load_c_at(buf: *mut f32, t: &Tile) {
        let mut j0 = 0;
        while j0 < t.cols {
            let mask = first_lanes(t.cols - j0);
            // SAFETY: row r < rows; the mask covers columns j0.. < cols.
            let row = |r: usize| unsafe {
                _mm512_maskz_loadu_ps(mask, t.c.offset(r as isize * t.rsc).add(j0))
            };
            // A full panel's rows straight into registers (a loop over `rows` kept the
            // vectors on the stack and copied them through `memcpy` for the transpose).
            let mut v: [__m512; LANES] = if t.rows == LANES {
                core::array::from_fn(row)
            } else {
                core::array::from_fn(|r| {
                    if r < t.rows {
                        row(r)
                    } else {
                        _mm512_setzero_ps()
                    }
                })
            };
            transpose(&mut v);
            for (j, &vj) in v.iter().enumerate() {
                // SAFETY: inside `buf` (the caller's contract).
                unsafe { _mm512_store_ps(buf.add((j0 + j) * LANES), vj) };
            }
            j0 += LANES;
        }
        debug_assert!(j0 <= BUF_COLS);
    }

    /// As [`super::finish_portable`], 16 rows at a time: the row bias one masked vector
    /// load, the activation the AVX-512 6-row kernel's NaN-propagating sequence, then per
    /// 16 columns a transpose into rows of C, each stored under the column mask.
    ///
    /// # Safety
    /// The CPU has AVX-512F; the tile's rows × cols of C exist, and its bias entries when
    /// non-null.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn finish(buf: &mut TileBuf, t: &Tile, epi: &GemmEpilogue) {
        // SAFETY: forwarded; the stack tile holds BUF_COLS columns.
        unsafe { finish_at(buf.0.as_ptr(), t, epi) }
    }

    /// [`finish`] from the columns at `buf` (the tile's columns rounded up to 16, 64-byte
    /// aligned; lanes past the tile's columns are read but never stored).
    ///
    /// # Safety
    /// As for [`finish`], and `buf` as described.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn finish_at(buf: *const f32, t: &Tile, epi: &GemmEpilogue) {
        use crate::gemm::kernels::{
            ACT_HARDSWISH, ACT_SIGMOID, ACT_SWISH, CLAMP_NEG, CLAMP_NONNEG,
        };
        let code = crate::gemm::kernels::gemm_act_code(epi.activation, epi.lo, epi.hi);
        // SAFETY: forwarded.
        unsafe {
            match code {
                0 => finish_act::<0>(buf, t, epi),
                1 => finish_act::<1>(buf, t, epi),
                CLAMP_NONNEG => finish_act::<CLAMP_NONNEG>(buf, t, epi),
                CLAMP_NEG => finish_act::<CLAMP_NEG>(buf, t, epi),
                ACT_SIGMOID => finish_act::<ACT_SIGMOID>(buf, t, epi),
                ACT_SWISH => finish_act::<ACT_SWISH>(buf, t, epi),
                ACT_HARDSWISH => finish_act::<ACT_HARDSWISH>(buf, t, epi),
                _ => finish_act::<2>(buf, t, epi),
            }
        }
    }

    /// [`finish_at`] with its activation code `ACT` a constant. Every group of 16 columns
    /// is taken whole, so that the 16 vectors stay in registers through the transpose
    /// (a loop over the valid columns only kept them on the stack, and dispatched the
    /// activation per vector): the lanes past the tile's columns are computed from what
    /// the stack tile holds there and never stored. Zen 5, one thread, a 160→960 1×1
    /// conv on 7×7 alone (`nnefc bench`): this epilogue was a tenth of the layer.
    ///
    /// # Safety
    /// As for [`finish_at`].
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn finish_act<const ACT: u32>(buf: *const f32, t: &Tile, epi: &GemmEpilogue) {
        let (lo, hi) = (_mm512_set1_ps(epi.lo), _mm512_set1_ps(epi.hi));
        // SAFETY (whole body): the row bias is read under the mask of valid rows, the
        // column bias for columns < cols; buf holds the tile's columns rounded up to 16;
        // C is written for rows < rows under the mask of columns < cols.
        unsafe {
            let brow = if t.bias_row.is_null() {
                None
            } else {
                Some(_mm512_maskz_loadu_ps(first_lanes(t.rows), t.bias_row))
            };
            let mut j0 = 0;
            while j0 < t.cols {
                let w = (t.cols - j0).min(LANES);
                let mut v: [__m512; LANES] = core::array::from_fn(|j| {
                    let mut x = _mm512_load_ps(buf.add((j0 + j) * LANES));
                    if let Some(br) = brow {
                        x = _mm512_add_ps(x, br);
                    }
                    if !t.bias_col.is_null() && j < w {
                        x = _mm512_add_ps(x, _mm512_set1_ps(*t.bias_col.add(j0 + j)));
                    }
                    // The 6-row AVX-512 kernel's sequence.
                    crate::gemm::kernels::gemm_activate(x, ACT, lo, hi)
                });
                transpose(&mut v);
                let mask = first_lanes(w);
                if t.rows == LANES {
                    for (r, &vr) in v.iter().enumerate() {
                        crate::gemm::store16(t.c.offset(r as isize * t.rsc).add(j0), mask, vr);
                    }
                } else {
                    for (r, &vr) in v.iter().enumerate().take(t.rows) {
                        crate::gemm::store16(t.c.offset(r as isize * t.rsc).add(j0), mask, vr);
                    }
                }
                j0 += LANES;
            }
        }
    }

    #[cfg(all(test, feature = "std"))]
    mod tests {
        use super::*;

        /// The register transpose is one: `v[i][j]` ends at `v[j][i]`.
        #[test]
        fn transpose_transposes() {
            if !crate::gemm::KernelId::Avx512.is_available() {
                return;
            }
            let mut m = [[0.0f32; LANES]; LANES];
            for (i, row) in m.iter_mut().enumerate() {
                for (j, x) in row.iter_mut().enumerate() {
                    *x = (i * LANES + j) as f32;
                }
            }
            // SAFETY: the CPU has AVX-512F (checked above); loads and stores of 16 floats.
            let out = unsafe {
                let mut v: [__m512; LANES] =
                    core::array::from_fn(|i| _mm512_loadu_ps(m[i].as_ptr()));
                transpose(&mut v);
                let mut out = [[0.0f32; LANES]; LANES];
                for (i, o) in out.iter_mut().enumerate() {
                    _mm512_storeu_ps(o.as_mut_ptr(), v[i]);
                }
                out
            };
            for i in 0..LANES {
                for j in 0..LANES {
                    assert_eq!(out[i][j], m[j][i], "({i}, {j})");
                }
            }
        }
    }
}
