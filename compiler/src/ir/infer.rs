//! Shape and dtype inference: the one place that holds every shape rule of the IR.
//!
//! [`infer`] maps an [`Op`] and its operand types to its result types, or explains why the
//! operands and attributes do not fit. The front end calls it while lowering, passes call
//! it when they build nodes, and the verifier re-runs it on every node. Extents may be
//! [`Dim::Unknown`]; rules then propagate what is still known, TensorFlow style
//! (`Dim::merge` where two facts describe the same extent, `Unknown` where the result
//! depends on the missing extent).
//!
//! The window, reshape and slice arithmetic is public ([`window_output_extent`],
//! [`auto_padding`], [`resolved_conv_padding`], [`resolved_deconv_padding`],
//! [`resolved_window_padding`], [`resolved_transposed_window_padding`],
//! [`broadcast_dims`], [`reshape_output_dims`], [`slice_ranges`]) so that the
//! interpreter and the back end compute exactly what inference assumed.
//!
//! Rules follow NNEF 1.0.5 (see `docs/research/nnef-spec.md` §3, §5, §6) with these
//! deliberate choices:
//! - broadcasting is NNEF's: left-aligned, missing trailing dims and extent 1 broadcast;
//! - `reduce`, `squeeze` and `unsqueeze` axes must be sorted and unique (the front end
//!   sorts them); `softmax` axes must be unique;
//! - transposed window ops (`deconv`, `debox`, `desample`) accept only the borders
//!   `constant` and `ignore`, `multilinear_upsample` only `constant` and `replicate`,
//!   `pad` every border but `ignore`; `reflect` / `reflect-even` require that no tap
//!   reads further than one mirror image away (padding < extent, resp. ≤ extent);
//! - `slice` follows the 1.0.4 rules, clamping begin/end into the axis (so a slice
//!   can be empty, extent 0) and rejecting `begin > end` for positive strides.
//!
//! - every result must fit [`MAX_TENSOR_BYTES`] (known extents multiplied, times the
//!   item size, without overflow), so an absurd padding, dilation, window or repeat
//!   count is an error here, at the op, and never a saturated extent shown as valid.
//!
//! It does not evaluate anything (no constant folding) and ignores operand layouts: the
//! results are row-major, and the verifier compares dtype and extents only.

use super::op::{Border, ConvAttrs, Op, ReduceOp, UnaryOp, WindowAttrs};
use super::types::{DType, Dim, TensorType};
use std::fmt::Write as _;

/// Why an op cannot be applied to its operands. The message names the offending
/// operand, attribute and extents.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InferError {
    pub message: String,
}

impl InferError {
    pub fn new(message: impl Into<String>) -> InferError {
        InferError {
            message: message.into(),
        }
    }
}

fn fail<T>(message: impl Into<String>) -> Result<T, InferError> {
    Err(InferError::new(message))
}

/// `[1,?,3]`
pub fn dims_to_string(dims: &[Dim]) -> String {
    let mut s = String::from("[");
    for (i, d) in dims.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{d}");
    }
    s.push(']');
    s
}

fn list<T: std::fmt::Display>(items: &[T]) -> String {
    let parts: Vec<String> = items.iter().map(|x| x.to_string()).collect();
    format!("[{}]", parts.join(","))
}

// ---------------------------------------------------------------------------------------
// Public arithmetic shared with the interpreter and the back end.
// ---------------------------------------------------------------------------------------

/// Effective window extent `(size − 1)·dilation + 1`.
pub fn effective_window(size: usize, dilation: usize) -> usize {
    size.saturating_sub(1)
        .saturating_mul(dilation)
        .saturating_add(1)
}

/// Output extent of a forward window op with explicit padding:
/// `floor((input + p + q − w) / stride) + 1`; `None` if the window does not fit
/// (`input + p + q < w`) or `size`/`stride` is 0.
pub fn window_output_extent(
    input: usize,
    size: usize,
    stride: usize,
    dilation: usize,
    pad: (usize, usize),
) -> Option<usize> {
    if size == 0 || stride == 0 || dilation == 0 {
        return None;
    }
    let w = effective_window(size, dilation);
    let padded = input.checked_add(pad.0)?.checked_add(pad.1)?;
    if padded < w {
        return None;
    }
    Some((padded - w) / stride + 1)
}

/// NNEF automatic ("SAME") padding of a forward window op, per spec §5.4:
/// `total = max(0, (ceil(in/stride) − 1)·stride + w − in)`, front `total/2`, back the rest.
pub fn auto_padding(input: usize, size: usize, stride: usize, dilation: usize) -> (usize, usize) {
    let s = stride.max(1);
    let out = input.div_ceil(s);
    let w = effective_window(size, dilation);
    let total = out
        .saturating_sub(1)
        .saturating_mul(s)
        .saturating_add(w)
        .saturating_sub(input);
    (total / 2, total - total / 2)
}

/// Automatic padding of a transposed window op mapping `input` to `output` (the padding
/// of the forward op mapping `output` back to `input`), spec §5.4:
/// `total = max(0, (in − 1)·stride + w − out)`.
pub fn transposed_auto_padding(
    input: usize,
    output: usize,
    size: usize,
    stride: usize,
    dilation: usize,
) -> (usize, usize) {
    let w = effective_window(size, dilation);
    let total = (input
        .saturating_sub(1)
        .saturating_mul(stride.max(1))
        .saturating_add(w))
    .saturating_sub(output);
    (total / 2, total - total / 2)
}

fn nth_or_one(v: &[usize], i: usize) -> usize {
    v.get(i).copied().unwrap_or(1)
}

/// The padding `conv` uses on each spatial dim: the explicit one, or automatic
/// padding computed from `input_dims` `[N,C,s…]` and `filter_dims` `[Cout,Cin/G,k…]`.
pub fn resolved_conv_padding(
    attrs: &ConvAttrs,
    input_dims: &[usize],
    filter_dims: &[usize],
) -> Vec<(usize, usize)> {
    if !attrs.padding.is_empty() {
        return attrs.padding.clone();
    }
    let spatial = input_dims.len().saturating_sub(2);
    (0..spatial)
        .map(|i| {
            auto_padding(
                nth_or_one(input_dims, i + 2),
                nth_or_one(filter_dims, i + 2),
                nth_or_one(&attrs.stride, i),
                nth_or_one(&attrs.dilation, i),
            )
        })
        .collect()
}

/// The padding `deconv` uses on each spatial dim: the explicit one, or the automatic
/// padding of the forward conv mapping `output_dims` back to `input_dims` (spec §5.4).
pub fn resolved_deconv_padding(
    attrs: &ConvAttrs,
    input_dims: &[usize],
    filter_dims: &[usize],
    output_dims: &[usize],
) -> Vec<(usize, usize)> {
    if !attrs.padding.is_empty() {
        return attrs.padding.clone();
    }
    let spatial = input_dims.len().saturating_sub(2);
    (0..spatial)
        .map(|i| {
            transposed_auto_padding(
                nth_or_one(input_dims, i + 2),
                nth_or_one(output_dims, i + 2),
                nth_or_one(filter_dims, i + 2),
                nth_or_one(&attrs.stride, i),
                nth_or_one(&attrs.dilation, i),
            )
        })
        .collect()
}

/// The padding a forward window op (`box`, `argmax_pool`, `sample`, `max_pool`) uses on
/// every dim: the explicit one, or automatic padding.
pub fn resolved_window_padding(attrs: &WindowAttrs, input_dims: &[usize]) -> Vec<(usize, usize)> {
    if !attrs.padding.is_empty() {
        return attrs.padding.clone();
    }
    (0..input_dims.len())
        .map(|i| {
            auto_padding(
                nth_or_one(input_dims, i),
                nth_or_one(&attrs.size, i),
                nth_or_one(&attrs.stride, i),
                nth_or_one(&attrs.dilation, i),
            )
        })
        .collect()
}

/// The padding a transposed window op (`debox`, `desample`) uses on every dim: the
/// explicit one, or the automatic padding of the forward op mapping `output_dims` back to
/// Where coordinate `x` (relative to the start of an extent of `n`) reads under a
/// border mode (spec §5.6): itself when inside; for `replicate`, `reflect` and
/// `reflect-even` the mapped coordinate; `Ok(None)` for the filling borders (`constant`,
/// `ignore`), whose outside taps read no element. An error when the mapping leaves the
/// extent (a mirror further than one image away, or an empty extent). The interpreter and
/// the back end both use this, so they agree on every padded read.
pub fn border_source(x: i64, n: usize, border: Border) -> Result<Option<usize>, InferError> {
    let n = n as i64;
    if (0..n).contains(&x) {
        return Ok(Some(x as usize));
    }
    let mapped = match border {
        Border::Constant | Border::Ignore => return Ok(None),
        Border::Replicate => x.clamp(0, (n - 1).max(0)),
        Border::Reflect => {
            if x < 0 {
                -x
            } else {
                2 * (n - 1) - x
            }
        }
        Border::ReflectEven => {
            if x < 0 {
                -x - 1
            } else {
                2 * n - 1 - x
            }
        }
    };
    if !(0..n).contains(&mapped) {
        return fail(format!(
            "{} border cannot reach coordinate {x} of an extent of {n}",
            border.mnemonic()
        ));
    }
    Ok(Some(mapped as usize))
}
/// `input_dims`.
pub fn resolved_transposed_window_padding(
    attrs: &WindowAttrs,
    input_dims: &[usize],
    output_dims: &[usize],
) -> Vec<(usize, usize)> {
    if !attrs.padding.is_empty() {
        return attrs.padding.clone();
    }
    (0..input_dims.len())
        .map(|i| {
            transposed_auto_padding(
                nth_or_one(input_dims, i),
                nth_or_one(output_dims, i),
                nth_or_one(&attrs.size, i),
                nth_or_one(&attrs.stride, i),
                nth_or_one(&attrs.dilation, i),
            )
        })
        .collect()
}

/// The group count `conv` actually uses: `groups`, or the input channels when 0.
pub fn conv_groups(attrs: &ConvAttrs, input_channels: usize) -> usize {
    if attrs.groups == 0 {
        input_channels
    } else {
        attrs.groups
    }
}

/// The group count `deconv` actually uses: `groups`, or when 0 (depthwise) the output
/// channels from `output_shape` if given, else the input channels (spec §5.5).
pub fn deconv_groups(attrs: &ConvAttrs, input_channels: usize) -> usize {
    if attrs.groups != 0 {
        attrs.groups
    } else {
        attrs.output_shape.get(1).copied().unwrap_or(input_channels)
    }
}

/// NNEF broadcasting of two shapes (spec §6.1): left-aligned, a missing trailing dim
/// counts as 1, extents must be equal or one of them 1. With unknown extents: `?` against
/// a known `n ≠ 1` gives `n` (the unknown must be 1 or `n`), `?` against 1 gives `?`.
pub fn broadcast_dims(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, InferError> {
    let rank = a.len().max(b.len());
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let x = a.get(i).copied().unwrap_or(Dim::Known(1));
        let y = b.get(i).copied().unwrap_or(Dim::Known(1));
        let d = match (x, y) {
            (Dim::Known(p), Dim::Known(q)) if p == q => Dim::Known(p),
            (Dim::Known(1), other) | (other, Dim::Known(1)) => other,
            (Dim::Known(p), Dim::Known(q)) => {
                return fail(format!(
                    "cannot broadcast {} with {}: extent {p} vs {q} at axis {i}",
                    dims_to_string(a),
                    dims_to_string(b)
                ));
            }
            (Dim::Known(n), Dim::Unknown) | (Dim::Unknown, Dim::Known(n)) => Dim::Known(n),
            (Dim::Unknown, Dim::Unknown) => Dim::Unknown,
        };
        out.push(d);
    }
    Ok(out)
}

/// Output extents of `reshape` (spec §3.8): the dims `[axis_start, axis_start+count)`
/// (`axis_count == -1`: to the end) are replaced by `shape`, where `0` copies
/// `input[axis_start + i]` and one `-1` takes the remaining volume. An unknown extent in
/// the replaced range makes a `-1` unknown.
pub fn reshape_output_dims(
    input: &[Dim],
    shape: &[i64],
    axis_start: usize,
    axis_count: i64,
) -> Result<Vec<Dim>, InferError> {
    let rank = input.len();
    if axis_start > rank {
        return fail(format!(
            "reshape axis_start {axis_start} is out of range for rank {rank}"
        ));
    }
    let count = if axis_count == -1 {
        rank - axis_start
    } else if axis_count < 0 {
        return fail(format!(
            "reshape axis_count must be -1 or ≥ 0, got {axis_count}"
        ));
    } else {
        let c = axis_count as usize;
        if axis_start + c > rank {
            return fail(format!(
                "reshape axes [{axis_start}, {}) exceed rank {rank}",
                axis_start + c
            ));
        }
        c
    };
    let range = &input[axis_start..axis_start + count];
    let mut new: Vec<Dim> = Vec::with_capacity(shape.len());
    let mut infer_at = None;
    for (i, &s) in shape.iter().enumerate() {
        let d = match s {
            -1 => {
                if infer_at.is_some() {
                    return fail(format!(
                        "reshape shape {} has more than one -1",
                        list(shape)
                    ));
                }
                infer_at = Some(i);
                Dim::Unknown
            }
            0 => match input.get(axis_start + i) {
                Some(&d) => d,
                None => {
                    return fail(format!(
                        "reshape shape item {i} is 0 (copy) but input axis {} does not exist",
                        axis_start + i
                    ));
                }
            },
            n if n > 0 => Dim::Known(n as usize),
            n => return fail(format!("reshape shape item {i} is {n}; items must be ≥ -1")),
        };
        new.push(d);
    }
    let in_volume: Option<usize> = range.iter().map(|d| d.known()).product();
    let others: Option<usize> = new
        .iter()
        .enumerate()
        .filter(|&(i, _)| Some(i) != infer_at)
        .map(|(_, d)| d.known())
        .product();
    match (infer_at, in_volume, others) {
        (Some(i), Some(v), Some(o)) => {
            if o == 0 || v % o != 0 {
                return fail(format!(
                    "cannot reshape {} to {}: volume {v} is not a multiple of {o}",
                    dims_to_string(range),
                    list(shape)
                ));
            }
            new[i] = Dim::Known(v / o);
        }
        (None, Some(v), Some(o)) if v != o => {
            return fail(format!(
                "cannot reshape {} (volume {v}) to {} (volume {o})",
                dims_to_string(range),
                list(shape)
            ));
        }
        _ => {}
    }
    let mut out = input[..axis_start].to_vec();
    out.extend(new);
    out.extend_from_slice(&input[axis_start + count..]);
    Ok(out)
}

/// Which elements of one axis a slice reads: `start`, `start + stride`, … (`count` of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SliceRange {
    pub start: usize,
    pub stride: i64,
    pub count: usize,
}

/// One sliced axis of extent `n` per NNEF 1.0.4 (spec §3.8): negative begin/end count
/// from the end; `end == 0` with stride 1 means "to the end"; begin/end are clamped into
/// the axis (`[0, n]` for positive, `[-1, n-1]` for negative strides).
fn slice_axis(
    n: usize,
    axis: usize,
    begin: i64,
    end: i64,
    stride: i64,
) -> Result<SliceRange, InferError> {
    if stride == 0 {
        return fail(format!("slice stride on axis {axis} is 0"));
    }
    let n = n as i64;
    let mut b = if begin < 0 { begin + n } else { begin };
    let mut e = if end == 0 && stride == 1 {
        n
    } else if end < 0 {
        end + n
    } else {
        end
    };
    if stride > 0 {
        b = b.clamp(0, n);
        e = e.clamp(0, n);
        if b > e {
            return fail(format!(
                "slice on axis {axis}: begin {begin} is after end {end} (extent {n}, stride {stride})"
            ));
        }
        let count = (e - b + stride - 1) / stride;
        Ok(SliceRange {
            start: b as usize,
            stride,
            count: count as usize,
        })
    } else {
        b = b.clamp(-1, n - 1);
        e = e.clamp(-1, n - 1);
        if e > b {
            return fail(format!(
                "slice on axis {axis}: end {end} is after begin {begin} with negative stride {stride} (extent {n})"
            ));
        }
        let step = -stride;
        let count = (b - e + step - 1) / step;
        let start = if count == 0 { 0 } else { b };
        Ok(SliceRange {
            start: start as usize,
            stride,
            count: count as usize,
        })
    }
}

fn check_slice_attrs(
    rank: usize,
    axes: &[usize],
    begin: &[i64],
    end: &[i64],
    stride: &[i64],
) -> Result<(), InferError> {
    if begin.len() != axes.len() || end.len() != axes.len() {
        return fail(format!(
            "slice has {} axes but {} begin and {} end values",
            axes.len(),
            begin.len(),
            end.len()
        ));
    }
    if !stride.is_empty() && stride.len() != axes.len() {
        return fail(format!(
            "slice has {} axes but {} strides",
            axes.len(),
            stride.len()
        ));
    }
    check_axes("slice", axes, rank, false)
}

/// Per input axis, the elements `slice` reads (unsliced axes: everything). The one
/// implementation of the slice rule; the interpreter and code generator iterate these.
pub fn slice_ranges(
    input: &[usize],
    axes: &[usize],
    begin: &[i64],
    end: &[i64],
    stride: &[i64],
) -> Result<Vec<SliceRange>, InferError> {
    check_slice_attrs(input.len(), axes, begin, end, stride)?;
    let mut out: Vec<SliceRange> = input
        .iter()
        .map(|&n| SliceRange {
            start: 0,
            stride: 1,
            count: n,
        })
        .collect();
    for (k, &axis) in axes.iter().enumerate() {
        let s = stride.get(k).copied().unwrap_or(1);
        let (b, e) = (
            begin.get(k).copied().unwrap_or(0),
            end.get(k).copied().unwrap_or(0),
        );
        if let (Some(r), Some(&n)) = (out.get_mut(axis), input.get(axis)) {
            *r = slice_axis(n, axis, b, e, s)?;
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Checks shared by several rules.
// ---------------------------------------------------------------------------------------

fn arity(op: &Op, inputs: &[&TensorType], n: usize) -> Result<(), InferError> {
    if inputs.len() != n {
        return fail(format!(
            "{} expects {n} operand{}, got {}",
            op.mnemonic(),
            if n == 1 { "" } else { "s" },
            inputs.len()
        ));
    }
    Ok(())
}

fn dtype_names(allowed: &[DType]) -> String {
    let names: Vec<&str> = allowed.iter().map(|d| d.mnemonic()).collect();
    names.join(" or ")
}

fn expect_dtype(op: &Op, what: &str, t: &TensorType, allowed: &[DType]) -> Result<(), InferError> {
    if !allowed.contains(&t.dtype) {
        return fail(format!(
            "{} {what} must be {}, got {t}",
            op.mnemonic(),
            dtype_names(allowed)
        ));
    }
    Ok(())
}

fn expect_rank(
    op: &Op,
    what: &str,
    t: &TensorType,
    ok: bool,
    requirement: &str,
) -> Result<(), InferError> {
    if !ok {
        return fail(format!(
            "{} {what} must have {requirement}, got {t}",
            op.mnemonic()
        ));
    }
    Ok(())
}

/// Axes in `[0, rank)`, unique; sorted too when `sorted`.
fn check_axes(what: &str, axes: &[usize], rank: usize, sorted: bool) -> Result<(), InferError> {
    for (i, &a) in axes.iter().enumerate() {
        if a >= rank {
            return fail(format!("{what} axis {a} is out of range for rank {rank}"));
        }
        if axes[..i].contains(&a) {
            return fail(format!("{what} axes {} repeat axis {a}", list(axes)));
        }
        if sorted && i > 0 && axes[i - 1] > a {
            return fail(format!("{what} axes {} must be sorted", list(axes)));
        }
    }
    Ok(())
}

fn merge_dims(what: &str, a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, InferError> {
    if a.len() != b.len() {
        return fail(format!(
            "{what}: {} and {} differ in rank",
            dims_to_string(a),
            dims_to_string(b)
        ));
    }
    a.iter()
        .zip(b)
        .enumerate()
        .map(|(i, (&x, &y))| {
            x.merge(y).ok_or_else(|| {
                InferError::new(format!(
                    "{what}: {} and {} differ at axis {i} ({x} vs {y})",
                    dims_to_string(a),
                    dims_to_string(b)
                ))
            })
        })
        .collect()
}

fn broadcast_types(a: &TensorType, b: &TensorType) -> Result<Vec<Dim>, InferError> {
    broadcast_dims(&a.dims, &b.dims).map_err(|_| {
        let axis = (0..a.rank().max(b.rank()))
            .find(|&i| {
                let x = a.dims.get(i).copied().unwrap_or(Dim::Known(1));
                let y = b.dims.get(i).copied().unwrap_or(Dim::Known(1));
                matches!((x, y), (Dim::Known(p), Dim::Known(q)) if p != q && p != 1 && q != 1)
            })
            .unwrap_or(0);
        let x = a.dims.get(axis).copied().unwrap_or(Dim::Known(1));
        let y = b.dims.get(axis).copied().unwrap_or(Dim::Known(1));
        InferError::new(format!(
            "cannot broadcast {a} with {b}: extent {x} vs {y} at axis {axis}"
        ))
    })
}

/// One-directional broadcast: `param` must broadcast *to* `target` (output = target).
fn broadcast_to(
    op: &Op,
    what: &str,
    param: &TensorType,
    target: &TensorType,
) -> Result<(), InferError> {
    if param.rank() > target.rank() {
        return fail(format!(
            "{} {what} {param} has higher rank than the input {target}",
            op.mnemonic()
        ));
    }
    for (i, (&p, &t)) in param.dims.iter().zip(&target.dims).enumerate() {
        let ok = match (p, t) {
            (Dim::Known(1), _) | (Dim::Unknown, _) | (_, Dim::Unknown) => true,
            (Dim::Known(x), Dim::Known(y)) => x == y,
        };
        if !ok {
            return fail(format!(
                "{} {what} {param} does not broadcast to the input {target}: extent {p} vs {t} at axis {i}",
                op.mnemonic()
            ));
        }
    }
    Ok(())
}

/// Bias of conv/deconv/linear: rank 0, `[1]`, or `[1, C]` with C the output channels or 1.
fn check_bias(op: &Op, bias: &TensorType, channels: Dim) -> Result<(), InferError> {
    expect_dtype(op, "bias", bias, &[DType::F32])?;
    let ok = match bias.dims.as_slice() {
        [] => true,
        [d] => d.merge(Dim::Known(1)).is_some(),
        [a, c] => {
            a.merge(Dim::Known(1)).is_some()
                && (c.merge(channels).is_some() || c.merge(Dim::Known(1)).is_some())
        }
        _ => false,
    };
    if !ok {
        return fail(format!(
            "{} bias must be a scalar or [1,{channels}], got {bias}",
            op.mnemonic()
        ));
    }
    Ok(())
}

fn check_list_len(
    op: &Op,
    name: &str,
    len: usize,
    want: usize,
    allow_empty: bool,
) -> Result<(), InferError> {
    if len != want && !(allow_empty && len == 0) {
        return fail(format!(
            "{} {name} has {len} item{} but the op needs {want}",
            op.mnemonic(),
            if len == 1 { "" } else { "s" }
        ));
    }
    Ok(())
}

fn check_positive(op: &Op, name: &str, v: &[usize]) -> Result<(), InferError> {
    if let Some(i) = v.iter().position(|&x| x == 0) {
        return fail(format!(
            "{} {name} {} has 0 at index {i}; items must be ≥ 1",
            op.mnemonic(),
            list(v)
        ));
    }
    Ok(())
}

/// Reflect borders mirror once: the farthest tap on either side must stay within one
/// mirror image. `lo` = how far before 0 the first tap reads, `hi` = the largest coordinate
/// read.
fn check_border_reach(
    op: &Op,
    border: Border,
    n: usize,
    lo: usize,
    hi: usize,
    axis: usize,
) -> Result<(), InferError> {
    let (front_ok, back_ok) = match border {
        Border::Reflect => (lo < n, hi.saturating_add(2) <= n.saturating_mul(2)),
        Border::ReflectEven => (lo <= n, hi < n.saturating_mul(2)),
        Border::Replicate => (n > 0 || (lo == 0 && hi == 0), true),
        Border::Constant | Border::Ignore => (true, true),
    };
    if !(front_ok && back_ok) {
        return fail(format!(
            "{} border '{}' needs padding within the extent {n} at axis {axis} (reads coordinates {} to {hi})",
            op.mnemonic(),
            border.mnemonic(),
            -(lo as i64)
        ));
    }
    Ok(())
}

/// Output extent of one forward windowed dim (input `i`, kernel `k`).
#[allow(clippy::too_many_arguments)]
fn forward_extent(
    op: &Op,
    border: Border,
    i: Dim,
    k: Dim,
    s: usize,
    d: usize,
    pad: Option<(usize, usize)>,
    axis: usize,
) -> Result<Dim, InferError> {
    let (Dim::Known(n), Dim::Known(kk)) = (i, k) else {
        // Auto padding gives ceil(i/s) whatever the kernel is.
        return Ok(match (pad, i) {
            (None, Dim::Known(n)) => Dim::Known(n.div_ceil(s)),
            _ => Dim::Unknown,
        });
    };
    let p = pad.unwrap_or_else(|| auto_padding(n, kk, s, d));
    let Some(o) = window_output_extent(n, kk, s, d, p) else {
        return fail(format!(
            "{} window of extent {} (size {kk}, dilation {d}) does not fit input extent {n} with padding ({},{}) at axis {axis}",
            op.mnemonic(),
            effective_window(kk, d),
            p.0,
            p.1
        ));
    };
    let hi = ((o - 1) * s + effective_window(kk, d) - 1).saturating_sub(p.0);
    check_border_reach(op, border, n, p.0, hi, axis)?;
    Ok(Dim::Known(o))
}

/// Output extent of one transposed windowed dim (input `i`, kernel `k`), honouring a
/// requested output extent.
#[allow(clippy::too_many_arguments)]
fn transposed_extent(
    op: &Op,
    i: Dim,
    k: Dim,
    s: usize,
    d: usize,
    pad: Option<(usize, usize)>,
    requested: Option<usize>,
    axis: usize,
) -> Result<Dim, InferError> {
    if let Some(o) = requested {
        if let (Dim::Known(n), Dim::Known(kk)) = (i, k) {
            let back = match pad {
                None => Some(o.div_ceil(s)),
                Some(p) => window_output_extent(o, kk, s, d, p),
            };
            if back != Some(n) {
                return fail(format!(
                    "{} output_shape extent {o} at axis {axis} does not map back to input extent {n} (size {kk}, stride {s}, dilation {d})",
                    op.mnemonic()
                ));
            }
        }
        return Ok(Dim::Known(o));
    }
    let Dim::Known(n) = i else {
        return Ok(Dim::Unknown);
    };
    match pad {
        None => grown(op, axis, n.checked_mul(s)),
        Some((p, q)) => {
            let Dim::Known(kk) = k else {
                return Ok(Dim::Unknown);
            };
            let window = kk
                .saturating_sub(1)
                .checked_mul(d)
                .and_then(|w| w.checked_add(1));
            let full = n
                .saturating_sub(1)
                .checked_mul(s)
                .and_then(|x| x.checked_add(window?));
            let Dim::Known(full) = grown(op, axis, full)? else {
                return Ok(Dim::Unknown);
            };
            if n == 0 || full <= p.saturating_add(q) {
                return fail(format!(
                    "{} padding ({p},{q}) at axis {axis} leaves no output (input extent {n}, size {kk}, stride {s}, dilation {d})",
                    op.mnemonic()
                ));
            }
            Ok(Dim::Known(full - p - q))
        }
    }
}

/// A result extent computed with checked arithmetic: an overflow is an error naming the
/// op and axis, never a saturated extent passed on as if it were valid.
fn grown(op: &Op, axis: usize, v: Option<usize>) -> Result<Dim, InferError> {
    v.map(Dim::Known).ok_or_else(|| {
        InferError::new(format!(
            "{} result extent at axis {axis} overflows 64 bits",
            op.mnemonic()
        ))
    })
}

fn check_transposed_border(op: &Op, border: Border) -> Result<(), InferError> {
    if !matches!(border, Border::Constant | Border::Ignore) {
        return fail(format!(
            "{} does not support border '{}' (only 'constant' and 'ignore')",
            op.mnemonic(),
            border.mnemonic()
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The rule.
// ---------------------------------------------------------------------------------------

fn out(dtype: DType, dims: Vec<Dim>) -> Vec<TensorType> {
    vec![TensorType::with_dims(dtype, dims)]
}

/// The largest tensor any stage accepts: 16 GiB. Far above the activations and weights
/// of real models, far below what overflows an address computation, and small enough
/// that the extents' product, and every index into the tensor, fits in 64 bits.
pub const MAX_TENSOR_BYTES: u64 = 16 << 30;

/// Checks that a tensor of type `t` fits [`MAX_TENSOR_BYTES`] (unknown extents are not
/// counted: they are checked once known). `what` names it in the message ("the result").
pub fn check_tensor_size(what: &str, t: &TensorType) -> Result<(), InferError> {
    let bytes = t
        .dims
        .iter()
        .try_fold(t.dtype.size() as u64, |acc, d| match d {
            Dim::Known(n) => acc.checked_mul(*n as u64),
            Dim::Unknown => Some(acc),
        });
    match bytes {
        Some(b) if b <= MAX_TENSOR_BYTES => Ok(()),
        _ => fail(format!(
            "{what} {}{} would take {} bytes, more than the {} GiB allowed for one tensor",
            t.dtype.mnemonic(),
            dims_to_string(&t.dims),
            bytes.map_or("more than 2^64".to_string(), |b| b.to_string()),
            MAX_TENSOR_BYTES >> 30
        )),
    }
}

/// The result types of `op` applied to operands of types `inputs`, or why it does not
/// apply. Results are row-major, and each fits [`MAX_TENSOR_BYTES`].
pub fn infer(op: &Op, inputs: &[&TensorType]) -> Result<Vec<TensorType>, InferError> {
    let results = infer_unbounded(op, inputs)?;
    for r in &results {
        check_tensor_size("the result", r)?;
    }
    Ok(results)
}

fn infer_unbounded(op: &Op, inputs: &[&TensorType]) -> Result<Vec<TensorType>, InferError> {
    match op {
        Op::Unary(u) => {
            arity(op, inputs, 1)?;
            let x = inputs[0];
            let allowed: &[DType] = match u {
                UnaryOp::Copy => &[DType::F32, DType::I32, DType::Bool],
                UnaryOp::Not => &[DType::Bool],
                UnaryOp::Abs | UnaryOp::Neg | UnaryOp::Sign => &[DType::F32, DType::I32],
                _ => &[DType::F32],
            };
            expect_dtype(op, "operand", x, allowed)?;
            Ok(out(x.dtype, x.dims.clone()))
        }
        Op::Binary(b) => {
            arity(op, inputs, 2)?;
            let (x, y) = (inputs[0], inputs[1]);
            let allowed: &[DType] = if b.is_logical() {
                &[DType::Bool]
            } else {
                &[DType::F32, DType::I32]
            };
            expect_dtype(op, "left operand", x, allowed)?;
            expect_dtype(op, "right operand", y, allowed)?;
            if x.dtype != y.dtype {
                return fail(format!(
                    "{} operands differ in dtype: {x} and {y}",
                    op.mnemonic()
                ));
            }
            let dims = broadcast_types(x, y)?;
            let dtype = if b.is_comparison() {
                DType::Bool
            } else {
                x.dtype
            };
            Ok(out(dtype, dims))
        }
        Op::Select => {
            arity(op, inputs, 3)?;
            let (c, t, f) = (inputs[0], inputs[1], inputs[2]);
            expect_dtype(op, "condition", c, &[DType::Bool])?;
            if t.dtype != f.dtype {
                return fail(format!("select branches differ in dtype: {t} and {f}"));
            }
            let tf = TensorType::with_dims(t.dtype, broadcast_types(t, f)?);
            let dims = broadcast_types(c, &tf)?;
            Ok(out(t.dtype, dims))
        }
        Op::Clamp => {
            arity(op, inputs, 3)?;
            let (x, a, b) = (inputs[0], inputs[1], inputs[2]);
            for (what, t) in [("operand", x), ("lower bound", a), ("upper bound", b)] {
                expect_dtype(op, what, t, &[DType::F32, DType::I32])?;
                if t.dtype != x.dtype {
                    return fail(format!("clamp {what} {t} differs in dtype from {x}"));
                }
            }
            let xa = TensorType::with_dims(x.dtype, broadcast_types(x, a)?);
            Ok(out(x.dtype, broadcast_types(&xa, b)?))
        }
        Op::Conv(attrs) => infer_conv(op, attrs, inputs),
        Op::Deconv(attrs) => infer_deconv(op, attrs, inputs),
        Op::Box { window, .. } | Op::MaxPool(window) => {
            arity(op, inputs, 1)?;
            expect_dtype(op, "input", inputs[0], &[DType::F32])?;
            let dims = forward_window(op, window, inputs[0])?;
            Ok(out(DType::F32, dims))
        }
        Op::ArgmaxPool(window) => {
            arity(op, inputs, 1)?;
            expect_dtype(op, "input", inputs[0], &[DType::F32])?;
            let dims = forward_window(op, window, inputs[0])?;
            Ok(out(DType::I32, dims))
        }
        Op::Sample(window) => {
            arity(op, inputs, 2)?;
            expect_dtype(op, "input", inputs[0], &[DType::F32])?;
            expect_dtype(op, "index", inputs[1], &[DType::I32])?;
            let dims = forward_window(op, window, inputs[0])?;
            let dims = merge_dims(
                "sample index must have the output shape",
                &inputs[1].dims,
                &dims,
            )?;
            Ok(out(DType::F32, dims))
        }
        Op::Debox { window, .. } => {
            arity(op, inputs, 1)?;
            expect_dtype(op, "input", inputs[0], &[DType::F32])?;
            Ok(out(DType::F32, transposed_window(op, window, inputs[0])?))
        }
        Op::Desample(window) => {
            arity(op, inputs, 2)?;
            expect_dtype(op, "input", inputs[0], &[DType::F32])?;
            expect_dtype(op, "index", inputs[1], &[DType::I32])?;
            merge_dims(
                "desample index must have the input shape",
                &inputs[1].dims,
                &inputs[0].dims,
            )?;
            Ok(out(DType::F32, transposed_window(op, window, inputs[0])?))
        }
        Op::MultilinearUpsample { factor, border, .. } => {
            arity(op, inputs, 1)?;
            let x = inputs[0];
            expect_dtype(op, "input", x, &[DType::F32])?;
            expect_rank(op, "input", x, x.rank() >= 3, "rank ≥ 3 ([N,C,spatial…])")?;
            check_list_len(op, "factor", factor.len(), x.rank() - 2, false)?;
            check_positive(op, "factor", factor)?;
            if !matches!(border, Border::Constant | Border::Replicate) {
                return fail(format!(
                    "multilinear_upsample does not support border '{}' (only 'constant' and 'replicate')",
                    border.mnemonic()
                ));
            }
            let mut dims = x.dims.clone();
            for (axis, (d, &f)) in dims[2..].iter_mut().zip(factor).enumerate() {
                if let Dim::Known(n) = *d {
                    *d = grown(op, axis + 2, n.checked_mul(f))?;
                }
            }
            Ok(out(DType::F32, dims))
        }
        Op::Reduce { op: r, axes } => {
            arity(op, inputs, 1)?;
            let x = inputs[0];
            let (allowed, result): (&[DType], DType) = match r {
                ReduceOp::Sum | ReduceOp::Mean | ReduceOp::Max | ReduceOp::Min => {
                    (&[DType::F32], DType::F32)
                }
                ReduceOp::Any | ReduceOp::All => (&[DType::Bool], DType::Bool),
                ReduceOp::ArgMax | ReduceOp::ArgMin => (&[DType::F32], DType::I32),
            };
            expect_dtype(op, "input", x, allowed)?;
            check_axes(op.mnemonic(), axes, x.rank(), true)?;
            let mut dims = x.dims.clone();
            for &a in axes {
                dims[a] = Dim::Known(1);
            }
            Ok(out(result, dims))
        }
        Op::MatMul {
            transpose_a,
            transpose_b,
        } => {
            arity(op, inputs, 2)?;
            let (a, b) = (inputs[0], inputs[1]);
            expect_dtype(op, "A", a, &[DType::F32])?;
            expect_dtype(op, "B", b, &[DType::F32])?;
            expect_rank(op, "A", a, a.rank() >= 2, "rank ≥ 2")?;
            if a.rank() != b.rank() {
                return fail(format!("matmul operands differ in rank: A {a}, B {b}"));
            }
            let r = a.rank();
            let (m, ka) = if *transpose_a {
                (a.dims[r - 1], a.dims[r - 2])
            } else {
                (a.dims[r - 2], a.dims[r - 1])
            };
            let (kb, n) = if *transpose_b {
                (b.dims[r - 1], b.dims[r - 2])
            } else {
                (b.dims[r - 2], b.dims[r - 1])
            };
            if ka.merge(kb).is_none() {
                return fail(format!(
                    "matmul inner extents differ: {ka} vs {kb} (A {a}{}, B {b}{})",
                    if *transpose_a { " transposed" } else { "" },
                    if *transpose_b { " transposed" } else { "" }
                ));
            }
            let mut dims = broadcast_dims(&a.dims[..r - 2], &b.dims[..r - 2]).map_err(|e| {
                InferError::new(format!(
                    "matmul batch dims of A {a} and B {b} do not broadcast: {e}"
                ))
            })?;
            dims.push(m);
            dims.push(n);
            Ok(out(DType::F32, dims))
        }
        Op::Linear => {
            arity(op, inputs, 3)?;
            let (x, w, bias) = (inputs[0], inputs[1], inputs[2]);
            expect_dtype(op, "input", x, &[DType::F32])?;
            expect_dtype(op, "filter", w, &[DType::F32])?;
            expect_rank(op, "input", x, x.rank() == 2, "rank 2 ([N,Cin])")?;
            expect_rank(op, "filter", w, w.rank() == 2, "rank 2 ([Cout,Cin])")?;
            if x.dims[1].merge(w.dims[1]).is_none() {
                return fail(format!(
                    "linear input {x} has {} channels but filter {w} expects {}",
                    x.dims[1], w.dims[1]
                ));
            }
            check_bias(op, bias, w.dims[0])?;
            Ok(out(DType::F32, vec![x.dims[0], w.dims[0]]))
        }
        Op::Softmax { axes } => {
            arity(op, inputs, 1)?;
            expect_dtype(op, "input", inputs[0], &[DType::F32])?;
            check_axes("softmax", axes, inputs[0].rank(), false)?;
            Ok(out(DType::F32, inputs[0].dims.clone()))
        }
        Op::BatchNorm { .. } => {
            arity(op, inputs, 5)?;
            let x = inputs[0];
            expect_dtype(op, "input", x, &[DType::F32])?;
            for (what, t) in [
                ("mean", inputs[1]),
                ("variance", inputs[2]),
                ("offset", inputs[3]),
                ("scale", inputs[4]),
            ] {
                expect_dtype(op, what, t, &[DType::F32])?;
                broadcast_to(op, what, t, x)?;
            }
            Ok(out(DType::F32, x.dims.clone()))
        }
        Op::Reshape {
            shape,
            axis_start,
            axis_count,
        } => {
            arity(op, inputs, 1)?;
            let dims = reshape_output_dims(&inputs[0].dims, shape, *axis_start, *axis_count)?;
            Ok(out(inputs[0].dtype, dims))
        }
        Op::Squeeze { axes } => {
            arity(op, inputs, 1)?;
            let x = inputs[0];
            check_axes("squeeze", axes, x.rank(), true)?;
            for &a in axes {
                if x.dims[a].merge(Dim::Known(1)).is_none() {
                    return fail(format!(
                        "squeeze axis {a} of {x} has extent {}, not 1",
                        x.dims[a]
                    ));
                }
            }
            let dims = x
                .dims
                .iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, &d)| d)
                .collect();
            Ok(out(x.dtype, dims))
        }
        Op::Unsqueeze { axes } => {
            arity(op, inputs, 1)?;
            let x = inputs[0];
            let rank = x.rank() + axes.len();
            check_axes("unsqueeze", axes, rank, true)?;
            let mut rest = x.dims.iter();
            let dims = (0..rank)
                .map(|i| {
                    if axes.contains(&i) {
                        Dim::Known(1)
                    } else {
                        rest.next().copied().unwrap_or(Dim::Known(1))
                    }
                })
                .collect();
            Ok(out(x.dtype, dims))
        }
        Op::Transpose { axes } => {
            arity(op, inputs, 1)?;
            let x = inputs[0];
            if axes.len() > x.rank() {
                return fail(format!(
                    "transpose axes {} are longer than the rank of {x}",
                    list(axes)
                ));
            }
            let mut seen = vec![false; axes.len()];
            for &a in axes {
                match seen.get_mut(a) {
                    Some(s) if !*s => *s = true,
                    _ => {
                        return fail(format!(
                            "transpose axes {} are not a permutation of 0..{}",
                            list(axes),
                            axes.len()
                        ));
                    }
                }
            }
            let mut dims: Vec<Dim> = axes.iter().map(|&a| x.dims[a]).collect();
            dims.extend_from_slice(&x.dims[axes.len()..]);
            Ok(out(x.dtype, dims))
        }
        Op::Split { axis, ratios } => {
            arity(op, inputs, 1)?;
            let x = inputs[0];
            if *axis >= x.rank() {
                return fail(format!("split axis {axis} is out of range for {x}"));
            }
            if ratios.is_empty() {
                return fail("split ratios must not be empty");
            }
            check_positive(op, "ratios", ratios)?;
            let total: usize = ratios.iter().sum();
            let unit = match x.dims[*axis] {
                Dim::Known(n) if n % total != 0 => {
                    return fail(format!(
                        "split of extent {n} at axis {axis} by ratios {} (sum {total}) is not exact",
                        list(ratios)
                    ));
                }
                Dim::Known(n) => Some(n / total),
                Dim::Unknown => None,
            };
            Ok(ratios
                .iter()
                .map(|&r| {
                    let mut dims = x.dims.clone();
                    dims[*axis] = unit.map_or(Dim::Unknown, |u| Dim::Known(u * r));
                    TensorType::with_dims(x.dtype, dims)
                })
                .collect())
        }
        Op::Concat { axis } => {
            let Some(first) = inputs.first() else {
                return fail("concat needs at least one operand");
            };
            if *axis >= first.rank() {
                return fail(format!("concat axis {axis} is out of range for {first}"));
            }
            let mut dims = first.dims.clone();
            for (k, t) in inputs.iter().enumerate().skip(1) {
                if t.dtype != first.dtype || t.rank() != first.rank() {
                    return fail(format!(
                        "concat operand {k} {t} does not match operand 0 {first}"
                    ));
                }
                for i in 0..dims.len() {
                    if i == *axis {
                        dims[i] = match (dims[i], t.dims[i]) {
                            (Dim::Known(a), Dim::Known(b)) => grown(op, i, a.checked_add(b))?,
                            _ => Dim::Unknown,
                        };
                    } else {
                        dims[i] = dims[i].merge(t.dims[i]).ok_or_else(|| {
                            InferError::new(format!(
                                "concat operand {k} {t} differs from operand 0 {first} at axis {i}"
                            ))
                        })?;
                    }
                }
            }
            Ok(out(first.dtype, dims))
        }
        Op::Stack { axis } => {
            let Some(first) = inputs.first() else {
                return fail("stack needs at least one operand");
            };
            if *axis > first.rank() {
                return fail(format!(
                    "stack axis {axis} is out of range for {first} (at most {})",
                    first.rank()
                ));
            }
            let mut dims = first.dims.clone();
            for (k, t) in inputs.iter().enumerate().skip(1) {
                if t.dtype != first.dtype {
                    return fail(format!(
                        "stack operand {k} {t} does not match operand 0 {first}"
                    ));
                }
                dims = merge_dims(
                    &format!("stack operand {k} does not match operand 0"),
                    &dims,
                    &t.dims,
                )?;
            }
            dims.insert(*axis, Dim::Known(inputs.len()));
            Ok(out(first.dtype, dims))
        }
        Op::Unstack { axis } => {
            arity(op, inputs, 1)?;
            let x = inputs[0];
            if *axis >= x.rank() {
                return fail(format!("unstack axis {axis} is out of range for {x}"));
            }
            let Dim::Known(n) = x.dims[*axis] else {
                return fail(format!(
                    "unstack needs a known extent at axis {axis}, got {x}"
                ));
            };
            let mut dims = x.dims.clone();
            dims.remove(*axis);
            Ok(vec![TensorType::with_dims(x.dtype, dims); n])
        }
        Op::Slice {
            axes,
            begin,
            end,
            stride,
        } => {
            arity(op, inputs, 1)?;
            let x = inputs[0];
            check_slice_attrs(x.rank(), axes, begin, end, stride)?;
            let mut dims = x.dims.clone();
            for (k, &a) in axes.iter().enumerate() {
                let s = stride.get(k).copied().unwrap_or(1);
                if s == 0 {
                    return fail(format!("slice stride on axis {a} is 0"));
                }
                dims[a] = match x.dims[a] {
                    Dim::Known(n) => Dim::Known(slice_axis(n, a, begin[k], end[k], s)?.count),
                    Dim::Unknown => Dim::Unknown,
                };
            }
            Ok(out(x.dtype, dims))
        }
        Op::Tile { repeats } => {
            arity(op, inputs, 1)?;
            let x = inputs[0];
            check_list_len(op, "repeats", repeats.len(), x.rank(), false)?;
            check_positive(op, "repeats", repeats)?;
            let dims = x
                .dims
                .iter()
                .zip(repeats)
                .enumerate()
                .map(|(axis, (&d, &r))| match d {
                    Dim::Known(n) => grown(op, axis, n.checked_mul(r)),
                    Dim::Unknown => Ok(Dim::Unknown),
                })
                .collect::<Result<_, _>>()?;
            Ok(out(x.dtype, dims))
        }
        Op::Pad {
            padding, border, ..
        } => {
            arity(op, inputs, 1)?;
            let x = inputs[0];
            expect_dtype(op, "input", x, &[DType::F32])?;
            check_list_len(op, "padding", padding.len(), x.rank(), false)?;
            if *border == Border::Ignore {
                return fail("pad does not support border 'ignore'");
            }
            let mut dims = Vec::with_capacity(x.rank());
            for (i, (&d, &(p, q))) in x.dims.iter().zip(padding).enumerate() {
                dims.push(match d {
                    Dim::Known(n) => {
                        check_border_reach(op, *border, n, p, (n + q).saturating_sub(1), i)?;
                        grown(op, i, n.checked_add(p).and_then(|m| m.checked_add(q)))?
                    }
                    Dim::Unknown => Dim::Unknown,
                });
            }
            Ok(out(DType::F32, dims))
        }
        Op::Gather { axis } => {
            arity(op, inputs, 2)?;
            let (x, idx) = (inputs[0], inputs[1]);
            expect_dtype(op, "indices", idx, &[DType::I32])?;
            if *axis >= x.rank() {
                return fail(format!("gather axis {axis} is out of range for {x}"));
            }
            let mut dims = x.dims[..*axis].to_vec();
            dims.extend_from_slice(&idx.dims);
            dims.extend_from_slice(&x.dims[axis + 1..]);
            Ok(out(x.dtype, dims))
        }
        Op::Cast { to } => {
            arity(op, inputs, 1)?;
            Ok(out(*to, inputs[0].dims.clone()))
        }
        Op::RoiPool { output_size, .. } | Op::RoiResample { output_size, .. } => {
            arity(op, inputs, 3)?;
            let (x, rois, index) = (inputs[0], inputs[1], inputs[2]);
            expect_dtype(op, "input", x, &[DType::F32])?;
            expect_dtype(op, "rois", rois, &[DType::F32])?;
            expect_dtype(op, "batch_index", index, &[DType::I32])?;
            expect_rank(op, "input", x, x.rank() >= 3, "rank ≥ 3 ([N,C,spatial…])")?;
            let rois_ok = rois.rank() == 2 && rois.dims[1].merge(Dim::Known(4)).is_some();
            expect_rank(op, "rois", rois, rois_ok, "shape [R,4]")?;
            expect_rank(op, "batch_index", index, index.rank() == 1, "rank 1 ([R])")?;
            let r = rois.dims[0].merge(index.dims[0]).ok_or_else(|| {
                InferError::new(format!(
                    "{} rois {rois} and batch_index {index} disagree on the ROI count",
                    op.mnemonic()
                ))
            })?;
            check_list_len(op, "output_size", output_size.len(), x.rank() - 2, false)?;
            check_positive(op, "output_size", output_size)?;
            let mut dims = vec![r, x.dims[1]];
            dims.extend(output_size.iter().map(|&n| Dim::Known(n)));
            Ok(out(DType::F32, dims))
        }
    }
}

fn check_conv_lists(op: &Op, attrs: &ConvAttrs, spatial: usize) -> Result<(), InferError> {
    check_list_len(op, "padding", attrs.padding.len(), spatial, true)?;
    check_list_len(op, "stride", attrs.stride.len(), spatial, true)?;
    check_list_len(op, "dilation", attrs.dilation.len(), spatial, true)?;
    check_positive(op, "stride", &attrs.stride)?;
    check_positive(op, "dilation", &attrs.dilation)
}

fn conv_operands<'a>(
    op: &Op,
    inputs: &[&'a TensorType],
) -> Result<(&'a TensorType, &'a TensorType, &'a TensorType), InferError> {
    arity(op, inputs, 3)?;
    let (x, w, bias) = (inputs[0], inputs[1], inputs[2]);
    expect_dtype(op, "input", x, &[DType::F32])?;
    expect_dtype(op, "filter", w, &[DType::F32])?;
    expect_rank(op, "input", x, x.rank() >= 3, "rank ≥ 3 ([N,C,spatial…])")?;
    if w.rank() != x.rank() {
        return fail(format!(
            "{} filter {w} must have the rank of the input {x}",
            op.mnemonic()
        ));
    }
    Ok((x, w, bias))
}

fn infer_conv(
    op: &Op,
    attrs: &ConvAttrs,
    inputs: &[&TensorType],
) -> Result<Vec<TensorType>, InferError> {
    let (x, w, bias) = conv_operands(op, inputs)?;
    let spatial = x.rank() - 2;
    check_conv_lists(op, attrs, spatial)?;
    if !attrs.output_shape.is_empty() {
        return fail("conv does not take output_shape");
    }
    let (c, cout, cpg) = (x.dims[1], w.dims[0], w.dims[1]);
    let g = if attrs.groups == 0 {
        c.known()
    } else {
        Some(attrs.groups)
    };
    if let Some(g) = g {
        if let Dim::Known(c) = c
            && (g == 0 || c % g != 0)
        {
            return fail(format!("groups = {g} does not divide input channels {c}"));
        }
        if let Dim::Known(co) = cout
            && (g == 0 || co % g != 0)
        {
            return fail(format!(
                "groups = {g} does not divide output channels {co} (filter {w})"
            ));
        }
        if let (Dim::Known(c), Dim::Known(k)) = (c, cpg)
            && k.saturating_mul(g) != c
        {
            let per_group = if g == 1 {
                String::new()
            } else {
                format!(" ({k} per group × {g} groups)")
            };
            return fail(format!(
                "conv filter {w} expects {} input channels{per_group}, input {x} has {c}",
                k.saturating_mul(g)
            ));
        }
    }
    check_bias(op, bias, cout)?;
    let mut dims = vec![x.dims[0], cout];
    for i in 0..spatial {
        dims.push(forward_extent(
            op,
            attrs.border,
            x.dims[i + 2],
            w.dims[i + 2],
            nth_or_one(&attrs.stride, i),
            nth_or_one(&attrs.dilation, i),
            attrs.padding.get(i).copied(),
            i + 2,
        )?);
    }
    Ok(out(DType::F32, dims))
}

fn infer_deconv(
    op: &Op,
    attrs: &ConvAttrs,
    inputs: &[&TensorType],
) -> Result<Vec<TensorType>, InferError> {
    let (x, w, bias) = conv_operands(op, inputs)?;
    let spatial = x.rank() - 2;
    check_conv_lists(op, attrs, spatial)?;
    check_list_len(op, "output_shape", attrs.output_shape.len(), x.rank(), true)?;
    check_transposed_border(op, attrs.border)?;
    let (cin, fin, per_group) = (x.dims[1], w.dims[0], w.dims[1]);
    if cin.merge(fin).is_none() {
        return fail(format!(
            "deconv filter {w} expects {fin} input channels, input {x} has {cin}"
        ));
    }
    let g = if attrs.groups != 0 {
        Some(attrs.groups)
    } else {
        attrs
            .output_shape
            .get(1)
            .copied()
            .or(cin.merge(fin).and_then(|d| d.known()))
    };
    let mut cout = Dim::Unknown;
    if let Some(g) = g {
        if let Some(c) = cin.merge(fin).and_then(|d| d.known())
            && (g == 0 || c % g != 0)
        {
            return fail(format!("groups = {g} does not divide input channels {c}"));
        }
        if let Dim::Known(k) = per_group {
            cout = grown(op, 1, k.checked_mul(g))?;
        }
    }
    if let Some(&n) = attrs.output_shape.first()
        && x.dims[0].merge(Dim::Known(n)).is_none()
    {
        return fail(format!(
            "deconv output_shape {} has batch {n} but input {x} has {}",
            list(&attrs.output_shape),
            x.dims[0]
        ));
    }
    if let Some(&c) = attrs.output_shape.get(1) {
        cout = cout.merge(Dim::Known(c)).ok_or_else(|| {
            InferError::new(format!(
                "deconv output_shape {} has {c} channels but filter {w} with groups {} gives {cout}",
                list(&attrs.output_shape),
                attrs.groups
            ))
        })?;
    }
    check_bias(op, bias, cout)?;
    let mut dims = vec![x.dims[0], cout];
    for i in 0..spatial {
        dims.push(transposed_extent(
            op,
            x.dims[i + 2],
            w.dims[i + 2],
            nth_or_one(&attrs.stride, i),
            nth_or_one(&attrs.dilation, i),
            attrs.padding.get(i).copied(),
            attrs.output_shape.get(i + 2).copied(),
            i + 2,
        )?);
    }
    if let Some(&n) = attrs.output_shape.first() {
        dims[0] = Dim::Known(n);
    }
    Ok(out(DType::F32, dims))
}

fn check_window_lists(op: &Op, w: &WindowAttrs, rank: usize) -> Result<(), InferError> {
    check_list_len(op, "size", w.size.len(), rank, false)?;
    check_list_len(op, "padding", w.padding.len(), rank, true)?;
    check_list_len(op, "stride", w.stride.len(), rank, true)?;
    check_list_len(op, "dilation", w.dilation.len(), rank, true)?;
    check_positive(op, "size", &w.size)?;
    check_positive(op, "stride", &w.stride)?;
    check_positive(op, "dilation", &w.dilation)
}

fn forward_window(op: &Op, w: &WindowAttrs, x: &TensorType) -> Result<Vec<Dim>, InferError> {
    check_window_lists(op, w, x.rank())?;
    if !w.output_shape.is_empty() {
        return fail(format!("{} does not take output_shape", op.mnemonic()));
    }
    (0..x.rank())
        .map(|i| {
            forward_extent(
                op,
                w.border,
                x.dims[i],
                Dim::Known(w.size[i]),
                nth_or_one(&w.stride, i),
                nth_or_one(&w.dilation, i),
                w.padding.get(i).copied(),
                i,
            )
        })
        .collect()
}

fn transposed_window(op: &Op, w: &WindowAttrs, x: &TensorType) -> Result<Vec<Dim>, InferError> {
    check_window_lists(op, w, x.rank())?;
    check_list_len(op, "output_shape", w.output_shape.len(), x.rank(), true)?;
    check_transposed_border(op, w.border)?;
    (0..x.rank())
        .map(|i| {
            transposed_extent(
                op,
                x.dims[i],
                Dim::Known(w.size[i]),
                nth_or_one(&w.stride, i),
                nth_or_one(&w.dilation, i),
                w.padding.get(i).copied(),
                w.output_shape.get(i).copied(),
                i,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests;
