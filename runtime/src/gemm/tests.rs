//! Tests of every kernel available on this CPU (each forced through the driver directly)
//! against a naive triple loop in f64: many shapes (including the edge sizes 1…257),
//! transposed and general strides, packed and unpacked A, every epilogue. They also check
//! that the scratch bound holds and that nothing outside C is written. (A forced AVX-512
//! kernel hands products with n ≤ 16 to AVX2, as in production.) On aarch64 they run the
//! NEON kernel, under qemu from `tests/all/runtime_aarch64.rs`, with smaller products where
//! emulation would make them slow.

use super::driver::{self, ASrc, Problem};
use super::kernels::{KernelId, available_kernels, kernel};
use super::*;
use std::vec::Vec;

const SIZES: [usize; 16] = [1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 255, 257];

/// xorshift64*: deterministic test data without dependencies.
struct Rng(u64);
impl Rng {
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let v = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
        (v as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next_f32()).collect()
    }
}

/// How an operand is laid out in memory.
#[derive(Clone, Copy, Debug)]
enum Layout {
    RowMajor,
    ColMajor,
    /// Both strides ≠ 1 (every other element of a row-major matrix with padding).
    Strided,
}

impl Layout {
    /// (row stride, column stride, buffer length) for a rows × cols matrix.
    fn strides(self, rows: usize, cols: usize) -> (usize, usize, usize) {
        match self {
            Layout::RowMajor => (cols + 3, 1, rows * (cols + 3)),
            Layout::ColMajor => (1, rows + 2, cols * (rows + 2)),
            Layout::Strided => (2 * cols + 1, 2, rows * (2 * cols + 1)),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Epi {
    bias_kind: u32,
    activation: u32,
    accumulate: bool,
}

const EPIS: [Epi; 9] = [
    Epi {
        bias_kind: 0,
        activation: 0,
        accumulate: false,
    },
    Epi {
        bias_kind: 0,
        activation: 0,
        accumulate: true,
    },
    Epi {
        bias_kind: 1,
        activation: 1,
        accumulate: false,
    },
    Epi {
        bias_kind: 2,
        activation: 2,
        accumulate: false,
    },
    Epi {
        bias_kind: 2,
        activation: 1,
        accumulate: true,
    },
    Epi {
        bias_kind: 1,
        activation: 2,
        accumulate: true,
    },
    Epi {
        bias_kind: 1,
        activation: 4,
        accumulate: false,
    },
    Epi {
        bias_kind: 2,
        activation: 3,
        accumulate: true,
    },
    Epi {
        bias_kind: 1,
        activation: 5,
        accumulate: true,
    },
];

/// A 64-byte aligned unit of scratch (the GEMM's scratch alignment).
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub(super) struct Line(pub(super) [u8; 64]);

#[derive(Clone, Copy, Debug)]
struct Case {
    m: usize,
    n: usize,
    k: usize,
    la: Layout,
    lb: Layout,
    packed: bool,
    epi: Epi,
}

/// A as the driver reads it: `packed_a` when `packed`, else `a` with its strides.
fn a_source(packed: bool, packed_a: &[f32], a: &[f32], rsa: usize, csa: usize) -> ASrc {
    if packed {
        ASrc::Packed(packed_a.as_ptr())
    } else {
        ASrc::Strided {
            a: a.as_ptr(),
            rsa: rsa as isize,
            csa: csa as isize,
        }
    }
}

/// `driver::sgemm` with `kern` on `(m, n, k)`: A from `a`, B with its row and column
/// strides, C with its row stride.
///
/// # Safety
/// The operands are sized for their strides; the scratch holds
/// `sgemm_scratch_bytes(m, n, k)` bytes.
unsafe fn drive(
    kern: &'static kernels::Kernel,
    (m, n, k): (usize, usize, usize),
    a: ASrc,
    (b, rsb, csb): (&[f32], usize, usize),
    (c, rsc): (&mut [f32], usize),
    ge: &GemmEpilogue,
    scratch: &mut [Line],
) {
    // SAFETY: the caller's contract.
    unsafe {
        driver::sgemm(
            kern,
            Problem {
                m,
                n,
                k,
                a,
                b: b.as_ptr(),
                rsb: rsb as isize,
                csb: csb as isize,
                c: c.as_mut_ptr(),
                rsc: rsc as isize,
            },
            ge,
            scratch.as_mut_ptr().cast::<u8>(),
        )
    }
}

/// Runs one case with kernel `id` and compares with the naive product.
fn run_case(id: KernelId, case: Case, rng: &mut Rng) {
    let Case {
        m,
        n,
        k,
        la,
        lb,
        packed,
        epi,
    } = case;
    let kern = kernel(id).expect("only available kernels are tested");
    let (rsa, csa, alen) = la.strides(m, k);
    let (rsb, csb, blen) = lb.strides(k, n);
    let a = rng.vec(alen.max(1));
    let b = rng.vec(blen.max(1));
    let rsc = n + 5;
    let c0 = rng.vec(m * rsc);
    let bias = rng.vec(m.max(n));
    let (lo, hi) = (-0.25f32, 0.5f32);

    // Naive reference in f64.
    let mut expected = c0.clone();
    let mut max_abs = 0.0f64;
    for i in 0..m {
        for j in 0..n {
            let mut s = if epi.accumulate {
                c0[i * rsc + j] as f64
            } else {
                0.0
            };
            for kk in 0..k {
                s += a[i * rsa + kk * csa] as f64 * b[kk * rsb + j * csb] as f64;
            }
            s += match epi.bias_kind {
                1 => bias[i] as f64,
                2 => bias[j] as f64,
                _ => 0.0,
            };
            s = activate_f64(s, epi.activation, lo, hi);
            max_abs = max_abs.max(s.abs());
            expected[i * rsc + j] = s as f32;
        }
    }

    let ge = GemmEpilogue {
        bias: if epi.bias_kind == 0 {
            core::ptr::null()
        } else {
            bias.as_ptr()
        },
        bias_kind: epi.bias_kind,
        activation: epi.activation,
        lo,
        hi,
        accumulate: epi.accumulate as u32,
    };
    let bytes = sgemm_scratch_bytes(m, n, k);
    let guard = 64;
    let mut scratch = std::vec![Line([0xAB; 64]); (bytes + guard).div_ceil(64)];
    let packed_a = if packed {
        pack_a(m, k, &a, rsa, csa)
    } else {
        Vec::new()
    };
    assert_eq!(packed_a.len(), if packed { packed_a_len(m, k) } else { 0 });
    let mut c = c0.clone();
    let a_src = a_source(packed, &packed_a, &a, rsa, csa);
    // SAFETY: every buffer above is sized for the strides used; scratch holds `bytes` + guard.
    unsafe {
        drive(
            kern,
            (m, n, k),
            a_src,
            (&b, rsb, csb),
            (&mut c, rsc),
            &ge,
            &mut scratch,
        )
    };
    let tol = 1e-4 * max_abs.max(1.0);
    for i in 0..m {
        for j in 0..rsc {
            let (got, want) = (c[i * rsc + j], expected[i * rsc + j]);
            if j >= n {
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{id:?} {case:?}: wrote padding at ({i}, {j})"
                );
            } else {
                assert!(
                    ((got - want) as f64).abs() <= tol,
                    "{id:?} {case:?}: C[{i}][{j}] = {got}, expected {want} (tol {tol})"
                );
            }
        }
    }
    let flat: Vec<u8> = scratch.iter().flat_map(|l| l.0).collect();
    assert!(
        flat[bytes..].iter().all(|&x| x == 0xAB),
        "{id:?} {case:?}: scratch overrun past {bytes} bytes"
    );
}

#[test]
fn every_kernel_is_listed() {
    let ids: Vec<KernelId> = available_kernels().collect();
    assert!(ids.contains(&KernelId::Generic));
    assert!(ids.contains(&kernels::selected().id));
    // NEON is the aarch64 baseline: every test below runs it there (under qemu in CI).
    #[cfg(target_arch = "aarch64")]
    assert!(ids.contains(&KernelId::Neon));
}

/// All m × n pairs of the edge sizes; k, layouts, packing and epilogue rotate.
#[test]
fn all_kernels_match_naive_on_edge_sizes() {
    let layouts = [Layout::RowMajor, Layout::ColMajor, Layout::Strided];
    for id in available_kernels() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ id as u64);
        let mut idx = 0usize;
        for &m in &SIZES {
            for &n in &SIZES {
                let k = SIZES[(idx * 7 + 3) % SIZES.len()];
                let case = Case {
                    m,
                    n,
                    k,
                    la: layouts[idx % 3],
                    lb: layouts[(idx / 3) % 3],
                    packed: idx.is_multiple_of(2),
                    epi: EPIS[(idx / 2) % EPIS.len()],
                };
                run_case(id, case, &mut rng);
                idx += 1;
            }
        }
    }
}

/// Every k size (including 0 and > KC), every epilogue, packed and unpacked, on shapes that
/// hit full tiles, edge tiles and the GEMV paths.
#[test]
fn all_kernels_every_k_and_epilogue() {
    let shapes = [
        (1, 100),
        (100, 1),
        (7, 3),
        (13, 33),
        (12, 64),
        (6, 4),
        (1, 1),
    ];
    for id in available_kernels() {
        let mut rng = Rng(42 + id as u64);
        for (m, n) in shapes {
            for k in core::iter::once(0).chain(SIZES) {
                for (e, epi) in EPIS.iter().enumerate() {
                    for packed in [false, true] {
                        let la = if (k + e) % 2 == 0 {
                            Layout::RowMajor
                        } else {
                            Layout::ColMajor
                        };
                        let lb = [Layout::RowMajor, Layout::ColMajor, Layout::Strided][(k + e) % 3];
                        run_case(
                            id,
                            Case {
                                m,
                                n,
                                k,
                                la,
                                lb,
                                packed,
                                epi: *epi,
                            },
                            &mut rng,
                        );
                    }
                }
            }
        }
    }
}

/// Shapes spanning several n, k and m blocks (n > NC, k > KC, m > MC).
#[cfg(not(target_arch = "aarch64"))]
const MULTI_BLOCK: [(usize, usize, usize, bool); 3] = [
    (150, 600, 300, false),
    (145, 1030, 520, true),
    (64, 3136 / 4, 576, true),
];
/// The same block crossings with less work: under qemu the shapes above take 10 s.
#[cfg(target_arch = "aarch64")]
const MULTI_BLOCK: [(usize, usize, usize, bool); 3] = [
    (150, 520, 260, false),
    (145, 530, 270, true),
    (64, 196, 576, true),
];

#[test]
fn all_kernels_multi_block() {
    for id in available_kernels() {
        let mut rng = Rng(7 + id as u64);
        for (m, n, k, packed) in MULTI_BLOCK {
            for (la, lb) in [
                (Layout::RowMajor, Layout::RowMajor),
                (Layout::ColMajor, Layout::ColMajor),
            ] {
                run_case(
                    id,
                    Case {
                        m,
                        n,
                        k,
                        la,
                        lb,
                        packed,
                        epi: EPIS[4],
                    },
                    &mut rng,
                );
            }
        }
    }
}

/// The exported entry points (which use the detected kernel) on a few shapes.
#[test]
fn extern_entry_points() {
    let mut rng = Rng(3);
    let (m, n, k) = (9, 17, 33);
    let a = rng.vec(m * k);
    let b = rng.vec(k * n);
    let mut naive = std::vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            naive[i * n + j] = (0..k).map(|kk| a[i * k + kk] * b[kk * n + j]).sum();
        }
    }
    let mut scratch = std::vec![Line([0; 64]); sgemm_scratch_bytes(m, n, k).div_ceil(64)];
    let packed = pack_a(m, k, &a, k, 1);
    for use_packed in [false, true] {
        let mut c = std::vec![0.0f32; m * n];
        // SAFETY: buffers sized for the row-major shapes; null epilogue means none.
        unsafe {
            if use_packed {
                nnefc_sgemm_packed_a(
                    m,
                    n,
                    k,
                    packed.as_ptr(),
                    b.as_ptr(),
                    n as isize,
                    1,
                    c.as_mut_ptr(),
                    n as isize,
                    core::ptr::null(),
                    scratch.as_mut_ptr().cast(),
                );
            } else {
                nnefc_sgemm(
                    m,
                    n,
                    k,
                    a.as_ptr(),
                    k as isize,
                    1,
                    b.as_ptr(),
                    n as isize,
                    1,
                    c.as_mut_ptr(),
                    n as isize,
                    core::ptr::null(),
                    scratch.as_mut_ptr().cast(),
                );
            }
        }
        for (got, want) in c.iter().zip(&naive) {
            assert!(
                (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                "{got} vs {want}"
            );
        }
    }
}

#[test]
fn packed_format_is_documented_layout() {
    // 7 × 2 matrix, A[i][kk] = 10·i + kk: two panels, the second padded with zero rows.
    let a: Vec<f32> = (0..7)
        .flat_map(|i| (0..2).map(move |kk| (10 * i + kk) as f32))
        .collect();
    let p = pack_a(7, 2, &a, 2, 1);
    assert_eq!(p.len(), packed_a_len(7, 2));
    assert_eq!(p.len(), 24);
    assert_eq!(
        &p[..12],
        &[0., 10., 20., 30., 40., 50., 1., 11., 21., 31., 41., 51.]
    );
    assert_eq!(
        &p[12..],
        &[60., 0., 0., 0., 0., 0., 61., 0., 0., 0., 0., 0.]
    );
    assert!(try_pack_a(7, 2, &a[..13], 2, 1).is_err());
    assert_eq!(try_pack_a(0, 5, &[], 0, 0), Ok(Vec::new()));
}

#[test]
fn scratch_is_bounded_and_zero_when_unused() {
    assert_eq!(sgemm_scratch_bytes(100, 100, 0), 0);
    let big = sgemm_scratch_bytes(usize::MAX / 8, usize::MAX / 8, usize::MAX / 8);
    assert!(big <= 1 << 20, "{big}");
    assert_eq!(big % 64, 0);
}

/// Activation code `act` (`GemmEpilogue::activation`) of `s` in f64, the reference the
/// kernels' tests hold every route to; NaN stays NaN, the clamp is `max(min(s, hi), lo)`.
pub(crate) fn activate_f64(s: f64, act: u32, lo: f32, hi: f32) -> f64 {
    match act {
        _ if s.is_nan() => s,
        1 => s.max(0.0),
        2 => s.min(f64::from(hi)).max(f64::from(lo)),
        3 => 1.0 / (1.0 + (-s).exp()),
        4 => s / (1.0 + (-s).exp()),
        5 => s * (s + 3.0).clamp(0.0, 6.0) / 6.0,
        _ => s,
    }
}

/// A [`Parallel`](crate::Parallel) of `workers` workers that runs the tasks through
/// [`reverse_for`].
pub(crate) fn reversed(workers: usize) -> crate::Parallel {
    crate::Parallel {
        pool: workers as *mut core::ffi::c_void,
        workers,
        parallel_for: Some(reverse_for),
    }
}

/// A `parallel_for` that runs the tasks on this thread in reverse order, each with worker
/// index `i % workers`: a different order and scratch assignment than serial code.
unsafe extern "C" fn reverse_for(
    pool: *mut core::ffi::c_void,
    task: crate::TaskFn,
    ctx: *mut core::ffi::c_void,
    n: usize,
) {
    let workers = pool as usize;
    for i in (0..n).rev() {
        // SAFETY: the parallel_for contract, forwarded.
        unsafe { task(ctx, i, i % workers) };
    }
}

/// The worker counts the split test tries. Under qemu (aarch64) each product costs about
/// 50 times more, so only the largest count runs there (the most cuts, and the only count
/// whose last worker's scratch ends at the guard line).
const SPLIT_WORKERS: &[usize] = if cfg!(target_arch = "aarch64") {
    &[5]
} else {
    &[2, 3, 4, 5]
};

/// Every routine (blocked, every GEMV form, epilogue only), cut into 2–5 parts along the
/// axis the planner picks, gives C bit for bit equal to the serial call, for every kernel.
#[test]
fn split_products_are_bit_identical_to_serial() {
    let shapes: [(usize, usize, usize); 13] = [
        (64, 100, 2000), // wide enough to be blocked, parts narrow enough for panel-major
        (96, 700, 67),   // blocked, columns
        (512, 49, 300),  // blocked, rows (few columns)
        (13, 1000, 33),  // blocked, odd rows
        (1, 4000, 100),  // m == 1: row GEMV
        (3000, 1, 80),   // n == 1: column GEMV
        (700, 3, 90),    // packed A, n ≤ 4: panel GEMV
        (37, 3000, 5),
        (200, 200, 200),
        (2, 20000, 8),
        (600, 17, 31),
        (8, 8, 0), // epilogue only
        (0, 50, 50),
    ];
    let layouts = [Layout::RowMajor, Layout::ColMajor, Layout::Strided];
    for id in available_kernels() {
        let kern = kernel(id).expect("available");
        let mut rng = Rng(0x1234_5678 ^ id as u64);
        for (si, &(m, n, k)) in shapes.iter().enumerate() {
            for variant in 0..6 {
                let la = layouts[variant % 3];
                let lb = layouts[(variant + si) % 3];
                let packed = variant % 2 == 1;
                let epi = EPIS[(variant + si) % EPIS.len()];
                let (rsa, csa, alen) = la.strides(m, k);
                let (rsb, csb, blen) = lb.strides(k, n);
                let a = rng.vec(alen.max(1));
                let b = rng.vec(blen.max(1));
                let rsc = n + 3;
                let c0 = rng.vec((m * rsc).max(1));
                let bias = rng.vec(m.max(n).max(1));
                let packed_a = if packed {
                    pack_a(m, k, &a, rsa, csa)
                } else {
                    Vec::new()
                };
                let problem = |c: &mut Vec<f32>| Problem {
                    m,
                    n,
                    k,
                    a: if packed {
                        ASrc::Packed(packed_a.as_ptr())
                    } else {
                        ASrc::Strided {
                            a: a.as_ptr(),
                            rsa: rsa as isize,
                            csa: csa as isize,
                        }
                    },
                    b: b.as_ptr(),
                    rsb: rsb as isize,
                    csb: csb as isize,
                    c: c.as_mut_ptr(),
                    rsc: rsc as isize,
                };
                let ge = GemmEpilogue {
                    bias: if epi.bias_kind == 0 {
                        core::ptr::null()
                    } else {
                        bias.as_ptr()
                    },
                    bias_kind: epi.bias_kind,
                    activation: epi.activation,
                    lo: -0.25,
                    hi: 0.5,
                    accumulate: epi.accumulate as u32,
                };
                let stride = sgemm_scratch_bytes(m, n, k).div_ceil(64) * 64;
                let mut serial = c0.clone();
                // Five workers' scratch, then a guard line that must stay untouched.
                let mut scratch = std::vec![Line([0xAB; 64]); (stride * 5).div_ceil(64) + 1];
                // SAFETY: buffers sized for the strides; scratch holds 5 strides.
                unsafe {
                    driver::sgemm(kern, problem(&mut serial), &ge, scratch.as_mut_ptr().cast())
                };
                for &workers in SPLIT_WORKERS {
                    let par = reversed(workers);
                    let mut c = c0.clone();
                    // SAFETY: as above.
                    unsafe {
                        super::split::sgemm_parallel(
                            kern,
                            problem(&mut c),
                            &ge,
                            &par,
                            scratch.as_mut_ptr().cast(),
                            stride,
                            super::driver::Prefetch::NONE,
                        )
                    };
                    let guard = scratch.last().map(|l| l.0);
                    assert_eq!(
                        guard,
                        Some([0xAB; 64]),
                        "{id:?} m={m} n={n} k={k}: scratch overrun"
                    );
                    let same = c
                        .iter()
                        .zip(&serial)
                        .all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(
                        same,
                        "{id:?} m={m} n={n} k={k} {la:?}/{lb:?} packed={packed} {epi:?} \
                         workers={workers}: differs from the serial product"
                    );
                }
            }
        }
    }
}

/// The planner actually cuts the large shapes (the test above would pass vacuously if
/// everything ran as one part).
#[test]
fn large_products_are_cut_into_parts() {
    use super::split::{Axis, Plan};
    let kern = kernels::selected();
    let a = [0.0f32; 1];
    let p = |m, n, k| Problem {
        m,
        n,
        k,
        a: ASrc::Strided {
            a: a.as_ptr(),
            rsa: k as isize,
            csa: 1,
        },
        b: a.as_ptr(),
        rsb: n as isize,
        csb: 1,
        c: core::ptr::null_mut(),
        rsc: n as isize,
    };
    let plan = |m, n, k, w| {
        let q = p(m, n, k);
        Plan::new(driver::Route::of(kern, &q), &q, w)
    };
    assert_eq!(plan(96, 700, 67, 2).parts, 2);
    assert_eq!(plan(6, 700, 67, 2).axis, Axis::Cols);
    assert_eq!(plan(512, 49, 300, 4).axis, Axis::Rows);
    // A 1×1 conv to 24 channels over 56×56: rows would make each part pack all of B.
    assert_eq!(plan(24, 3136, 144, 2).axis, Axis::Cols);
    assert_eq!(plan(96, 300, 64, 2).axis, Axis::Rows);
    assert_eq!(plan(1, 4000, 100, 3).parts, 3);
    assert_eq!(plan(8, 8, 8, 4).parts, 1, "small products stay inline");
    let pl = plan(13, 1000, 33, 3);
    let mut covered = 0;
    for i in 0..pl.parts {
        let (lo, hi) = pl.range(i);
        assert_eq!(lo, covered);
        covered = hi;
    }
    assert_eq!(covered, pl.total);
}

/// The runtime's pool runs every task exactly once, with worker indices below `workers`
/// and never two tasks at once on one index, across many calls.
#[test]
fn thread_pool_runs_every_task_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    struct Ctx {
        hits: Vec<AtomicUsize>,
        busy: Vec<AtomicUsize>,
        bad: AtomicUsize,
    }
    unsafe extern "C" fn task(ctx: *mut core::ffi::c_void, i: usize, w: usize) {
        // SAFETY: ctx is the test's Ctx.
        let c = unsafe { &*(ctx as *const Ctx) };
        if w >= c.busy.len() || c.busy[w].fetch_add(1, Ordering::SeqCst) != 0 {
            c.bad.fetch_add(1, Ordering::SeqCst);
        }
        c.hits[i].fetch_add(1, Ordering::SeqCst);
        for _ in 0..(i % 7) * 50 {
            core::hint::spin_loop();
        }
        if w < c.busy.len() {
            c.busy[w].fetch_sub(1, Ordering::SeqCst);
        }
    }
    for threads in [1usize, 2, 3, 4] {
        let pool = crate::ThreadPool::new(threads).expect("threads start");
        assert_eq!(pool.workers(), threads);
        for n in [0usize, 1, 2, 3, 17, 100] {
            for _ in 0..20 {
                let ctx = Ctx {
                    hits: (0..n).map(|_| AtomicUsize::new(0)).collect(),
                    busy: (0..threads).map(|_| AtomicUsize::new(0)).collect(),
                    bad: AtomicUsize::new(0),
                };
                let par = pool.parallel();
                // SAFETY: task only touches the Ctx, which outlives the call.
                unsafe {
                    (par.parallel_for.expect("pool callback"))(
                        par.pool,
                        task,
                        &ctx as *const Ctx as *mut core::ffi::c_void,
                        n,
                    )
                };
                assert!(ctx.hits.iter().all(|h| h.load(Ordering::SeqCst) == 1));
                assert_eq!(ctx.bad.load(Ordering::SeqCst), 0);
            }
        }
    }
}

/// Throughput of the shapes CNN layers produce (`cargo test -p nnefc-runtime --release
/// -- --ignored gemm_shapes_throughput --nocapture`); prints GFLOP/s, asserts nothing
/// about speed (the machine is shared).
#[test]
#[ignore]
fn gemm_shapes_throughput() {
    let kern = kernels::selected();
    let shapes = [
        (512, 49, 4608),
        (1280, 49, 320),
        (256, 196, 2304),
        (64, 3136, 576),
        (96, 12544, 16),
        (384, 196, 64),
        (64, 196, 384),
        (576, 196, 96),
        (256, 784, 128),
    ];
    let mut rng = Rng(1);
    for (m, n, k) in shapes {
        let a = rng.vec(m * k);
        let b = rng.vec(k * n);
        let pa = pack_a(m, k, &a, k, 1);
        let mut c = std::vec![0f32; m * n];
        let mut scratch = std::vec![Line([0; 64]); sgemm_scratch_bytes(m, n, k).div_ceil(64) + 1];
        let run = |c: &mut Vec<f32>, scratch: &mut Vec<Line>| unsafe {
            driver::sgemm(
                kern,
                Problem {
                    m,
                    n,
                    k,
                    a: ASrc::Packed(pa.as_ptr()),
                    b: b.as_ptr(),
                    rsb: n as isize,
                    csb: 1,
                    c: c.as_mut_ptr(),
                    rsc: n as isize,
                },
                &GemmEpilogue::NONE,
                scratch.as_mut_ptr().cast(),
            )
        };
        for _ in 0..3 {
            run(&mut c, &mut scratch);
        }
        let iters = 20;
        let mut best = f64::MAX;
        for _ in 0..iters {
            let t = std::time::Instant::now();
            run(&mut c, &mut scratch);
            best = best.min(t.elapsed().as_secs_f64());
        }
        std::println!(
            "{m}x{n}x{k}: {:.3} ms, {:.1} GFLOP/s",
            best * 1e3,
            2.0 * (m * n * k) as f64 / best / 1e9
        );
    }
}

/// `C = epilogue(A·B)` through `driver::sgemm` with `kern`, for an `m×n` product of depth
/// `k` (`mnk`) with B (`k×n`) and C (`m×n`) row-major, on scratch of its own.
///
/// # Safety
/// `a` describes an `m×k` A; `b` and `c` hold `k·n` and `m·n` floats; `ge`'s bias as
/// its kind needs.
unsafe fn row_major(
    kern: &'static kernels::Kernel,
    (m, n, k): (usize, usize, usize),
    a: ASrc,
    b: &[f32],
    c: &mut [f32],
    ge: &GemmEpilogue,
) {
    let mut scratch = std::vec![Line([0; 64]); sgemm_scratch_bytes(m, n, k).div_ceil(64) + 1];
    let p = Problem {
        m,
        n,
        k,
        a,
        b: b.as_ptr(),
        rsb: n as isize,
        csb: 1,
        c: c.as_mut_ptr(),
        rsc: n as isize,
    };
    // SAFETY: the caller's contract; the scratch is sized for the product.
    unsafe { driver::sgemm(kern, p, ge, scratch.as_mut_ptr().cast::<u8>()) };
}

/// NaN and ±∞ through every kernel's epilogue (tiles, edge tiles, GEMV): C = a·bᵀ with
/// k = 2 where the second term is an exact 0, so C[i][j] = a[i]·b[j] exactly (±∞ also
/// where ±3e38 · 2 overflows); then, with or without a row bias (added in one rounding),
/// none, ReLU, clamp to [−1, 6], ReLU6 (clamp to [0, 6]) or clamp to [0.5, 6] (the
/// bounds the 6-row tile's shorter clamps cover, and a NaN bound they leave to the
/// general one). Expected: [`kernels::activate`] (IEEE `maximum`/`minimum`: NaN
/// propagates) on that sum. Compared by bits, any NaN matching any NaN.
#[test]
fn epilogues_propagate_nan_and_infinity() {
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        3e38,
        -3e38,
        1e30,
        -1e30,
        -0.0,
        0.0,
        1e-40,
        -3.0,
        0.3,
        7.0,
    ];
    let bs = [1.0f32, -1.0, 2.0, 0.5];
    // (activation, packed A, clamp bounds, row bias): ReLU ignores the bounds.
    let epilogues = [
        (1u32, false, 0.0, 0.0, false),
        (1, true, 0.0, 0.0, false),
        (2, true, -1.0f32, 6.0f32, false),
        (2, false, -1.0, 6.0, false),
        (2, true, 0.0, 6.0, false),
        (2, false, 0.0, 6.0, false),
        (0, true, 0.0, 0.0, true),
        (1, true, 0.0, 0.0, true),
        (2, true, 0.0, 6.0, true),
        (2, false, -1.0, 6.0, true),
        (2, true, 0.5, 6.0, true),
        (2, true, 0.0, f32::NAN, true),
        (3, true, 0.0, 0.0, true),
        (4, false, 0.0, 0.0, true),
        (4, true, 0.0, 0.0, false),
        (5, true, 0.0, 0.0, true),
        (5, false, 0.0, 0.0, false),
    ];
    let row_bias = [0.0f32, 0.5, -2.0, 3e38, -0.0, 1e-40, -7.0];
    for id in available_kernels() {
        let kern = kernel(id).expect("available");
        for (m, n) in [(1, 37), (37, 1), (11, 37), (13, 70)] {
            for (act, packed, lo, hi, with_bias) in epilogues {
                let k = 2;
                let bias: Vec<f32> = (0..m).map(|i| row_bias[i % row_bias.len()]).collect();
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
                let mut c = std::vec![0.0f32; m * n];
                let ge = GemmEpilogue {
                    bias: if with_bias {
                        bias.as_ptr()
                    } else {
                        core::ptr::null()
                    },
                    bias_kind: u32::from(with_bias),
                    activation: act,
                    lo,
                    hi,
                    accumulate: 0,
                };
                let packed_a = if packed {
                    pack_a(m, k, &a, k, 1)
                } else {
                    Vec::new()
                };
                let a_src = if packed {
                    ASrc::Packed(packed_a.as_ptr())
                } else {
                    ASrc::Strided {
                        a: a.as_ptr(),
                        rsa: k as isize,
                        csa: 1,
                    }
                };
                // SAFETY: a is m×k, b is k×n, c is m×n, all row-major.
                unsafe { row_major(kern, (m, n, k), a_src, &b, &mut c, &ge) };
                for i in 0..m {
                    for j in 0..n {
                        let p = a[i * k] * b[j];
                        let p = if with_bias { p + bias[i] } else { p };
                        let want = kernels::activate(p, act, lo, hi);
                        let got = c[i * n + j];
                        let same = (got.is_nan() && want.is_nan()) || got.to_bits() == want.to_bits()
                            // Products are never −0 here (−0·1 + 1·0 = +0), but a tie of
                            // the bounds with a zero may pick either zero on x86.
                            || (got == 0.0 && want == 0.0);
                        assert!(
                            same,
                            "{id:?} m={m} n={n} act={act} [{lo}, {hi}] packed={packed} \
                             bias={with_bias}: \
                             C[{i}][{j}] = \
                             {got:e} ({:#x}), want {want:e} (activation of {p:e})",
                            got.to_bits()
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn activate_is_ieee_maximum_minimum() {
    use kernels::activate;
    assert!(activate(f32::NAN, 1, 0.0, 0.0).is_nan());
    assert_eq!(activate(-0.0, 1, 0.0, 0.0).to_bits(), 0.0f32.to_bits());
    assert_eq!(activate(f32::NEG_INFINITY, 1, 0.0, 0.0), 0.0);
    assert_eq!(activate(f32::INFINITY, 1, 0.0, 0.0), f32::INFINITY);
    assert!(activate(f32::NAN, 2, 0.0, 6.0).is_nan());
    assert!(activate(1.0, 2, f32::NAN, 6.0).is_nan());
    assert!(activate(1.0, 2, 0.0, f32::NAN).is_nan());
    assert_eq!(activate(f32::INFINITY, 2, 0.0, 6.0), 6.0);
    assert_eq!(activate(f32::NEG_INFINITY, 2, 0.0, 6.0), 0.0);
    assert_eq!(activate(-0.0, 2, 0.0, 6.0).to_bits(), 0.0f32.to_bits());
}

/// The AVX-512 activation gives the scalar one's bits on the special values (±0, ±∞,
/// NaN, subnormals, the bounds themselves), for every activation and clamps with
/// bounds of either sign, +0 or NaN; so do the GEMM routes' shorter ReLU (`relu_short`)
/// and clamp (`clamp_short`, for every pair of those bounds `short_clamp` accepts, which
/// must be all but the NaN ones).
#[cfg(target_arch = "x86_64")]
#[test]
fn vector_activation_matches_the_scalar_one() {
    use core::arch::x86_64::*;
    if !std::is_x86_feature_detected!("avx512f") {
        return;
    }
    let vals = [
        0.0f32,
        -0.0,
        1.5,
        -1.5,
        6.0,
        7.0,
        -6.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        1e-40,
        -1e-40,
        f32::MIN_POSITIVE,
        -3.0,
        0.25,
    ];
    // (Not bounds of −0: the vector clamp then orders ±0 as `vmaxps`/`vminps` do, not
    // as IEEE maximum/minimum; `activate(0, 2, −0, 6)` is +0, the vector one −0.)
    let bounds = [
        (0.0f32, 6.0f32),
        (-1.0, 1.0),
        (-2.0, 0.5),
        (0.0, f32::NAN),
        (f32::NAN, 1.0),
        (0.5, 6.0),
        (-1.0, 0.0),
        (0.0, 0.0),
        (3.0, 1.0),
        (-1.0, -3.0),
        (-f32::MIN_POSITIVE, 1e-40),
        (f32::NEG_INFINITY, f32::INFINITY),
    ];
    // `f` applied to `vals` in one vector against the scalar activation `act` with the
    // bounds, by bits (any NaN matching any NaN).
    let check = |f: &dyn Fn(__m512) -> __m512, act: u32, lo: f32, hi: f32, what: &str| {
        let mut got = [0.0f32; 16];
        // SAFETY: the CPU has AVX-512F (checked above); 16 floats each way.
        unsafe { _mm512_storeu_ps(got.as_mut_ptr(), f(_mm512_loadu_ps(vals.as_ptr()))) };
        for (&x, &g) in vals.iter().zip(&got) {
            let want = kernels::activate(x, act, lo, hi);
            assert!(
                g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                "{what} [{lo}, {hi}] of {x}: {g} vs {want}"
            );
        }
    };
    // SAFETY (the closures): the CPU has AVX-512F (checked above).
    check(
        &|v| unsafe { kernels::relu_short(v) },
        1,
        0.0,
        0.0,
        "short ReLU",
    );
    for &(lo, hi) in &bounds {
        // SAFETY: the CPU has AVX-512F (checked above).
        let (l, h) = unsafe { (_mm512_set1_ps(lo), _mm512_set1_ps(hi)) };
        for act in 0..6u32 {
            let f = |v| unsafe { kernels::activate_avx512(v, act, l, h) };
            check(&f, act, lo, hi, &format!("act {act}"));
        }
        let Some(nonneg) = kernels::short_clamp(lo, hi) else {
            assert!(
                lo.is_nan() || hi.is_nan(),
                "[{lo}, {hi}] left to the general clamp"
            );
            continue;
        };
        let f = |v| unsafe {
            if nonneg {
                kernels::clamp_short::<true>(v, l, h)
            } else {
                kernels::clamp_short::<false>(v, l, h)
            }
        };
        check(&f, 2, lo, hi, "short clamp");
    }
}

/// `nnefc_sgemm_batch_parallel`: a batch of products (packed and strided A, epilogues,
/// several shapes) gives the serial products' bytes whether whole products are handed to
/// workers (2 and 3 workers: at least two products each) or each product is split (5
/// workers), with a reverse-order `parallel_for`; every worker stays in its scratch.
#[test]
fn batched_products_are_bit_identical_to_serial() {
    let shapes: [(usize, usize, usize); 8] = [
        (64, 196, 64),
        (64, 196, 64),
        (13, 50, 33),
        (96, 120, 17),
        (1, 300, 40),
        (200, 3, 90),
        (64, 196, 64),
        (40, 40, 40),
    ];
    let mut rng = Rng(77);
    let mut ops = std::vec::Vec::new();
    for (i, &(m, n, k)) in shapes.iter().enumerate() {
        let a = rng.vec(m * k);
        let packed = if i % 2 == 0 {
            pack_a(m, k, &a, k, 1)
        } else {
            std::vec::Vec::new()
        };
        let b = rng.vec(k * n);
        let bias = rng.vec(m.max(n));
        let c0 = rng.vec(m * n);
        ops.push((m, n, k, a, packed, b, bias, c0));
    }
    let epis: std::vec::Vec<GemmEpilogue> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let e = EPIS[i % EPIS.len()];
            GemmEpilogue {
                bias: if e.bias_kind == 0 {
                    core::ptr::null()
                } else {
                    op.6.as_ptr()
                },
                bias_kind: e.bias_kind,
                activation: e.activation,
                lo: -0.25,
                hi: 0.5,
                accumulate: e.accumulate as u32,
            }
        })
        .collect();
    let stride = shapes
        .iter()
        .map(|&(m, n, k)| sgemm_scratch_bytes(m, n, k))
        .max()
        .unwrap_or(0)
        .div_ceil(64)
        * 64;
    let run = |par: *const crate::Parallel| -> std::vec::Vec<std::vec::Vec<f32>> {
        let mut cs: std::vec::Vec<std::vec::Vec<f32>> = ops.iter().map(|o| o.7.clone()).collect();
        let args: std::vec::Vec<GemmArgs> = ops
            .iter()
            .zip(cs.iter_mut())
            .zip(&epis)
            .map(|((o, c), e)| {
                let (m, n, k) = (o.0, o.1, o.2);
                let packed = !o.4.is_empty();
                GemmArgs {
                    m,
                    n,
                    k,
                    a: if packed { o.4.as_ptr() } else { o.3.as_ptr() },
                    rsa: k as isize,
                    csa: 1,
                    a_packed: usize::from(packed),
                    b: o.5.as_ptr(),
                    rsb: n as isize,
                    csb: 1,
                    c: c.as_mut_ptr(),
                    rsc: n as isize,
                    epilogue: e,
                }
            })
            .collect();
        let mut scratch = std::vec![Line([0xAB; 64]); (stride * 5).div_ceil(64) + 1];
        // SAFETY: every product's buffers are sized for it; scratch holds 5 strides.
        unsafe {
            super::nnefc_sgemm_batch_parallel(
                args.as_ptr(),
                args.len(),
                par,
                scratch.as_mut_ptr().cast(),
                stride,
            )
        };
        assert_eq!(
            scratch.last().map(|l| l.0),
            Some([0xAB; 64]),
            "scratch overrun"
        );
        cs
    };
    let serial = run(core::ptr::null());
    for workers in [2usize, 3, 5] {
        let par = reversed(workers);
        let got = run(&par);
        for (i, (g, s)) in got.iter().zip(&serial).enumerate() {
            let same = g.iter().zip(s).all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(
                same,
                "product {i}, {workers} workers: differs from the serial run"
            );
        }
    }
}

/// The paired last vector of two row panels (`Kernel::edge_pair`) and the last columns of
/// four (`Kernel::edge_quad`) give the bits each panel's own edge tiles give: ragged
/// edges of 1–16 columns after full tiles, partial last panels, panel counts that leave
/// pairs and single panels after the quads, several k and n blocks, packed and strided A,
/// every epilogue, inputs with ±0, ±∞ and NaN.
#[test]
fn paired_edges_give_the_own_edges_bits() {
    for id in available_kernels() {
        let kern = kernel(id).expect("only available kernels are tested");
        if kern.edge_pair.is_none() {
            continue;
        }
        // The same kernel without pairs.
        let own: &'static kernels::Kernel =
            std::boxed::Box::leak(std::boxed::Box::new(kernels::Kernel {
                edge_pair: None,
                edge_quad: None,
                ..*kern
            }));
        let mut rng = Rng(0x5EED ^ id as u64);
        let (mut paired, mut quads) = (0, 0);
        let shapes = [
            (12, 196, 96),
            (576, 196, 96),
            (30, 784, 32),
            (13, 68, 7),
            (18, 80, 300),
            (24, 529, 20),
            (25, 1040, 3),
            (11, 100, 9),
            (24, 65, 5),
            (54, 130, 40),
            (48, 259, 300),
            (36, 132, 17),
            (30, 196, 64),
        ];
        for (s, &(m, n, k)) in shapes.iter().enumerate() {
            for (e, epi) in EPIS.iter().enumerate() {
                let packed = (s + e) % 2 == 0;
                let (rsa, csa, alen) = Layout::RowMajor.strides(m, k);
                let (rsb, csb, blen) = Layout::RowMajor.strides(k, n);
                let mut a = rng.vec(alen);
                let mut b = rng.vec(blen);
                for (i, x) in [0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]
                    .into_iter()
                    .enumerate()
                {
                    a[(i * 7919 + s) % alen] = x;
                    b[(i * 104_729 + e) % blen] = x;
                }
                let rsc = n + 5;
                let c0 = rng.vec(m * rsc);
                let bias = rng.vec(m.max(n));
                let ge = GemmEpilogue {
                    bias: if epi.bias_kind == 0 {
                        core::ptr::null()
                    } else {
                        bias.as_ptr()
                    },
                    bias_kind: epi.bias_kind,
                    activation: epi.activation,
                    lo: -0.25,
                    hi: 0.5,
                    accumulate: epi.accumulate as u32,
                };
                let packed_a = pack_a(m, k, &a, rsa, csa);
                let run = |kern: &'static kernels::Kernel| {
                    let mut c = c0.clone();
                    let mut scratch =
                        std::vec![Line([0; 64]); sgemm_scratch_bytes(m, n, k).div_ceil(64)];
                    let a_src = a_source(packed, &packed_a, &a, rsa, csa);
                    // SAFETY: every buffer is sized for the strides used; the scratch
                    // holds sgemm_scratch_bytes.
                    unsafe {
                        drive(
                            kern,
                            (m, n, k),
                            a_src,
                            (&b, rsb, csb),
                            (&mut c, rsc),
                            &ge,
                            &mut scratch,
                        )
                    };
                    c
                };
                let (with, without) = (run(kern), run(own));
                for (i, (x, y)) in with.iter().zip(&without).enumerate() {
                    assert_eq!(
                        x.to_bits(),
                        y.to_bits(),
                        "{id:?} {m}×{n}×{k} {epi:?} packed {packed}: element {i}"
                    );
                }
                let rest = n % kern.nr;
                paired += usize::from(m >= 2 * MR && rest > 0 && rest <= 16);
                quads += usize::from(
                    m >= 4 * MR
                        && rest > 0
                        && rest <= 4
                        && k <= KC
                        && epi.bias_kind != 2
                        && !epi.accumulate,
                );
            }
        }
        assert!(
            paired >= 30,
            "{id:?}: only {paired} products paired their edges"
        );
        assert!(
            quads >= 8,
            "{id:?}: only {quads} products took four panels' edges at once"
        );
    }
}

/// The 6-row tiles' and the few-row route's ReLU and ReLU6 epilogues with a row bias drop
/// the `+ 0` that turns a −0 into +0 when none of the tile's (pass's) biases is −0
/// (`kernels::nonneg_code`): then a sum plus bias cannot be −0, so the bits are the same. Sums of −0 (a product that
/// underflows, −1e-30 · 1e-30, summed from +0 rounds to −0) meet biases of −0, +0 and
/// others in tiles with and without a −0 bias; every element must have the bits of the
/// scalar `activate(fma(a, b, 0) + bias)`, zeros' signs included.
#[test]
fn nonneg_epilogues_keep_zero_signs() {
    // 12 and 24 rows take the few-row route (one pass of 12 or 24 rows on Zen 4, passes
    // of 12 elsewhere: `tall::one_vector_passes`), 48 the 6-row tiles (`tall::takes`).
    // Biases 0..12 and 24..36 include −0, 12..24 and 36..48 do not; 12 rows run once from
    // bias 0 and once from bias 12, so that a few-row pass without a −0 bias occurs
    // whatever the form of the passes.
    let k = 1;
    let bias: Vec<f32> = (0..48)
        .map(|i| match (i / 12 % 2, i % 3) {
            (0, 0) => -0.0,
            (_, 0) => 0.0,
            (_, 1) => 0.5,
            _ => -2.0,
        })
        .collect();
    let a: Vec<f32> = (0..48)
        .map(|i| if i % 2 == 0 { -1e-30 } else { 1e-30 })
        .collect();
    let mut seen = [false; 2];
    for id in available_kernels() {
        let kern = kernel(id).expect("available");
        for (m, n, b0) in [
            (48, 64, 0),
            (48, 128, 0),
            (48, 96, 0),
            (24, 64, 0),
            (24, 80, 0),
            (12, 64, 0),
            (12, 64, 12),
        ] {
            let bias = &bias[b0..];
            let b: Vec<f32> = (0..n)
                .map(|j| match j % 4 {
                    0 => 1e-30,
                    1 => -1e-30,
                    2 => 3.0,
                    _ => -0.0,
                })
                .collect();
            for (act, lo, hi) in [(1u32, 0.0f32, 0.0f32), (2, 0.0, 6.0), (2, 0.5, 6.0)] {
                let ge = GemmEpilogue {
                    bias: bias.as_ptr(),
                    bias_kind: 1,
                    activation: act,
                    lo,
                    hi,
                    accumulate: 0,
                };
                let packed_a = pack_a(m, k, &a, k, 1);
                let mut c = std::vec![1.0f32; m * n];
                // SAFETY: A (packed) is m×k, B k×n and C m×n row-major.
                unsafe {
                    let a_src = ASrc::Packed(packed_a.as_ptr());
                    row_major(kern, (m, n, k), a_src, &b, &mut c, &ge)
                };
                for i in 0..m {
                    for j in 0..n {
                        let s = a[i].mul_add(b[j], 0.0);
                        let v = s + bias[i];
                        if v == 0.0 {
                            seen[usize::from(v.is_sign_negative())] = true;
                        }
                        let want = kernels::activate(v, act, lo, hi);
                        let got = c[i * n + j];
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "{id:?} n={n} act={act} [{lo}, {hi}]: C[{i}][{j}] = {got:e}, \
                             want {want:e} (sum {s:e} + bias {:e})",
                            bias[i]
                        );
                    }
                }
            }
        }
    }
    assert!(
        seen[0] && seen[1],
        "sums plus bias of +0 and of −0 both occur"
    );
}
