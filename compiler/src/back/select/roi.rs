//! Region pools `avg_roi_pool` / `max_roi_pool` (spec §3.9) as masked loop nests, with
//! exactly the bin convention of `ir::interp::resample`: ROI row
//! `(begin_0, …, begin_{S−1}, end_0, …, end_{S−1})` in input pixels, the half-open box
//! `[begin, end)` split into `output_size` equal bins, bin `b` of dim `d` covering pixels
//! `floor(begin + b·step) .. ceil(begin + (b+1)·step)` (`step = (end − begin)/out`)
//! clipped to the input; an empty bin gives 0.
//!
//! The bins' extents depend on run-time data while kernel loops have constant extents,
//! so the pool loops over the largest possible bin (the whole input extent `n_d` per dim)
//! and masks: per ROI and bin, small table kernels compute `start` and `count` (i32, in
//! f32 arithmetic — the interpreter uses f64, so a bin edge that lands within rounding
//! of an integer may differ), and `pos[r, b, t] = start + t`. The pool kernel reads pixel
//! `pos` through an [`Indirect`] term (clamped into the input, so every access is in
//! bounds whatever the ROI data), counts it when `t < count`, and divides by (or, for
//! max, keeps) the result only for a non-empty bin. `batch_index` is clamped into
//! `[0, N)` (the interpreter reports an error). Cost: `R·C·bins·Π n_d` taps — fine for the
//! small feature maps ROI heads see, not for large ones (a run-time loop extent in the
//! kernel description would remove the `Π n_d / bin size` waste).
//!
//! A NaN pixel makes its `max_roi_pool` bin NaN, as in the interpreter (NaN-propagating
//! `max`, see `back`'s "NaN and infinity").
//!
//! Not here: `roi_resample` (`select::resample`).

use super::resample::{RoiDim, roi_table};
use super::{Lowering, strides};
use crate::back::CodegenError;
use crate::back::kernel::{Expr, ExprId, ExprNode, Indirect, Kernel, Lit, ReduceKind, Reduction};
use crate::ir::{BinaryOp, DType, RoiPoolOp, UnaryOp, ValueId};

fn lit(k: &mut Kernel, x: f32) -> ExprId {
    k.push(Expr::Lit(Lit::F32(x)), DType::F32)
}

/// The bin edges `(start, end)` of bin `j` (f32) from `begin`, `len` of the ROI, as in the
/// interpreter: `start = max(floor(begin + j·step), 0)`,
/// `end = min(max(ceil(begin + (j+1)·step), 0), n)`, `start = min(start, end)`.
fn bin_edges(k: &mut Kernel, [b, len, j]: [ExprId; 3], out: usize, n: usize) -> (ExprId, ExprId) {
    let f = DType::F32;
    let of = lit(k, out as f32);
    let step = k.push(Expr::Binary(BinaryOp::Div, len, of), f);
    let js = k.push(Expr::Binary(BinaryOp::Mul, j, step), f);
    let s = k.push(Expr::Binary(BinaryOp::Add, b, js), f);
    let s = k.push(Expr::Unary(UnaryOp::Floor, s), f);
    let zero = lit(k, 0.0);
    let s = k.push(Expr::Binary(BinaryOp::Max, s, zero), f);
    let one = lit(k, 1.0);
    let j1 = k.push(Expr::Binary(BinaryOp::Add, j, one), f);
    let js1 = k.push(Expr::Binary(BinaryOp::Mul, j1, step), f);
    let e = k.push(Expr::Binary(BinaryOp::Add, b, js1), f);
    let e = k.push(Expr::Unary(UnaryOp::Ceil, e), f);
    let e = k.push(Expr::Binary(BinaryOp::Max, e, zero), f);
    let nf = lit(k, n as f32);
    let e = k.push(Expr::Binary(BinaryOp::Min, e, nf), f);
    let s = k.push(Expr::Binary(BinaryOp::Min, s, e), f);
    (s, e)
}

/// `avg_roi_pool` / `max_roi_pool`: `(input [N, C, s…], rois [R, 2S], batch_index [R])
/// → [R, C, output_size…]`.
pub(super) fn roi_pool(
    lw: &mut Lowering<'_>,
    kind: RoiPoolOp,
    output_size: &[usize],
    ins: &[ValueId],
    outs: &[ValueId],
) -> Result<(), CodegenError> {
    let (&[x, rois, bidx], &[y]) = (ins, outs) else {
        return Err(CodegenError::Invalid(
            "roi pool takes three inputs and one output".into(),
        ));
    };
    let xs = lw.shape(x)?;
    let ys = lw.shape(y)?;
    let spatial = xs.len().saturating_sub(2);
    let r = lw.shape(bidx)?.first().copied().unwrap_or(0);
    if xs.len() < 3
        || output_size.len() != spatial
        || lw.shape(rois)? != [r, 2 * spatial]
        || ys.len() != xs.len()
        || ys[0] != r
        || ys[1] != xs[1]
        || ys[2..] != *output_size
    {
        return Err(CodegenError::Invalid(format!(
            "roi pool of {xs:?} to {output_size:?} gives {ys:?}"
        )));
    }
    if ys.iter().product::<usize>() == 0 {
        return Ok(());
    }
    if xs.contains(&0) {
        return Err(CodegenError::Unsupported(
            "roi pool of an empty input".into(),
        ));
    }
    let xb = lw.buf(x)?;
    let rb = lw.buf(rois)?;
    let bb = lw.buf(bidx)?;
    let yb = lw.buf(y)?;
    let (f, i) = (DType::F32, DType::I32);
    let plane: usize = xs[2..].iter().product();
    let sst = strides(&xs[2..]);
    // Per dim: count table [R, out] and position table [R, out, n].
    let mut counts = Vec::with_capacity(spatial);
    let mut positions = Vec::with_capacity(spatial);
    for d in 0..spatial {
        let (out, n) = (output_size[d], xs[d + 2]);
        let dim = RoiDim {
            rois: rb,
            spatial,
            r,
            d,
            out,
        };
        let start = roi_table(lw, &dim, i, |k, v| {
            let (s, _) = bin_edges(k, v, out, n);
            k.push(Expr::Cast(i, s), i);
        });
        let count = roi_table(lw, &dim, i, |k, v| {
            let (s, e) = bin_edges(k, v, out, n);
            let c = k.push(Expr::Binary(BinaryOp::Sub, e, s), f);
            k.push(Expr::Cast(i, c), i);
        });
        let iota: Vec<u8> = (0..n as i32).flat_map(|t| t.to_le_bytes()).collect();
        let iota = lw.const_buf(iota, i, n);
        let pos = lw.scratch(i, r * out * n);
        let mut k = lw.kernel("roi_pos", &[r, out, n]);
        let sa = k.access(start, 0, vec![out as i64, 1, 0]);
        let ta = k.access(iota, 0, vec![0, 0, 1]);
        let s = k.load(sa, i);
        let t = k.load(ta, i);
        k.push(Expr::Binary(BinaryOp::Add, s, t), i);
        k.set_store(pos, 0, vec![(out * n) as i64, n as i64, 1]);
        lw.push(k);
        counts.push(count);
        positions.push((pos, iota));
    }
    // Pool: loops [R, C, bins…, taps…], the taps reduced.
    let mut ext = vec![r, xs[1]];
    ext.extend_from_slice(output_size);
    ext.extend_from_slice(&xs[2..]);
    let nl = ext.len();
    let mut k = lw.kernel("roi_pool", &ext);
    let mut st = vec![0i64; nl];
    st[0] = 1;
    let ba = k.access(bb, 0, st);
    let mut xst = vec![0i64; nl];
    xst[1] = plane as i64;
    let xa = k.access(xb, 0, xst);
    k.accesses[xa.0 as usize].indirect.push(Indirect {
        index: ba,
        scale: (xs[1] * plane) as i64,
        bound: xs[0],
    });
    let mut mask: Option<ExprId> = None;
    let mut count_loads = Vec::with_capacity(spatial);
    for d in 0..spatial {
        let (out, n) = (output_size[d], xs[d + 2]);
        let (pos, iota) = positions[d];
        let mut st = vec![0i64; nl];
        st[0] = (out * n) as i64;
        st[2 + d] = n as i64;
        st[2 + spatial + d] = 1;
        let pa = k.access(pos, 0, st);
        k.accesses[xa.0 as usize].indirect.push(Indirect {
            index: pa,
            scale: sst[d],
            bound: n,
        });
        let mut st = vec![0i64; nl];
        st[0] = out as i64;
        st[2 + d] = 1;
        let ca = k.access(counts[d], 0, st);
        count_loads.push(ca);
        let mut st = vec![0i64; nl];
        st[2 + spatial + d] = 1;
        let ta = k.access(iota, 0, st);
        let t = k.load(ta, i);
        let c = k.load(ca, i);
        let m = k.push(Expr::Binary(BinaryOp::Lt, t, c), DType::Bool);
        mask = Some(match mask {
            None => m,
            Some(prev) => k.push(Expr::Binary(BinaryOp::And, prev, m), DType::Bool),
        });
    }
    let mask =
        mask.ok_or_else(|| CodegenError::Internal("roi pool without spatial dims".into()))?;
    let v = k.load(xa, f);
    let fill = lit(
        &mut k,
        match kind {
            RoiPoolOp::Avg => 0.0,
            RoiPoolOp::Max => f32::NEG_INFINITY,
        },
    );
    k.push(Expr::Select(mask, v, fill), f);
    // Finalize: count = Π count_d (f32); empty bin → 0, avg divides.
    let mut fin: Vec<ExprNode> = Vec::new();
    let mut add = |e: Expr, ty: DType| {
        fin.push(ExprNode { expr: e, ty });
        ExprId(fin.len() as u32 - 1)
    };
    let acc = add(Expr::Acc, f);
    let mut cnt: Option<ExprId> = None;
    for ca in count_loads {
        let c = add(Expr::Load(ca), i);
        let c = add(Expr::Cast(f, c), f);
        cnt = Some(match cnt {
            None => c,
            Some(p) => add(Expr::Binary(BinaryOp::Mul, p, c), f),
        });
    }
    let cnt = cnt.ok_or_else(|| CodegenError::Internal("roi pool without spatial dims".into()))?;
    let zero = add(Expr::Lit(Lit::F32(0.0)), f);
    let nonempty = add(Expr::Binary(BinaryOp::Gt, cnt, zero), DType::Bool);
    let value = match kind {
        RoiPoolOp::Avg => add(Expr::Binary(BinaryOp::Div, acc, cnt), f),
        RoiPoolOp::Max => acc,
    };
    add(Expr::Select(nonempty, value, zero), f);
    k.reduction = Some(Reduction {
        kind: match kind {
            RoiPoolOp::Avg => ReduceKind::Sum,
            RoiPoolOp::Max => ReduceKind::Max,
        },
        first_loop: 2 + spatial,
        finalize: fin,
    });
    let mut st = strides(&ys);
    st.extend(std::iter::repeat_n(0, spatial));
    k.set_store(yb, 0, st);
    lw.push(k);
    Ok(())
}
