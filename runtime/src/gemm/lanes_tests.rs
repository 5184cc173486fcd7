//! Tests of the lane-panel format and its GEMM route (`lanes`): the documented layout,
//! the AVX-512 and portable tiles against a naive product (odd m, every width from 1 to
//! 70 and wide products, k from 0 through several k blocks, strided B, every epilogue,
//! NaN bounds), bit-identity with the 6-row kernels of the same arithmetic, and with the
//! serial call whatever the worker count (`nnefc_sgemm_parallel`,
//! `nnefc_sgemm_batch_parallel`).

use super::driver::{self, ASrc, Problem};
use super::kernels::{KernelId, activate, available_kernels, kernel};
use super::*;
use std::vec::Vec;

use super::tests::{Line, reversed};

/// Deterministic test data (an LCG), values in [−1, 1).
struct Lcg(u64);
impl Lcg {
    fn f32(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }
    fn below(&mut self, n: usize) -> usize {
        ((self.f32() + 1.0) * 0.5 * n as f32) as usize % n
    }
}

/// The lane-panel tiles to test: the portable one (forced through the portable 6-row
/// kernel, which selects it) and the AVX-512 one when the CPU has it.
fn lane_kernels() -> Vec<KernelId> {
    let mut v = std::vec![KernelId::Generic];
    if KernelId::Avx512.is_available() {
        v.push(KernelId::Avx512);
    }
    v
}

/// One product's operands: A (row-major, row stride k + 1), B with strides (rsb, csb),
/// C with row stride n + 3 (the padding must stay untouched), the bias.
struct Operands {
    m: usize,
    n: usize,
    k: usize,
    a: Vec<f32>,
    rsa: usize,
    b: Vec<f32>,
    rsb: usize,
    csb: usize,
    rsc: usize,
    c0: Vec<f32>,
    bias: Vec<f32>,
}

impl Operands {
    fn new(rng: &mut Lcg, m: usize, n: usize, k: usize, b_layout: usize) -> Operands {
        let rsa = k + 1;
        // Row-major B, column-major B, and both strides ≠ 1 with an odd row stride.
        let (rsb, csb) = match b_layout % 3 {
            0 => (n + 1, 1),
            1 => (1, k + 2),
            _ => (2 * n + 3, 2),
        };
        let blen = if k == 0 || n == 0 {
            1
        } else {
            (k - 1) * rsb + (n - 1) * csb + 1
        };
        let rsc = n + 3;
        Operands {
            m,
            n,
            k,
            a: rng.vec((m * rsa).max(1)),
            rsa,
            b: rng.vec(blen),
            rsb,
            csb,
            rsc,
            c0: rng.vec((m * rsc).max(1)),
            bias: rng.vec(m.max(n).max(1)),
        }
    }

    fn epilogue(
        &self,
        bias_kind: u32,
        activation: u32,
        lo: f32,
        hi: f32,
        acc: bool,
    ) -> GemmEpilogue {
        GemmEpilogue {
            bias: if bias_kind == 0 {
                core::ptr::null()
            } else {
                self.bias.as_ptr()
            },
            bias_kind,
            activation,
            lo,
            hi,
            accumulate: acc as u32,
        }
    }

    fn problem(&self, a: ASrc, c: &mut [f32]) -> Problem {
        Problem {
            m: self.m,
            n: self.n,
            k: self.k,
            a,
            b: self.b.as_ptr(),
            rsb: self.rsb as isize,
            csb: self.csb as isize,
            c: c.as_mut_ptr(),
            rsc: self.rsc as isize,
        }
    }

    /// C through `driver::sgemm` with kernel `id`, A in lane panels or in 6-row panels.
    fn run(&self, id: KernelId, lanes: bool, epi: &GemmEpilogue) -> Vec<f32> {
        let kern = kernel(id).expect("only available kernels are tested");
        let packed = if lanes {
            pack_a_lanes(self.m, self.k, &self.a, self.rsa, 1)
        } else {
            pack_a(self.m, self.k, &self.a, self.rsa, 1)
        };
        let src = if lanes {
            ASrc::Lanes(packed.as_ptr())
        } else {
            ASrc::Packed(packed.as_ptr())
        };
        let mut c = self.c0.clone();
        let bytes = sgemm_scratch_bytes(self.m, self.n, self.k);
        let mut scratch = std::vec![Line([0; 64]); bytes.div_ceil(64) + 1];
        // SAFETY: every operand is sized for its strides; the scratch holds `bytes`,
        // 64-byte aligned (the lane route uses none).
        unsafe {
            driver::sgemm(
                kern,
                self.problem(src, &mut c),
                epi,
                scratch.as_mut_ptr().cast(),
            )
        };
        c
    }

    /// The definition in f64, then the epilogue in f32 with [`activate`].
    fn naive(&self, epi: &GemmEpilogue) -> (Vec<f32>, f64) {
        let mut want = self.c0.clone();
        let mut max_abs = 0.0f64;
        for i in 0..self.m {
            for j in 0..self.n {
                let mut s = if epi.accumulate != 0 {
                    self.c0[i * self.rsc + j] as f64
                } else {
                    0.0
                };
                for kk in 0..self.k {
                    s += self.a[i * self.rsa + kk] as f64
                        * self.b[kk * self.rsb + j * self.csb] as f64;
                }
                s += match epi.bias_kind {
                    1 => self.bias[i] as f64,
                    2 => self.bias[j] as f64,
                    _ => 0.0,
                };
                max_abs = max_abs.max(s.abs());
                want[i * self.rsc + j] = activate(s as f32, epi.activation, epi.lo, epi.hi);
            }
        }
        (want, max_abs)
    }
}

/// The layout the module docs promise: element (i, kk) at (i/16)·16·k + kk·16 + i%16,
/// zero rows past m, and the length of `packed_a_lanes_len`.
#[test]
fn lane_format_is_documented_layout() {
    for (m, k) in [(1, 1), (16, 3), (17, 5), (40, 7), (5, 0), (0, 4)] {
        let a: Vec<f32> = (0..m * k).map(|x| x as f32 + 1.0).collect();
        // A read transposed (strides 1, m) must give the same panels as its row-major copy.
        let at: Vec<f32> = (0..m * k).map(|x| a[(x % m) * k + x / m]).collect();
        let p = pack_a_lanes(m, k, &a, k, 1);
        assert_eq!(p, pack_a_lanes(m, k, &at, 1, m.max(1)));
        assert_eq!(p.len(), packed_a_lanes_len(m, k));
        assert_eq!(p.len(), m.div_ceil(16) * 16 * k);
        for i in 0..m.div_ceil(16) * 16 {
            for kk in 0..k {
                let want = if i < m { a[i * k + kk] } else { 0.0 };
                assert_eq!(
                    p[(i / 16) * 16 * k + kk * 16 + i % 16],
                    want,
                    "m={m} k={k} ({i}, {kk})"
                );
            }
        }
    }
    // A slice too short for the described matrix is an error, not a panic.
    assert!(try_pack_a_lanes(4, 4, &[0.0; 15], 4, 1).is_err());
    assert!(try_pack_a_lanes(2, 2, &[0.0; 4], usize::MAX, 1).is_err());
    assert!(try_pack_a_lanes(0, 9, &[], 9, 1).is_ok_and(|v| v.is_empty()));
}

/// Random shapes (m with and without a partial last panel, below 16 too; n from 1 to 70
/// and wide; k from 0 to several k blocks), strided B, every bias and activation, with
/// and without accumulation, clamp bounds that are NaN: both lane tiles match the
/// definition within rounding, never touch C's padding, and agree with each other up to
/// the fused multiply-add.
#[test]
fn lanes_match_naive() {
    let mut rng = Lcg(11);
    let ms = [1, 2, 7, 15, 16, 17, 31, 33, 48, 50];
    let ks = [0, 1, 2, 3, 17, 64, 255, 256, 257, 300, 600];
    for case in 0..260 {
        let m = ms[case % ms.len()];
        let n = if case % 13 == 12 {
            200 + rng.below(400)
        } else {
            1 + rng.below(70)
        };
        let k = ks[rng.below(ks.len())];
        let ops = Operands::new(&mut rng, m, n, k, case);
        let bias_kind = rng.below(3) as u32;
        let activation = rng.below(6) as u32;
        let (lo, hi) = match rng.below(4) {
            0 => (f32::NAN, 0.5),
            1 => (-0.25, f32::NAN),
            _ => (-0.25, 0.5),
        };
        let acc = rng.below(2) == 1;
        let epi = ops.epilogue(bias_kind, activation, lo, hi, acc);
        let (want, max_abs) = ops.naive(&epi);
        let tol = 1e-5 * (k as f64 + 2.0) * max_abs.max(1.0);
        for id in lane_kernels() {
            let got = ops.run(id, true, &epi);
            for i in 0..m {
                for j in 0..ops.rsc {
                    let (g, w) = (got[i * ops.rsc + j], want[i * ops.rsc + j]);
                    let ctx = || {
                        std::format!(
                            "{id:?} case {case}: m={m} n={n} k={k} B strides ({}, {}) \
                             bias {bias_kind} act {activation} [{lo}, {hi}] acc {acc}: \
                             C[{i}][{j}] = {g}, want {w}",
                            ops.rsb,
                            ops.csb
                        )
                    };
                    if j >= n {
                        assert_eq!(g.to_bits(), w.to_bits(), "wrote padding: {}", ctx());
                    } else if w.is_nan() {
                        assert!(g.is_nan(), "{}", ctx());
                    } else {
                        assert!(((g - w) as f64).abs() <= tol, "{}", ctx());
                    }
                }
            }
        }
    }
}

/// On one CPU the lane tiles compute every element with the operations of the 6-row
/// kernels: the portable lane tile equals the portable 6-row kernel, and the AVX-512 lane
/// tile equals every fused-multiply-add 6-row kernel (AVX-512 6×64, 6×32 and AVX2 6×16,
/// which the AVX-512 ones hand narrow products to), bit for bit, over several k blocks
/// and every epilogue, wherever the 6-row path runs its blocked loops (m ≥ 2, n ≥ 5), in
/// either tile order.
#[test]
fn lanes_are_bit_identical_to_six_row_kernels() {
    let mut rng = Lcg(5);
    let shapes = [
        (2, 5, 1),
        (17, 49, 320),
        (40, 49, 960),
        (33, 13, 257),
        (16, 196, 96),
        (50, 70, 600),
        (7, 100, 1000),
        (64, 30, 256),
        // B of 768 KB and A of 10 KB: the column-major tile order.
        (40, 3000, 64),
    ];
    let pairs: Vec<(KernelId, KernelId)> = available_kernels()
        .filter(|&id| id != KernelId::Neon)
        .filter_map(|id| match id {
            KernelId::Generic => Some((id, KernelId::Generic)),
            _ if KernelId::Avx512.is_available() => Some((id, KernelId::Avx512)),
            _ => None,
        })
        .collect();
    assert!(!pairs.is_empty());
    let mut compared = 0;
    for (si, &(m, n, k)) in shapes.iter().enumerate() {
        let ops = Operands::new(&mut rng, m, n, k, si);
        for (bias_kind, activation, acc) in
            [(0, 0, false), (1, 1, false), (2, 2, true), (1, 2, true)]
        {
            let epi = ops.epilogue(bias_kind, activation, -0.25, 0.5, acc);
            for &(six, lane) in &pairs {
                let want = ops.run(six, false, &epi);
                let got = ops.run(lane, true, &epi);
                let same = got
                    .iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_bits() == w.to_bits());
                assert!(
                    same,
                    "6-row {six:?} vs lanes {lane:?}: m={m} n={n} k={k} bias {bias_kind} act {activation} acc {acc}"
                );
                compared += 1;
            }
        }
    }
    assert!(compared >= shapes.len() * 4);
}

/// `a_packed = 2` through `nnefc_sgemm_parallel` with 1, 2, 3 and 5 workers of a
/// reverse-order fake pool gives the serial call's C bit for bit, and the planner does
/// cut these products (by row panels, or by columns when there are fewer panels than
/// workers); `nnefc_sgemm_batch_prefetch` gives the same C; `nnefc_sgemm_batch_parallel`
/// takes lane panels among other products.
#[test]
fn lanes_split_bit_identical_to_serial() {
    use super::split::{Axis, Plan};
    let mut rng = Lcg(21);
    // 1280 rows are 40 pairs of panels: rows for any count; 160 rows, 5 pairs: rows for 5
    // workers, columns for 2 and 3; 50 rows, 2 pairs: rows for 2 workers; 64 rows, 2
    // pairs, but fewer rows than the 196 columns: columns; 17 and 9 rows, one pair:
    // columns.
    let shapes = [
        (1280, 49, 320),
        (64, 196, 384),
        (160, 49, 960),
        (17, 300, 64),
        (50, 30, 700),
        (9, 2000, 40),
    ];
    for (si, &(m, n, k)) in shapes.iter().enumerate() {
        let ops = Operands::new(&mut rng, m, n, k, si);
        let epi = ops.epilogue(1 + (si % 2) as u32, 2, -0.25, 0.5, si % 2 == 0);
        let packed = pack_a_lanes(m, k, &ops.a, ops.rsa, 1);
        let args = |c: &mut [f32]| GemmArgs {
            m,
            n,
            k,
            a: packed.as_ptr(),
            rsa: 0,
            csa: 0,
            a_packed: A_LANES,
            b: ops.b.as_ptr(),
            rsb: ops.rsb as isize,
            csb: ops.csb as isize,
            c: c.as_mut_ptr(),
            rsc: ops.rsc as isize,
            epilogue: &epi,
        };
        let run = |p: *const crate::Parallel| {
            let mut c = ops.c0.clone();
            let g = args(&mut c);
            // SAFETY: operands sized for their strides; the lane route needs no scratch.
            unsafe {
                nnefc_sgemm_parallel(&g, p, core::ptr::NonNull::<u8>::dangling().as_ptr(), 0)
            };
            c
        };
        // The same product through `nnefc_sgemm_batch_prefetch`, prefetching a region of
        // `len` floats (many lines per k step, or fewer than one per tile pair).
        let region = vec![1.0f32; 1 << 18];
        let run_pf = |p: *const crate::Parallel, len: usize| {
            let mut c = ops.c0.clone();
            let g = args(&mut c);
            // SAFETY: as above; the region is readable.
            unsafe {
                crate::gemm::nnefc_sgemm_batch_prefetch(
                    &g,
                    1,
                    p,
                    core::ptr::NonNull::<u8>::dangling().as_ptr(),
                    0,
                    region.as_ptr(),
                    len,
                )
            };
            c
        };
        let serial = run(core::ptr::null());
        let q = Problem {
            m,
            n,
            k,
            a: ASrc::Lanes(packed.as_ptr()),
            b: ops.b.as_ptr(),
            rsb: ops.rsb as isize,
            csb: ops.csb as isize,
            c: core::ptr::null_mut(),
            rsc: ops.rsc as isize,
        };
        let route = driver::Route::of(kernels::selected(), &q);
        for workers in [1usize, 2, 3, 5] {
            let p = reversed(workers);
            let bits = |c: &[f32]| c.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            for (how, got) in [
                ("", run(&p)),
                (" prefetching", run_pf(&p, region.len())),
                (" prefetching a little", run_pf(&p, 40)),
            ] {
                assert!(
                    bits(&got) == bits(&serial),
                    "m={m} n={n} k={k}, {workers} workers{how}: differs from serial"
                );
            }
            let plan = Plan::new(route, &q, workers);
            if workers > 1 {
                assert!(
                    plan.parts > 1,
                    "m={m} n={n} k={k}: not cut for {workers} workers"
                );
            }
            // Rows in whole pairs of panels when the pairs share out evenly (a multiple
            // of the parts, or at least four per part) and m ≥ n, else columns.
            let want_axis = match (m, workers) {
                (1280, _) | (160, 5) | (50, 2) => Axis::Rows,
                _ => Axis::Cols,
            };
            if workers > 1 {
                assert_eq!(plan.axis, want_axis, "m={m} n={n} k={k}, {workers} workers");
            }
        }
    }
    // A batch mixing lane panels, 6-row panels and strided A: whole products per worker
    // (2 workers) or split products (1 and 5 workers) give the serial bytes, prefetching
    // or not.
    let mut batch = Vec::new();
    for i in 0..6 {
        let (m, n, k) = [(64, 49, 300), (20, 7, 90), (96, 120, 17)][i % 3];
        batch.push((i % 3, Operands::new(&mut rng, m, n, k, 0)));
    }
    let packs: Vec<Vec<f32>> = batch
        .iter()
        .map(|(f, o)| match f {
            0 => o.a.clone(),
            1 => pack_a(o.m, o.k, &o.a, o.rsa, 1),
            _ => pack_a_lanes(o.m, o.k, &o.a, o.rsa, 1),
        })
        .collect();
    let stride = batch
        .iter()
        .map(|(_, o)| sgemm_scratch_bytes(o.m, o.n, o.k))
        .max()
        .unwrap_or(0)
        .div_ceil(64)
        * 64;
    // Through `nnefc_sgemm_batch_prefetch` too (`pf`: a region each product prefetches a
    // share of).
    let region = vec![1.0f32; 1 << 16];
    let run_batch = |p: *const crate::Parallel, pf: bool| {
        let mut cs: Vec<Vec<f32>> = batch.iter().map(|(_, o)| o.c0.clone()).collect();
        let epi = GemmEpilogue::NONE;
        let args: Vec<GemmArgs> = batch
            .iter()
            .zip(&packs)
            .zip(cs.iter_mut())
            .map(|(((f, o), a), c)| GemmArgs {
                m: o.m,
                n: o.n,
                k: o.k,
                a: a.as_ptr(),
                rsa: o.rsa as isize,
                csa: 1,
                a_packed: *f,
                b: o.b.as_ptr(),
                rsb: o.rsb as isize,
                csb: o.csb as isize,
                c: c.as_mut_ptr(),
                rsc: o.rsc as isize,
                epilogue: &epi,
            })
            .collect();
        let mut scratch = std::vec![0u64; (stride * 5).div_ceil(8)];
        // SAFETY: each product's operands are sized for it; 5 workers' scratch.
        unsafe {
            let scratch = scratch.as_mut_ptr().cast();
            if pf {
                let (r, len) = (region.as_ptr(), region.len());
                nnefc_sgemm_batch_prefetch(args.as_ptr(), args.len(), p, scratch, stride, r, len)
            } else {
                nnefc_sgemm_batch_parallel(args.as_ptr(), args.len(), p, scratch, stride)
            }
        };
        cs
    };
    let serial = run_batch(core::ptr::null(), false);
    let bits = |cs: &[Vec<f32>]| cs.iter().flatten().map(|x| x.to_bits()).collect::<Vec<_>>();
    for workers in [1usize, 2, 5] {
        let p = reversed(workers);
        for pf in [false, true] {
            assert_eq!(
                bits(&run_batch(&p, pf)),
                bits(&serial),
                "batch, {workers} workers, prefetching: {pf}"
            );
        }
    }
    // And the batch is the products computed one by one.
    for (i, (f, o)) in batch.iter().enumerate() {
        if *f == A_LANES {
            let want = o.run(kernels::selected().id, true, &GemmEpilogue::NONE);
            assert_eq!(serial[i], want, "product {i}");
        }
    }
}

/// NaN and ±∞ through the lane tiles' epilogues: C = a·bᵀ with one nonzero term, so each
/// element is a product of a special value and ±1, ±2 or 0.5; then ReLU or clamp (bounds
/// including NaN). Compared with [`activate`] on that product by bits (any NaN matches
/// any NaN; a zero tie with a bound may pick either zero).
#[test]
fn lane_epilogues_propagate_nan_and_infinity() {
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        3e38,
        -3e38,
        -0.0,
        0.0,
        1e-40,
        -3.0,
        0.3,
        7.0,
    ];
    let bs = [1.0f32, -1.0, 2.0, 0.5];
    for id in lane_kernels() {
        for (m, n) in [(1, 37), (37, 1), (11, 37), (21, 70)] {
            for (act, lo, hi) in [
                (1u32, 0.0, 0.0),
                (2, -1.0f32, 6.0f32),
                (2, 0.0, 6.0),
                (2, f32::NAN, 6.0),
                (2, 0.0, f32::NAN),
            ] {
                let k = 2;
                let a: Vec<f32> = (0..m * k)
                    .map(|i| {
                        if i % k == 0 {
                            specials[(i / k) % specials.len()]
                        } else {
                            1.0
                        }
                    })
                    .collect();
                let b: Vec<f32> = (0..k * n)
                    .map(|i| if i < n { bs[i % bs.len()] } else { 0.0 })
                    .collect();
                let packed = pack_a_lanes(m, k, &a, k, 1);
                let mut c = std::vec![0.0f32; m * n];
                let epi = GemmEpilogue {
                    activation: act,
                    lo,
                    hi,
                    ..GemmEpilogue::NONE
                };
                // SAFETY: a is m×k, b is k×n, c is m×n, all row-major; no scratch needed.
                unsafe {
                    driver::sgemm(
                        kernel(id).expect("available"),
                        Problem {
                            m,
                            n,
                            k,
                            a: ASrc::Lanes(packed.as_ptr()),
                            b: b.as_ptr(),
                            rsb: n as isize,
                            csb: 1,
                            c: c.as_mut_ptr(),
                            rsc: n as isize,
                        },
                        &epi,
                        core::ptr::NonNull::<u8>::dangling().as_ptr(),
                    )
                };
                for i in 0..m {
                    for j in 0..n {
                        let p = a[i * k] * b[j];
                        let want = activate(p, act, lo, hi);
                        let got = c[i * n + j];
                        let same = (got.is_nan() && want.is_nan())
                            || got.to_bits() == want.to_bits()
                            || (got == 0.0 && want == 0.0);
                        assert!(
                            same,
                            "{id:?} m={m} n={n} act={act} [{lo}, {hi}]: C[{i}][{j}] = {got:e}, \
                             want {want:e} (activation of {p:e})"
                        );
                    }
                }
            }
        }
    }
}
