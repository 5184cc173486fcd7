//! Reductions (spec §3.7, §4.3) and the native `softmax` (§4.2), which is a reduction
//! followed by an element-wise pass.
//!
//! Both split the input into "kept" positions (one per output element) and "reduced"
//! offsets (one per element of a reduced slice, in row-major order over the reduced
//! axes — the order `argmax_reduce` numbers them in). Sums accumulate in f64. Not here:
//! the reductions fused into other ops (pools live in `window`, contractions in `linalg`).

use super::{Result, bool_data, f32_data, invalid, strides};
use crate::ir::op::ReduceOp;
use crate::ir::tensor::Tensor;

/// Output shape (reduced axes set to 1), the input offset of every output element, and
/// the relative offsets of the elements of one reduced slice.
fn split_axes(
    op: &'static str,
    shape: &[usize],
    axes: &[usize],
) -> Result<(Vec<usize>, Vec<usize>, Vec<usize>)> {
    let rank = shape.len();
    let mut reduced = vec![false; rank];
    for &a in axes {
        if a >= rank || reduced[a] {
            return Err(invalid(
                op,
                format!("axes {axes:?} must be distinct and below rank {rank}"),
            ));
        }
        reduced[a] = true;
    }
    let st = strides(shape);
    let out_shape: Vec<usize> = (0..rank)
        .map(|d| if reduced[d] { 1 } else { shape[d] })
        .collect();
    let slice_shape: Vec<usize> = (0..rank)
        .map(|d| if reduced[d] { shape[d] } else { 1 })
        .collect();
    let offsets_of = |sub: &[usize]| -> Vec<usize> {
        let count: usize = sub.iter().product();
        let mut index = vec![0; rank];
        let mut offsets = Vec::with_capacity(count);
        for _ in 0..count {
            offsets.push(index.iter().zip(&st).map(|(i, s)| i * s).sum());
            super::window::next_index(&mut index, sub);
        }
        offsets
    };
    Ok((
        out_shape.clone(),
        offsets_of(&out_shape),
        offsets_of(&slice_shape),
    ))
}

/// `sum`/`mean`/`max`/`min` (f32), `any`/`all` (bool), `argmax`/`argmin` (f32 → i32,
/// first position on ties). Reducing an empty slice gives the identity (0, −∞, +∞,
/// false, true) and index 0; `mean` of an empty slice is NaN. NaN propagates: `max`/`min`
/// of a slice holding a NaN is NaN, and `argmax`/`argmin` give the position of the first
/// NaN (as NumPy's `argmax` does), so the index always designates the reduced value.
pub(super) fn reduce(r: ReduceOp, axes: &[usize], input: &Tensor) -> Result<Tensor> {
    let op = crate::ir::op::Op::Reduce {
        op: r,
        axes: Vec::new(),
    }
    .mnemonic();
    let (shape, bases, slice) = split_axes(op, &input.shape, axes)?;
    if matches!(r, ReduceOp::Any | ReduceOp::All) {
        let x = bool_data(op, "input", input)?;
        let any = r == ReduceOp::Any;
        let out = bases.iter().map(|&b| {
            if any {
                slice.iter().any(|&s| x[b + s])
            } else {
                slice.iter().all(|&s| x[b + s])
            }
        });
        return Ok(Tensor::bool(shape, out.collect()));
    }
    let x = f32_data(op, "input", input)?;
    if matches!(r, ReduceOp::ArgMax | ReduceOp::ArgMin) {
        let max = r == ReduceOp::ArgMax;
        let out = bases.iter().map(|&b| {
            let mut best = 0;
            for (i, &s) in slice.iter().enumerate().skip(1) {
                let (v, w) = (x[b + s], x[b + slice[best]]);
                if !w.is_nan() && ((max && v > w) || (!max && v < w) || v.is_nan()) {
                    best = i;
                }
            }
            best as i32
        });
        return Ok(Tensor::i32(shape, out.collect()));
    }
    use super::elementwise::{maximum, minimum};
    let out = bases.iter().map(|&b| {
        let values = slice.iter().map(|&s| x[b + s] as f64);
        let exact = slice.iter().map(|&s| x[b + s]);
        match r {
            ReduceOp::Sum => values.sum::<f64>() as f32,
            ReduceOp::Mean => (values.sum::<f64>() / slice.len() as f64) as f32,
            ReduceOp::Max => exact.fold(f32::NEG_INFINITY, maximum),
            _ => exact.fold(f32::INFINITY, minimum),
        }
    });
    Ok(Tensor::f32(shape, out.collect()))
}

/// `softmax` jointly over `axes`: `exp(x − max) / Σ exp(x − max)`, in IEEE arithmetic: a
/// slice holding a NaN or +∞ is NaN throughout (∞ − ∞), −∞ entries give 0 next to a
/// finite maximum, and a slice of only −∞ is NaN.
pub(super) fn softmax(axes: &[usize], input: &Tensor) -> Result<Tensor> {
    let op = "softmax";
    let x = f32_data(op, "input", input)?;
    let (_, bases, slice) = split_axes(op, &input.shape, axes)?;
    let mut out = vec![0f32; x.len()];
    let mut e = vec![0f64; slice.len()];
    for &b in &bases {
        let m = slice.iter().fold(f32::NEG_INFINITY, |m, &s| {
            super::elementwise::maximum(m, x[b + s])
        }) as f64;
        let mut sum = 0f64;
        for (ei, &s) in e.iter_mut().zip(&slice) {
            *ei = (x[b + s] as f64 - m).exp();
            sum += *ei;
        }
        for (ei, &s) in e.iter().zip(&slice) {
            out[b + s] = (ei / sum) as f32;
        }
    }
    Ok(Tensor::f32(input.shape.clone(), out))
}
