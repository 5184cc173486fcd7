//! Products with few rows and packed A: C[m×n] = A[m×k]·B with m ≤ 64 (a CNN's projection
//! and squeeze layers: 16 to 64 filters over thousands of pixels). The blocked route packs
//! every k×n block of B and then reads each packed panel only ⌈m/6⌉ times, so for these
//! products the copy costs a third of the arithmetic. Here the rows of C stay in registers
//! for 32 columns at a time, up to 12 rows a pass (24 accumulators), each row of B read
//! in place once per 32 columns and pass and multiplied into every row: no packing, no
//! scratch.
//!
//! Every element goes through the 6-row AVX-512 tiles' operations: the same k blocks
//! (`kc_step` as in `driver::blocked`), each summed from 0 with fused multiply-adds in k
//! order, earlier blocks' sums added through C, the same epilogue sequence
//! (`kernels::gemm_activate`). So C is bit-identical to the blocked route's, but for the
//! payload of a NaN that two NaNs met in (which operand's NaN a multiply-add returns
//! depends on the instruction form LLVM picks for it).
//!
//! Not here: other CPUs (the route is only chosen with the AVX-512 kernels), strided B
//! columns, A not in 6-row panels.

use super::driver::Problem;
use super::kernels::{
    CLAMP_NEG, CLAMP_NONNEG, CLAMP_NONNEG_NZ, KernelId, RELU_NZ, gemm_act_code, gemm_activate,
    nonneg_code,
};
use super::{GemmEpilogue, KC, MR, first_lanes};
use core::arch::x86_64::*;

/// Most rows the route takes, in passes of two 6-row panels (24 accumulators). The
/// blocked route's 6×64 tiles pad the rows to a multiple of 6 and pack B; AMD Zen 4, one
/// core (`gemm_bench Avx512 custom M N K`, GFLOP/s blocked → few-row): 32×12544×32
/// 74 → 90, 32×3136×32 75 → 93, 32×3136×64 81 → 99, 36×3136×48 91 → 98, 48×3136×48
/// 93 → 99, 64×3136×64 93 → 100, 64×3136×32 84 → 92, 40×3136×64 88 → 100, 64×12544×16
/// 72 → 76, 48×784×128 100 → 106; but 64×196×384 93 → 97 and 576×196×96 105 → 95, so
/// not beyond 64 rows. (Those blocked numbers predate the 6×64 tile's spill fix and were
/// taken on the bare product; [`takes`] says what holds now.)
pub(crate) const MAX_M: usize = super::FEW_ROWS_MAX_M;

/// Most rows the route takes whatever the depth of the product (beyond, up to [`MAX_M`],
/// only with k ≥ 2m: see [`takes`]).
const ANY_K_MAX_M: usize = 32;

/// How far ahead (in columns: six tiles) each row of C is also prefetched into L2. The
/// write hint two tiles ahead alone left the route waiting on C's lines where they come
/// from L3 or memory: with one pair of streams per row of C and of B (64 for a 32×32
/// product), the hardware prefetchers lose track. Zen 4, in the network (`nnefc bench
/// --profile -n 300`, three interleaved runs each): regnet_x_400mf's 32→32 1×1 layer on
/// 112² 0.42–0.45 → 0.35–0.36 ms (ONNX Runtime's profiler: 0.26), the 32→32 stride-2 1×1
/// before it 0.14–0.15 → 0.13; mobilenet_v2's 32→16 on 112² 0.169–0.173 → 0.166–0.169.
/// 12 or 24 tiles ahead were no better, and the blocked route's 6×64 tile gained
/// nothing from the same hint four tiles ahead.
const PF_C_FAR: usize = 192;

/// Whether the route takes a product: the AVX-512 kernels, A in 6-row panels (checked by
/// the caller), B's columns contiguous, a full vector of columns, and at most 32 rows, or
/// at most [`MAX_M`] with k at least twice the rows. Since the 6×64 tile stopped spilling
/// its sums (`kernels::x86`), it beats this route on shallow products of more rows: Zen 4,
/// one core, `gemm_bench Avx512 custom M N K relu6`, GFLOP/s few-row / 6×64 tiles:
/// 64×12544×16 66/86, 64×3136×64 96/100, 64×784×64 96/100, but 32×3136×64 93/85,
/// 24×3136×144 104/96, 16×3025×64 94/75, 48×784×128 104/103, 32×12544×32 79/80 (which
/// stays here: in the network, regnet_x_400mf's such layer took 0.355 ms this way and
/// 0.363 blocked). In the networks (interleaved `nnefc bench -n 400`, three pairs):
/// regnet_y_400mf 9.44–9.56 → 9.29–9.31 ms, mnasnet1_0 7.54–7.87 → 7.37–7.46,
/// shufflenet_v2_x1_0 3.88 → 3.79–3.84, regnet_x_400mf's 64-row 1×1 layer on 56²
/// 0.157–0.160 → 0.140–0.143 (`--profile`); mobilenet_v2 and efficientnet_b0 the same.
pub(crate) fn takes(kern: KernelId, p: &Problem) -> bool {
    kern.is_avx512()
        && (p.m <= ANY_K_MAX_M || (p.m <= MAX_M && p.k >= 2 * p.m))
        && p.n >= 16
        && p.csb == 1
}

/// Runs `p` (A packed at `ap`) with `epi`.
///
/// # Safety
/// The CPU has AVX-512F; the operands satisfy `nnefc_sgemm_packed_a`'s contract; [`takes`]
/// holds.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn run(p: &Problem, ap: *const f32, epi: &GemmEpilogue) {
    // SAFETY: forwarded.
    unsafe { run_passes(p, ap, epi, one_vector_passes()) }
}

/// [`run`] with the form of its passes given (`one_vector`: see [`one_vector_passes`]);
/// both give the same bits.
///
/// # Safety
/// As for [`run`].
#[target_feature(enable = "avx512f")]
unsafe fn run_passes(p: &Problem, ap: *const f32, epi: &GemmEpilogue, one_vector: bool) {
    let kc_step = p.k.div_ceil(p.k.div_ceil(KC));
    // The activation's form, once per call (see `gemm_act_code`).
    let act = gemm_act_code(epi.activation, epi.lo, epi.hi);
    let mut j = 0;
    while j < p.n {
        // 32 columns a tile: two vectors of B share each broadcast of A.
        let cols = p.n - j;
        let mask = [first_lanes(cols), first_lanes(cols.saturating_sub(16))];
        // A hint (never faults): the rows of C two tiles on, for writing. In a network the
        // output often lands on bytes last touched an inference ago, and each line's
        // read-for-ownership otherwise stalls the tile's stores (see `pass` for B).
        for r in 0..p.m {
            let cp = p.c.wrapping_offset(r as isize * p.rsc).wrapping_add(j + 64);
            _mm_prefetch::<_MM_HINT_ET0>(cp.cast());
            _mm_prefetch::<_MM_HINT_ET0>(cp.wrapping_add(16).cast());
            // And into L2 further on (see `PF_C_FAR`).
            let far = cp.wrapping_add(PF_C_FAR);
            _mm_prefetch::<_MM_HINT_T1>(far.cast());
            _mm_prefetch::<_MM_HINT_T1>(far.wrapping_add(16).cast());
        }
        let mut pc = 0;
        while pc < p.k {
            let kc = kc_step.min(p.k - pc);
            let t = Tile {
                kc,
                pc,
                first: pc == 0,
                last: pc + kc == p.k,
                col: j,
                mask,
                act,
                one_vector,
            };
            // SAFETY: columns j.. of C and B, k block pc..pc + kc of A's panels.
            unsafe { tile(p, ap, epi, &t) }
            pc += kc;
        }
        j += 32;
    }
}

/// One k block of one 32-column tile.
struct Tile {
    kc: usize,
    pc: usize,
    first: bool,
    last: bool,
    col: usize,
    /// The tile's columns inside C, per vector of 16.
    mask: [u16; 2],
    /// The activation code ([`gemm_act_code`]) of the product.
    act: u32,
    /// Passes over one vector at a time ([`one_vector_passes`]).
    one_vector: bool,
}

/// Evaluates `$body` with `$R` a `const usize` equal to `$rows` (1 to [`ROW_PASS`]).
macro_rules! by_rows {
    ($rows:expr, $R:ident => $body:expr) => {
        by_rows!(@ $rows, $R, $body, [1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23])
    };
    (@ $rows:expr, $R:ident, $body:expr, [$($n:literal)*]) => {
        match $rows {
            $($n => {
                const $R: usize = $n;
                $body
            })*
            _ => {
                const $R: usize = ROW_PASS;
                $body
            }
        }
    };
}

/// The rows × 32 columns of one k block, in passes each followed by its epilogue; the
/// first pass prefetches B. A product of at most [`MR`] rows takes one pass over both
/// vectors of the tile (2·m accumulators); more rows go [`ROW_PASS`] at most at a time
/// over one vector, then the other, where the CPU has one 512-bit multiply-add pipe
/// ([`one_vector_passes`]), else two panels at a time over both vectors.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn tile(p: &Problem, ap: *const f32, epi: &GemmEpilogue, t: &Tile) {
    // `pass` for `$rows` rows from panel `$q0` on, `$v` vectors from vector `$h`, its
    // constants spelled out (`FIRST`, the first pass over the vector: prefetch B).
    macro_rules! pass_for {
        ($v:literal, $rows:expr, $q0:expr, $h:expr) => {
            if $q0 == 0 {
                by_rows!($rows, R => pass::<true, R, $v>(p, ap, epi, t, $q0, $h))
            } else {
                by_rows!($rows, R => pass::<false, R, $v>(p, ap, epi, t, $q0, $h))
            }
        };
    }
    // SAFETY (whole body): forwarded; every pass's rows are the product's.
    unsafe {
        if p.m <= MR {
            return pass_for!(2, p.m, 0, 0);
        }
        // Two loops, not one for both forms: one loop choosing its rows and vectors per
        // pass took Zen 4's 6×3136×64 from 102 to 93 GFLOP/s and 16×12544×32 from 104
        // to 99 (`gemm_bench Avx512 custom`), from the code LLVM made of it.
        if !t.one_vector {
            let mut q0 = 0;
            while q0 * MR < p.m {
                let rows = (p.m - q0 * MR).min(2 * MR);
                pass_for!(2, rows, q0, 0);
                q0 += 2;
            }
            return;
        }
        let mut q0 = 0;
        loop {
            let left = p.m - q0 * MR;
            // Whole panels but in the last pass, and no short last pass: 32 rows go as
            // 18 + 14, not 24 + 8.
            let rows = if left <= ROW_PASS {
                left
            } else if left <= ROW_PASS + 2 * MR {
                3 * MR
            } else {
                ROW_PASS
            };
            pass_for!(1, rows, q0, 0);
            if t.mask[1] != 0 {
                pass_for!(1, rows, q0, 1)
            }
            if rows == left {
                return;
            }
            q0 += rows / MR;
        }
    }
}

/// Rows a one-vector pass takes at most: 24 accumulators, one vector of B and the
/// broadcast in registers.
const ROW_PASS: usize = 4 * MR;

/// Whether the CPU retires one 512-bit multiply-add a cycle (AMD Zen 4, family 25), where
/// products of more than [`MR`] rows run one vector of B at a time: each multiply-add
/// then takes its own broadcast of A, which that core issues beside it for free, and a
/// pass holds up to 24 rows, so B is read once per vector instead of once per two
/// panels. Zen 4, one core, `gemm_bench Avx512 custom M N K`, GFLOP/s two panels × two
/// vectors → up to 24 rows × one vector: 16×12544×32 94 → 104, 24×3136×96 108 → 113,
/// 24×3136×144 110 → 115, 8×3136×64 99 → 105, 12×3136×64 103 → 112, 32×3136×64
/// 105 → 110, 48×784×128 108 → 113, 64×3136×64 and 36×3136×48 even; but one vector took
/// 6×3136×64 from 95 to 93, so not for one panel. Zen 5 (two pipes) gained the other
/// way, from one vector to two (see [`pass`]).
fn one_vector_passes() -> bool {
    use core::sync::atomic::{AtomicU8, Ordering};
    static ONE: AtomicU8 = AtomicU8::new(0);
    match ONE.load(Ordering::Relaxed) {
        1 => return false,
        2 => return true,
        _ => {}
    }
    // CPUID leaves 0 (vendor) and 1 (signature) exist on every x86-64 CPU.
    let (vendor, sig) = (__cpuid(0), __cpuid(1).eax);
    let amd = (vendor.ebx, vendor.edx, vendor.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163);
    let family = match (sig >> 8) & 0xF {
        0xF => 0xF + ((sig >> 20) & 0xFF),
        f => f,
    };
    let one = amd && family == 0x19;
    ONE.store(if one { 2 } else { 1 }, Ordering::Relaxed);
    one
}

/// `R` rows from panel `q0` on (rows `q0·MR ..`) × `V` vectors of the tile from vector `h0`
/// over one k block, then the 6-row tiles' epilogue: add the old C unless this is the
/// first block of an overwriting product, and on the last block the biases and
/// activation. Rows of A past the pass's `R` (its last panel's zero padding) are never
/// read. Each broadcast of A feeds every vector of the pass. With two vectors, where with
/// one vector a tile (16 columns) every multiply-add took its own broadcast load: Zen 5,
/// one core, `gemm_bench Avx512 custom M N K`, GFLOP/s 16 columns → 32: 16×12544×32
/// 169 → 193, 24×3136×144 205 → 234, 24×3136×96 214 → 226, 16×3025×128 195 → 214,
/// 16×729×32 191 → 212; mobilenet_v2's 32→16 layer on 112×112 in the network (`nnefc
/// bench --profile`, per-layer minima of three interleaved runs) 0.0754 → 0.0680 ms. Zen 4
/// prefers one vector and more rows ([`one_vector_passes`]).
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn pass<const FIRST: bool, const R: usize, const V: usize>(
    p: &Problem,
    ap: *const f32,
    epi: &GemmEpilogue,
    t: &Tile,
    q0: usize,
    h0: usize,
) {
    let mut acc = [[_mm512_setzero_ps(); V]; R];
    // SAFETY (whole body): B rows pc..pc + kc, columns col.. under the masks; A panels
    // q0.. at k offset pc hold MR values per k step; the pass's rows are the product's.
    unsafe {
        // Each panel's values of the k block, MR per k step.
        let a: [*const f32; 4] =
            core::array::from_fn(|j| ap.wrapping_add((q0 + j) * MR * p.k + t.pc * MR));
        let mut bp = p.b.offset(t.pc as isize * p.rsb).add(t.col + 16 * h0);
        for kk in 0..t.kc {
            let b: [__m512; V] =
                core::array::from_fn(|v| _mm512_maskz_loadu_ps(t.mask[h0 + v], bp.add(16 * v)));
            if FIRST {
                // A hint (never faults): this row of B two tiles on. A tile reads lines
                // from each of k rows a row stride apart, which the hardware prefetchers
                // follow badly: mobilenet_v2's 24×3136×144 projection (Zen 5, in the
                // network, `nnefc bench --profile`) 0.18 ms without, 0.11 with. The first
                // pass over each vector fetches that vector's lines (one pass fetching
                // both made Zen 4's 8×3136×64 run at 87 GFLOP/s instead of 104); later
                // passes read the rows it left in L1.
                for v in 0..V {
                    _mm_prefetch::<_MM_HINT_T0>(bp.wrapping_add(64 + 16 * v).cast());
                }
                // And into L2 eight tiles on, for a B that comes from memory: Zen 4,
                // mobilenet_v2's 32→16 layer on 112² in the network (`nnefc bench
                // --profile -n 300`, three interleaved runs) 0.18–0.21 ms without these
                // and C's hints, 0.16 with C's, 0.15–0.16 with both.
                for v in 0..V {
                    _mm_prefetch::<_MM_HINT_T1>(bp.wrapping_add(256 + 16 * v).cast());
                }
            }
            unroll!(r in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23] {
                if r < R {
                    let av = _mm512_set1_ps(*a[r / MR].add(kk * MR + r % MR));
                    for v in 0..V {
                        acc[r][v] = _mm512_fmadd_ps(av, b[v], acc[r][v]);
                    }
                }
            });
            bp = bp.offset(p.rsb);
        }
        let accumulate = epi.accumulate != 0 || !t.first;
        let (lo, hi) = (_mm512_set1_ps(epi.lo), _mm512_set1_ps(epi.hi));
        let row0 = q0 * MR;
        // The common epilogue (the product's only or last k block, no old C, a row bias
        // or none, an activation with a short form) with the activation a constant and
        // no test per vector: the general one below tests each vector's row, mask,
        // accumulation, bias kind and activation. Chosen by the product and k block only,
        // never by the tile's columns, so that a split product's parts take it for the
        // same elements as the whole (the two can differ in a NaN's payload).
        let col_bias = epi.bias_kind == 2 && !epi.bias.is_null();
        if !accumulate && t.last && !col_bias {
            let row_bias = epi.bias_kind == 1 && !epi.bias.is_null();
            // Every row of the pass × its vectors, plus the row's bias, then the
            // activation `$act` (a `gemm_act_code`), stored: the general epilogue's
            // operations. A macro, not a function: LLVM declined to inline one taking the
            // sums, which then went through the stack (and the pass got slower than
            // before).
            macro_rules! plain {
                ($act:expr) => {{
                    unroll!(r in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23] {
                        if r < R {
                            let row = row0 + r;
                            let cp = p.c.offset(row as isize * p.rsc).add(t.col);
                            let b = row_bias.then(|| _mm512_set1_ps(*epi.bias.add(row)));
                            for v in 0..V {
                                let h = h0 + v;
                                if t.mask[h] != 0 {
                                    let mut x = acc[r][v];
                                    if let Some(b) = b {
                                        x = _mm512_add_ps(x, b);
                                    }
                                    let x = gemm_activate(x, $act, lo, hi);
                                    crate::gemm::store16(cp.add(16 * h), t.mask[h], x);
                                }
                            }
                        }
                    });
                    return;
                }};
            }
            // The short ReLU and ReLU6 where no bias of the pass is −0 (`nonneg_code`):
            // Zen 4, `gemm_bench Avx512 custom M N K relu6`, GFLOP/s: 16×12544×32
            // 90.3–91.6 → 92.0–92.2, 32×12544×32 94.3–94.9 → 95.5–95.6.
            let code = if row_bias {
                nonneg_code(t.act, epi.bias.add(row0), R)
            } else {
                t.act
            };
            match code {
                0 => plain!(0),
                1 => plain!(1),
                RELU_NZ => plain!(RELU_NZ),
                CLAMP_NONNEG => plain!(CLAMP_NONNEG),
                CLAMP_NONNEG_NZ => plain!(CLAMP_NONNEG_NZ),
                CLAMP_NEG => plain!(CLAMP_NEG),
                _ => {}
            }
        }
        unroll!(r in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23] {
            if r < R {
                let row = row0 + r;
                for (v, &sum) in acc[r].iter().enumerate() {
                    let h = h0 + v;
                    let (col, mask) = (t.col + 16 * h, t.mask[h]);
                    if mask != 0 {
                        let cp = p.c.offset(row as isize * p.rsc).add(col);
                        let mut x = sum;
                        if accumulate {
                            x = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, cp), x);
                        }
                        if t.last {
                            if epi.bias_kind == 1 && !epi.bias.is_null() {
                                x = _mm512_add_ps(x, _mm512_set1_ps(*epi.bias.add(row)));
                            }
                            if epi.bias_kind == 2 && !epi.bias.is_null() {
                                let b = _mm512_maskz_loadu_ps(mask, epi.bias.add(col));
                                x = _mm512_add_ps(x, b);
                            }
                            x = gemm_activate(x, t.act, lo, hi);
                        }
                        crate::gemm::store16(cp, mask, x);
                    }
                }
            }
        });
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::super::driver::{self, ASrc, Route};
    use super::super::kernels::{self, KernelId};
    use super::super::tests::Line;
    use super::super::*;
    use std::vec::Vec;

    fn data(seed: &mut u64, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let v = ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
                // Some NaNs, infinities and signed zeros for the epilogue.
                match *seed >> 58 {
                    0 => f32::NAN,
                    1 => f32::INFINITY,
                    2 => -0.0,
                    _ => v,
                }
            })
            .collect()
    }

    /// Random products of 2–64 rows (one to three k blocks, padded B and C rows, every
    /// epilogue): the few-row route gives the blocked route's C bit for bit, serially and
    /// split over 3 workers.
    #[test]
    fn tall_is_bit_identical_to_the_blocked_route() {
        let Some(kern) = kernels::kernel(KernelId::Avx512) else {
            return;
        };
        let pool = crate::ThreadPool::new(3).expect("pool");
        let mut seed = 9u64;
        for case in 0..120usize {
            let pick = |s: &mut u64, m: usize| {
                *s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                (*s >> 33) as usize % m
            };
            // One row is a matrix-vector product (its own route).
            let m = 2 + pick(&mut seed, 63);
            let n = 16 + pick(&mut seed, 300);
            let k = 1 + pick(&mut seed, if case % 5 == 0 { 700 } else { 150 });
            let (rsb, rsc) = (n + case % 3, n + 1);
            let a: Vec<f32> = data(&mut seed, m * k).iter().map(|v| v * 0.5).collect();
            let b = data(&mut seed, k * rsb);
            let c0 = data(&mut seed, m * rsc);
            let bias = data(&mut seed, m.max(n));
            let packed = pack_a(m, k, &a, k, 1);
            let epi = GemmEpilogue {
                bias: bias.as_ptr(),
                bias_kind: (case % 3) as u32,
                activation: (case / 3 % 3) as u32,
                lo: -0.25,
                hi: if case % 11 == 0 { f32::NAN } else { 0.5 },
                accumulate: (case % 2) as u32,
            };
            let problem = |c: &mut Vec<f32>| driver::Problem {
                m,
                n,
                k,
                a: ASrc::Packed(packed.as_ptr()),
                b: b.as_ptr(),
                rsb: rsb as isize,
                csb: 1,
                c: c.as_mut_ptr(),
                rsc: rsc as isize,
            };
            let bytes = sgemm_scratch_bytes(m, n, k);
            let mut scratch = std::vec![Line([0; 64]); bytes.div_ceil(64) + 1];
            let mut want = c0.clone();
            let mut got = c0.clone();
            let p = problem(&mut got);
            // The route is chosen by `takes`; it is run here either way, to check its bits.
            let chosen = matches!(Route::of(kern, &p), Route::Tall);
            assert_eq!(chosen, m <= 32 || k >= 2 * m, "case {case}: m={m} k={k}");
            // SAFETY: operands sized for their strides; scratch of `bytes`, aligned.
            unsafe {
                driver::run_route(
                    Route::Blocked(kern, false),
                    &problem(&mut want),
                    &epi,
                    scratch.as_mut_ptr().cast(),
                    driver::Prefetch::NONE,
                );
                driver::run_route(
                    Route::Tall,
                    &p,
                    &epi,
                    scratch.as_mut_ptr().cast(),
                    driver::Prefetch::NONE,
                );
            }
            // Across routes a NaN matches any NaN: both compute each element with the same
            // operations, but which operand's NaN a multiply-add returns depends on the
            // instruction form LLVM picks, which decides only whose NaN payload survives
            // (case 16 meets it: a sum that is NaN twice over).
            let same = |x: &[f32], y: &[f32]| {
                x.iter()
                    .zip(y)
                    .all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()))
            };
            assert!(same(&got, &want), "case {case}: m={m} n={n} k={k}");
            // Both forms of the passes, whichever this CPU runs.
            for one_vector in [false, true] {
                let mut other = c0.clone();
                let q = problem(&mut other);
                // SAFETY: as above; the CPU has AVX-512F (the kernel exists).
                unsafe { super::run_passes(&q, packed.as_ptr(), &epi, one_vector) };
                assert!(
                    same(&other, &want),
                    "case {case}: m={m} n={n} k={k}, one vector: {one_vector}"
                );
            }
            let mut split = c0.clone();
            let args = GemmArgs {
                m,
                n,
                k,
                a: packed.as_ptr(),
                rsa: 0,
                csa: 0,
                a_packed: 1,
                b: b.as_ptr(),
                rsb: rsb as isize,
                csb: 1,
                c: split.as_mut_ptr(),
                rsc: rsc as isize,
                epilogue: &epi,
            };
            let stride = bytes.div_ceil(64) * 64;
            let mut scratch3 = std::vec![Line([0; 64]); 3 * stride / 64 + 1];
            let par = pool.parallel();
            // SAFETY: as above, with a scratch of `stride` bytes per worker.
            unsafe { nnefc_sgemm_parallel(&args, &par, scratch3.as_mut_ptr().cast(), stride) };
            // The parallel entry runs the CPU's selected kernel: an AVX-512 one here.
            // Where it takes this route too, the split gives the serial bits, NaNs
            // included; where `takes` sends the product to the blocked route, the bits but
            // for NaN payloads.
            if kernels::selected().id.is_avx512() {
                let exact = split
                    .iter()
                    .zip(&got)
                    .all(|(s, g)| s.to_bits() == g.to_bits());
                assert!(
                    exact || (!chosen && same(&split, &got)),
                    "case {case}: split over 3 workers"
                );
            }
        }
    }
}
