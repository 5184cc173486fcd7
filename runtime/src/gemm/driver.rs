//! The BLIS-style blocking loops around the micro-kernels: n blocks of `NC` columns, k
//! blocks of `KC`, B packed into scratch per (n, k) block, A packed per `MC` rows (unless
//! pre-packed), then `MR × nr` tiles, with edge tiles computed through a stack buffer;
//! for pre-packed A and a narrow B, the panel-major order instead (all of B packed once,
//! each A panel streamed through all k). Also routes degenerate shapes (`k == 0`, `m == 1`, `n == 1`, small n with packed A) to
//! the scalar epilogue or the GEMV paths. It does not allocate or spawn threads.

use super::kernels::{EdgePairFn, EdgeQuadFn, Gemv, Kernel, TileEpi, TileFn, activate};
use super::pack::{pack_a_panels, pack_b_panels};
use super::{GemmEpilogue, KC, MC, MR, NC, NR_MAX};

/// Where A comes from.
#[derive(Clone, Copy)]
pub(crate) enum ASrc {
    /// Element `(i, kk)` at `a[i·rsa + kk·csa]`.
    Strided {
        a: *const f32,
        rsa: isize,
        csa: isize,
    },
    /// The packed-A format (see the `gemm` module docs).
    Packed(*const f32),
    /// The lane-panel format (`lanes`), computed only by [`Route::Lanes`].
    Lanes(*const f32),
}

/// One GEMM call's operands (see `nnefc_sgemm`).
#[derive(Clone, Copy)]
pub(crate) struct Problem {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: ASrc,
    pub b: *const f32,
    pub rsb: isize,
    pub csb: isize,
    pub c: *mut f32,
    pub rsc: isize,
}

/// Where the packed blocks live in the caller's scratch. Computed with `NR_MAX`, never the
/// running kernel's `nr`, so the size is the same on every CPU.
pub(crate) struct ScratchLayout {
    /// Byte offset of the packed A block (64-byte aligned).
    pub a_offset: usize,
    /// Total bytes.
    pub total_bytes: usize,
}

impl ScratchLayout {
    /// What a product reserves: enough for the blocked order and, when the shape allows
    /// the panel-major order, for all of B packed (`k·NR_MAX` floats). Monotone in `m`
    /// and `n`, so every part of a split product fits its whole product's scratch.
    pub(crate) fn new(m: usize, n: usize, k: usize) -> ScratchLayout {
        let mut l = ScratchLayout::blocked(m, n, k);
        if is_panel_major(n, k) {
            l.total_bytes = l.total_bytes.max(k * NR_MAX * 4);
        }
        l
    }

    /// The blocked order's layout: one packed `kc × nc` block of B, then one `mc × kc`
    /// block of A.
    pub(crate) fn blocked(m: usize, n: usize, k: usize) -> ScratchLayout {
        let kc = k.min(KC);
        let b_floats = kc * n.min(NC).div_ceil(NR_MAX) * NR_MAX;
        let a_floats = m.min(MC).div_ceil(MR) * MR * kc;
        let a_offset = (b_floats * 4).div_ceil(64) * 64;
        ScratchLayout {
            a_offset,
            total_bytes: a_offset + a_floats * 4,
        }
    }
}

/// Which routine computes a problem. Decided once on the whole problem, so that every part
/// of a split problem ([`sgemm_part`]) runs the same routine, with the same kernel, as the
/// serial call: that is what makes the result independent of the number of parts.
#[derive(Clone, Copy)]
pub(crate) enum Route {
    /// `m == 0` or `n == 0`: nothing to do.
    Empty,
    /// `k == 0`: only the epilogue.
    EpilogueOnly,
    /// One of the matrix-vector forms, with this kernel's GEMV bodies.
    Gemv(GemvKind, &'static Kernel),
    /// The cache-blocked loops with this kernel, panel-major ([`panel_major`]) or not.
    /// Both are decided on the whole product: a part must not switch to the panel-major
    /// order, whose packed B can exceed the scratch sized for the whole product.
    Blocked(&'static Kernel, bool),
    /// A in lane panels: the `lanes` tiles of this flavour, whatever the shape.
    Lanes(super::lanes::Impl),
    /// A in 6-row panels, few rows, B's columns contiguous, an AVX-512 kernel: every row
    /// of C in registers, B read in place (`tall`).
    #[cfg(target_arch = "x86_64")]
    Tall,
}

/// The matrix-vector forms of [`run_gemv`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum GemvKind {
    /// `m == 1`, B with unit column stride: axpy over the columns.
    RowAxpy,
    /// `m == 1`, B with unit row stride and contiguous A row: dot products.
    RowDot,
    /// `n == 1`, strided A with unit row stride: axpy over the rows.
    ColAxpy,
    /// `n == 1`, strided A with unit column stride and B column contiguous: dots.
    ColDot,
    /// Packed A and `n ≤ 4`: one streaming pass over the panels per column.
    Panel,
}

impl Route {
    /// The routine for `p` with the CPU's kernel `kern`.
    pub(crate) fn of(kern: &'static Kernel, p: &Problem) -> Route {
        if p.m == 0 || p.n == 0 {
            return Route::Empty;
        }
        if p.k == 0 {
            return Route::EpilogueOnly;
        }
        if let ASrc::Lanes(_) = p.a {
            return Route::Lanes(super::lanes::Impl::for_kernel(kern.id));
        }
        if p.m == 1 {
            let incx = match p.a {
                ASrc::Strided { csa, .. } => csa,
                ASrc::Packed(_) | ASrc::Lanes(_) => MR as isize,
            };
            if p.csb == 1 {
                return Route::Gemv(GemvKind::RowAxpy, kern);
            }
            if p.rsb == 1 && incx == 1 {
                return Route::Gemv(GemvKind::RowDot, kern);
            }
        }
        match p.a {
            ASrc::Strided { rsa, csa, .. } if p.n == 1 => {
                if rsa == 1 {
                    return Route::Gemv(GemvKind::ColAxpy, kern);
                }
                if csa == 1 && p.rsb == 1 {
                    return Route::Gemv(GemvKind::ColDot, kern);
                }
            }
            ASrc::Packed(_) if p.n <= 4 => return Route::Gemv(GemvKind::Panel, kern),
            #[cfg(target_arch = "x86_64")]
            ASrc::Packed(_) if super::tall::takes(kern.id, p) => return Route::Tall,
            _ => {}
        }
        Route::Blocked(
            super::kernels::for_width(kern, p.n),
            matches!(p.a, ASrc::Packed(_)) && is_panel_major(p.n, p.k),
        )
    }
}

/// Runs one GEMM with kernel `kern`.
///
/// # Safety
/// The operands, epilogue bias and scratch satisfy the contract of `nnefc_sgemm` /
/// `nnefc_sgemm_packed_a`.
pub(crate) unsafe fn sgemm(
    kern: &'static Kernel,
    p: Problem,
    epi: &GemmEpilogue,
    scratch: *mut u8,
) {
    let route = Route::of(kern, &p);
    // SAFETY: forwarded caller contract.
    unsafe { run_route(route, &p, epi, scratch, Prefetch::NONE) }
}

/// Memory that a product brings into the caches while it computes, for a later step
/// (`nnefc_sgemm_batch_prefetch`): `len` floats from `ptr`, a hint that never faults.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Prefetch {
    pub ptr: *const f32,
    pub len: usize,
}

impl Prefetch {
    pub(crate) const NONE: Prefetch = Prefetch {
        ptr: core::ptr::null(),
        len: 0,
    };

    /// Floats `[lo·len/total, hi·len/total)` of the region: the share of a part that
    /// computes `[lo, hi)` of `total` rows, columns or tiles.
    pub(crate) fn share(self, lo: usize, hi: usize, total: usize) -> Prefetch {
        if total == 0 || self.len == 0 {
            return Prefetch::NONE;
        }
        let at = |i: usize| (i as u128 * self.len as u128 / total as u128) as usize;
        Prefetch {
            ptr: self.ptr.wrapping_add(at(lo)),
            len: at(hi) - at(lo),
        }
    }
}

/// Runs `p` with the routine `route` (decided on `p` or on a problem `p` is a part of),
/// prefetching `pf` meanwhile where the routine can (lane panels; the others ignore it).
///
/// # Safety
/// As for [`sgemm`]; `route` is `Route::of` of `p` or of a problem `p` is a part of.
pub(crate) unsafe fn run_route(
    route: Route,
    p: &Problem,
    epi: &GemmEpilogue,
    scratch: *mut u8,
    pf: Prefetch,
) {
    if p.m == 0 || p.n == 0 {
        return;
    }
    let nul = core::ptr::null::<f32>();
    let bias_row = if epi.bias_kind == 1 { epi.bias } else { nul };
    let bias_col = if epi.bias_kind == 2 { epi.bias } else { nul };
    let accumulate = epi.accumulate != 0;
    // SAFETY (all calls below): forwarded caller contract; the route's stride
    // preconditions hold for every part of the problem they were checked on.
    unsafe {
        match route {
            Route::Empty => {}
            Route::EpilogueOnly => epilogue_only(p, bias_row, bias_col, epi),
            Route::Gemv(kind, kern) => run_gemv(kern, kind, p, bias_row, bias_col, epi),
            Route::Blocked(kern, pm) => {
                blocked(kern, p, pm, bias_row, bias_col, accumulate, epi, scratch)
            }
            Route::Lanes(imp) => {
                if let ASrc::Lanes(ap) = p.a {
                    super::lanes::run(imp, p, ap, epi, pf)
                }
            }
            #[cfg(target_arch = "x86_64")]
            Route::Tall => {
                if let ASrc::Packed(ap) = p.a {
                    super::tall::run(p, ap, epi)
                }
            }
        }
    }
}

/// `k == 0`: the product is zero, only the epilogue remains.
///
/// # Safety
/// C and the bias are valid for the problem.
unsafe fn epilogue_only(
    p: &Problem,
    bias_row: *const f32,
    bias_col: *const f32,
    epi: &GemmEpilogue,
) {
    for i in 0..p.m {
        for j in 0..p.n {
            // SAFETY: (i, j) is an element of C; bias elements i / j exist if non-null.
            unsafe {
                let cp = p.c.offset(i as isize * p.rsc).add(j);
                let mut v = if epi.accumulate != 0 { *cp } else { 0.0 };
                if !bias_row.is_null() {
                    v += *bias_row.add(i);
                }
                if !bias_col.is_null() {
                    v += *bias_col.add(j);
                }
                *cp = activate(v, epi.activation, epi.lo, epi.hi);
            }
        }
    }
}

/// The matrix-vector form `kind` (chosen by [`Route::of`]).
///
/// # Safety
/// The problem's operands are valid and satisfy the stride precondition of `kind`.
unsafe fn run_gemv(
    kern: &Kernel,
    kind: GemvKind,
    p: &Problem,
    bias_row: *const f32,
    bias_col: *const f32,
    epi: &GemmEpilogue,
) {
    // Bias along the GEMV output (`along`) or one value for all outputs (`across`).
    let pick = |along: *const f32, across: *const f32| -> (*const f32, isize) {
        if !along.is_null() {
            (along, 1)
        } else {
            (across, 0)
        }
    };
    let base = |len,
                x,
                incx,
                mat,
                stride_k,
                stride_out,
                y,
                incy,
                (bias, bias_inc): (*const f32, isize)| Gemv {
        len,
        k: p.k,
        x,
        incx,
        mat,
        stride_k,
        stride_out,
        y,
        incy,
        bias,
        bias_inc,
        accumulate: epi.accumulate != 0,
        act: epi.activation,
        lo: epi.lo,
        hi: epi.hi,
    };
    // SAFETY (all calls): the GEMV descriptions below address exactly the elements of A, B,
    // C and the bias the GEMM would; each form's stride precondition held when `kind` was
    // chosen.
    unsafe {
        match (kind, p.a) {
            (GemvKind::RowAxpy | GemvKind::RowDot, a_src) => {
                // y = row 0 of C, x = row 0 of A, M = B.
                let (x, incx) = match a_src {
                    ASrc::Strided { a, csa, .. } => (a, csa),
                    ASrc::Packed(ap) => (ap, MR as isize),
                    // Route::of never sends lane panels to a GEMV form.
                    ASrc::Lanes(_) => return,
                };
                let g = base(
                    p.n,
                    x,
                    incx,
                    p.b,
                    p.rsb,
                    p.csb,
                    p.c,
                    1,
                    pick(bias_col, bias_row),
                );
                if kind == GemvKind::RowAxpy {
                    (kern.gemv_axpy)(&g);
                } else {
                    (kern.gemv_dot)(&g);
                }
            }
            (GemvKind::ColAxpy | GemvKind::ColDot, ASrc::Strided { a, rsa, csa }) => {
                // y = column 0 of C, x = column 0 of B, M = Aᵀ.
                let g = base(
                    p.m,
                    p.b,
                    p.rsb,
                    a,
                    csa,
                    rsa,
                    p.c,
                    p.rsc,
                    pick(bias_row, bias_col),
                );
                if kind == GemvKind::ColAxpy {
                    (kern.gemv_axpy)(&g);
                } else {
                    (kern.gemv_dot)(&g);
                }
            }
            (GemvKind::Panel, ASrc::Packed(ap)) => {
                // One streaming pass over packed A per column of B.
                for j in 0..p.n {
                    let col_bias = if bias_col.is_null() {
                        nul_f32()
                    } else {
                        bias_col.add(j)
                    };
                    let g = base(
                        p.m,
                        p.b.offset(j as isize * p.csb),
                        p.rsb,
                        ap,
                        0,
                        0,
                        p.c.add(j),
                        p.rsc,
                        pick(bias_row, col_bias),
                    );
                    (kern.gemv_panel)(&g);
                }
            }
            // Route::of never pairs a column form with packed A or the panel form with
            // strided A.
            _ => {}
        }
    }
}

fn nul_f32() -> *const f32 {
    core::ptr::null()
}

/// The general path: cache-blocked loops over packed panels.
///
/// # Safety
/// The problem's operands are valid and `scratch` holds `ScratchLayout::new(m, n, k)` bytes.
unsafe fn blocked(
    kern: &'static Kernel,
    p: &Problem,
    panel_major_order: bool,
    bias_row: *const f32,
    bias_col: *const f32,
    accumulate: bool,
    epi: &GemmEpilogue,
    scratch: *mut u8,
) {
    let (m, n, k, nr) = (p.m, p.n, p.k, kern.nr);
    if let ASrc::Packed(ap) = p.a
        && panel_major_order
    {
        // SAFETY: forwarded; the condition of panel_major holds.
        unsafe { panel_major(kern, p, ap, bias_row, bias_col, accumulate, epi, scratch) };
        return;
    }
    let layout = ScratchLayout::blocked(m, n, k);
    let bpack = scratch.cast::<f32>();
    // SAFETY: a_offset lies within the scratch (it is at most total_bytes).
    let apack = unsafe { scratch.add(layout.a_offset) }.cast::<f32>();
    let m_block = match p.a {
        ASrc::Packed(_) => m,
        ASrc::Strided { .. } => MC,
        // Route::of sends lane panels to `lanes`, never here.
        ASrc::Lanes(_) => return,
    };
    // B is always packed, also when its columns are contiguous: reading it in place jumps
    // a row stride per k step (a new page per step for wide im2col matrices), and packing
    // each (k, n) block once for all row panels measured 1–12 % faster on CNN shapes
    // (`gemm_shapes_throughput`).
    // Equal k blocks (e.g. 576 = 3·192, not 256 + 256 + 64) keep every block efficient.
    let kc_step = k.div_ceil(k.div_ceil(KC));
    let mut jc = 0;
    while jc < n {
        let nc = NC.min(n - jc);
        let mut pc = 0;
        while pc < k {
            let kc = kc_step.min(k - pc);
            // SAFETY: the (pc, jc) block of B is inside B; packed it needs
            // ceil(nc/nr)·nr·kc ≤ kc_step·ceil(min(n,NC)/NR_MAX)·NR_MAX floats (nr divides
            // NR_MAX), what the scratch layout reserves.
            unsafe {
                let b_block = p.b.offset(pc as isize * p.rsb + jc as isize * p.csb);
                pack_b_panels(nr, kc, nc, b_block, p.rsb, p.csb, bpack);
            }
            let mut ic = 0;
            while ic < m {
                let mc = m_block.min(m - ic);
                // SAFETY: for packed A, panel ic/MR at k offset pc is inside the packed buffer;
                // for strided A the (ic, pc) block is inside A and the packed block fits the
                // scratch's A region (mc ≤ MC, kc ≤ KC).
                let (abase, panel_stride) = unsafe {
                    match p.a {
                        ASrc::Packed(ap) | ASrc::Lanes(ap) => {
                            (ap.add((ic / MR) * k * MR + pc * MR), k * MR)
                        }
                        ASrc::Strided { a, rsa, csa } => {
                            pack_a_panels(
                                mc,
                                kc,
                                a.offset(ic as isize * rsa + pc as isize * csa),
                                rsa,
                                csa,
                                apack,
                            );
                            (apack.cast_const(), kc * MR)
                        }
                    }
                };
                // Whether groups of full panels compute their last columns together
                // (`Kernel::edge_quad`, `Kernel::edge_pair`).
                let groups = EdgeGroups::of(kern, nc, kc == k && !accumulate, bias_col, mc);
                let mut ir = 0;
                while ir < mc {
                    // The next panel of a packed filter while this one's tiles run: a
                    // layer's filter is out of cache (a network's weights exceed L2 and
                    // are read once per inference), and each panel's first tile otherwise
                    // waits for its k block from L3, which short k blocks do not hide.
                    // Zen 5, one thread, in the network (`nnefc bench --profile`, minima
                    // of three interleaved runs): mobilenet_v2's 96→576 layers on 14×14
                    // 0.103 → 0.098 ms, its 64→384 ones 0.048 → 0.046, the whole network
                    // 3.35 → 3.29; resnet18 10.52 → 10.37; squeezenet1_1 unchanged.
                    #[cfg(target_arch = "x86_64")]
                    if matches!(p.a, ASrc::Packed(_)) && ir + MR < mc {
                        crate::dwconv::prefetch_row::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                            abase.wrapping_add((ir / MR + 1) * panel_stride),
                            kc * MR,
                        );
                    }
                    let edge = groups.edge(ir / MR, panel_stride);
                    // SAFETY: panel ir/MR of the current A block; the packed B block of
                    // (pc, jc); rows ic + ir.. of C (and those of its group's earlier
                    // panels, when grouped).
                    unsafe {
                        row_panel(
                            kern,
                            p,
                            &Block {
                                ap: abase.add((ir / MR) * panel_stride),
                                bpack,
                                kc,
                                first: pc == 0,
                                last: pc + kc == k,
                                row: ic + ir,
                                mr: MR.min(mc - ir),
                                col0: jc,
                                nc,
                            },
                            edge,
                            bias_row,
                            bias_col,
                            accumulate,
                            epi,
                        )
                    };
                    ir += MR;
                }
                ic += mc;
            }
            pc += kc;
        }
        jc += nc;
    }
}

/// Who computes a row panel's last columns when they are a partial tile of at most 16.
#[derive(Clone, Copy)]
enum Edge {
    /// The panel's own edge tiles.
    Own,
    /// The previous panel with this one (panels `panel_stride` floats apart), by the
    /// kernel's `edge_pair`.
    Pair(EdgePairFn, usize),
    /// The three previous panels with this one, by the kernel's `edge_quad`.
    Quad(EdgeQuadFn, usize),
    /// A later panel of its group does.
    Done,
}

impl Edge {
    /// For the last panel of a group: how many panels up the group starts, and the panel
    /// stride.
    fn group(self) -> Option<(usize, usize)> {
        match self {
            Edge::Pair(_, ps) => Some((1, ps)),
            Edge::Quad(_, ps) => Some((3, ps)),
            Edge::Own | Edge::Done => None,
        }
    }
}

/// How the full panels of a block of `nc` columns share their last columns: when the block
/// ends in a partial tile of at most 4 columns (and the product adds no old C or column
/// bias, in one k block), the first full panels go four at a time (`Kernel::edge_quad`);
/// then, for a partial tile of at most 16, two at a time (`Kernel::edge_pair`); the rest
/// take their own edge tiles. Only the shape and epilogue decide, so every split computes
/// alike (and the grouped routines have the tiles' arithmetic anyway).
struct EdgeGroups {
    quad: Option<EdgeQuadFn>,
    pair: Option<EdgePairFn>,
    /// Full panels in quads (a multiple of 4) and in all.
    quads_end: usize,
    full: usize,
}

impl EdgeGroups {
    fn of(kern: &Kernel, nc: usize, plain: bool, bias_col: *const f32, mc: usize) -> EdgeGroups {
        let rest = nc % kern.nr;
        let quad = kern
            .edge_quad
            .filter(|_| rest > 0 && rest <= 4 && plain && bias_col.is_null());
        let pair = kern.edge_pair.filter(|_| rest > 0 && rest <= 16);
        let full = mc / MR;
        EdgeGroups {
            quad,
            pair,
            quads_end: if quad.is_some() { full / 4 * 4 } else { 0 },
            full,
        }
    }

    /// The edge of panel `p` of the block (panels `panel_stride` floats apart).
    ///
    /// A group's last panel computes the group's edge: by then the tiles of every panel of
    /// the group have brought its A panel into cache (a layer's filter streams from L3 or
    /// memory), where the first panel's would have waited for the next three.
    fn edge(&self, p: usize, panel_stride: usize) -> Edge {
        if p < self.quads_end {
            return match self.quad {
                Some(f) if p % 4 == 3 => Edge::Quad(f, panel_stride),
                _ => Edge::Done,
            };
        }
        let q = p - self.quads_end;
        match self.pair {
            Some(f) if !q.is_multiple_of(2) && p < self.full => Edge::Pair(f, panel_stride),
            Some(_) if q.is_multiple_of(2) && p + 1 < self.full => Edge::Done,
            _ => Edge::Own,
        }
    }
}

/// One row panel against one packed B block: what [`row_panel`] computes.
struct Block {
    /// The A panel at the block's k offset (`kc·MR` floats).
    ap: *const f32,
    /// The packed B block: `ceil(nc/nr)` panels of `kc × nr`.
    bpack: *const f32,
    kc: usize,
    /// First / last k block (the epilogue applies after the last).
    first: bool,
    last: bool,
    /// First row of C and rows in this panel (≤ MR).
    row: usize,
    mr: usize,
    /// First column of C of the block and its width.
    col0: usize,
    nc: usize,
}

/// The tiles of one row panel over one packed B block, with the epilogue on the last k
/// block (full tiles by the kernel, edges through [`edge_tile`]).
///
/// # Safety
/// `blk` describes valid panels of A and B for the problem; its rows and columns are
/// inside C and the bias.
#[allow(clippy::too_many_arguments)]
unsafe fn row_panel(
    kern: &Kernel,
    p: &Problem,
    blk: &Block,
    edge: Edge,
    bias_row: *const f32,
    bias_col: *const f32,
    accumulate: bool,
    epi: &GemmEpilogue,
) {
    let nr = kern.nr;
    let mut jr = 0;
    let mut q = 0;
    while jr < blk.nc {
        let cols = nr.min(blk.nc - jr);
        let col = blk.col0 + jr;
        // SAFETY: panel q of the packed block; (row, col) is an element of C; bias offsets
        // row / col are in range when present.
        unsafe {
            let (bp, rsb) = (blk.bpack.add(q * blk.kc * nr), nr as isize);
            let cp = p.c.offset(blk.row as isize * p.rsc).add(col);
            let last = blk.last;
            let te = TileEpi {
                accumulate: accumulate || !blk.first,
                bias_row: if last && !bias_row.is_null() {
                    bias_row.add(blk.row)
                } else {
                    nul_f32()
                },
                bias_col: if last && !bias_col.is_null() {
                    bias_col.add(col)
                } else {
                    nul_f32()
                },
                act: if last { epi.activation } else { 0 },
                lo: epi.lo,
                hi: epi.hi,
            };
            if blk.mr == MR && cols == nr {
                (kern.tile)(blk.kc, blk.ap, bp, rsb, cp, p.rsc, &te);
            } else if let Some((back, ps)) = edge.group() {
                // The group (EdgeGroups) from its first panel, `back` panels up.
                let up = -((back * MR) as isize);
                let (a0, c0, te0) = (
                    blk.ap.sub(back * ps),
                    cp.offset(up * p.rsc),
                    shifted(&te, up, 0),
                );
                match edge {
                    Edge::Pair(f, _) => f(blk.kc, a0, blk.ap, bp, rsb, c0, p.rsc, cols, &te0),
                    Edge::Quad(f, _) => f(blk.kc, a0, ps, bp, rsb, c0, p.rsc, cols, &te0),
                    Edge::Own | Edge::Done => {}
                }
            } else if !matches!(edge, Edge::Done) {
                edge_columns(kern, blk.kc, blk.ap, bp, rsb, cp, p.rsc, blk.mr, cols, &te);
            }
        }
        jr += nr;
        q += 1;
    }
}

/// Whether a product runs panel-major ([`panel_major`]): packed A, and B narrow enough
/// that all of it, packed, stays in the L2 cache. Depends on the shape only, like the
/// scratch layout.
pub(crate) fn is_panel_major(n: usize, k: usize) -> bool {
    n <= NR_MAX && k * NR_MAX <= PANEL_MAJOR_MAX_FLOATS
}

/// Largest packed B (floats) of the panel-major order: 2 MiB.
const PANEL_MAJOR_MAX_FLOATS: usize = 1 << 19;

/// Packed A with a narrow B (a convolution on a small image: 512 filters × 4608 taps by
/// 49 pixels): B is packed whole, once, and each A panel then streams through all its k
/// blocks in one contiguous run. The block-major order of [`blocked`] reads every panel in
/// `kc`-sized pieces 110 KB apart, which defeats the hardware prefetchers when A comes
/// from memory (resnet18's last layers ran at two thirds of their in-cache speed). The
/// k blocks, kernel and epilogue order are those of [`blocked`], so every element is
/// computed identically.
///
/// # Safety
/// As for [`blocked`]; A is packed and [`is_panel_major`] holds.
#[allow(clippy::too_many_arguments)]
unsafe fn panel_major(
    kern: &'static Kernel,
    p: &Problem,
    ap: *const f32,
    bias_row: *const f32,
    bias_col: *const f32,
    accumulate: bool,
    epi: &GemmEpilogue,
    scratch: *mut u8,
) {
    let (m, n, k, nr) = (p.m, p.n, p.k, kern.nr);
    let bpack = scratch.cast::<f32>();
    let kc_step = k.div_ceil(k.div_ceil(KC));
    let ncp = n.div_ceil(nr) * nr;
    // Block pc of B is packed at pc·ncp floats: k·ncp ≤ k·NR_MAX floats in all, which
    // the scratch layout reserves for panel-major shapes.
    let mut pc = 0;
    while pc < k {
        let kc = kc_step.min(k - pc);
        // SAFETY: rows pc.. of B, all n columns; the destination is inside the scratch.
        unsafe {
            pack_b_panels(
                nr,
                kc,
                n,
                p.b.offset(pc as isize * p.rsb),
                p.rsb,
                p.csb,
                bpack.add(pc * ncp),
            )
        };
        pc += kc;
    }
    let mut ir = 0;
    while ir < m {
        let mut pc = 0;
        while pc < k {
            let kc = kc_step.min(k - pc);
            // SAFETY: panel ir/MR of packed A at k offset pc; block pc of packed B; rows
            // ir.. of C.
            unsafe {
                row_panel(
                    kern,
                    p,
                    &Block {
                        ap: ap.add((ir / MR) * k * MR + pc * MR),
                        bpack: bpack.add(pc * ncp),
                        kc,
                        first: pc == 0,
                        last: pc + kc == k,
                        row: ir,
                        mr: MR.min(m - ir),
                        col0: 0,
                        nc: n,
                    },
                    // Each panel runs through all k before the next: no pairs.
                    Edge::Own,
                    bias_row,
                    bias_col,
                    accumulate,
                    epi,
                )
            };
            pc += kc;
        }
        ir += MR;
    }
}

/// The last tile of a row panel (`mr ≤ MR` rows, `cols ≤ nr` columns, not both full):
/// with all rows, the kernel's narrower tiles ([`Kernel::edges`], same arithmetic) take
/// the columns they cover in full and what is left goes through [`edge_tile`] with the
/// narrowest tile that covers it, when that computes fewer lanes than one full tile
/// (41 columns: 32 + 16 instead of 64; 4: 16). Otherwise, and for partial row panels,
/// one full tile through [`edge_tile`].
///
/// # Safety
/// As for [`edge_tile`]; the packed B panel at `bp` holds `nr` columns per k.
#[allow(clippy::too_many_arguments)]
unsafe fn edge_columns(
    kern: &Kernel,
    kc: usize,
    ap: *const f32,
    bp: *const f32,
    rsb: isize,
    c: *mut f32,
    rsc: isize,
    mr: usize,
    cols: usize,
    te: &TileEpi,
) {
    // Lanes the narrower tiles would compute; when they cover no fewer than one full
    // tile (49 columns: 32 + 16 + 16), the full tile alone is faster.
    let mut lanes = 0;
    let mut left = cols;
    for &(w, _) in kern.edges {
        lanes += left / w * w;
        left %= w;
    }
    if left > 0 {
        lanes += kern.edges.last().map_or(kern.nr, |e| e.0);
    }
    if mr < MR || lanes >= kern.nr {
        // SAFETY: forwarded.
        unsafe { edge_tile(kern.tile, kern.nr, kc, ap, bp, rsb, c, rsc, mr, cols, te) };
        return;
    }
    // The same walk as the count above: whole narrower tiles, then the narrowest one for
    // the rest.
    let mut c0 = 0;
    for &(w, tile) in kern.edges {
        while cols - c0 >= w {
            // SAFETY: a whole w-column tile inside the packed panel, C and the bias.
            unsafe {
                tile(
                    kc,
                    ap,
                    bp.add(c0),
                    rsb,
                    c.add(c0),
                    rsc,
                    &shifted(te, 0, c0 as isize),
                )
            };
            c0 += w;
        }
    }
    if c0 < cols
        && let Some(&(w, tile)) = kern.edges.last()
    {
        // SAFETY: w ≤ nr columns of the packed panel from c0 (c0 + w ≤ nr, since fewer
        // than w columns are left); `cols − c0` columns of C.
        unsafe {
            edge_tile(
                tile,
                w,
                kc,
                ap,
                bp.add(c0),
                rsb,
                c.add(c0),
                rsc,
                mr,
                cols - c0,
                &shifted(te, 0, c0 as isize),
            )
        };
    }
}

/// `te` for the tile `rows` rows down and `cols` columns right (its biases, if any, moved
/// along).
fn shifted(te: &TileEpi, rows: isize, cols: isize) -> TileEpi {
    let at = |b: *const f32, by: isize| {
        if b.is_null() {
            b
        } else {
            b.wrapping_offset(by)
        }
    };
    TileEpi {
        bias_row: at(te.bias_row, rows),
        bias_col: at(te.bias_col, cols),
        ..*te
    }
}

/// A partial tile (`mr ≤ MR` rows, `cols ≤ w` columns): run the `w`-column `tile` on a
/// stack tile with zero-padded bias, then copy the valid part to C.
///
/// # Safety
/// As for the tile, but C, `bias_row` and `bias_col` only need `mr` rows / `cols` columns.
#[allow(clippy::too_many_arguments)]
unsafe fn edge_tile(
    tile: TileFn,
    nr: usize,
    kc: usize,
    ap: *const f32,
    bp: *const f32,
    rsb: isize,
    c: *mut f32,
    rsc: isize,
    mr: usize,
    cols: usize,
    te: &TileEpi,
) {
    let mut tmp = [0.0f32; MR * NR_MAX];
    let mut brow = [0.0f32; MR];
    let mut bcol = [0.0f32; NR_MAX];
    // SAFETY: only the valid mr × cols part of C and the valid bias entries are touched;
    // tmp holds MR·nr ≤ MR·NR_MAX floats.
    unsafe {
        for r in 0..mr {
            if te.accumulate {
                for j in 0..cols {
                    tmp[r * nr + j] = *c.offset(r as isize * rsc).add(j);
                }
            }
            if !te.bias_row.is_null() {
                brow[r] = *te.bias_row.add(r);
            }
        }
        if !te.bias_col.is_null() {
            for (j, slot) in bcol.iter_mut().enumerate().take(cols) {
                *slot = *te.bias_col.add(j);
            }
        }
        let local = TileEpi {
            accumulate: te.accumulate,
            bias_row: if te.bias_row.is_null() {
                nul_f32()
            } else {
                brow.as_ptr()
            },
            bias_col: if te.bias_col.is_null() {
                nul_f32()
            } else {
                bcol.as_ptr()
            },
            act: te.act,
            lo: te.lo,
            hi: te.hi,
        };
        tile(kc, ap, bp, rsb, tmp.as_mut_ptr(), nr as isize, &local);
        for r in 0..mr {
            for j in 0..cols {
                *c.offset(r as isize * rsc).add(j) = tmp[r * nr + j];
            }
        }
    }
}
