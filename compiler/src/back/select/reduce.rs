//! Reductions and softmax.
//!
//! A reduction of at most 16 elements per output that keeps the innermost axis (a max
//! over a few channels) is one element-wise kernel combining unrolled loads, vectorized
//! along that axis. Otherwise
//! `reduce(x, axes)`: loops over the kept axes (outer, in order) then the reduced axes
//! (inner, in order, so ArgMax/ArgMin count positions row-major over the reduced axes as
//! the spec says); the output keeps rank with extent 1 on reduced axes. Mean multiplies
//! the sum by 1/count in the finalizer (an empty slice gives NaN, like 0/0).
//!
//! `softmax(x, axes)`: three kernels over scratch rows: `m = max_axes x`,
//! `s = Σ_axes exp(x − m)`, `y = exp(x − m) / s` (exp is recomputed rather than stored,
//! so no kernel reads the buffer it writes).

use super::{Lowering, strides};
use crate::back::CodegenError;
use crate::back::kernel::{Expr, Lit, ReduceKind, Reduction};
use crate::ir::{BinaryOp, DType, ReduceOp, UnaryOp, ValueId};

fn first(v: &[ValueId], what: &str) -> Result<ValueId, CodegenError> {
    v.first()
        .copied()
        .ok_or_else(|| CodegenError::Invalid(format!("{what} without operand")))
}

/// Loop order (kept axes, then reduced axes), the extents in that order, and the number
/// of kept loops.
fn order(shape: &[usize], axes: &[usize]) -> Result<(Vec<usize>, usize), CodegenError> {
    if let Some(a) = axes.iter().find(|&&a| a >= shape.len()) {
        return Err(CodegenError::Invalid(format!(
            "reduction axis {a} outside rank {}",
            shape.len()
        )));
    }
    let kept: Vec<usize> = (0..shape.len()).filter(|d| !axes.contains(d)).collect();
    let n = kept.len();
    let mut o = kept;
    o.extend((0..shape.len()).filter(|d| axes.contains(d)));
    Ok((o, n))
}

/// Factor the Mean finalizer applies: 1/count (count 0 gives NaN like 0/0).
fn mean_scale(count: usize) -> f32 {
    if count == 0 {
        f32::NAN
    } else {
        1.0 / count as f32
    }
}

pub(super) fn reduce(
    lw: &mut Lowering<'_>,
    op: ReduceOp,
    axes: &[usize],
    ins: &[ValueId],
    outs: &[ValueId],
) -> Result<(), CodegenError> {
    let x = first(ins, "reduce")?;
    let y = first(outs, "reduce")?;
    let shape = lw.shape(x)?;
    let xdt = lw.dtype(x)?;
    let ydt = lw.dtype(y)?;
    let (ord, nkept) = order(&shape, axes)?;
    let xs = strides(&shape);
    let yshape = lw.shape(y)?;
    if yshape.len() != shape.len() {
        return Err(CodegenError::Invalid(format!(
            "reduce output rank {} differs from input rank {}",
            yshape.len(),
            shape.len()
        )));
    }
    let ys = strides(&yshape);
    let xb = lw.buf(x)?;
    let yb = lw.buf(y)?;
    if let Some(k) = unrolled(lw, op, axes, &shape, &yshape, xb, yb, xdt)? {
        lw.push(k);
        return Ok(());
    }
    let extents: Vec<usize> = ord.iter().map(|&d| shape[d]).collect();
    let mut k = lw.kernel(
        crate::ir::Op::Reduce {
            op,
            axes: Vec::new(),
        }
        .mnemonic(),
        &extents,
    );
    let a = k.access(xb, 0, ord.iter().map(|&d| xs[d]).collect());
    k.load(a, xdt);
    let kind = match op {
        ReduceOp::Sum | ReduceOp::Mean => ReduceKind::Sum,
        ReduceOp::Max => ReduceKind::Max,
        ReduceOp::Min => ReduceKind::Min,
        ReduceOp::Any => ReduceKind::Any,
        ReduceOp::All => ReduceKind::All,
        ReduceOp::ArgMax => ReduceKind::ArgMax,
        ReduceOp::ArgMin => ReduceKind::ArgMin,
    };
    let mut fin = vec![crate::back::kernel::ExprNode {
        expr: Expr::Acc,
        ty: ydt,
    }];
    if op == ReduceOp::Mean {
        let count: usize = axes.iter().map(|&d| shape[d]).product();
        fin.push(crate::back::kernel::ExprNode {
            expr: Expr::Lit(Lit::F32(mean_scale(count))),
            ty: DType::F32,
        });
        fin.push(crate::back::kernel::ExprNode {
            expr: Expr::Binary(
                BinaryOp::Mul,
                crate::back::kernel::ExprId(0),
                crate::back::kernel::ExprId(1),
            ),
            ty: DType::F32,
        });
    }
    k.reduction = Some(Reduction {
        kind,
        first_loop: nkept,
        finalize: fin,
    });
    k.set_store(
        yb,
        0,
        ord.iter()
            .enumerate()
            .map(|(l, &d)| if l < nkept { ys[d] } else { 0 })
            .collect(),
    );
    lw.push(k);
    Ok(())
}

/// Most reduced elements per output for which [`unrolled`] applies.
const UNROLL_MAX: usize = 16;

/// A few reduced elements per output with the innermost axis kept (e.g. a max over 2
/// channels): one element-wise kernel over the output whose body combines the reduced
/// elements, vectorized along the kept innermost axis. The loop form would run a scalar
/// reduction of a few steps per output. Same combine order (row-major over the reduced
/// axes) as the loop form's scalar path.
#[allow(clippy::too_many_arguments)]
fn unrolled(
    lw: &Lowering<'_>,
    op: ReduceOp,
    axes: &[usize],
    shape: &[usize],
    yshape: &[usize],
    xb: crate::back::kernel::BufId,
    yb: crate::back::kernel::BufId,
    xdt: DType,
) -> Result<Option<crate::back::kernel::Kernel>, CodegenError> {
    let combine = match op {
        ReduceOp::Sum | ReduceOp::Mean => BinaryOp::Add,
        ReduceOp::Max => BinaryOp::Max,
        ReduceOp::Min => BinaryOp::Min,
        _ => return Ok(None),
    };
    let count: usize = axes.iter().map(|&d| shape[d]).product();
    let inner_kept = shape
        .len()
        .checked_sub(1)
        .is_some_and(|l| !axes.contains(&l));
    if xdt != DType::F32 || !lw.vectorize || !inner_kept || count == 0 || count > UNROLL_MAX {
        return Ok(None);
    }
    let xs = strides(shape);
    let f = DType::F32;
    let mut k = lw.kernel("reduce_unrolled", yshape);
    let kept_strides: Vec<i64> = (0..shape.len())
        .map(|d| if axes.contains(&d) { 0 } else { xs[d] })
        .collect();
    let rext: Vec<usize> = axes.iter().map(|&d| shape[d]).collect();
    let mut acc = None;
    for i in 0..count {
        // Row-major position i over the reduced axes → element offset.
        let mut rem = i;
        let mut off = 0i64;
        for (j, &d) in axes.iter().enumerate().rev() {
            off += (rem % rext[j]) as i64 * xs[d];
            rem /= rext[j];
        }
        let a = k.access(xb, off, kept_strides.clone());
        let v = k.load(a, f);
        acc = Some(match acc {
            None => v,
            Some(p) => k.push(Expr::Binary(combine, p, v), f),
        });
    }
    if op == ReduceOp::Mean
        && let Some(p) = acc
    {
        let c = k.push(Expr::Lit(Lit::F32(mean_scale(count))), f);
        k.push(Expr::Binary(BinaryOp::Mul, p, c), f);
    }
    k.set_store(yb, 0, strides(yshape));
    Ok(Some(k))
}

pub(super) fn softmax(
    lw: &mut Lowering<'_>,
    axes: &[usize],
    ins: &[ValueId],
    outs: &[ValueId],
) -> Result<(), CodegenError> {
    let x = first(ins, "softmax")?;
    let y = first(outs, "softmax")?;
    let shape = lw.shape(x)?;
    let (ord, nkept) = order(&shape, axes)?;
    let xs = strides(&shape);
    // Row buffers indexed by the kept axes (reduced axes have extent 1).
    let rshape: Vec<usize> = (0..shape.len())
        .map(|d| if axes.contains(&d) { 1 } else { shape[d] })
        .collect();
    let rs = strides(&rshape);
    let rows: usize = rshape.iter().product();
    let xb = lw.buf(x)?;
    let yb = lw.buf(y)?;
    let mb = lw.scratch(DType::F32, rows);
    let sb = lw.scratch(DType::F32, rows);
    let extents: Vec<usize> = ord.iter().map(|&d| shape[d]).collect();
    let xstr: Vec<i64> = ord.iter().map(|&d| xs[d]).collect();
    let rstr: Vec<i64> = ord
        .iter()
        .enumerate()
        .map(|(l, &d)| if l < nkept { rs[d] } else { 0 })
        .collect();
    let f = DType::F32;
    let acc_only = || {
        vec![crate::back::kernel::ExprNode {
            expr: Expr::Acc,
            ty: DType::F32,
        }]
    };

    // m = max x
    let mut k = lw.kernel("softmax_max", &extents);
    let a = k.access(xb, 0, xstr.clone());
    k.load(a, f);
    k.reduction = Some(Reduction {
        kind: ReduceKind::Max,
        first_loop: nkept,
        finalize: acc_only(),
    });
    k.set_store(mb, 0, rstr.clone());
    lw.push(k);

    // s = Σ exp(x − m)
    let mut k = lw.kernel("softmax_sum", &extents);
    let a = k.access(xb, 0, xstr.clone());
    let am = k.access(mb, 0, rstr.clone());
    let xv = k.load(a, f);
    let mv = k.load(am, f);
    let d = k.push(Expr::Binary(BinaryOp::Sub, xv, mv), f);
    k.push(Expr::Unary(UnaryOp::Exp, d), f);
    k.reduction = Some(Reduction {
        kind: ReduceKind::Sum,
        first_loop: nkept,
        finalize: acc_only(),
    });
    k.set_store(sb, 0, rstr.clone());
    lw.push(k);

    // y = exp(x − m) / s, in the input's own loop order.
    let mut k = lw.kernel("softmax_div", &shape);
    let a = k.access(xb, 0, xs.clone());
    let rstr_in: Vec<i64> = (0..shape.len())
        .map(|d| if axes.contains(&d) { 0 } else { rs[d] })
        .collect();
    let am = k.access(mb, 0, rstr_in.clone());
    let asum = k.access(sb, 0, rstr_in);
    let xv = k.load(a, f);
    let mv = k.load(am, f);
    let sv = k.load(asum, f);
    let d = k.push(Expr::Binary(BinaryOp::Sub, xv, mv), f);
    let e = k.push(Expr::Unary(UnaryOp::Exp, d), f);
    k.push(Expr::Binary(BinaryOp::Div, e, sv), f);
    k.set_store(yb, 0, xs);
    lw.push(k);
    Ok(())
}
