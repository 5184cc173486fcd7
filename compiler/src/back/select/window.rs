//! Sliding-window ops (spec §3.5, §5) as loop nests: `box`, `max_pool`, `argmax_pool`,
//! `sample`, and the shared geometry the convolutions (`select::conv`) use.
//!
//! Every forward window op reads, for output position `y` and tap `t` of each dim, input
//! coordinate `x = y·s + t·d − p` (§5.2). Borders are handled once, up front: the input
//! is copied into a scratch buffer `P` that already holds what every tap reads —
//! the fill value (0, or −∞ for `max_pool` with `ignore`) for constant/ignore borders, the
//! mirrored or clamped input for replicate/reflect/reflect-even (an index table per dim,
//! read through [`Indirect`]). After that the window op is purely affine in `P` and needs
//! no bounds tests. When no tap leaves the input, `P` is the input itself (no copy).
//!
//! Schedules: windows of at most [`UNROLL_TAPS`] taps are unrolled into the body (one
//! access per tap), so the innermost loop is the output width and vectorizes (f32x4) when
//! the stride along it is 1; bigger windows (global pools) become reduction loops whose
//! innermost loop is the window width. `box` with `ignore` divides by the in-bounds count
//! through per-dim reciprocal tables (the count is separable: a product over dims).
//!
//! Conventions follow `ir::interp` (the oracle): `max_pool` counts outside taps as 0 with
//! `constant` and skips them with `ignore`; `argmax_pool` reports the row-major tap index
//! of the first maximum; `sample` reads 0 at an outside tap. Differences: an index of
//! `sample` outside the window is clamped into it (the interpreter reports an error).
//! Not here: transposed ops' scatter (they are rewritten as gathers in `select::conv`).

use super::{Lowering, strides};
use crate::back::CodegenError;
use crate::back::kernel::{
    Activation, BufId, Expr, ExprId, Indirect, Lit, ReduceKind, Reduction, Step, WindowCall,
    WindowOp,
};
use crate::ir::infer::resolved_window_padding;
use crate::ir::{BinaryOp, Border, DType, ValueId, WindowAttrs};

/// Windows with at most this many taps are unrolled into the kernel body.
pub(super) const UNROLL_TAPS: usize = 32;

/// A strided view of a buffer: element `(i_0, …)` is `buf[offset + Σ strides[d]·i_d]`.
#[derive(Clone, Debug)]
pub(super) struct View {
    pub buf: BufId,
    pub offset: i64,
    pub strides: Vec<i64>,
}

/// Geometry of a forward window op over all dims of its input.
#[derive(Clone, Debug)]
pub(super) struct Geometry {
    pub input: Vec<usize>,
    pub output: Vec<usize>,
    pub size: Vec<usize>,
    pub stride: Vec<usize>,
    pub dilation: Vec<usize>,
    /// Front padding per dim.
    pub front: Vec<usize>,
}

fn ones_or(list: &[usize], rank: usize, what: &str) -> Result<Vec<usize>, CodegenError> {
    if list.is_empty() {
        return Ok(vec![1; rank]);
    }
    if list.len() != rank {
        return Err(CodegenError::Invalid(format!(
            "{what} has {} items, expected {rank}",
            list.len()
        )));
    }
    Ok(list.to_vec())
}

impl Geometry {
    /// Geometry from per-dim attributes; `output` is the op's result extents (from the graph).
    pub fn new(
        input: &[usize],
        output: &[usize],
        size: &[usize],
        stride: &[usize],
        dilation: &[usize],
        pad: &[(usize, usize)],
    ) -> Result<Geometry, CodegenError> {
        let rank = input.len();
        if size.len() != rank || output.len() != rank || pad.len() != rank {
            return Err(CodegenError::Invalid(format!(
                "window of {} dims, padding of {}, output of {} dims over an input of {rank} dims",
                size.len(),
                pad.len(),
                output.len()
            )));
        }
        let stride = ones_or(stride, rank, "stride")?;
        let dilation = ones_or(dilation, rank, "dilation")?;
        if stride.contains(&0) || dilation.contains(&0) {
            return Err(CodegenError::Invalid(
                "stride and dilation must be positive".into(),
            ));
        }
        Ok(Geometry {
            input: input.to_vec(),
            output: output.to_vec(),
            size: size.to_vec(),
            stride,
            dilation,
            front: pad.iter().map(|p| p.0).collect(),
        })
    }

    pub(super) fn from_window(
        w: &WindowAttrs,
        input: &[usize],
        output: &[usize],
    ) -> Result<Geometry, CodegenError> {
        let pad = resolved_window_padding(w, input);
        Geometry::new(input, output, &w.size, &w.stride, &w.dilation, &pad)
    }

    pub fn volume(&self) -> usize {
        self.size.iter().product()
    }
    pub fn empty(&self) -> bool {
        self.output.contains(&0)
    }

    /// Extent of `P` per dim: one past the farthest coordinate (in padded units) a tap reads.
    fn reach(&self) -> Vec<usize> {
        (0..self.input.len())
            .map(|d| {
                (self.output[d].saturating_sub(1)) * self.stride[d]
                    + (self.size[d].saturating_sub(1)) * self.dilation[d]
                    + 1
            })
            .collect()
    }

    /// Number of in-bounds taps of output `y` along dim `d`.
    pub fn count(&self, d: usize, y: usize) -> usize {
        (0..self.size[d])
            .filter(|&t| {
                let x = (y * self.stride[d] + t * self.dilation[d]) as i64 - self.front[d] as i64;
                (0..self.input[d] as i64).contains(&x)
            })
            .count()
    }
}

/// Where padded coordinate `x` (already shifted by the front padding) reads in an extent
/// of `n` under a mapping border (`ir::infer::border_source`, the interpreter's rule).
fn border_index(x: i64, n: usize, border: Border) -> Result<i64, CodegenError> {
    match crate::ir::infer::border_source(x, n, border) {
        Ok(Some(i)) => Ok(i as i64),
        Ok(None) => Err(CodegenError::Internal(
            "border_index on a filling border".into(),
        )),
        Err(e) => Err(CodegenError::Invalid(e.message)),
    }
}

/// An i32 const table.
pub(super) fn i32_table(lw: &mut Lowering<'_>, vals: &[i32]) -> BufId {
    let bytes = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    lw.const_buf(bytes, DType::I32, vals.len())
}
/// An f32 const table.
pub(super) fn f32_table(lw: &mut Lowering<'_>, vals: &[f32]) -> BufId {
    let bytes = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    lw.const_buf(bytes, DType::F32, vals.len())
}

/// The view every tap of `geo` reads without bounds tests: the input itself when no tap
/// leaves it, else a scratch copy of extents `reach` holding the border values (`fill`
/// for constant/ignore). Coordinates of the view are padded coordinates.
pub(super) fn padded(
    lw: &mut Lowering<'_>,
    src: View,
    geo: &Geometry,
    border: Border,
    fill: f32,
) -> Result<View, CodegenError> {
    let reach = geo.reach();
    let rank = geo.input.len();
    let inside = (0..rank).all(|d| geo.front[d] == 0 && reach[d] <= geo.input[d]);
    if inside {
        return Ok(src);
    }
    let len: usize = reach.iter().product();
    let dst = lw.scratch(DType::F32, len);
    let dst_st = strides(&reach);
    match border {
        Border::Constant | Border::Ignore => {
            // Interior: padded coordinate front+x for x < input, clipped to reach.
            let region: Vec<usize> = (0..rank)
                .map(|d| geo.input[d].min(reach[d].saturating_sub(geo.front[d])))
                .collect();
            if region.contains(&0) {
                let mut k = lw.kernel("pad_fill", &[len]);
                k.push(Expr::Lit(Lit::F32(fill)), DType::F32);
                k.set_store(dst, 0, vec![1]);
                lw.push(k);
                return Ok(View {
                    buf: dst,
                    offset: 0,
                    strides: dst_st,
                });
            }
            fill_border(lw, dst, &reach, &geo.front, &region, fill);
            let mut k = lw.kernel("pad_copy", &region);
            let a = k.access(src.buf, src.offset, src.strides.clone());
            k.load(a, DType::F32);
            let off: i64 = (0..rank).map(|d| geo.front[d] as i64 * dst_st[d]).sum();
            k.set_store(dst, off, dst_st.clone());
            lw.push(k);
        }
        _ => {
            let mut k = lw.kernel("pad_border", &reach);
            let mut affine = vec![0i64; rank];
            let mut tables = Vec::new();
            for d in 0..rank {
                if geo.front[d] == 0 && reach[d] <= geo.input[d] {
                    affine[d] = src.strides[d];
                    continue;
                }
                let map: Vec<i32> = (0..reach[d])
                    .map(|j| {
                        border_index(j as i64 - geo.front[d] as i64, geo.input[d], border)
                            .map(|v| v as i32)
                    })
                    .collect::<Result<_, _>>()?;
                let t = i32_table(lw, &map);
                let mut st = vec![0i64; rank];
                st[d] = 1;
                let ta = k.access(t, 0, st);
                tables.push(Indirect {
                    index: ta,
                    scale: src.strides[d],
                    bound: geo.input[d],
                });
            }
            let a = k.access(src.buf, src.offset, affine);
            k.accesses[a.0 as usize].indirect = tables;
            k.load(a, DType::F32);
            k.set_store(dst, 0, dst_st.clone());
            lw.push(k);
        }
    }
    Ok(View {
        buf: dst,
        offset: 0,
        strides: dst_st,
    })
}

/// Fills every element of the `reach`-shaped buffer `dst` outside the box
/// `[front, front + region)` with `fill` (the box itself is written by the caller).
/// Slab `d` covers the elements whose first coordinate outside the box is `d`: inside
/// the box along dims `< d`, before or after it along `d`, anything along dims `> d`.
/// Writing only the border instead of the whole buffer saves a full pass over it.
fn fill_border(
    lw: &mut Lowering<'_>,
    dst: BufId,
    reach: &[usize],
    front: &[usize],
    region: &[usize],
    fill: f32,
) {
    let rank = reach.len();
    let st = strides(reach);
    for d in 0..rank {
        let after = front[d] + region[d];
        for (start, width) in [(0, front[d]), (after, reach[d].saturating_sub(after))] {
            if width == 0 {
                continue;
            }
            let mut ext: Vec<usize> = region[..d].to_vec();
            ext.push(width);
            ext.extend_from_slice(&reach[d + 1..]);
            let off: i64 =
                (0..d).map(|e| front[e] as i64 * st[e]).sum::<i64>() + start as i64 * st[d];
            let mut k = lw.kernel("pad_fill", &ext);
            k.push(Expr::Lit(Lit::F32(fill)), DType::F32);
            k.set_store(dst, off, st.clone());
            lw.push(k);
        }
    }
}

/// Row-major multi-index of tap `t` of a window of `size`.
fn tap_index(mut t: usize, size: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; size.len()];
    for d in (0..size.len()).rev() {
        let e = size[d].max(1);
        idx[d] = t % e;
        t /= e;
    }
    idx
}

/// Element offset in `p` of tap `t` relative to the window origin.
fn tap_offset(p: &View, geo: &Geometry, t: usize) -> i64 {
    tap_index(t, &geo.size)
        .iter()
        .enumerate()
        .map(|(d, &i)| (i * geo.dilation[d]) as i64 * p.strides[d])
        .sum()
}

/// How a window's taps combine.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Combine {
    Sum,
    Max,
}

/// `out[y] = post(combine_t p[y·s + t·d])`, `post` multiplying by `scale` (a literal or,
/// with `tables`, a product of per-dim f32 tables indexed by the output coordinate).
fn window_combine(
    lw: &mut Lowering<'_>,
    name: &str,
    p: &View,
    geo: &Geometry,
    combine: Combine,
    scale: Option<f32>,
    tables: &[(usize, BufId)],
    out: BufId,
) -> Result<(), CodegenError> {
    let rank = geo.input.len();
    let ost = strides(&geo.output);
    let pst: Vec<i64> = (0..rank)
        .map(|d| geo.stride[d] as i64 * p.strides[d])
        .collect();
    let vol = geo.volume();
    let f = DType::F32;
    let bop = if combine == Combine::Sum {
        BinaryOp::Add
    } else {
        BinaryOp::Max
    };
    let post = |k: &mut crate::back::kernel::Kernel, mut v: ExprId, outer: usize| {
        if let Some(s) = scale {
            let c = k.push(Expr::Lit(Lit::F32(s)), f);
            v = k.push(Expr::Binary(BinaryOp::Mul, v, c), f);
        }
        for &(d, t) in tables {
            let mut st = vec![0i64; outer];
            st[d] = 1;
            let a = k.access(t, 0, st);
            let c = k.load(a, f);
            v = k.push(Expr::Binary(BinaryOp::Mul, v, c), f);
        }
        v
    };
    if vol == 0 {
        let mut k = lw.kernel(name, &geo.output);
        let init = if combine == Combine::Sum {
            0.0
        } else {
            f32::NEG_INFINITY
        };
        k.push(Expr::Lit(Lit::F32(init)), f);
        k.set_store(out, 0, ost);
        lw.push(k);
        return Ok(());
    }
    if vol <= UNROLL_TAPS {
        let mut k = lw.kernel(name, &geo.output);
        let mut acc: Option<ExprId> = None;
        for t in 0..vol {
            let a = k.access(p.buf, p.offset + tap_offset(p, geo, t), pst.clone());
            let v = k.load(a, f);
            acc = Some(match acc {
                None => v,
                Some(x) => k.push(Expr::Binary(bop, x, v), f),
            });
        }
        let v = acc.ok_or_else(|| CodegenError::Internal("window without taps".into()))?;
        post(&mut k, v, rank);
        k.set_store(out, 0, ost);
        lw.push(k);
        return Ok(());
    }
    // Reduction over the window dims (innermost).
    let mut ext = geo.output.clone();
    ext.extend_from_slice(&geo.size);
    let mut k = lw.kernel(name, &ext);
    let mut st = pst.clone();
    st.extend((0..rank).map(|d| geo.dilation[d] as i64 * p.strides[d]));
    let a = k.access(p.buf, p.offset, st);
    k.load(a, f);
    let kind = if combine == Combine::Sum {
        ReduceKind::Sum
    } else {
        ReduceKind::Max
    };
    let mut fin = crate::back::kernel::Kernel::new("fin", &ext);
    // The finalizer's loads refer to accesses of `k` (it runs in `k`'s loop nest).
    let mut v = fin.push(Expr::Acc, f);
    if let Some(s) = scale {
        let c = fin.push(Expr::Lit(Lit::F32(s)), f);
        v = fin.push(Expr::Binary(BinaryOp::Mul, v, c), f);
    }
    for &(d, t) in tables {
        let mut st = vec![0i64; 2 * rank];
        st[d] = 1;
        let ta = k.access(t, 0, st);
        let c = fin.push(Expr::Load(ta), f);
        v = fin.push(Expr::Binary(BinaryOp::Mul, v, c), f);
    }
    let _ = v;
    k.reduction = Some(Reduction {
        kind,
        first_loop: rank,
        finalize: fin.body,
    });
    let mut sst = ost.clone();
    sst.extend(std::iter::repeat_n(0, rank));
    k.set_store(out, 0, sst);
    lw.push(k);
    Ok(())
}

/// A plain window sum of `p` (no normalization).
pub(super) fn window_sum(
    lw: &mut Lowering<'_>,
    name: &str,
    p: &View,
    geo: &Geometry,
    out: BufId,
) -> Result<(), CodegenError> {
    window_combine(lw, name, p, geo, Combine::Sum, None, &[], out)
}

fn single(ins: &[ValueId], outs: &[ValueId], op: &str) -> Result<(ValueId, ValueId), CodegenError> {
    match (ins.first(), outs.first()) {
        (Some(&i), Some(&o)) => Ok((i, o)),
        _ => Err(CodegenError::Invalid(format!(
            "`{op}` needs an input and an output"
        ))),
    }
}

fn f32_only(lw: &Lowering<'_>, v: ValueId, op: &str) -> Result<(), CodegenError> {
    if lw.dtype(v)? != DType::F32 {
        return Err(CodegenError::Unsupported(format!(
            "`{op}` on {} tensors",
            lw.dtype(v)?
        )));
    }
    Ok(())
}

/// The input view of value `v` (row-major).
pub(super) fn value_view(lw: &mut Lowering<'_>, v: ValueId) -> Result<View, CodegenError> {
    let shape = lw.shape(v)?;
    Ok(View {
        buf: lw.buf(v)?,
        offset: 0,
        strides: strides(&shape),
    })
}

/// `box` (and `avg_pool`): window sums, normalized by the window volume or, with
/// `ignore`, by the in-bounds count.
pub(super) fn box_filter(
    lw: &mut Lowering<'_>,
    w: &WindowAttrs,
    normalize: bool,
    ins: &[ValueId],
    outs: &[ValueId],
) -> Result<(), CodegenError> {
    let (x, y) = single(ins, outs, "box")?;
    f32_only(lw, x, "box")?;
    let geo = Geometry::from_window(w, &lw.shape(x)?, &lw.shape(y)?)?;
    if geo.empty() {
        return Ok(());
    }
    let src = value_view(lw, x)?;
    let p = padded(lw, src, &geo, w.border, 0.0)?;
    let out = lw.buf(y)?;
    let mut tables = Vec::new();
    let mut scale = None;
    if normalize {
        if w.border == Border::Ignore {
            for d in 0..geo.input.len() {
                let rc: Vec<f32> = (0..geo.output[d])
                    .map(|y| match geo.count(d, y) {
                        0 => 0.0,
                        c => 1.0 / c as f32,
                    })
                    .collect();
                if rc.iter().all(|&v| v == 1.0) {
                    continue;
                }
                tables.push((d, f32_table(lw, &rc)));
            }
        } else if geo.volume() > 1 {
            scale = Some(1.0 / geo.volume() as f32);
        }
    }
    window_combine(lw, "box", &p, &geo, Combine::Sum, scale, &tables, out)
}

/// The geometry and the padded input of a maximum over windows (`max_pool`,
/// `argmax_pool`): outside taps read 0 with `constant` and −∞ (never the maximum) with
/// `ignore`. `None` when the output is empty.
fn max_window_input(
    lw: &mut Lowering<'_>,
    w: &WindowAttrs,
    x: ValueId,
    y: ValueId,
    op: &str,
) -> Result<Option<(Geometry, View)>, CodegenError> {
    f32_only(lw, x, op)?;
    let geo = Geometry::from_window(w, &lw.shape(x)?, &lw.shape(y)?)?;
    if geo.empty() {
        return Ok(None);
    }
    let src = value_view(lw, x)?;
    let fill = if w.border == Border::Ignore {
        f32::NEG_INFINITY
    } else {
        0.0
    };
    let p = padded(lw, src, &geo, w.border, fill)?;
    Ok(Some((geo, p)))
}

/// `max_pool`: window maximum (outside taps read 0 with `constant`, are skipped with `ignore`).
pub(super) fn max_pool(
    lw: &mut Lowering<'_>,
    w: &WindowAttrs,
    ins: &[ValueId],
    outs: &[ValueId],
) -> Result<(), CodegenError> {
    let (x, y) = single(ins, outs, "max_pool")?;
    if w.border == Border::Ignore {
        f32_only(lw, x, "max_pool")?;
        let geo = Geometry::from_window(w, &lw.shape(x)?, &lw.shape(y)?)?;
        let src = value_view(lw, x)?;
        let out = lw.buf(y)?;
        if !geo.empty()
            && (max_pool_call(lw, &src, &geo, out)? || max_pool_regions(lw, &src, &geo, out)?)
        {
            return Ok(());
        }
    }
    let Some((geo, p)) = max_window_input(lw, w, x, y, "max_pool")? else {
        return Ok(());
    };
    let out = lw.buf(y)?;
    window_combine(lw, "max_pool", &p, &geo, Combine::Max, None, &[], out)
}

/// Whether the runtime's window maximum (`nnefc_maxpool`, and `nnefc_conv_pool` after a
/// conv) takes this 2-D `max_pool` geometry: 3×3 windows with equal strides of 1 or 2 and
/// no dilation over NCHW planes, every window keeping a tap inside the input.
pub(super) fn runtime_max_pool(geo: &Geometry) -> bool {
    let plain = |d: usize| {
        geo.size[d] == 1
            && geo.stride[d] == 1
            && geo.dilation[d] == 1
            && geo.front[d] == 0
            && geo.output[d] == geo.input[d]
    };
    geo.input.len() == 4
        && plain(0)
        && plain(1)
        && geo.size[2..] == [3, 3]
        && geo.dilation[2..] == [1, 1]
        && geo.stride[2] == geo.stride[3]
        && (geo.stride[2] == 1 || geo.stride[2] == 2)
        && (2..4).all(|d| {
            tap_runs(
                geo.output[d],
                geo.input[d],
                3,
                geo.stride[d],
                1,
                geo.front[d],
            )
            .iter()
            .all(|r| !r.2.is_empty())
        })
}

/// 2-D `max_pool` with the `ignore` border as one call of the runtime's vector kernel
/// (`nnefc_maxpool`, [`Step::Window`] with [`WindowOp::Max`]) when the target has it:
/// 3×3 windows with equal strides of 1 or 2 and no dilation over NCHW rows, every window
/// keeping a tap inside the input. Returns `false` (emitting nothing) otherwise. Narrow
/// rows take the call too: on squeezenet's last pool (13-wide rows) the kernel's strips
/// ran at 0.018 ms against the loop nests' 0.048.
fn max_pool_call(
    lw: &mut Lowering<'_>,
    src: &View,
    geo: &Geometry,
    out: BufId,
) -> Result<bool, CodegenError> {
    if !(lw.runtime_windows && runtime_max_pool(geo) && src.strides[3] == 1) {
        return Ok(false);
    }
    let ost = strides(&geo.output);
    let (i, o, s) = (&geo.input, &geo.output, geo.stride[2]);
    lw.prog.steps.push(Step::Window(WindowCall {
        dims: [
            i[0],
            i[1],
            i[2],
            i[3],
            o[2],
            o[3],
            3,
            3,
            s,
            s,
            1,
            1,
            geo.front[2],
            geo.front[3],
        ],
        x: (
            src.buf,
            src.offset,
            [src.strides[0], src.strides[1], src.strides[2]],
        ),
        op: WindowOp::Max,
        residual: None,
        y: (out, [ost[0], ost[1], ost[2]]),
        activation: Activation::None,
    }));
    Ok(true)
}

/// Outputs along one dim whose windows read the same in-bounds taps: (first output,
/// count, taps `t < size` with `o·stride + t·dilation − front` inside `[0, input)`).
pub(super) type TapRun = (usize, usize, Vec<usize>);

/// The outputs `0..outputs` along one dim grouped into [`TapRun`]s, in order (3×3
/// stride 1 pad 1: the first output, the interior, the last). What splitting a padded
/// window op into regions without a padded copy starts from.
pub(super) fn tap_runs(
    outputs: usize,
    input: usize,
    size: usize,
    stride: usize,
    dilation: usize,
    front: usize,
) -> Vec<TapRun> {
    let mut runs: Vec<TapRun> = Vec::new();
    for o in 0..outputs {
        let valid: Vec<usize> = (0..size)
            .filter(|&t| {
                let x = (o * stride + t * dilation) as i64 - front as i64;
                (0..input as i64).contains(&x)
            })
            .collect();
        match runs.last_mut() {
            Some(last) if last.2 == valid => last.1 += 1,
            _ => runs.push((o, 1, valid)),
        }
    }
    runs
}

/// Most kernels [`max_pool_regions`] splits a pool into.
const POOL_MAX_REGIONS: usize = 16;

/// `max_pool` with the `ignore` border over padding, without the padded copy (a full
/// pass over the input): along each dim the outputs are grouped into runs whose windows
/// keep the same in-bounds taps (3×3 stride 2 pad 1: the first output, then the rest),
/// and each combination of runs is one kernel reading the input directly with only its
/// in-bounds taps, which is exactly what `ignore` means. Returns `false` (emitting
/// nothing) when no padding is read, when a window lies wholly in the padding, or when it
/// would take more than [`POOL_MAX_REGIONS`] kernels or [`UNROLL_TAPS`] taps.
fn max_pool_regions(
    lw: &mut Lowering<'_>,
    src: &View,
    geo: &Geometry,
    out: BufId,
) -> Result<bool, CodegenError> {
    let rank = geo.input.len();
    let reach = geo.reach();
    let inside = (0..rank).all(|d| geo.front[d] == 0 && reach[d] <= geo.input[d]);
    if inside || geo.volume() > UNROLL_TAPS {
        return Ok(false);
    }
    let runs: Vec<Vec<TapRun>> = (0..rank)
        .map(|d| {
            tap_runs(
                geo.output[d],
                geo.input[d],
                geo.size[d],
                geo.stride[d],
                geo.dilation[d],
                geo.front[d],
            )
        })
        .collect();
    if runs.iter().flatten().any(|r| r.2.is_empty()) {
        return Ok(false);
    }
    if runs.iter().map(Vec::len).product::<usize>() > POOL_MAX_REGIONS {
        return Ok(false);
    }
    let ost = strides(&geo.output);
    let pst: Vec<i64> = (0..rank)
        .map(|d| geo.stride[d] as i64 * src.strides[d])
        .collect();
    // Odometer over the runs of every dim, then over the in-bounds taps of a region.
    let next = |idx: &mut [usize], len: &dyn Fn(usize) -> usize| -> bool {
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < len(d) {
                return true;
            }
            idx[d] = 0;
        }
        false
    };
    let mut ri = vec![0usize; rank];
    loop {
        let region: Vec<&TapRun> = (0..rank).map(|d| &runs[d][ri[d]]).collect();
        let ext: Vec<usize> = region.iter().map(|r| r.1).collect();
        let mut k = lw.kernel("max_pool", &ext);
        let mut acc: Option<ExprId> = None;
        let mut ti = vec![0usize; rank];
        loop {
            let off: i64 = (0..rank)
                .map(|d| {
                    let x = (region[d].0 * geo.stride[d] + region[d].2[ti[d]] * geo.dilation[d])
                        as i64
                        - geo.front[d] as i64;
                    x * src.strides[d]
                })
                .sum();
            let a = k.access(src.buf, src.offset + off, pst.clone());
            let v = k.load(a, DType::F32);
            acc = Some(match acc {
                None => v,
                Some(m) => k.push(Expr::Binary(BinaryOp::Max, m, v), DType::F32),
            });
            if !next(&mut ti, &|d| region[d].2.len()) {
                break;
            }
        }
        let out_off: i64 = (0..rank).map(|d| region[d].0 as i64 * ost[d]).sum();
        k.set_store(out, out_off, ost.clone());
        lw.push(k);
        if !next(&mut ri, &|d| runs[d].len()) {
            break;
        }
    }
    Ok(true)
}

/// `argmax_pool`: i32 row-major tap index of the first maximum of each window.
pub(super) fn argmax_pool(
    lw: &mut Lowering<'_>,
    w: &WindowAttrs,
    ins: &[ValueId],
    outs: &[ValueId],
) -> Result<(), CodegenError> {
    let (x, y) = single(ins, outs, "argmax_pool")?;
    let Some((geo, p)) = max_window_input(lw, w, x, y, "argmax_pool")? else {
        return Ok(());
    };
    let out = lw.buf(y)?;
    let rank = geo.input.len();
    let mut ext = geo.output.clone();
    ext.extend_from_slice(&geo.size);
    let mut k = lw.kernel("argmax_pool", &ext);
    let mut st: Vec<i64> = (0..rank)
        .map(|d| geo.stride[d] as i64 * p.strides[d])
        .collect();
    st.extend((0..rank).map(|d| geo.dilation[d] as i64 * p.strides[d]));
    let a = k.access(p.buf, p.offset, st);
    k.load(a, DType::F32);
    let acc = crate::back::kernel::ExprNode {
        expr: Expr::Acc,
        ty: DType::I32,
    };
    k.reduction = Some(Reduction {
        kind: ReduceKind::ArgMax,
        first_loop: rank,
        finalize: vec![acc],
    });
    let mut sst = strides(&geo.output);
    sst.extend(std::iter::repeat_n(0, rank));
    k.set_store(out, 0, sst);
    lw.push(k);
    Ok(())
}

/// `sample`: per window, the tap its index designates (through a tap-offset table).
pub(super) fn sample(
    lw: &mut Lowering<'_>,
    w: &WindowAttrs,
    ins: &[ValueId],
    outs: &[ValueId],
) -> Result<(), CodegenError> {
    let (x, y) = single(ins, outs, "sample")?;
    let idx = *ins
        .get(1)
        .ok_or_else(|| CodegenError::Invalid("`sample` needs an index operand".into()))?;
    f32_only(lw, x, "sample")?;
    let oshape = lw.shape(y)?;
    if lw.shape(idx)? != oshape || lw.dtype(idx)? != DType::I32 {
        return Err(CodegenError::Invalid(
            "`sample` index must be i32 of the output shape".into(),
        ));
    }
    let geo = Geometry::from_window(w, &lw.shape(x)?, &oshape)?;
    if geo.empty() {
        return Ok(());
    }
    let src = value_view(lw, x)?;
    let p = padded(lw, src, &geo, w.border, 0.0)?;
    let out = lw.buf(y)?;
    let ib = lw.buf(idx)?;
    let vol = geo.volume();
    let offs: Vec<i32> = (0..vol)
        .map(|t| {
            i32::try_from(tap_offset(&p, &geo, t))
                .map_err(|_| CodegenError::Unsupported("window offsets beyond 2^31".into()))
        })
        .collect::<Result<_, _>>()?;
    let table = i32_table(lw, &offs);
    let rank = geo.input.len();
    let ost = strides(&geo.output);
    let mut k = lw.kernel("sample", &geo.output);
    let ia = k.access(ib, 0, ost.clone());
    let ta = k.access(table, 0, vec![0; rank]);
    k.accesses[ta.0 as usize].indirect.push(Indirect {
        index: ia,
        scale: 1,
        bound: vol,
    });
    let pst: Vec<i64> = (0..rank)
        .map(|d| geo.stride[d] as i64 * p.strides[d])
        .collect();
    let pa = k.access(p.buf, p.offset, pst);
    // The tap offset is already clamped to the window by the table lookup.
    k.accesses[pa.0 as usize].indirect.push(Indirect {
        index: ta,
        scale: 1,
        bound: i32::MAX as usize,
    });
    k.load(pa, DType::F32);
    k.set_store(out, 0, ost);
    lw.push(k);
    Ok(())
}
