//! GEMM: the contraction engine generated code calls for matmul, linear layers and
//! convolution (via im2col). This module is the C ABI surface and the layout contracts;
//! `driver` does the cache blocking, `kernels` the register-blocked micro-kernels, `gemv`
//! the matrix-vector paths.
//!
//! # Semantics
//! `C[m×n] = A[m×k] · B[k×n]`, then the [`GemmEpilogue`]: optionally add the old C
//! (`accumulate`), then a bias per row or per column, then an activation. A and B are read
//! through arbitrary element strides (so transposed views cost nothing to describe); C has a
//! row stride and unit column stride.
//!
//! # Packed A (fixed at compile time, independent of the CPU that runs the code)
//! [`pack_a`] writes A as `ceil(m / MR)` row panels of [`MR`] = 6 rows. Panel `p` holds,
//! for every `kk in 0..k` in order, the `MR` values `A[p·MR + r][kk]` (`r in 0..MR`); rows
//! past `m` are zero. So element `(i, kk)` sits at `(i / MR)·k·MR + kk·MR + i % MR`, and the
//! whole buffer has [`packed_a_len`]`(m, k) = ceil(m/MR)·MR·k` floats. The format has no
//! k-blocking (a k block `[pc, pc+kc)` of a panel is the contiguous slice starting at
//! `pc·MR`), so it does not depend on any cache parameter either. Every micro-kernel
//! (AVX-512, AVX2, NEON, portable) reads exactly this format.
//!
//! # Lane panels (the second packed-A format, equally fixed)
//! [`pack_a_lanes`] writes A as `ceil(m / 16)` panels of [`LANES`] = 16 rows: panel `p`
//! holds, for every `kk in 0..k` in order, the 16 values `A[p·16 + r][kk]` (`r in 0..16`);
//! rows past `m` are zero. Element `(i, kk)` sits at `(i / 16)·16·k + kk·16 + i % 16`, and
//! the buffer has [`packed_a_lanes_len`]`(m, k) = ceil(m/16)·16·k` floats. Only
//! [`nnefc_sgemm_parallel`] / [`nnefc_sgemm_batch_parallel`] read it (`GemmArgs::a_packed`
//! = 2), with tiles that hold 16 rows of C per AVX-512 register and broadcast B's columns
//! (`lanes`; a portable version of the same arithmetic runs on other CPUs): the format
//! for products with few columns, which the 6-row kernels' 16-column vectors fill badly.
//! Every element is computed with the same operations as by the 6-row kernels (same k
//! blocks, same fused or unfused multiply-adds, same epilogue), so on one CPU the two
//! formats give the same C wherever the 6-row path runs its blocked loops (`m ≥ 2`,
//! `n ≥ 5`), but for the payload of a NaN where a sum meets two NaNs.
//!
//! # What it does not do
//! No threads of its own ([`nnefc_sgemm_parallel`] splits a product into parts for a
//! caller's `parallel_for`, see `split`), no allocation inside the `extern "C"` functions, no integer or f16
//! types, no strided C columns.

mod driver;
mod gemv;
mod kernels;
pub(crate) mod lanes;
#[cfg(all(test, feature = "std"))]
mod lanes_tests;
mod pack;
mod split;
#[cfg(target_arch = "x86_64")]
mod tall;
#[cfg(all(test, feature = "std"))]
pub(crate) mod tests;

#[allow(unused_imports)]
pub(crate) use kernels::by_act;
pub use kernels::{ACT_CLAMP, ACT_HARDSWISH, ACT_NONE, ACT_RELU, ACT_SIGMOID, ACT_SWISH};
#[doc(hidden)]
pub use kernels::{KernelId, available_kernels};
/// The activation every kernel applies (scalar and AVX-512), and IEEE 754-2019 `maximum`
/// (the portable window maximum's too).
pub(crate) use kernels::{activate, maximum};
#[cfg(target_arch = "x86_64")]
pub(crate) use kernels::{activate_avx512, first_lanes, store16};
pub use lanes::LANES;

/// Whether this CPU runs one of the AVX-512 micro-kernel families: what the other vector
/// routines (convolutions, pools, Winograd transforms) dispatch on.
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx512_selected() -> bool {
    kernels::selected().id.is_avx512()
}

/// Rows per panel of packed A: the `MR` of every micro-kernel. Part of the packed format.
pub const MR: usize = 6;

/// Depth of a k block (`KC`): B is packed `KC × NC` at a time.
pub(crate) const KC: usize = 256;
/// Width of an n block (`NC`): a packed `KC × NC` block of B stays in the L2 cache.
pub(crate) const NC: usize = 512;
/// Height of an m block (`MC`) when A is packed at run time (multiple of `MR`).
pub(crate) const MC: usize = 144;
/// Most rows of a product with A in 6-row panels that the few-row route (`tall.rs`, on
/// AVX-512 CPUs) computes; the compiler's choice between 6-row and lane panels weighs
/// that route up to here.
pub const FEW_ROWS_MAX_M: usize = 64;
/// The widest micro-kernel tile (`NR`) of any kernel (AVX-512's 6×64); scratch sizes are
/// computed with it so they do not depend on the CPU.
pub(crate) const NR_MAX: usize = 64;

/// What happens to the product before it is stored in C.
///
/// Order: `C = activation((accumulate ? C_old : 0) + A·B + bias)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmEpilogue {
    /// Bias values (null = no bias). Length `m` for `bias_kind == 1`, `n` for `bias_kind == 2`.
    pub bias: *const f32,
    /// 0: no bias; 1: one value per row of C (length m); 2: one per column (length n).
    /// Other values are reserved and mean no bias.
    pub bias_kind: u32,
    /// 0 ([`ACT_NONE`]): none; 1 ([`ACT_RELU`]): ReLU (`max(x, 0)`); 2 ([`ACT_CLAMP`]):
    /// clamp to `[lo, hi]`; 3 ([`ACT_SIGMOID`]): 1/(1 + e⁻ˣ); 4 ([`ACT_SWISH`]): x·σ(x);
    /// 5 ([`ACT_HARDSWISH`]): x·clamp(x + 3, 0, 6)·(1/6).
    /// Other values are reserved and mean none. NaN propagates (IEEE 754-2019
    /// `maximum`/`minimum`: ReLU(NaN) and clamp of NaN, or with a NaN bound, are NaN;
    /// σ(NaN) is NaN); ReLU(−0) is +0. Sigmoid and swish give the same bits on every route
    /// and CPU (no fused multiply-add inside; max abs error of σ below 1.2e-7).
    pub activation: u32,
    /// Lower clamp bound (activation 2).
    pub lo: f32,
    /// Upper clamp bound (activation 2).
    pub hi: f32,
    /// 1: add the product to the existing C (before bias and activation); 0: overwrite C.
    pub accumulate: u32,
}

impl GemmEpilogue {
    /// No bias, no activation, overwrite C.
    pub const NONE: GemmEpilogue = GemmEpilogue {
        bias: core::ptr::null(),
        bias_kind: 0,
        activation: 0,
        lo: 0.0,
        hi: 0.0,
        accumulate: 0,
    };
}

impl Default for GemmEpilogue {
    fn default() -> Self {
        GemmEpilogue::NONE
    }
}

/// `C[m×n] (row stride rsc, unit column stride) = A[m×k]·B[k×n]`, then the epilogue.
///
/// Element `(i, kk)` of A is `a[i·rsa + kk·csa]`, element `(kk, j)` of B is
/// `b[kk·rsb + j·csb]`, element `(i, j)` of C is `c[i·rsc + j]`. `k == 0` gives
/// `C = 0` (or the old C with `accumulate`) followed by bias and activation.
/// Single-threaded; does not allocate; never unwinds.
///
/// # Safety
/// - `a`, `b`, `c` must address every element of A, B, C described above (they may be
///   dangling only if the corresponding matrix is empty); C must not overlap A, B, the bias
///   or the scratch.
/// - `epilogue` is null (meaning [`GemmEpilogue::NONE`]) or points to a valid epilogue whose
///   `bias` (if its `bias_kind` is 1 or 2) points to `m` or `n` floats.
/// - `scratch` points to at least [`sgemm_scratch_bytes`]`(m, n, k)` writable bytes aligned to
///   64 (it may be dangling if that is 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nnefc_sgemm(
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    b: *const f32,
    rsb: isize,
    csb: isize,
    c: *mut f32,
    rsc: isize,
    epilogue: *const GemmEpilogue,
    scratch: *mut u8,
) {
    // SAFETY: the caller upholds this function's contract, which is the driver's.
    unsafe {
        let epi = read_epilogue(epilogue);
        driver::sgemm(
            kernels::selected(),
            driver::Problem {
                m,
                n,
                k,
                a: driver::ASrc::Strided { a, rsa, csa },
                b,
                rsb,
                csb,
                c,
                rsc,
            },
            &epi,
            scratch,
        );
    }
}

/// Like [`nnefc_sgemm`] with A pre-packed by [`pack_a`] (see the module docs for the format).
///
/// # Safety
/// As for [`nnefc_sgemm`]; `a_packed` must point to [`packed_a_len`]`(m, k)` floats produced
/// by [`pack_a`] for the same `m` and `k`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nnefc_sgemm_packed_a(
    m: usize,
    n: usize,
    k: usize,
    a_packed: *const f32,
    b: *const f32,
    rsb: isize,
    csb: isize,
    c: *mut f32,
    rsc: isize,
    epilogue: *const GemmEpilogue,
    scratch: *mut u8,
) {
    // SAFETY: the caller upholds this function's contract, which is the driver's.
    unsafe {
        let epi = read_epilogue(epilogue);
        driver::sgemm(
            kernels::selected(),
            driver::Problem {
                m,
                n,
                k,
                a: driver::ASrc::Packed(a_packed),
                b,
                rsb,
                csb,
                c,
                rsc,
            },
            &epi,
            scratch,
        );
    }
}

/// `nnefc_gemm_args`: the operands of one [`nnefc_sgemm_parallel`] call (the arguments of
/// [`nnefc_sgemm`] / [`nnefc_sgemm_packed_a`] in one struct). 13 pointer-sized fields,
/// 104 bytes on 64-bit targets, in this order.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GemmArgs {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of B and C.
    pub n: usize,
    /// Columns of A, rows of B.
    pub k: usize,
    /// A: strided, or packed by [`pack_a`] / [`pack_a_lanes`] (see `a_packed`).
    pub a: *const f32,
    /// Row stride of A in elements (ignored when packed).
    pub rsa: isize,
    /// Column stride of A in elements (ignored when packed).
    pub csa: isize,
    /// The format of `a`: 0 strided (`rsa`, `csa`); 1 the packed-A format of [`pack_a`]
    /// (6-row panels); 2 lane panels ([`pack_a_lanes`], 16-row panels). Other values are
    /// reserved and read as 1 (what every non-zero value meant before lane panels).
    pub a_packed: usize,
    /// B.
    pub b: *const f32,
    /// Row stride of B.
    pub rsb: isize,
    /// Column stride of B.
    pub csb: isize,
    /// C (unit column stride).
    pub c: *mut f32,
    /// Row stride of C.
    pub rsc: isize,
    /// Epilogue, or null for none.
    pub epilogue: *const GemmEpilogue,
}

/// [`nnefc_sgemm`] / [`nnefc_sgemm_packed_a`] split over the workers of `par` (null or
/// serial: one call on this thread). Worker `w` uses the scratch at `scratch + w·stride`.
///
/// The product is cut into ranges of rows or columns of C computed by the same routine as
/// the serial call, so C is bit-identical whatever the worker count and task order.
/// Products too small to be worth a hand-off run inline.
///
/// # Safety
/// - `args` points to a valid [`GemmArgs`] whose operands satisfy the [`nnefc_sgemm`]
///   contract (or [`nnefc_sgemm_packed_a`]'s when `a_packed` is 1; with `a_packed` = 2,
///   `a` holds [`packed_a_lanes_len`]`(m, k)` floats written by [`pack_a_lanes`]);
/// - `par` is null or points to a valid [`Parallel`](crate::Parallel) honouring its
///   contract;
/// - `scratch` is 64-byte aligned and holds `stride · workers` writable bytes, where
///   `stride ≥ sgemm_scratch_bytes(m, n, k)` is a multiple of 64 (`workers` being 1 for a
///   serial `par`); with lane panels (`a_packed` = 2) no scratch is used, so `stride`
///   may be 0 and `scratch` dangling.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nnefc_sgemm_parallel(
    args: *const GemmArgs,
    par: *const crate::Parallel,
    scratch: *mut u8,
    stride: usize,
) {
    // SAFETY: forwarded.
    unsafe { sgemm_prefetching(args, par, scratch, stride, driver::Prefetch::NONE) }
}

/// [`nnefc_sgemm_parallel`], prefetching `pf` while it computes.
///
/// # Safety
/// As for [`nnefc_sgemm_parallel`].
unsafe fn sgemm_prefetching(
    args: *const GemmArgs,
    par: *const crate::Parallel,
    scratch: *mut u8,
    stride: usize,
    pf: driver::Prefetch,
) {
    if args.is_null() {
        return;
    }
    // SAFETY: the caller upholds this function's contract, which is the driver's.
    unsafe {
        let g = args.read_unaligned();
        let epi = read_epilogue(g.epilogue);
        let a = match g.a_packed {
            0 => driver::ASrc::Strided {
                a: g.a,
                rsa: g.rsa,
                csa: g.csa,
            },
            A_LANES => driver::ASrc::Lanes(g.a),
            _ => driver::ASrc::Packed(g.a),
        };
        split::sgemm_parallel(
            kernels::selected(),
            driver::Problem {
                m: g.m,
                n: g.n,
                k: g.k,
                a,
                b: g.b,
                rsb: g.rsb,
                csb: g.csb,
                c: g.c,
                rsc: g.rsc,
            },
            &epi,
            par,
            scratch,
            stride,
            pf,
        );
    }
}

/// `count` independent products (`args[0..count]`, e.g. the 36 point-wise products of a
/// Winograd layer or the phases of a deconvolution) with `par`'s workers in one hand-off.
///
/// With at least two products per worker and enough work to be worth a hand-off, whole
/// products are handed out as tasks (worker `w` runs each of its products serially with
/// the scratch at `scratch + w·stride`); otherwise each product is split (or run inline)
/// as by [`nnefc_sgemm_parallel`], one after another.
/// Either way every product is computed by the routine a serial call would use, so C is
/// bit-identical whatever the worker count and task order. One fork-join per layer
/// instead of one per product is what lets small batched products scale.
///
/// # Safety
/// `args` points to `count` valid [`GemmArgs`], each meeting [`nnefc_sgemm_parallel`]'s
/// contract with this `scratch`/`stride`, whose outputs do not overlap each other or any
/// operand of another product; `par` is null or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nnefc_sgemm_batch_parallel(
    args: *const GemmArgs,
    count: usize,
    par: *const crate::Parallel,
    scratch: *mut u8,
    stride: usize,
) {
    // SAFETY: forwarded.
    unsafe { sgemm_batch(args, count, par, scratch, stride, driver::Prefetch::NONE) }
}

/// [`nnefc_sgemm_batch_parallel`], product `i` of the `count` prefetching the `i`-th
/// share of `pf` while it computes.
///
/// # Safety
/// As for [`nnefc_sgemm_batch_parallel`].
unsafe fn sgemm_batch(
    args: *const GemmArgs,
    count: usize,
    par: *const crate::Parallel,
    scratch: *mut u8,
    stride: usize,
    pf: driver::Prefetch,
) {
    if args.is_null() || count == 0 {
        return;
    }
    // SAFETY: the caller upholds the contract above.
    unsafe {
        let workers = crate::parallel::workers(par);
        // Hand-offs cost microseconds: only batches with at least two parts' worth of
        // work (as `split` counts it) are handed out.
        let macs = (0..count).fold(0usize, |acc, i| {
            let g = &*args.add(i);
            acc.saturating_add(g.m.saturating_mul(g.n).saturating_mul(g.k))
        });
        if workers > 1 && count >= 2 * workers && macs >= 2 * split::MIN_PART_MACS {
            let job = BatchJob {
                args,
                count,
                scratch,
                stride,
                pf,
            };
            crate::parallel::run(
                par,
                batch_task,
                &job as *const BatchJob as *mut core::ffi::c_void,
                count,
            );
        } else {
            for i in 0..count {
                sgemm_prefetching(args.add(i), par, scratch, stride, pf.share(i, i + 1, count));
            }
        }
    }
}

/// [`nnefc_sgemm_batch_parallel`] that also brings `pf_floats` floats from `pf` into the
/// caches while it computes: a later step's weights, which would otherwise come from
/// memory when that step runs. Product `i` of the `count` takes the `i`-th share of the
/// region, and products whose A is in lane panels prefetch it (their tiles issue the
/// hints spread over their k loops, each part of a split product its share); other
/// routes ignore it. A hint: `pf` need not be readable, and C is the same bits as
/// without it.
///
/// Why: mobilenet_v2's classifier (1000×1280, 5 MB) streams its weights from memory
/// after the 320→1280 layer, whose multiply-adds leave the memory idle. With them
/// prefetched during that layer (Zen 4, `nnefc bench --profile`, minima of four
/// interleaved runs; a scratch build): one thread, the classifier 0.216 → 0.114 ms and
/// the layer before 0.391 → 0.399; two threads 0.105 → 0.052 and 0.199 → 0.211.
///
/// # Safety
/// As for [`nnefc_sgemm_batch_parallel`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nnefc_sgemm_batch_prefetch(
    args: *const GemmArgs,
    count: usize,
    par: *const crate::Parallel,
    scratch: *mut u8,
    stride: usize,
    pf: *const f32,
    pf_floats: usize,
) {
    let pf = driver::Prefetch {
        ptr: pf,
        len: pf_floats,
    };
    // SAFETY: the caller upholds the contract above.
    unsafe { sgemm_batch(args, count, par, scratch, stride, pf) }
}

/// What every task of [`nnefc_sgemm_batch_parallel`] needs.
struct BatchJob {
    args: *const GemmArgs,
    count: usize,
    scratch: *mut u8,
    stride: usize,
    pf: driver::Prefetch,
}

unsafe extern "C" fn batch_task(ctx: *mut core::ffi::c_void, i: usize, worker: usize) {
    // SAFETY: ctx is the `BatchJob` of `nnefc_sgemm_batch_parallel`, alive until every
    // task returned; `i < count`; the worker index is unique among running tasks, so each
    // task has its own scratch; a null `par` runs the product serially on this thread.
    unsafe {
        let job = &*(ctx as *const BatchJob);
        sgemm_prefetching(
            job.args.add(i),
            core::ptr::null(),
            job.scratch.add(worker * job.stride),
            job.stride,
            job.pf.share(i, i + 1, job.count),
        );
    }
}

/// Copies the epilogue out of the caller's memory; null means none.
///
/// # Safety
/// `p` is null or points to a valid `GemmEpilogue`.
unsafe fn read_epilogue(p: *const GemmEpilogue) -> GemmEpilogue {
    if p.is_null() {
        GemmEpilogue::NONE
    } else {
        // SAFETY: non-null and valid by the caller's contract.
        unsafe { p.read_unaligned() }
    }
}

/// Number of floats [`pack_a`] produces for an `m × k` matrix: `ceil(m / MR) · MR · k`.
pub fn packed_a_len(m: usize, k: usize) -> usize {
    m.div_ceil(MR) * MR * k
}

/// `GemmArgs::a_packed` for lane panels.
pub const A_LANES: usize = 2;

/// Number of floats [`pack_a_lanes`] produces for an `m × k` matrix:
/// `ceil(m / 16) · 16 · k` (saturating at `usize::MAX`, which no buffer reaches).
pub fn packed_a_lanes_len(m: usize, k: usize) -> usize {
    lanes::len(m, k).unwrap_or(usize::MAX)
}

/// Bytes of scratch [`nnefc_sgemm`] and [`nnefc_sgemm_packed_a`] need for this shape.
///
/// Independent of the CPU (so the compiler can plan the workspace) and bounded by about
/// 2.2 MiB whatever the shape (2 MiB when B is narrow enough to be packed whole, see
/// `driver::is_panel_major`).
pub fn sgemm_scratch_bytes(m: usize, n: usize, k: usize) -> usize {
    let layout = driver::ScratchLayout::new(m, n, k);
    layout.total_bytes
}

/// Packs A (`m × k`, element `(i, kk)` at `a[i·rsa + kk·csa]`) into the packed-A format
/// (see the module docs), for weights baked into an object at compile time.
///
/// # Panics
/// If `a` is too short for the described matrix. Use [`try_pack_a`] to get an error instead.
#[cfg(feature = "std")]
pub fn pack_a(m: usize, k: usize, a: &[f32], rsa: usize, csa: usize) -> std::vec::Vec<f32> {
    match try_pack_a(m, k, a, rsa, csa) {
        Ok(v) => v,
        Err(_) => panic!(
            "pack_a: a slice of {} floats is too short for a {m}×{k} matrix with strides ({rsa}, {csa})",
            a.len()
        ),
    }
}

/// [`pack_a`] that reports a too-short `a` (or an overflowing size) as
/// [`Status::ShapeMismatch`](crate::Status::ShapeMismatch) instead of panicking.
#[cfg(feature = "std")]
pub fn try_pack_a(
    m: usize,
    k: usize,
    a: &[f32],
    rsa: usize,
    csa: usize,
) -> Result<std::vec::Vec<f32>, crate::Error> {
    let len = m.div_ceil(MR).checked_mul(MR * k);
    // SAFETY: `pack_a_panels` writes ceil(m/MR)·MR·k floats.
    unsafe { packed_with(m, k, a, rsa, csa, len, pack::pack_a_panels) }
}

/// Packs A (`m × k`, element `(i, kk)` at `a[i·rsa + kk·csa]`) into lane panels (see the
/// module docs), for weights baked into an object at compile time.
///
/// # Panics
/// If `a` is too short for the described matrix. Use [`try_pack_a_lanes`] to get an error
/// instead.
#[cfg(feature = "std")]
pub fn pack_a_lanes(m: usize, k: usize, a: &[f32], rsa: usize, csa: usize) -> std::vec::Vec<f32> {
    match try_pack_a_lanes(m, k, a, rsa, csa) {
        Ok(v) => v,
        Err(_) => panic!(
            "pack_a_lanes: a slice of {} floats is too short for a {m}×{k} matrix with strides ({rsa}, {csa})",
            a.len()
        ),
    }
}

/// [`pack_a_lanes`] that reports a too-short `a` (or an overflowing size) as
/// [`Status::ShapeMismatch`](crate::Status::ShapeMismatch) instead of panicking.
#[cfg(feature = "std")]
pub fn try_pack_a_lanes(
    m: usize,
    k: usize,
    a: &[f32],
    rsa: usize,
    csa: usize,
) -> Result<std::vec::Vec<f32>, crate::Error> {
    // SAFETY: `lanes::pack` writes ceil(m/16)·16·k floats, which is `lanes::len`.
    unsafe { packed_with(m, k, a, rsa, csa, lanes::len(m, k), lanes::pack) }
}

/// A of `m × k` (strides `rsa`, `csa` into `a`) packed by `pack` into a new buffer of
/// `len` floats (`None`: too large), after checking that `a` holds the matrix.
///
/// # Safety
/// `pack(m, k, a, rsa, csa, dst)` writes at most `len` floats to `dst` and reads only the
/// matrix's elements.
#[cfg(feature = "std")]
unsafe fn packed_with(
    m: usize,
    k: usize,
    a: &[f32],
    rsa: usize,
    csa: usize,
    len: Option<usize>,
    pack: unsafe fn(usize, usize, *const f32, isize, isize, *mut f32),
) -> Result<std::vec::Vec<f32>, crate::Error> {
    check_a_bounds(m, k, a.len(), rsa, csa)?;
    let len = len.ok_or(crate::Error::Status(crate::Status::ShapeMismatch))?;
    let mut out = std::vec![0.0f32; len];
    if len > 0 {
        // SAFETY: the bounds check above guarantees every (i, kk) with i < m, kk < k is
        // inside `a`; `out` holds the `len` floats `pack` writes (the caller's contract).
        unsafe {
            pack(
                m,
                k,
                a.as_ptr(),
                rsa as isize,
                csa as isize,
                out.as_mut_ptr(),
            )
        };
    }
    Ok(out)
}

/// Whether an `m × k` matrix with strides `(rsa, csa)` fits in `len` floats (and its
/// offsets in an `isize`).
#[cfg(feature = "std")]
fn check_a_bounds(
    m: usize,
    k: usize,
    len: usize,
    rsa: usize,
    csa: usize,
) -> Result<(), crate::Error> {
    let shape_err = crate::Error::Status(crate::Status::ShapeMismatch);
    if m > 0 && k > 0 {
        let last = (m - 1)
            .checked_mul(rsa)
            .and_then(|r| (k - 1).checked_mul(csa).and_then(|c| r.checked_add(c)))
            .ok_or(shape_err)?;
        if last >= len || isize::try_from(last).is_err() {
            return Err(shape_err);
        }
    }
    Ok(())
}

/// [`nnefc_sgemm`] / [`nnefc_sgemm_packed_a`] with a chosen kernel instead of the detected
/// one (benchmarks and tests). Returns `false`, doing nothing, if `id` is not available.
/// With `a_is_packed`, `a` is packed A and `rsa`/`csa` are ignored.
///
/// # Safety
/// As for [`nnefc_sgemm`] (or [`nnefc_sgemm_packed_a`] with `a_is_packed`).
#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn sgemm_with_kernel(
    id: KernelId,
    m: usize,
    n: usize,
    k: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    a_is_packed: bool,
    b: *const f32,
    rsb: isize,
    csb: isize,
    c: *mut f32,
    rsc: isize,
    epilogue: &GemmEpilogue,
    scratch: *mut u8,
) -> bool {
    let Some(kern) = kernels::kernel(id) else {
        return false;
    };
    let a = if a_is_packed {
        driver::ASrc::Packed(a)
    } else {
        driver::ASrc::Strided { a, rsa, csa }
    };
    // SAFETY: forwarded caller contract.
    unsafe {
        driver::sgemm(
            kern,
            driver::Problem {
                m,
                n,
                k,
                a,
                b,
                rsb,
                csb,
                c,
                rsc,
            },
            epilogue,
            scratch,
        )
    };
    true
}
