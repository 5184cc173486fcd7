//! Shape rules the interpreter needs: broadcasting, sliding-window extents and padding,
//! slice ranges and reshape extents (spec §3.8, §5.3, §5.4, §6.1).
//!
//! Temporary home: these are the rules `ir::infer` owns. They live here only until that
//! module lands, and then become thin calls into it so the interpreter and the compiler
//! can never disagree. Nothing here computes tensor data.

use super::{Result, invalid};

/// NNEF broadcasting (§6.1): align left, missing trailing extents count as 1, each pair
/// equal or one of them 1.
pub(super) fn broadcast_dims(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let rank = a.len().max(b.len());
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let x = a.get(i).copied().unwrap_or(1);
        let y = b.get(i).copied().unwrap_or(1);
        out.push(match (x, y) {
            _ if x == y => x,
            (1, _) => y,
            (_, 1) => x,
            _ => return Err(invalid(op, format!("shapes {a:?} and {b:?} do not broadcast"))),
        });
    }
    Ok(out)
}

/// One windowed dim of a forward op (conv, box, pools): the output extent and the
/// (front, back) padding, automatic when `padding` is `None` (§5.3, §5.4).
pub(super) fn forward_extent(
    op: &'static str,
    input: usize,
    size: usize,
    stride: usize,
    dilation: usize,
    padding: Option<(usize, usize)>,
) -> Result<(usize, (usize, usize))> {
    if size == 0 || stride == 0 || dilation == 0 {
        return Err(invalid(op, "window size, stride and dilation must be at least 1"));
    }
    let window = (size - 1) * dilation + 1;
    match padding {
        Some((p, q)) => {
            let padded = input + p + q;
            if padded < window {
                return Err(invalid(op, format!("window {window} exceeds padded extent {padded}")));
            }
            Ok(((padded - window) / stride + 1, (p, q)))
        }
        None => {
            let out = input.div_ceil(stride);
            let total = ((out.max(1) - 1) * stride + window).saturating_sub(input);
            Ok((out, (total / 2, total - total / 2)))
        }
    }
}

/// One windowed dim of a transposed op (deconv, debox, desample) whose input extent is
/// `input`: its output extent (`requested` if given) and the padding of the forward op it
/// is the adjoint of. A requested extent must map back to `input` under the forward rule.
pub(super) fn transposed_extent(
    op: &'static str,
    input: usize,
    size: usize,
    stride: usize,
    dilation: usize,
    padding: Option<(usize, usize)>,
    requested: Option<usize>,
) -> Result<(usize, (usize, usize))> {
    if size == 0 || stride == 0 || dilation == 0 {
        return Err(invalid(op, "window size, stride and dilation must be at least 1"));
    }
    let window = (size - 1) * dilation + 1;
    let out = match (requested, padding) {
        (Some(o), _) => o,
        (None, None) => input * stride,
        (None, Some((p, q))) => {
            let full = (input.max(1) - 1) * stride + window;
            full.checked_sub(p + q)
                .filter(|&o| o > 0)
                .ok_or_else(|| invalid(op, format!("padding ({p}, {q}) leaves no output")))?
        }
    };
    let pad = match padding {
        Some(pq) => pq,
        None => {
            let total = ((input.max(1) - 1) * stride + window).saturating_sub(out);
            (total / 2, total - total / 2)
        }
    };
    let (back, _) = forward_extent(op, out, size, stride, dilation, Some(pad))?;
    if back != input {
        return Err(invalid(
            op,
            format!("output extent {out} does not map back to input extent {input} (it gives {back})"),
        ));
    }
    Ok((out, pad))
}

/// NNEF 1.0.4 slice rule for one axis of extent `n` (§3.8): the first index and the
/// element count (elements `first, first+stride, …`).
pub(super) fn slice_range(op: &'static str, n: usize, begin: i64, end: i64, stride: i64) -> Result<(i64, usize)> {
    if stride == 0 {
        return Err(invalid(op, "slice stride must not be 0"));
    }
    let n = n as i64;
    let mut b = if begin < 0 { begin + n } else { begin };
    let mut e = if end < 0 { end + n } else { end };
    if stride == 1 && end == 0 {
        e = n;
    }
    b = b.clamp(-1, n);
    e = e.clamp(-1, n);
    let count = if stride > 0 {
        if !(0 <= b && b <= e) {
            return Err(invalid(op, format!("empty or reversed range [{begin}, {end}) with stride {stride}")));
        }
        (e - b + stride - 1) / stride
    } else {
        if !(e <= b && b < n) {
            return Err(invalid(op, format!("range [{begin}, {end}) invalid for stride {stride}")));
        }
        (b - e + (-stride) - 1) / (-stride)
    };
    Ok((b, count as usize))
}

/// Output extents of `reshape` (§3.8): `0` copies an input extent, one `-1` is inferred,
/// `axis_count == -1` reshapes to the end.
pub(super) fn reshape_dims(op: &'static str, input: &[usize], shape: &[i64], axis_start: usize, axis_count: i64) -> Result<Vec<usize>> {
    let rank = input.len();
    let count = if axis_count == -1 { rank.checked_sub(axis_start) } else { usize::try_from(axis_count).ok() };
    let end = count.and_then(|c| axis_start.checked_add(c)).filter(|&e| e <= rank && axis_start <= rank);
    let Some(end) = end else {
        return Err(invalid(op, format!("axis range {axis_start}+{axis_count} outside rank {rank}")));
    };
    let sub_volume: usize = input[axis_start..end].iter().product();
    let mut dims = Vec::with_capacity(shape.len());
    let mut inferred = None;
    for (i, &s) in shape.iter().enumerate() {
        match s {
            0 => dims.push(
                *input
                    .get(axis_start + i)
                    .ok_or_else(|| invalid(op, format!("shape item {i} is 0 but there is no input extent to copy")))?,
            ),
            -1 if inferred.is_none() => {
                inferred = Some(i);
                dims.push(1);
            }
            s if s > 0 => dims.push(s as usize),
            _ => return Err(invalid(op, format!("invalid shape item {s}"))),
        }
    }
    let known: usize = dims.iter().product();
    if let Some(i) = inferred {
        if known == 0 || !sub_volume.is_multiple_of(known) {
            return Err(invalid(op, format!("cannot infer -1: {sub_volume} elements into {shape:?}")));
        }
        dims[i] = sub_volume / known;
    } else if known != sub_volume {
        return Err(invalid(op, format!("{sub_volume} elements cannot take shape {shape:?}")));
    }
    let mut out = input[..axis_start].to_vec();
    out.extend(dims);
    out.extend_from_slice(&input[end..]);
    Ok(out)
}
