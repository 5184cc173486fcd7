//! The inverted-residual block (MobileNetV2's 1×1 expand → depthwise → 1×1 project, each
//! with its bias and activation, the projection with an optional residual) computed band
//! by band of output rows (`nnefc_inverted_residual`), so that the expanded map never
//! leaves the worker's cache.
//!
//! The output rows are cut into `parts` parts of near-equal rows, and each part into bands
//! of `band` rows from its top (the last one shorter); a band expands the input rows its
//! depthwise windows read into a band buffer, runs the depthwise conv over them into a
//! second band buffer, and projects that into its output rows. A worker runs a contiguous
//! range of bands (with as many workers as parts, one part each): the expanded rows two
//! consecutive bands share stay where they are in the buffer instead of being computed
//! again, and the next band's channels start that many rows further down (each channel's
//! new rows land on the next channel's rows no band reads again), so nothing is copied.
//! They were moved to the top of each channel's rows before, a small copy per channel
//! and band: in mobilenet_v2 on one thread (`nnefc bench --profile`, minima of five
//! interleaved runs, a slow hour) the 16→96→24 block from 112² took 0.834 → 0.800 ms,
//! the first one 0.757 → 0.714, the 24→144→24 on 56² 0.658 → 0.634. Both buffers, and
//! the GEMM scratch, are the worker's own (`scratch + worker·scratch_stride`), so on two cores no
//! cache line of the expanded or depthwise maps is ever written by one and read by the
//! other: what made mobilenet_v2's layers two to three times slower on cores far apart
//! (ARCHITECTURE.md, "Two threads on cores far apart"). The expansion may instead be a
//! direct convolution of few input channels (`expand_packing` [`EXPAND_DIRECT`]: a
//! network's first layer), which `nnefc_conv` runs over the band's rows with the band's
//! geometry; its rows get the bits of the whole layer (the test compares them).
//!
//! Bit-identical whatever the worker count: the bands are fixed by `parts` and `band`, and every
//! element is computed by the same kernel call (a band's) whoever runs it; the expanded
//! rows a band keeps from the one before are the bits it would have computed. That last
//! point, and the one-thread bands (`serial_band`), rest on the GEMM giving a column the
//! same bits whatever the product's other columns, which holds for products of more than
//! four columns: with 6-row panels, products of 1–4 columns take the matrix-vector route,
//! which sums in another order (lane panels: every width alike; measured over widths 1–69
//! and up to 2999, eleven shapes). So the input and output rows must have 5 columns or
//! more (the compiler's `passes::block` makes no block of narrower maps).
//!
//! Not here: the kernels themselves (`gemm`, `dwconv`), choosing the band (the compiler's
//! `back::select::block`).

use crate::gemm::{GemmArgs, GemmEpilogue, nnefc_sgemm_parallel, sgemm_scratch_bytes};
use crate::parallel::{self, Parallel};
use crate::{ConvArgs, DwArgs, nnefc_conv, nnefc_dwconv};

/// `nnefc_block_args`: one inverted-residual block over dense NCHW tensors. 360 bytes on
/// 64-bit targets: 42 pointer-sized fields, then six `f32` clamp bounds.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockArgs {
    /// Samples.
    pub n: usize,
    /// Input channels.
    pub cin: usize,
    /// Expanded channels (the depthwise conv's).
    pub mid: usize,
    /// Output channels.
    pub cout: usize,
    /// The expanded map's height (the depthwise conv's input; the block input's too
    /// unless the expansion is a direct conv).
    pub h: usize,
    /// The expanded map's width.
    pub w: usize,
    /// Output height (the depthwise conv's).
    pub oh: usize,
    /// Output width.
    pub ow: usize,
    /// Depthwise window height.
    pub kh: usize,
    /// Depthwise window width.
    pub kw: usize,
    /// Depthwise vertical stride.
    pub sh: usize,
    /// Depthwise horizontal stride.
    pub sw: usize,
    /// Depthwise vertical dilation.
    pub dh: usize,
    /// Depthwise horizontal dilation.
    pub dw: usize,
    /// Zero rows above the expanded map.
    pub pt: usize,
    /// Zero columns left of it.
    pub pl: usize,
    /// Output rows per band (≥ 1).
    pub band: usize,
    /// Parts the output rows are cut into before bands (≥ 1; more than `oh` read as `oh`).
    pub parts: usize,
    /// The block's input, `[n, cin, xh, xw]` dense.
    pub x: *const f32,
    /// The expansion: a `mid × cin` matrix in the format `expand_packing` names
    /// ([`GemmArgs::a_packed`]: 1 `pack_a`, 2 `pack_a_lanes`), or with `expand_packing`
    /// [`EXPAND_DIRECT`] a direct convolution's filter (`mid` outputs of `cin` channels,
    /// `ek`×`ek`, packed by [`pack_conv_filter`](crate::pack_conv_filter)) that
    /// `nnefc_conv` runs over the band's rows; null: no expansion (a depthwise conv and a
    /// projection, `mid == cin`, the depthwise conv reading the input in place).
    pub expand: *const f32,
    /// Its format.
    pub expand_packing: usize,
    /// The expansion's bias, `mid` values (null: none).
    pub expand_bias: *const f32,
    /// The expansion's activation code ([`GemmEpilogue::activation`]).
    pub expand_act: usize,
    /// The depthwise filter, `[mid, kh, kw]` dense.
    pub filter: *const f32,
    /// The depthwise bias, `mid` values (null: none).
    pub dw_bias: *const f32,
    /// The depthwise activation code.
    pub dw_act: usize,
    /// The projection's `cout × mid` matrix in the format `project_packing` names.
    pub project: *const f32,
    /// Its format.
    pub project_packing: usize,
    /// The projection's bias, `cout` values (null: none).
    pub project_bias: *const f32,
    /// Added to the projection before its activation, `[n, cout, oh, ow]` dense; may
    /// equal `y` (null: none).
    pub res: *const f32,
    /// The block's output, `[n, cout, oh, ow]` dense.
    pub y: *mut f32,
    /// The projection's activation code.
    pub act: usize,
    /// Per-worker scratch: worker `w` uses [`block_scratch_bytes`] bytes at
    /// `scratch + w·scratch_stride` (64-byte aligned).
    pub scratch: *mut u8,
    /// Bytes between the workers' scratch.
    pub scratch_stride: usize,
    /// Output rows per band when the call runs on one thread (one worker, or too little
    /// work to split), from the top of the map; 0: the bands above, in worker 0's
    /// scratch. A larger band (the whole map) saves the per-band costs where the maps fit
    /// the caches anyway; the bits are the same as long as every depthwise band takes the
    /// same kernel (3×3 windows: `nnefc_dwconv`'s row kernels, whose rows do not depend on
    /// the band; the compiler leaves this 0 for windows of 20 taps and more).
    pub serial_band: usize,
    /// The scratch of the one-thread bands, [`block_serial_scratch_bytes`] bytes, 64-byte
    /// aligned (unused when `serial_band` is 0).
    pub serial_scratch: *mut u8,
    /// The input's height: `h` unless the expansion is a direct conv.
    pub xh: usize,
    /// The input's width: `w` unless the expansion is a direct conv.
    pub xw: usize,
    /// A direct expansion's window side (square: [`nnefc_conv`]'s shapes,
    /// `conv_supported`); 1 otherwise.
    pub ek: usize,
    /// Its stride, both directions; 1 otherwise.
    pub es: usize,
    /// Its zero rows above the input (fewer than `ek`); 0 otherwise.
    pub ept: usize,
    /// Its zero columns left of the input (fewer than `ek`); 0 otherwise.
    pub epl: usize,
    /// Clamp bounds `[lo, hi]` of the expansion, the depthwise conv and the projection.
    pub bounds: [f32; 6],
}

/// `expand_packing` of an expansion that is a direct convolution (`nnefc_conv`): a
/// network's first layer (an image of 3 channels into 32, 3×3 stride 2) feeding the
/// first block, whose output map then never reaches memory.
pub const EXPAND_DIRECT: usize = 3;

/// Multiply-adds below which a block runs on the calling thread.
const PARALLEL_MIN_MACS: usize = 1 << 18;

fn align64(b: usize) -> usize {
    b.div_ceil(64) * 64
}

/// Input rows the depthwise windows of `rows` (≥ 1) consecutive output rows span.
fn reach(a: &BlockArgs, rows: usize) -> usize {
    (rows - 1) * a.sh + (a.kh - 1) * a.dh + 1
}

/// Input rows a band of `band` output rows reads at most (rows of the map): also the rows
/// between two channels of the band buffer.
fn band_rows_in(a: &BlockArgs) -> usize {
    reach(a, a.band.max(1).min(a.oh)).min(a.h)
}

/// Bytes added after each region of the scratch: 17 cache lines, so that the depthwise
/// conv's input and output planes of one channel never lie a multiple of 4 KiB apart
/// (loads that alias an earlier store's low address bits wait for it; a whole 56×56 map
/// of 144 channels is exactly 441 pages, and the 16→96→24 block's map ran 12 % slower
/// with its depthwise rows placed right after it).
const SKEW: usize = 17 * 64;

/// The byte offsets of a worker's regions: expanded rows, depthwise rows, GEMM scratch,
/// and the total.
fn layout(a: &BlockArgs) -> [usize; 4] {
    let rows_in = band_rows_in(a);
    let band = a.band.max(1).min(a.oh);
    // Each channel's rows `rows_in` apart, and room for a worker's bands to slide down
    // by up to the map's rows (see `bands`).
    let e = if a.expand.is_null() {
        0
    } else {
        align64((a.mid * rows_in + a.h) * a.w * 4) + SKEW
    };
    let d = align64(a.mid * band * a.ow * 4) + SKEW;
    let g = align64(
        sgemm_scratch_bytes(a.mid, rows_in * a.w, a.cin).max(sgemm_scratch_bytes(
            a.cout,
            band * a.ow,
            a.mid,
        )),
    );
    [0, e, e + d, e + d + g]
}

/// Bytes of scratch each worker needs for the block `a` describes (its dims and `band`,
/// and whether `expand` is null; no pointer is read through).
pub fn block_scratch_bytes(a: &BlockArgs) -> usize {
    if a.oh == 0 || a.h == 0 || a.kh == 0 {
        return 0;
    }
    layout(a)[3]
}

/// The arguments of the one-thread run: `serial_band` rows per band, one part, the
/// serial scratch (`None` when `serial_band` is 0).
fn serial(a: &BlockArgs) -> Option<BlockArgs> {
    (a.serial_band > 0).then_some(BlockArgs {
        band: a.serial_band,
        parts: 1,
        scratch: a.serial_scratch,
        scratch_stride: 0,
        ..*a
    })
}

/// Bytes of the one-thread scratch (`serial_scratch`) of the block `a` describes; 0
/// when `serial_band` is 0.
pub fn block_serial_scratch_bytes(a: &BlockArgs) -> usize {
    serial(a).map_or(0, |s| block_scratch_bytes(&s))
}

/// `C = act(A·B + bias (+ C))` through the serial GEMM.
///
/// # Safety
/// The operands hold the extents stated; `scratch` holds the product's scratch.
#[allow(clippy::too_many_arguments)]
unsafe fn product(
    a: (*const f32, usize),
    m: usize,
    n: usize,
    k: usize,
    b: (*const f32, usize),
    c: (*mut f32, usize),
    epi: &GemmEpilogue,
    scratch: *mut u8,
) {
    let g = GemmArgs {
        m,
        n,
        k,
        a: a.0,
        rsa: 0,
        csa: 0,
        a_packed: a.1,
        b: b.0,
        rsb: b.1 as isize,
        csb: 1,
        c: c.0,
        rsc: c.1 as isize,
        epilogue: epi,
    };
    // SAFETY: the caller's contract; a null `par` runs on this thread.
    unsafe { nnefc_sgemm_parallel(&g, core::ptr::null(), scratch, 0) }
}

/// The parts (clamped to the rows) and the bands of one sample.
fn cuts(a: &BlockArgs) -> (usize, usize) {
    let parts = a.parts.clamp(1, a.oh);
    let per = (0..parts)
        .map(|p| ((p + 1) * a.oh / parts - p * a.oh / parts).div_ceil(a.band))
        .sum();
    (parts, per)
}

/// Sample and output rows `[o0, o1)` of band `u` (counted over samples, parts, bands).
fn unit(a: &BlockArgs, u: usize) -> (usize, usize, usize) {
    let (parts, per) = cuts(a);
    let (s, mut j) = (u / per, u % per);
    for p in 0..parts {
        let (p0, p1) = (p * a.oh / parts, (p + 1) * a.oh / parts);
        let nb = (p1 - p0).div_ceil(a.band);
        if j < nb {
            let o0 = p0 + j * a.band;
            return (s, o0, (o0 + a.band).min(p1));
        }
        j -= nb;
    }
    (s, a.oh, a.oh)
}

/// Bands `[lo, hi)` (see [`unit`]), with worker `worker`'s scratch.
///
/// # Safety
/// As for [`nnefc_inverted_residual`]; no other call writes these bands or this scratch.
unsafe fn bands(a: &BlockArgs, lo: usize, hi: usize, worker: usize) {
    let [_, d_off, g_off, _] = layout(a);
    // SAFETY: worker `worker`'s scratch, by the caller's contract.
    let base = unsafe { a.scratch.add(worker * a.scratch_stride) };
    let (e, d, gs) = unsafe {
        (
            base.cast::<f32>(),
            base.add(d_off).cast::<f32>(),
            base.add(g_off),
        )
    };
    let (h, w, ow) = (a.h, a.w, a.ow);
    let direct = !a.expand.is_null() && a.expand_packing == EXPAND_DIRECT;
    let [elo, ehi, dlo, dhi, lo_, hi_] = a.bounds;
    let epi = |bias: *const f32, act: usize, lo: f32, hi: f32, acc: bool| GemmEpilogue {
        bias,
        bias_kind: u32::from(!bias.is_null()),
        activation: act as u32,
        lo,
        hi,
        accumulate: u32::from(acc),
    };
    let e_epi = epi(a.expand_bias, a.expand_act, elo, ehi, false);
    let p_epi = epi(a.project_bias, a.act, lo_, hi_, !a.res.is_null());
    // Floats between the channels' rows in `e`.
    let e_sc = band_rows_in(a) * w;
    // (sample, p0, p1, q): input rows [p0, p1) of that sample are in `e`, row `r` of
    // channel `c` at `e + c·e_sc + (r − q)·w`. A band that keeps rows of the one before
    // keeps `q`, so they are already in place, and writes its new rows after them, over
    // the next channel's rows that no band reads again (a band's rows span at most
    // `e_sc`); a band that keeps none starts over at its own first row.
    let mut held: Option<(usize, usize, usize, usize)> = None;
    for u in lo..hi {
        let (s, o0, o1) = unit(a, u);
        if o1 <= o0 {
            continue;
        }
        // Input rows the band's windows read: [r0, r1), and the zero rows above r0.
        let top = (o0 * a.sh) as isize - a.pt as isize;
        let r0 = top.max(0) as usize;
        let r1 = ((top + reach(a, o1 - o0) as isize).max(0) as usize).min(h);
        let pt = (-top).max(0) as usize;
        let rows = r1.saturating_sub(r0);
        let x = a.x.wrapping_add(s * a.cin * a.xh * a.xw);
        let (mut first_new, mut q) = (r0, r0);
        if a.expand.is_null() {
            first_new = r1;
        } else if let Some((hn, p0, p1, hq)) = held
            && hn == s
            && p1 > r0
            && p0 <= r0
        {
            // Rows [r0, p1) were expanded for the band before, and stay where they are.
            (first_new, q) = (p1, hq);
        }
        // Channel `c`'s row `r0` of this band: `eb + c·e_sc`. (`r0 − q` is below `h`: the
        // buffer's slack.)
        // SAFETY: inside the band buffer (`layout`).
        let eb = unsafe { e.add((r0 - q) * w) };
        if r1 > first_new && direct {
            // Expanded rows [first_new, r1): the conv's output rows from the input row
            // their windows start at (zero rows above the input are the conv's padding).
            let top = (first_new * a.es) as isize - a.ept as isize;
            let skip = (top.max(0) as usize).min(a.xh);
            let cargs = ConvArgs {
                geo: DwArgs {
                    n: 1,
                    c: a.mid,
                    h: a.xh - skip,
                    w: a.xw,
                    oh: r1 - first_new,
                    ow: w,
                    kh: a.ek,
                    kw: a.ek,
                    sh: a.es,
                    sw: a.es,
                    dh: 1,
                    dw: 1,
                    pt: (-top).max(0) as usize,
                    pl: a.epl,
                    x: x.wrapping_add(skip * a.xw),
                    x_sn: 0,
                    x_sc: (a.xh * a.xw) as isize,
                    x_sh: a.xw as isize,
                    filter: a.expand,
                    bias: a.expand_bias,
                    bias_sc: 1,
                    res: core::ptr::null(),
                    // SAFETY: rows [first_new − r0, rows) of the band buffer's channels.
                    y: unsafe { eb.add((first_new - r0) * w) },
                    y_sn: 0,
                    y_sc: e_sc as isize,
                    y_sh: w as isize,
                    act: a.expand_act,
                    lo: elo,
                    hi: ehi,
                },
                cin: a.cin,
                filter_sn: 0,
                bias_sn: 0,
            };
            // SAFETY: the input's rows the windows read, the band buffer's rows; a null
            // `par` runs on this thread.
            unsafe { nnefc_conv(&cargs, core::ptr::null()) };
        } else if r1 > first_new {
            // SAFETY: rows [first_new, r1) of the input, into the band buffer's rows.
            unsafe {
                product(
                    (a.expand, a.expand_packing),
                    a.mid,
                    (r1 - first_new) * w,
                    a.cin,
                    (x.add(first_new * w), a.xh * a.xw),
                    (eb.add((first_new - r0) * w), e_sc),
                    &e_epi,
                    gs,
                )
            }
        }
        held = Some((s, r0, r1, q));
        // Without an expansion the depthwise conv reads the input's rows in place (`x` is
        // then `h`×`w`).
        let (dx, dx_sc) = if a.expand.is_null() {
            (x.wrapping_add(r0 * w), h * w)
        } else {
            (eb.cast_const(), e_sc)
        };
        let orows = o1 - o0;
        let dargs = DwArgs {
            n: 1,
            c: a.mid,
            h: rows,
            w,
            oh: orows,
            ow,
            kh: a.kh,
            kw: a.kw,
            sh: a.sh,
            sw: a.sw,
            dh: a.dh,
            dw: a.dw,
            pt,
            pl: a.pl,
            x: dx,
            x_sn: 0,
            x_sc: dx_sc as isize,
            x_sh: w as isize,
            filter: a.filter,
            bias: a.dw_bias,
            bias_sc: 1,
            res: core::ptr::null(),
            y: d,
            y_sn: 0,
            y_sc: (orows * ow) as isize,
            y_sh: ow as isize,
            act: a.dw_act,
            lo: dlo,
            hi: dhi,
        };
        // SAFETY: `e` holds `rows` rows of every expanded channel, `d` has room for the
        // band's output rows; a null `par` runs on this thread.
        unsafe {
            if a.expand.is_null() {
                nnefc_dwconv(&dargs, core::ptr::null())
            } else {
                // The band buffer was just written: no prefetching (same bits).
                crate::dwconv::in_cache(&dargs)
            }
        }
        let yo = s * a.cout * a.oh * ow + o0 * ow;
        // SAFETY: sample `s`'s output rows [o0, o1) of every channel.
        let y = unsafe { a.y.add(yo) };
        if !a.res.is_null() && !core::ptr::eq(a.res, a.y) {
            for c in 0..a.cout {
                // SAFETY: the residual is laid out as the output and does not overlap
                // it (or equals it, which the test above excludes).
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        a.res.add(yo + c * a.oh * ow),
                        y.add(c * a.oh * ow),
                        orows * ow,
                    )
                }
            }
        }
        // SAFETY: the band's depthwise rows into its output rows.
        unsafe {
            product(
                (a.project, a.project_packing),
                a.cout,
                orows * ow,
                a.mid,
                (d, orows * ow),
                (y, a.oh * ow),
                &p_epi,
                gs,
            )
        }
    }
}

/// Runs the inverted-residual block `args` describes, its bands split over `par`'s
/// workers (one contiguous range of bands each).
///
/// # Safety
/// `args` points to a valid [`BlockArgs`] whose pointers address buffers of the extents it
/// states; `y` overlaps no operand but `res` (which may equal it); the scratch holds
/// `scratch_stride` bytes (≥ [`block_scratch_bytes`], a multiple of 64) per worker of
/// `par`, 64-byte aligned, and `serial_scratch` [`block_serial_scratch_bytes`]; `par` is
/// null or a valid [`Parallel`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nnefc_inverted_residual(args: *const BlockArgs, par: *const Parallel) {
    // SAFETY: valid by the caller's contract.
    let a = unsafe { &*args };
    if a.n == 0 || a.oh == 0 || a.ow == 0 || a.band == 0 || a.h == 0 || a.kh == 0 || a.kw == 0 {
        return;
    }
    if !a.expand.is_null()
        && a.expand_packing == EXPAND_DIRECT
        && !crate::conv_supported(a.ek, a.ek, a.es, a.es, 1, 1)
    {
        return;
    }
    let units = a.n * cuts(a).1;
    let taps = if a.expand_packing == EXPAND_DIRECT {
        a.ek * a.ek
    } else {
        1
    };
    let macs = a.n * a.mid * (a.h * a.w * a.cin * taps + a.oh * a.ow * (a.kh * a.kw + a.cout));
    // SAFETY: `par` is null or valid.
    let workers = unsafe { parallel::workers(par) };
    let tasks = if macs >= PARALLEL_MIN_MACS {
        units.min(workers)
    } else {
        1
    };
    if tasks == 1
        && let Some(s) = serial(a)
    {
        // SAFETY: the one-thread scratch, on this thread.
        return unsafe { bands(&s, 0, a.n * cuts(&s).1, 0) };
    }
    // SAFETY: tasks run disjoint ranges of bands, each in its worker's scratch.
    unsafe { parallel::worker_ranges(par, a, units, tasks, bands) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dwconv::tests::Lcg;
    use crate::{pack_a, pack_a_lanes};

    /// One block's data and its layer-by-layer result through the runtime's own calls.
    struct Case {
        a: BlockArgs,
        x: Vec<f32>,
        we: Vec<f32>,
        wp: Vec<f32>,
        f: Vec<f32>,
        be: Vec<f32>,
        bd: Vec<f32>,
        bp: Vec<f32>,
        res: Option<Vec<f32>>,
    }

    fn act(v: f32, code: usize, lo: f32, hi: f32) -> f32 {
        match code {
            1 => v.max(0.0),
            2 => v.max(lo).min(hi),
            _ => v,
        }
    }

    impl Case {
        /// The definition, in f64 sums: expand, depthwise (zero padding), project.
        fn reference(&self) -> Vec<f32> {
            let a = &self.a;
            let b = &a.bounds;
            let mut y = vec![0f32; a.n * a.cout * a.oh * a.ow];
            for s in 0..a.n {
                let mut e = vec![0f32; a.mid * a.h * a.w];
                if a.expand.is_null() {
                    e.copy_from_slice(&self.x[s * a.cin * a.h * a.w..(s + 1) * a.cin * a.h * a.w]);
                }
                let direct = a.expand_packing == EXPAND_DIRECT;
                for m in (0..a.mid).filter(|_| !a.expand.is_null() && direct) {
                    for oy in 0..a.h {
                        for ox in 0..a.w {
                            let mut acc = 0f64;
                            for c in 0..a.cin {
                                for ky in 0..a.ek {
                                    for kx in 0..a.ek {
                                        let iy = (oy * a.es + ky) as isize - a.ept as isize;
                                        let ix = (ox * a.es + kx) as isize - a.epl as isize;
                                        if iy < 0
                                            || ix < 0
                                            || iy >= a.xh as isize
                                            || ix >= a.xw as isize
                                        {
                                            continue;
                                        }
                                        let wi = ((m * a.cin + c) * a.ek + ky) * a.ek + kx;
                                        let xi = ((s * a.cin + c) * a.xh + iy as usize) * a.xw
                                            + ix as usize;
                                        acc += f64::from(self.we[wi]) * f64::from(self.x[xi]);
                                    }
                                }
                            }
                            e[(m * a.h + oy) * a.w + ox] =
                                act(acc as f32 + self.be[m], a.expand_act, b[0], b[1]);
                        }
                    }
                }
                for m in (0..a.mid).filter(|_| !a.expand.is_null() && !direct) {
                    for p in 0..a.h * a.w {
                        let mut acc = 0f64;
                        for c in 0..a.cin {
                            acc += f64::from(self.we[m * a.cin + c])
                                * f64::from(self.x[(s * a.cin + c) * a.h * a.w + p]);
                        }
                        e[m * a.h * a.w + p] =
                            act(acc as f32 + self.be[m], a.expand_act, b[0], b[1]);
                    }
                }
                let mut d = vec![0f32; a.mid * a.oh * a.ow];
                for m in 0..a.mid {
                    for oy in 0..a.oh {
                        for ox in 0..a.ow {
                            let mut acc = 0f64;
                            for ky in 0..a.kh {
                                for kx in 0..a.kw {
                                    let iy = (oy * a.sh + ky * a.dh) as isize - a.pt as isize;
                                    let ix = (ox * a.sw + kx * a.dw) as isize - a.pl as isize;
                                    if iy < 0 || ix < 0 || iy >= a.h as isize || ix >= a.w as isize
                                    {
                                        continue;
                                    }
                                    acc += f64::from(self.f[(m * a.kh + ky) * a.kw + kx])
                                        * f64::from(e[(m * a.h + iy as usize) * a.w + ix as usize]);
                                }
                            }
                            d[(m * a.oh + oy) * a.ow + ox] =
                                act(acc as f32 + self.bd[m], a.dw_act, b[2], b[3]);
                        }
                    }
                }
                for o in 0..a.cout {
                    for p in 0..a.oh * a.ow {
                        let mut acc = 0f64;
                        for m in 0..a.mid {
                            acc += f64::from(self.wp[o * a.mid + m])
                                * f64::from(d[m * a.oh * a.ow + p]);
                        }
                        let at = (s * a.cout + o) * a.oh * a.ow + p;
                        let r = self.res.as_ref().map_or(0.0, |r| r[at]);
                        y[at] = act(acc as f32 + self.bp[o] + r, a.act, b[4], b[5]);
                    }
                }
            }
            y
        }
    }

    /// Random blocks (odd channel counts, 3×3 and 5×5 windows, strides 1 and 2, dilation,
    /// paddings, bands from one row to more than the map, one to four parts, blocks without
    /// an expansion, one-thread
    /// bands of their own for 3×3 windows, residuals apart and in place, both packings):
    /// the banded call matches the definition, and gives the same bits serially and on a
    /// pool of three workers.
    #[test]
    fn inverted_residual_matches_the_definition() {
        let mut r = Lcg(29);
        let pool = crate::ThreadPool::new(3).expect("pool");
        let mut direct_cases = 0;
        for case in 0..90 {
            let k = [3, 5][r.below(2)];
            let (sh, dil) = (1 + r.below(2), if case % 7 == 3 { 2 } else { 1 });
            // Rows of at least 5 columns: see the module doc.
            let (h, w) = (1 + r.below(20), 5 + r.below(36));
            let (pt, pl, pb, pr) = (r.below(k), r.below(k), r.below(k), r.below(k));
            let span = (k - 1) * dil + 1;
            let (Some(eh), Some(ew)) = (
                (h + pt + pb).checked_sub(span),
                (w + pl + pr).checked_sub(span),
            ) else {
                continue;
            };
            let (oh, ow) = (eh / sh + 1, ew / sh + 1);
            if ow < 5 {
                continue;
            }
            let (n, cin, mid, cout) = (
                1 + r.below(2),
                1 + r.below(20),
                1 + r.below(70),
                1 + r.below(40),
            );
            // Every fifth case has no expansion: the depthwise conv reads the input. Every
            // fourth of the others expands by a direct conv of 1–4 channels, from an input
            // of any extent (taps past it read zero).
            let no_expand = case % 5 == 4;
            let direct = !no_expand && case % 4 == 1;
            let mid = if no_expand { cin } else { mid };
            let (cin, ek, es) = if direct {
                (1 + r.below(4), [3, 5, 7][r.below(3)], 1 + r.below(2))
            } else {
                (cin, 1, 1)
            };
            let (ept, epl) = if direct {
                (r.below(ek), r.below(ek))
            } else {
                (0, 0)
            };
            // The input whose conv output is exactly `h`×`w` with zero rows below and
            // columns right fewer than the window's side (as a graph's shapes give).
            let mut extent = |out: usize, front: usize| {
                let back = r.below(ek);
                let slack = r.below(es);
                ((out - 1) * es + ek + slack).checked_sub(front + back)
            };
            let (Some(xh), Some(xw)) = (extent(h, ept), extent(w, epl)) else {
                continue;
            };
            if xh == 0 || xw == 0 {
                continue;
            }
            let band = 1 + r.below(oh + 2);
            let parts = 1 + r.below(4);
            let mut take = |len: usize| -> Vec<f32> { (0..len).map(|_| r.next()).collect() };
            let (x, we, wp, f) = (
                take(n * cin * xh * xw),
                take(mid * cin * ek * ek),
                take(cout * mid),
                take(mid * k * k),
            );
            let (be, bd, bp) = (take(mid), take(mid), take(cout));
            let res = (case % 3 != 0).then(|| take(n * cout * oh * ow));
            let in_place = case % 3 == 2;
            let lanes = case % 2 == 1;
            let pack = |m: usize, kk: usize, a: &[f32]| {
                if lanes {
                    pack_a_lanes(m, kk, a, kk, 1)
                } else {
                    pack_a(m, kk, a, kk, 1)
                }
            };
            let pe = if direct {
                crate::pack_conv_filter(mid, cin, ek, ek, &we).expect("filter")
            } else {
                pack(mid, cin, &we)
            };
            let pp = pack(cout, mid, &wp);
            let mut c = Case {
                a: BlockArgs {
                    n,
                    cin,
                    mid,
                    cout,
                    h,
                    w,
                    oh,
                    ow,
                    kh: k,
                    kw: k,
                    sh,
                    sw: sh,
                    dh: dil,
                    dw: dil,
                    pt,
                    pl,
                    band,
                    parts,
                    x: core::ptr::null(),
                    expand: if no_expand {
                        core::ptr::null()
                    } else {
                        pe.as_ptr()
                    },
                    expand_packing: if direct {
                        EXPAND_DIRECT
                    } else {
                        1 + usize::from(lanes)
                    },
                    expand_bias: core::ptr::null(),
                    expand_act: [0, 1, 2][case % 3],
                    filter: core::ptr::null(),
                    dw_bias: core::ptr::null(),
                    dw_act: [2, 0, 1][case % 3],
                    project: pp.as_ptr(),
                    project_packing: 1 + usize::from(lanes),
                    project_bias: core::ptr::null(),
                    res: core::ptr::null(),
                    y: core::ptr::null_mut(),
                    act: [1, 2, 0][case % 3],
                    scratch: core::ptr::null_mut(),
                    scratch_stride: 0,
                    serial_band: if k == 3 {
                        [0, oh, 1 + r.below(oh)][case % 3]
                    } else {
                        0
                    },
                    serial_scratch: core::ptr::null_mut(),
                    xh,
                    xw,
                    ek,
                    es,
                    ept,
                    epl,
                    bounds: [-0.5, 0.7, 0.0, 6.0, -0.25, 0.25],
                },
                x,
                we,
                wp,
                f,
                be,
                bd,
                bp,
                res,
            };
            let want = c.reference();
            let stride = align64(block_scratch_bytes(&c.a));
            let mut scratch = vec![0u64; stride * 3 / 8 + 8];
            let mut one = vec![0u64; block_serial_scratch_bytes(&c.a) / 8 + 8];
            c.a.serial_scratch = one
                .as_mut_ptr()
                .cast::<u8>()
                .wrapping_add(one.as_mut_ptr().cast::<u8>().align_offset(64));
            let base = scratch.as_mut_ptr().cast::<u8>();
            let base = base.wrapping_add(base.align_offset(64));
            c.a.x = c.x.as_ptr();
            c.a.filter = c.f.as_ptr();
            c.a.expand_bias = c.be.as_ptr();
            c.a.dw_bias = c.bd.as_ptr();
            c.a.project_bias = c.bp.as_ptr();
            c.a.scratch = base;
            c.a.scratch_stride = stride;
            let run = |a: &BlockArgs, par: *const Parallel| -> Vec<f32> {
                let mut y = match (&c.res, in_place) {
                    (Some(r), true) => r.clone(),
                    _ => vec![f32::NAN; want.len()],
                };
                let mut a = *a;
                a.y = y.as_mut_ptr();
                a.res = match (&c.res, in_place) {
                    (Some(_), true) => a.y,
                    (Some(r), false) => r.as_ptr(),
                    (None, _) => core::ptr::null(),
                };
                // SAFETY: every operand holds the extents `a` states; the scratch holds
                // three workers' `stride` bytes.
                unsafe { nnefc_inverted_residual(&a, par) };
                y
            };
            let serial = run(&c.a, core::ptr::null());
            let p = pool.parallel();
            let pooled = run(&c.a, &p);
            let scale = want.iter().fold(1f32, |m, v| m.max(v.abs()));
            for (i, (g, e)) in serial.iter().zip(&want).enumerate() {
                assert!(
                    (g - e).abs() <= 1e-4 * scale,
                    "case {case} ({n}×{cin}→{mid}→{cout}, {h}×{w}, k {k} s {sh} d {dil}, band {band}, {parts} parts): \
                     element {i}: {g} against {e}"
                );
            }
            assert!(
                serial
                    .iter()
                    .zip(&pooled)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "case {case}: pooled run differs from the serial one"
            );
            if direct {
                // The bands' conv rows are the bits of the whole layer: `nnefc_conv` over
                // the map, then the block without an expansion over its output.
                let mut e = vec![f32::NAN; n * mid * h * w];
                let conv = ConvArgs {
                    geo: DwArgs {
                        n,
                        c: mid,
                        h: xh,
                        w: xw,
                        oh: h,
                        ow: w,
                        kh: ek,
                        kw: ek,
                        sh: es,
                        sw: es,
                        dh: 1,
                        dw: 1,
                        pt: ept,
                        pl: epl,
                        x: c.x.as_ptr(),
                        x_sn: (cin * xh * xw) as isize,
                        x_sc: (xh * xw) as isize,
                        x_sh: xw as isize,
                        filter: pe.as_ptr(),
                        bias: c.be.as_ptr(),
                        bias_sc: 1,
                        res: core::ptr::null(),
                        y: e.as_mut_ptr(),
                        y_sn: (mid * h * w) as isize,
                        y_sc: (h * w) as isize,
                        y_sh: w as isize,
                        act: c.a.expand_act,
                        lo: c.a.bounds[0],
                        hi: c.a.bounds[1],
                    },
                    cin,
                    filter_sn: 0,
                    bias_sn: 0,
                };
                // SAFETY: the input, filter and bias hold the extents stated; `e` holds
                // the output.
                unsafe { nnefc_conv(&conv, core::ptr::null()) };
                let mut rest = c.a;
                rest.cin = mid;
                (rest.expand, rest.expand_packing) = (core::ptr::null(), 1);
                rest.x = e.as_ptr();
                (rest.xh, rest.xw, rest.ek, rest.es, rest.ept, rest.epl) = (h, w, 1, 1, 0, 0);
                let layered = run(&rest, core::ptr::null());
                assert!(
                    serial
                        .iter()
                        .zip(&layered)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "case {case}: the direct expansion's bands differ from the whole conv"
                );
                direct_cases += 1;
            }
        }
        assert!(
            direct_cases >= 8,
            "only {direct_cases} direct-expansion cases ran"
        );
    }
}
