//! Data movement ops (spec §3.8): `transpose`, `split`, `concat`, `stack`, `unstack`,
//! `slice` (1.0.4 rules, negative strides), `tile`, `pad` (every border) and `gather`.
//! (`reshape`, `squeeze` and `unsqueeze` keep the data and take the shape `ir::infer`
//! computes; `eval_op` does that itself.)
//!
//! Each computes, for every output element, the input offset it copies, then gathers;
//! all work on any dtype. Not here: anything that computes new values (see
//! `elementwise`), and layout changes (the interpreter is row-major throughout).

use super::window::{border_map, next_index};
use super::{InterpError, Result, bool_data, f32_data, i32_data, invalid, strides, take, take_or};
use crate::ir::infer::slice_ranges;
use crate::ir::op::Border;
use crate::ir::tensor::{Tensor, TensorData};
use crate::ir::types::DType;

/// For every element of an output of `out_shape`, the input offset `source(index)`.
fn offsets(out_shape: &[usize], mut source: impl FnMut(&[usize]) -> usize) -> Vec<usize> {
    let count: usize = out_shape.iter().product();
    let mut index = vec![0; out_shape.len()];
    let mut result = Vec::with_capacity(count);
    for _ in 0..count {
        result.push(source(&index));
        next_index(&mut index, out_shape);
    }
    result
}

/// `output.shape[i] = input.shape[axes[i]]`; dims past `axes.len()` stay in place.
pub(super) fn transpose(axes: &[usize], input: &Tensor) -> Result<Tensor> {
    let rank = input.shape.len();
    let mut seen = vec![false; axes.len()];
    for &a in axes {
        if a >= axes.len() || seen[a] {
            return Err(invalid(
                "transpose",
                format!("axes {axes:?} are not a permutation"),
            ));
        }
        seen[a] = true;
    }
    if axes.len() > rank {
        return Err(invalid(
            "transpose",
            format!("{} axes for rank {rank}", axes.len()),
        ));
    }
    let perm: Vec<usize> = (0..rank)
        .map(|d| axes.get(d).copied().unwrap_or(d))
        .collect();
    let st = strides(&input.shape);
    let shape: Vec<usize> = perm.iter().map(|&p| input.shape[p]).collect();
    let src = offsets(&shape, |idx| {
        idx.iter().zip(&perm).map(|(i, &p)| i * st[p]).sum()
    });
    Ok(Tensor {
        shape,
        data: take(&input.data, &src),
    })
}

/// The part of `input` from `start` (length `len`) along `axis`.
fn part(input: &Tensor, axis: usize, start: usize, len: usize) -> Tensor {
    let st = strides(&input.shape);
    let mut shape = input.shape.clone();
    shape[axis] = len;
    let src = offsets(&shape, |idx| {
        idx.iter()
            .zip(&st)
            .enumerate()
            .map(|(d, (i, s))| (if d == axis { i + start } else { *i }) * s)
            .sum()
    });
    Tensor {
        shape,
        data: take(&input.data, &src),
    }
}

pub(super) fn split(axis: usize, ratios: &[usize], input: &Tensor) -> Result<Vec<Tensor>> {
    let n = *input.shape.get(axis).ok_or_else(|| {
        invalid(
            "split",
            format!("axis {axis} outside rank {}", input.shape.len()),
        )
    })?;
    let total: usize = ratios.iter().sum();
    if ratios.is_empty() || ratios.contains(&0) || n % total != 0 {
        return Err(invalid(
            "split",
            format!("extent {n} cannot be split in ratios {ratios:?}"),
        ));
    }
    let unit = n / total;
    let mut start = 0;
    let mut parts = Vec::with_capacity(ratios.len());
    for &r in ratios {
        parts.push(part(input, axis, start, r * unit));
        start += r * unit;
    }
    Ok(parts)
}

pub(super) fn unstack(axis: usize, input: &Tensor) -> Result<Vec<Tensor>> {
    let n = *input.shape.get(axis).ok_or_else(|| {
        invalid(
            "unstack",
            format!("axis {axis} outside rank {}", input.shape.len()),
        )
    })?;
    Ok((0..n)
        .map(|i| {
            let mut t = part(input, axis, i, 1);
            t.shape.remove(axis);
            t
        })
        .collect())
}

/// For each of `outer` rounds, copy `chunks[k]` consecutive elements of part `k`.
fn interleave<T: Copy>(parts: &[&[T]], outer: usize, chunks: &[usize]) -> Vec<T> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
    for o in 0..outer {
        for (p, &c) in parts.iter().zip(chunks) {
            out.extend_from_slice(&p[o * c..(o + 1) * c]);
        }
    }
    out
}

fn interleave_data(
    op: &'static str,
    inputs: &[&Tensor],
    outer: usize,
    chunks: &[usize],
) -> Result<TensorData> {
    let dtype = inputs
        .first()
        .map(|t| t.dtype())
        .ok_or_else(|| invalid(op, "needs at least one value"))?;
    Ok(match dtype {
        DType::F32 => {
            let parts = inputs
                .iter()
                .map(|t| f32_data(op, "every value", t))
                .collect::<Result<Vec<_>>>()?;
            TensorData::F32(interleave(&parts, outer, chunks))
        }
        DType::I32 => {
            let parts = inputs
                .iter()
                .map(|t| i32_data(op, "every value", t))
                .collect::<Result<Vec<_>>>()?;
            TensorData::I32(interleave(&parts, outer, chunks))
        }
        DType::Bool => {
            let parts = inputs
                .iter()
                .map(|t| bool_data(op, "every value", t))
                .collect::<Result<Vec<_>>>()?;
            TensorData::Bool(interleave(&parts, outer, chunks))
        }
    })
}

pub(super) fn concat(axis: usize, inputs: &[&Tensor]) -> Result<Tensor> {
    let op = "concat";
    let first = inputs
        .first()
        .ok_or_else(|| invalid(op, "needs at least one value"))?;
    let rank = first.shape.len();
    if axis >= rank {
        return Err(invalid(op, format!("axis {axis} outside rank {rank}")));
    }
    let mut shape = first.shape.clone();
    shape[axis] = 0;
    for t in inputs {
        let same =
            t.shape.len() == rank && (0..rank).all(|d| d == axis || t.shape[d] == first.shape[d]);
        if !same {
            return Err(invalid(
                op,
                format!(
                    "shapes {:?} and {:?} differ off axis {axis}",
                    first.shape, t.shape
                ),
            ));
        }
        shape[axis] += t.shape[axis];
    }
    let outer: usize = first.shape[..axis].iter().product();
    let chunks: Vec<usize> = inputs
        .iter()
        .map(|t| t.shape[axis..].iter().product())
        .collect();
    let data = interleave_data(op, inputs, outer, &chunks)?;
    Ok(Tensor { shape, data })
}

pub(super) fn stack(axis: usize, inputs: &[&Tensor]) -> Result<Tensor> {
    let op = "stack";
    let first = inputs
        .first()
        .ok_or_else(|| invalid(op, "needs at least one value"))?;
    if axis > first.shape.len() {
        return Err(invalid(
            op,
            format!("axis {axis} outside output rank {}", first.shape.len() + 1),
        ));
    }
    if let Some(t) = inputs.iter().find(|t| t.shape != first.shape) {
        return Err(invalid(
            op,
            format!("shapes {:?} and {:?} differ", first.shape, t.shape),
        ));
    }
    let outer: usize = first.shape[..axis].iter().product();
    let chunk: usize = first.shape[axis..].iter().product();
    let data = interleave_data(op, inputs, outer, &vec![chunk; inputs.len()])?;
    let mut shape = first.shape.clone();
    shape.insert(axis, inputs.len());
    Ok(Tensor { shape, data })
}

/// NNEF 1.0.4 `slice` (negative strides run backwards); the per-axis ranges come from
/// `ir::infer::slice_ranges`, the one implementation of the rule.
pub(super) fn slice(
    axes: &[usize],
    begin: &[i64],
    end: &[i64],
    stride: &[i64],
    input: &Tensor,
) -> Result<Tensor> {
    let ranges = slice_ranges(&input.shape, axes, begin, end, stride)
        .map_err(|e| invalid("slice", e.message))?;
    let st = strides(&input.shape);
    let shape: Vec<usize> = ranges.iter().map(|r| r.count).collect();
    let src = offsets(&shape, |idx| {
        idx.iter()
            .zip(&ranges)
            .zip(&st)
            .map(|((&i, r), &stride)| (r.start as i64 + i as i64 * r.stride) as usize * stride)
            .sum()
    });
    Ok(Tensor {
        shape,
        data: take(&input.data, &src),
    })
}

pub(super) fn tile(repeats: &[usize], input: &Tensor) -> Result<Tensor> {
    if repeats.len() != input.shape.len() || repeats.contains(&0) {
        return Err(invalid(
            "tile",
            format!(
                "repeats {repeats:?} must be ≥ 1, one per dim of {:?}",
                input.shape
            ),
        ));
    }
    let st = strides(&input.shape);
    let shape: Vec<usize> = input
        .shape
        .iter()
        .zip(repeats)
        .map(|(n, r)| n * r)
        .collect();
    let src = offsets(&shape, |idx| {
        idx.iter()
            .zip(&input.shape)
            .zip(&st)
            .map(|((i, n), s)| (i % n) * s)
            .sum()
    });
    Ok(Tensor {
        shape,
        data: take(&input.data, &src),
    })
}

/// `pad`: `constant` fills with `value`; `replicate`, `reflect`, `reflect-even` read the
/// mirrored/clamped input position (§5.6).
pub(super) fn pad(
    padding: &[(usize, usize)],
    border: Border,
    value: f32,
    input: &Tensor,
) -> Result<Tensor> {
    let op = "pad";
    if padding.len() != input.shape.len() {
        return Err(invalid(
            op,
            format!(
                "padding has {} items for rank {}",
                padding.len(),
                input.shape.len()
            ),
        ));
    }
    if border == Border::Ignore {
        return Err(InterpError::Unsupported {
            op,
            message: "border 'ignore'".into(),
        });
    }
    let shape: Vec<usize> = input
        .shape
        .iter()
        .zip(padding)
        .map(|(n, (p, q))| p + n + q)
        .collect();
    // Per dim: the input coordinate each output coordinate reads.
    let mut maps = Vec::with_capacity(shape.len());
    for (d, &n) in input.shape.iter().enumerate() {
        let map = (0..shape[d])
            .map(|y| border_map(op, y as i64 - padding[d].0 as i64, n, border))
            .collect::<Result<Vec<_>>>()?;
        maps.push(map);
    }
    let st = strides(&input.shape);
    let count: usize = shape.iter().product();
    let mut src = Vec::with_capacity(count);
    let mut index = vec![0; shape.len()];
    for _ in 0..count {
        let mut off = Some(0);
        for (d, &i) in index.iter().enumerate() {
            off = off.zip(maps[d][i]).map(|(o, x)| o + x * st[d]);
        }
        src.push(off);
        next_index(&mut index, &shape);
    }
    Ok(Tensor {
        shape,
        data: take_or(&input.data, &src, value),
    })
}

/// `gather`: `output[a…, i…, b…] = input[a…, indices[i…], b…]`; every index must lie in
/// `[0, input.shape[axis])`.
pub(super) fn gather(axis: usize, input: &Tensor, indices: &Tensor) -> Result<Tensor> {
    let op = "gather";
    let idx = i32_data(op, "indices", indices)?;
    let rank = input.shape.len();
    if axis >= rank {
        return Err(invalid(op, format!("axis {axis} outside rank {rank}")));
    }
    let n = input.shape[axis];
    let outer: usize = input.shape[..axis].iter().product();
    let inner: usize = input.shape[axis + 1..].iter().product();
    let mut src = Vec::with_capacity(outer * idx.len() * inner);
    for o in 0..outer {
        for &i in idx {
            let i = usize::try_from(i)
                .ok()
                .filter(|&i| i < n)
                .ok_or_else(|| invalid(op, format!("index {i} outside [0, {n})")))?;
            src.extend((0..inner).map(|k| (o * n + i) * inner + k));
        }
    }
    let mut shape = input.shape[..axis].to_vec();
    shape.extend_from_slice(&indices.shape);
    shape.extend_from_slice(&input.shape[axis + 1..]);
    Ok(Tensor {
        shape,
        data: take(&input.data, &src),
    })
}
