//! Data movement: every op is one or more copy kernels whose source and destination
//! accesses encode the index mapping (nothing is computed on the values).
//!
//! With `x` the input, `y` the output, `st(·)` row-major strides, `i` the loop index:
//! - reshape / squeeze / unsqueeze: `y[i] = x[i]` over the flat volume (a copy; aliasing is
//!   left to a later pass);
//! - transpose(axes): loops over y; `y[i] = x[Σ_d i_d · st(x)[axes[d]]]` (trailing dims stay);
//! - split / unstack: one kernel per output, reading `x` at an offset along `axis`;
//! - concat / stack: one kernel per input, writing `y` at an offset along `axis`;
//! - slice: `x[start_d + i_d·stride_d]` from `ir::infer::slice_ranges`;
//! - tile: each output dim `d` becomes two loops (repeat, extent) with input strides
//!   (0, st(x)[d]);
//! - pad: constant border = fill then copy the interior; other borders read `x` through
//!   one i32 index table per padded dim (the interpreter's `border_map`);
//! - gather(axis): `y[a…, j…, b…] = x[a…, clamp(indices[j…]), b…]`.

use super::{Lowering, strides};
use crate::back::CodegenError;
use crate::back::kernel::{Expr, Indirect, Lit};
use crate::ir::{Border, DType, ValueId};

type R = Result<(), CodegenError>;

fn first(v: &[ValueId], what: &str) -> Result<ValueId, CodegenError> {
    v.first()
        .copied()
        .ok_or_else(|| CodegenError::Invalid(format!("{what} without operand")))
}

/// Copy kernel: loops `extents`, `y[oy + Σ sy·i] = x[ox + Σ sx·i]`.
#[allow(clippy::too_many_arguments)]
fn copy_kernel(
    lw: &mut Lowering<'_>,
    what: &str,
    x: ValueId,
    ox: i64,
    sx: Vec<i64>,
    y: ValueId,
    oy: i64,
    sy: Vec<i64>,
    extents: &[usize],
) -> R {
    let xb = lw.buf(x)?;
    let yb = lw.buf(y)?;
    let dt = lw.dtype(x)?;
    let mut k = lw.kernel(what, extents);
    let a = k.access(xb, ox, sx);
    k.load(a, dt);
    k.set_store(yb, oy, sy);
    lw.push(k);
    Ok(())
}

pub(super) fn reshape(lw: &mut Lowering<'_>, ins: &[ValueId], outs: &[ValueId]) -> R {
    let x = first(ins, "reshape")?;
    let y = first(outs, "reshape")?;
    let n: usize = lw.shape(x)?.iter().product();
    if n != lw.shape(y)?.iter().product::<usize>() {
        return Err(CodegenError::Invalid(
            "reshape changes the element count".into(),
        ));
    }
    copy_kernel(lw, "reshape", x, 0, vec![1], y, 0, vec![1], &[n])
}

pub(super) fn transpose(
    lw: &mut Lowering<'_>,
    axes: &[usize],
    ins: &[ValueId],
    outs: &[ValueId],
) -> R {
    let x = first(ins, "transpose")?;
    let y = first(outs, "transpose")?;
    let xs = strides(&lw.shape(x)?);
    let yshape = lw.shape(y)?;
    let perm: Vec<usize> = (0..yshape.len())
        .map(|d| axes.get(d).copied().unwrap_or(d))
        .collect();
    let sx = perm
        .iter()
        .map(|&p| {
            xs.get(p)
                .copied()
                .ok_or_else(|| CodegenError::Invalid(format!("transpose axis {p} out of range")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    copy_kernel(lw, "transpose", x, 0, sx, y, 0, strides(&yshape), &yshape)
}

pub(super) fn split(lw: &mut Lowering<'_>, axis: usize, ins: &[ValueId], outs: &[ValueId]) -> R {
    let x = first(ins, "split")?;
    let xs = strides(&lw.shape(x)?);
    let step = *xs
        .get(axis)
        .ok_or_else(|| CodegenError::Invalid(format!("split axis {axis} out of range")))?;
    let mut start = 0i64;
    for &y in outs {
        let ys = lw.shape(y)?;
        copy_kernel(
            lw,
            "split",
            x,
            start * step,
            xs.clone(),
            y,
            0,
            strides(&ys),
            &ys,
        )?;
        start += ys.get(axis).copied().unwrap_or(0) as i64;
    }
    Ok(())
}

pub(super) fn concat(lw: &mut Lowering<'_>, axis: usize, ins: &[ValueId], outs: &[ValueId]) -> R {
    let y = first(outs, "concat")?;
    let ys = strides(&lw.shape(y)?);
    let step = *ys
        .get(axis)
        .ok_or_else(|| CodegenError::Invalid(format!("concat axis {axis} out of range")))?;
    let mut start = 0i64;
    let elem = lw.g.ty(y).dtype.size() as i64;
    for &x in ins {
        let xsh = lw.shape(x)?;
        // Placed in the output already by the memory plan (in-place concatenation).
        let in_place = match (lw.plan.slot(x), lw.plan.slot(y)) {
            (Some(sx), Some(sy)) => sx.offset as i64 == sy.offset as i64 + start * step * elem,
            _ => false,
        };
        if in_place {
            start += xsh.get(axis).copied().unwrap_or(0) as i64;
            continue;
        }
        copy_kernel(
            lw,
            "concat",
            x,
            0,
            strides(&xsh),
            y,
            start * step,
            ys.clone(),
            &xsh,
        )?;
        start += xsh.get(axis).copied().unwrap_or(0) as i64;
    }
    Ok(())
}

fn without(v: &[i64], axis: usize) -> Vec<i64> {
    v.iter()
        .enumerate()
        .filter(|(d, _)| *d != axis)
        .map(|(_, s)| *s)
        .collect()
}

pub(super) fn stack(lw: &mut Lowering<'_>, axis: usize, ins: &[ValueId], outs: &[ValueId]) -> R {
    let y = first(outs, "stack")?;
    let ys = strides(&lw.shape(y)?);
    let step = *ys
        .get(axis)
        .ok_or_else(|| CodegenError::Invalid(format!("stack axis {axis} out of range")))?;
    for (j, &x) in ins.iter().enumerate() {
        let xsh = lw.shape(x)?;
        copy_kernel(
            lw,
            "stack",
            x,
            0,
            strides(&xsh),
            y,
            j as i64 * step,
            without(&ys, axis),
            &xsh,
        )?;
    }
    Ok(())
}

pub(super) fn unstack(lw: &mut Lowering<'_>, axis: usize, ins: &[ValueId], outs: &[ValueId]) -> R {
    let x = first(ins, "unstack")?;
    let xs = strides(&lw.shape(x)?);
    let step = *xs
        .get(axis)
        .ok_or_else(|| CodegenError::Invalid(format!("unstack axis {axis} out of range")))?;
    for (j, &y) in outs.iter().enumerate() {
        let ysh = lw.shape(y)?;
        copy_kernel(
            lw,
            "unstack",
            x,
            j as i64 * step,
            without(&xs, axis),
            y,
            0,
            strides(&ysh),
            &ysh,
        )?;
    }
    Ok(())
}

pub(super) fn slice(
    lw: &mut Lowering<'_>,
    axes: &[usize],
    begin: &[i64],
    end: &[i64],
    stride: &[i64],
    ins: &[ValueId],
    outs: &[ValueId],
) -> R {
    let x = first(ins, "slice")?;
    let y = first(outs, "slice")?;
    let xsh = lw.shape(x)?;
    let xs = strides(&xsh);
    let ranges = crate::ir::infer::slice_ranges(&xsh, axes, begin, end, stride)
        .map_err(|e| CodegenError::Invalid(e.to_string()))?;
    let extents: Vec<usize> = ranges.iter().map(|r| r.count).collect();
    if extents != lw.shape(y)? {
        return Err(CodegenError::Invalid(
            "slice output shape disagrees with its ranges".into(),
        ));
    }
    let off: i64 = ranges
        .iter()
        .zip(&xs)
        .map(|(r, s)| r.start as i64 * s)
        .sum();
    let sx: Vec<i64> = ranges.iter().zip(&xs).map(|(r, s)| r.stride * s).collect();
    copy_kernel(lw, "slice", x, off, sx, y, 0, strides(&extents), &extents)
}

pub(super) fn tile(lw: &mut Lowering<'_>, ins: &[ValueId], outs: &[ValueId]) -> R {
    let x = first(ins, "tile")?;
    let y = first(outs, "tile")?;
    let xsh = lw.shape(x)?;
    let ysh = lw.shape(y)?;
    let xs = strides(&xsh);
    let ys = strides(&ysh);
    let (mut ext, mut sx, mut sy) = (Vec::new(), Vec::new(), Vec::new());
    for d in 0..ysh.len() {
        let n = xsh.get(d).copied().unwrap_or(1);
        let reps = ysh[d].checked_div(n).unwrap_or(0);
        ext.extend([reps, n]);
        sx.extend([0, xs.get(d).copied().unwrap_or(0)]);
        sy.extend([n as i64 * ys[d], ys[d]]);
    }
    copy_kernel(lw, "tile", x, 0, sx, y, 0, sy, &ext)
}

/// Where output coordinate `x` (relative to the input start) reads, for the mapping
/// borders (`ir::infer::border_source`, the interpreter's rule).
fn border_map(x: i64, n: usize, border: Border) -> Result<usize, CodegenError> {
    match crate::ir::infer::border_source(x, n, border) {
        Ok(Some(i)) => Ok(i),
        Ok(None) => Err(CodegenError::Internal(format!(
            "{} is not a mapping border",
            border.mnemonic()
        ))),
        Err(e) => Err(CodegenError::Invalid(e.message)),
    }
}

pub(super) fn pad(
    lw: &mut Lowering<'_>,
    padding: &[(usize, usize)],
    border: Border,
    value: f32,
    ins: &[ValueId],
    outs: &[ValueId],
) -> R {
    let x = first(ins, "pad")?;
    let y = first(outs, "pad")?;
    let xsh = lw.shape(x)?;
    let ysh = lw.shape(y)?;
    let dt = lw.dtype(x)?;
    if padding.len() != xsh.len() {
        return Err(CodegenError::Invalid(format!(
            "pad has {} paddings for rank {}",
            padding.len(),
            xsh.len()
        )));
    }
    let xs = strides(&xsh);
    let ys = strides(&ysh);
    match border {
        Border::Ignore => Err(CodegenError::Unsupported("pad with border `ignore`".into())),
        Border::Constant => {
            let yb = lw.buf(y)?;
            let mut k = lw.kernel("pad_fill", &ysh);
            let lit = match dt {
                DType::F32 => Lit::F32(value),
                DType::I32 => Lit::I32(value as i32),
                DType::Bool => Lit::Bool(value != 0.0),
            };
            k.push(Expr::Lit(lit), dt);
            k.set_store(yb, 0, ys.clone());
            lw.push(k);
            let off: i64 = padding.iter().zip(&ys).map(|(p, s)| p.0 as i64 * s).sum();
            copy_kernel(lw, "pad_copy", x, 0, xs, y, off, ys, &xsh)
        }
        _ => {
            if xsh.contains(&0) && ysh.iter().product::<usize>() > 0 {
                return Err(CodegenError::Invalid(format!(
                    "{} padding of an empty tensor",
                    border.mnemonic()
                )));
            }
            let xb = lw.buf(x)?;
            let yb = lw.buf(y)?;
            let mut tables = Vec::new();
            for d in 0..xsh.len() {
                if padding[d] == (0, 0) {
                    continue;
                }
                let map = (0..ysh[d])
                    .map(|o| {
                        border_map(o as i64 - padding[d].0 as i64, xsh[d], border).map(|i| i as i32)
                    })
                    .collect::<Result<Vec<i32>, _>>()?;
                let bytes = map.iter().flat_map(|v| v.to_le_bytes()).collect();
                tables.push((d, lw.const_buf(bytes, DType::I32, ysh[d])));
            }
            let mut k = lw.kernel("pad", &ysh);
            let sx: Vec<i64> = (0..xsh.len())
                .map(|d| if padding[d] == (0, 0) { xs[d] } else { 0 })
                .collect();
            let a = k.access(xb, 0, sx);
            for (d, tb) in tables {
                let unit: Vec<i64> = (0..ysh.len()).map(|l| i64::from(l == d)).collect();
                let t = k.access(tb, 0, unit);
                k.accesses[a.0 as usize].indirect.push(Indirect {
                    index: t,
                    scale: xs[d],
                    bound: xsh[d],
                });
            }
            k.load(a, dt);
            k.set_store(yb, 0, ys);
            lw.push(k);
            Ok(())
        }
    }
}

pub(super) fn gather(lw: &mut Lowering<'_>, axis: usize, ins: &[ValueId], outs: &[ValueId]) -> R {
    let x = first(ins, "gather")?;
    let idx = *ins
        .get(1)
        .ok_or_else(|| CodegenError::Invalid("gather without indices".into()))?;
    let y = first(outs, "gather")?;
    let xsh = lw.shape(x)?;
    let ish = lw.shape(idx)?;
    let ysh = lw.shape(y)?;
    if axis >= xsh.len() || ysh.len() != xsh.len() - 1 + ish.len() {
        return Err(CodegenError::Invalid("gather shapes disagree".into()));
    }
    let xs = strides(&xsh);
    let is = strides(&ish);
    let xb = lw.buf(x)?;
    let ib = lw.buf(idx)?;
    let yb = lw.buf(y)?;
    let dt = lw.dtype(x)?;
    let mut sx = Vec::new();
    let mut si = Vec::new();
    for l in 0..ysh.len() {
        if l < axis {
            sx.push(xs[l]);
            si.push(0);
        } else if l < axis + ish.len() {
            sx.push(0);
            si.push(is[l - axis]);
        } else {
            sx.push(xs[l - ish.len() + 1]);
            si.push(0);
        }
    }
    let mut k = lw.kernel("gather", &ysh);
    let ia = k.access(ib, 0, si);
    let a = k.access(xb, 0, sx);
    k.accesses[a.0 as usize].indirect.push(Indirect {
        index: ia,
        scale: xs[axis],
        bound: xsh[axis],
    });
    k.load(a, dt);
    k.set_store(yb, 0, strides(&ysh));
    lw.push(k);
    Ok(())
}
