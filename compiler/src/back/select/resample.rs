//! Linear resampling as separable loop nests: `multilinear_upsample` (spec §3.6) and
//! `roi_resample` (§3.9), with exactly the sample coordinates of `ir::interp::resample`.
//!
//! Both ops interpolate one spatial dim at a time. A pass over dim `d` reads, for output
//! position `j`, the two input taps `i0[j]`, `i1[j]` with weights `w0[j]`, `w1[j]`:
//! `out[…, j, …] = w0[j]·in[…, i0[j], …] + w1[j]·in[…, i1[j], …]`. The taps are read
//! through [`Indirect`] terms (so every read is clamped into the input whatever a table
//! says), the weights are ordinary affine loads; between passes the partial result lives
//! in scratch. The innermost loop is the untouched trailing extent, so every pass but the
//! last vectorizes.
//!
//! * `multilinear_upsample`: the tables are compile-time constants computed in f64 like
//!   the interpreter; a tap outside the input reads index 0 with weight 0 (`constant`
//!   border) or the clamped index (`replicate`). Infer admits no other border.
//! * `roi_resample`: the tables depend on the `rois` data, so small kernels compute them
//!   first (per ROI and output position, in f32 — the interpreter uses f64; the
//!   interpolation is continuous, so the results agree to rounding). The border is
//!   `replicate` (the index clamp does it), and `batch_index` is clamped into `[0, N)`
//!   (the interpreter reports an error for an index outside).
//!
//! Known difference: a tap with weight 0 is still multiplied, so an infinite input next
//! to a `constant` border or on a grid point gives NaN where the interpreter (which skips
//! outside taps) gives a finite value.
//!
//! Not here: other interpolation orders, region pools (`select::roi`).

use super::{Lowering, strides};
use crate::back::CodegenError;
use crate::back::kernel::{AccessId, BufId, Expr, Indirect, Kernel, Lit};
use crate::ir::{BinaryOp, Border, DType, ResampleMethod, UnaryOp, ValueId};

/// The tap tables of one pass: `[rows, out]` arrays (rows = 1 for upsample, R for ROIs).
struct Taps {
    idx: [BufId; 2],
    w: [BufId; 2],
    /// Table elements per ROI (0 when the tables are shared by all rows).
    row_stride: i64,
}

/// One separable pass: `dst[shape] ← src` interpolated along `axis`.
struct Pass {
    src: BufId,
    /// Shape of `src` (for ROI passes after the first: `[R, C, …]`).
    src_shape: Vec<usize>,
    dst: BufId,
    dst_shape: Vec<usize>,
    axis: usize,
    taps: Taps,
    /// First ROI pass: dim 0 of `dst` is the ROI; `src` row is `batch[r]` clamped to `[0, N)`.
    batch: Option<(BufId, usize)>,
}

fn invalid(m: String) -> CodegenError {
    CodegenError::Invalid(m)
}

fn pass(lw: &mut Lowering<'_>, p: &Pass) -> Result<(), CodegenError> {
    let rank = p.dst_shape.len();
    let n_axis = *p
        .src_shape
        .get(p.axis)
        .ok_or_else(|| CodegenError::Internal("resample axis out of range".into()))?;
    let sst = strides(&p.src_shape);
    let dst_st = strides(&p.dst_shape);
    let mut k = lw.kernel("resample", &p.dst_shape);
    let table = |k: &mut Kernel, b: BufId| -> AccessId {
        let mut st = vec![0i64; rank];
        st[0] = p.taps.row_stride;
        st[p.axis] = 1;
        k.access(b, 0, st)
    };
    let i0 = table(&mut k, p.taps.idx[0]);
    let i1 = table(&mut k, p.taps.idx[1]);
    let w0 = table(&mut k, p.taps.w[0]);
    let w1 = table(&mut k, p.taps.w[1]);
    let mut src_st = sst.clone();
    src_st[p.axis] = 0;
    let batch = match p.batch {
        Some((b, n)) => {
            src_st[0] = 0;
            let mut st = vec![0i64; rank];
            st[0] = 1;
            Some((k.access(b, 0, st), n))
        }
        None => None,
    };
    let mut x = [AccessId(0); 2];
    for (t, idx) in [i0, i1].into_iter().enumerate() {
        let a = k.access(p.src, 0, src_st.clone());
        let acc = &mut k.accesses[a.0 as usize];
        acc.indirect.push(Indirect {
            index: idx,
            scale: sst[p.axis],
            bound: n_axis,
        });
        if let Some((ba, n)) = batch {
            acc.indirect.push(Indirect {
                index: ba,
                scale: sst[0],
                bound: n,
            });
        }
        x[t] = a;
    }
    let f = DType::F32;
    let a = k.load(x[0], f);
    let wa = k.load(w0, f);
    let b = k.load(x[1], f);
    let wb = k.load(w1, f);
    let pa = k.push(Expr::Binary(BinaryOp::Mul, wa, a), f);
    let pb = k.push(Expr::Binary(BinaryOp::Mul, wb, b), f);
    k.push(Expr::Binary(BinaryOp::Add, pa, pb), f);
    k.set_store(p.dst, 0, dst_st);
    lw.push(k);
    Ok(())
}

/// Input coordinate sampled by output `j` of `out` over a region `[begin, begin + len)`
/// (pixel-centre units), as in `ir::interp::resample`.
fn coordinate(method: ResampleMethod, j: usize, out: usize, len: f64) -> f64 {
    let (j, out) = (j as f64, out as f64);
    match method {
        ResampleMethod::Symmetric => (j + 0.5) * len / out - 0.5,
        ResampleMethod::Asymmetric => j * len / out,
        ResampleMethod::Aligned => {
            if out > 1.0 {
                j * (len - 1.0) / (out - 1.0)
            } else {
                0.0
            }
        }
    }
}

fn i32_bytes(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `multilinear_upsample`: `[N, C, s…] → [N, C, s·factor…]`.
pub(super) fn multilinear_upsample(
    lw: &mut Lowering<'_>,
    factor: &[usize],
    method: ResampleMethod,
    border: Border,
    ins: &[ValueId],
    outs: &[ValueId],
) -> Result<(), CodegenError> {
    let (&[x], &[y]) = (ins, outs) else {
        return Err(invalid(
            "multilinear_upsample takes one input and one output".into(),
        ));
    };
    let xs = lw.shape(x)?;
    let ys = lw.shape(y)?;
    if xs.len() < 3 || factor.len() + 2 != xs.len() || ys.len() != xs.len() {
        return Err(invalid(format!(
            "multilinear_upsample factor {factor:?} for input {xs:?}"
        )));
    }
    if !matches!(border, Border::Constant | Border::Replicate) {
        return Err(CodegenError::Unsupported(format!(
            "multilinear_upsample with border '{}'",
            border.mnemonic()
        )));
    }
    for d in 0..factor.len() {
        if xs[d + 2].checked_mul(factor[d]) != Some(ys[d + 2]) || xs[d + 2] == 0 {
            return Err(invalid(format!(
                "multilinear_upsample of {xs:?} by {factor:?} gives {ys:?}"
            )));
        }
    }
    let len: usize = ys.iter().product();
    if len == 0 {
        return Ok(());
    }
    let src0 = lw.buf(x)?;
    let dst_final = lw.buf(y)?;
    // Dims with factor 1 need no pass (the interpreter's taps are (i, 1), (i+1, 0)).
    let axes: Vec<usize> = (0..factor.len()).filter(|&d| factor[d] != 1).collect();
    if axes.is_empty() {
        lw.copy(src0, dst_final, DType::F32, len);
        return Ok(());
    }
    let mut shape = xs.clone();
    let mut src = src0;
    for (pi, &d) in axes.iter().enumerate() {
        let axis = d + 2;
        let n = xs[axis];
        let out = n * factor[d];
        let mut idx = [vec![0i32; out], vec![0i32; out]];
        let mut w = [vec![0f32; out], vec![0f32; out]];
        for j in 0..out {
            let c = coordinate(method, j, out, n as f64);
            let lo = c.floor();
            let frac = c - lo;
            for (t, (pos, wt)) in [(lo as i64, 1.0 - frac), (lo as i64 + 1, frac)]
                .into_iter()
                .enumerate()
            {
                let inside = (0..n as i64).contains(&pos);
                let (i, wt) = match (inside, border) {
                    (true, _) => (pos, wt),
                    (false, Border::Replicate) => (pos.clamp(0, n as i64 - 1), wt),
                    (false, _) => (0, 0.0),
                };
                idx[t][j] = i as i32;
                w[t][j] = wt as f32;
            }
        }
        let taps = Taps {
            idx: [
                lw.const_buf(i32_bytes(&idx[0]), DType::I32, out),
                lw.const_buf(i32_bytes(&idx[1]), DType::I32, out),
            ],
            w: [
                lw.const_buf(f32_bytes(&w[0]), DType::F32, out),
                lw.const_buf(f32_bytes(&w[1]), DType::F32, out),
            ],
            row_stride: 0,
        };
        let mut dst_shape = shape.clone();
        dst_shape[axis] = out;
        let dst = if pi + 1 == axes.len() {
            dst_final
        } else {
            lw.scratch(DType::F32, dst_shape.iter().product())
        };
        pass(
            lw,
            &Pass {
                src,
                src_shape: shape.clone(),
                dst,
                dst_shape: dst_shape.clone(),
                axis,
                taps,
                batch: None,
            },
        )?;
        src = dst;
        shape = dst_shape;
    }
    Ok(())
}

/// One spatial dim of a ROI op: the `rois` buffer (`[r, 2·spatial]`), the dim `d` and
/// its output extent.
#[derive(Clone, Copy)]
pub(super) struct RoiDim {
    pub rois: BufId,
    pub spatial: usize,
    pub r: usize,
    pub d: usize,
    pub out: usize,
}

/// A kernel over `[R, out]` computing one table entry (of `dtype`) from the ROI row and
/// the output position: `body(k, [begin, len, j])` builds the value from loads of
/// `begin`, `end − begin` and `j` (as f32); its last node is stored.
pub(super) fn roi_table(
    lw: &mut Lowering<'_>,
    dim: &RoiDim,
    dtype: DType,
    body: impl FnOnce(&mut Kernel, [crate::back::kernel::ExprId; 3]),
) -> BufId {
    let RoiDim {
        rois,
        spatial,
        r,
        d,
        out,
    } = *dim;
    let dst = lw.scratch(dtype, r * out);
    let iota: Vec<f32> = (0..out).map(|j| j as f32).collect();
    let iota = lw.const_buf(f32_bytes(&iota), DType::F32, out);
    let mut k = lw.kernel("roi_table", &[r, out]);
    let row = 2 * spatial as i64;
    let ba = k.access(rois, d as i64, vec![row, 0]);
    let ea = k.access(rois, (spatial + d) as i64, vec![row, 0]);
    let ja = k.access(iota, 0, vec![0, 1]);
    let f = DType::F32;
    let b = k.load(ba, f);
    let e = k.load(ea, f);
    let len = k.push(Expr::Binary(BinaryOp::Sub, e, b), f);
    let j = k.load(ja, f);
    body(&mut k, [b, len, j]);
    k.set_store(dst, 0, vec![out as i64, 1]);
    lw.push(k);
    dst
}

/// Appends `f32` literal `x` to a kernel body.
fn lit(k: &mut Kernel, x: f32) -> crate::back::kernel::ExprId {
    k.push(Expr::Lit(Lit::F32(x)), DType::F32)
}

/// `roi_resample`: `(input [N, C, s…], rois [R, 2S], batch_index [R]) → [R, C, out…]`.
pub(super) fn roi_resample(
    lw: &mut Lowering<'_>,
    output_size: &[usize],
    method: ResampleMethod,
    ins: &[ValueId],
    outs: &[ValueId],
) -> Result<(), CodegenError> {
    let (&[x, rois, bidx], &[y]) = (ins, outs) else {
        return Err(invalid(
            "roi_resample takes three inputs and one output".into(),
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
        return Err(invalid(format!(
            "roi_resample of {xs:?} to {output_size:?} gives {ys:?}"
        )));
    }
    if ys.iter().product::<usize>() == 0 {
        return Ok(());
    }
    if xs.contains(&0) {
        return Err(CodegenError::Unsupported(
            "roi_resample of an empty input".into(),
        ));
    }
    let xb = lw.buf(x)?;
    let rb = lw.buf(rois)?;
    let bb = lw.buf(bidx)?;
    let yb = lw.buf(y)?;
    let f = DType::F32;
    let mut src = xb;
    let mut shape = xs.clone();
    for (d, &out) in output_size.iter().enumerate() {
        let dim = RoiDim {
            rois: rb,
            spatial,
            r,
            d,
            out,
        };
        // Sample coordinate c = begin + coordinate(j, len); taps floor(c), floor(c) + 1.
        let coord = move |k: &mut Kernel, [b, len, j]: [crate::back::kernel::ExprId; 3]| {
            let of = lit(k, out as f32);
            let rel = match method {
                ResampleMethod::Symmetric => {
                    let h = lit(k, 0.5);
                    let jh = k.push(Expr::Binary(BinaryOp::Add, j, h), f);
                    let m = k.push(Expr::Binary(BinaryOp::Mul, jh, len), f);
                    let q = k.push(Expr::Binary(BinaryOp::Div, m, of), f);
                    k.push(Expr::Binary(BinaryOp::Sub, q, h), f)
                }
                ResampleMethod::Asymmetric => {
                    let m = k.push(Expr::Binary(BinaryOp::Mul, j, len), f);
                    k.push(Expr::Binary(BinaryOp::Div, m, of), f)
                }
                ResampleMethod::Aligned => {
                    if out > 1 {
                        let one = lit(k, 1.0);
                        let l1 = k.push(Expr::Binary(BinaryOp::Sub, len, one), f);
                        let m = k.push(Expr::Binary(BinaryOp::Mul, j, l1), f);
                        let o1 = lit(k, (out - 1) as f32);
                        k.push(Expr::Binary(BinaryOp::Div, m, o1), f)
                    } else {
                        lit(k, 0.0)
                    }
                }
            };
            k.push(Expr::Binary(BinaryOp::Add, b, rel), f)
        };
        let idx0 = roi_table(lw, &dim, DType::I32, |k, v| {
            let c = coord(k, v);
            let lo = k.push(Expr::Unary(UnaryOp::Floor, c), f);
            k.push(Expr::Cast(DType::I32, lo), DType::I32);
        });
        let idx1 = roi_table(lw, &dim, DType::I32, |k, v| {
            let c = coord(k, v);
            let lo = k.push(Expr::Unary(UnaryOp::Floor, c), f);
            let one = lit(k, 1.0);
            let hi = k.push(Expr::Binary(BinaryOp::Add, lo, one), f);
            k.push(Expr::Cast(DType::I32, hi), DType::I32);
        });
        let w1 = roi_table(lw, &dim, f, |k, v| {
            let c = coord(k, v);
            let lo = k.push(Expr::Unary(UnaryOp::Floor, c), f);
            k.push(Expr::Binary(BinaryOp::Sub, c, lo), f);
        });
        let w0 = roi_table(lw, &dim, f, |k, v| {
            let c = coord(k, v);
            let lo = k.push(Expr::Unary(UnaryOp::Floor, c), f);
            let fr = k.push(Expr::Binary(BinaryOp::Sub, c, lo), f);
            let one = lit(k, 1.0);
            k.push(Expr::Binary(BinaryOp::Sub, one, fr), f);
        });
        let axis = d + 2;
        let mut dst_shape = shape.clone();
        dst_shape[0] = r;
        dst_shape[axis] = out;
        let dst = if d + 1 == spatial {
            yb
        } else {
            lw.scratch(f, dst_shape.iter().product())
        };
        pass(
            lw,
            &Pass {
                src,
                src_shape: shape.clone(),
                dst,
                dst_shape: dst_shape.clone(),
                axis,
                taps: Taps {
                    idx: [idx0, idx1],
                    w: [w0, w1],
                    row_stride: out as i64,
                },
                batch: (d == 0).then_some((bb, xs[0])),
            },
        )?;
        src = dst;
        shape = dst_shape;
    }
    Ok(())
}
