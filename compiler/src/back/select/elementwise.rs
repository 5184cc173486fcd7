//! Element-wise ops: one kernel over the output shape; operand `k` of shape `s_k` is read
//! at `x_k[broadcast(i)]` (NNEF left-aligned broadcasting: an extent of 1 or a missing
//! trailing dim contributes stride 0).
//!
//! - unary/binary/select/cast: the op itself;
//! - clamp(x, a, b) = max(min(x, b), a);
//! - batch_normalization = offset + scale·(x − mean)/√(variance + ε) (spec §4.9).
//!
//! A constant operand holding a single value (any shape) is a literal in the body, not a
//! load. [`body`] builds one op's expression; `select::fuse` uses it to chain several.

use super::{Lowering, broadcast_strides};
use crate::back::CodegenError;
use crate::back::kernel::{Expr, ExprId, Kernel, Lit};
use crate::ir::{BinaryOp, DType, Op, UnaryOp, ValueId};

pub(super) fn lower(
    lw: &mut Lowering<'_>,
    op: &Op,
    ins: &[ValueId],
    outs: &[ValueId],
) -> Result<(), CodegenError> {
    let out = *outs
        .first()
        .ok_or_else(|| CodegenError::Internal("element-wise op without output".into()))?;
    let oshape = lw.shape(out)?;
    let odt = lw.dtype(out)?;
    let ob = lw.buf(out)?;
    let mut k = lw.kernel(op.mnemonic(), &oshape);
    let mut args = Vec::new();
    for &v in ins {
        args.push(operand(lw, &mut k, v, &oshape)?);
    }
    body(&mut k, op, &args, odt)?;
    k.set_store(ob, 0, super::strides(&oshape));
    lw.push(k);
    Ok(())
}

/// The one value every element of a constant holds, if it holds only one.
pub(super) fn uniform_const(lw: &Lowering<'_>, v: ValueId) -> Option<Lit> {
    let t = lw.g.const_of(v)?;
    if let Some(d) = t.as_f32() {
        let x = *d.first()?;
        return d
            .iter()
            .all(|y| y.to_bits() == x.to_bits())
            .then_some(Lit::F32(x));
    }
    if let Some(d) = t.as_i32() {
        let x = *d.first()?;
        return d.iter().all(|y| *y == x).then_some(Lit::I32(x));
    }
    let d = t.as_bool()?;
    let x = *d.first()?;
    d.iter().all(|y| *y == x).then_some(Lit::Bool(x))
}

/// Operand `v` of an element-wise body whose loop nest has shape `oshape`: a literal
/// when `v` is a constant holding one value (no load, and `pow` can specialize on it),
/// else a load at the broadcast index.
pub(super) fn operand(
    lw: &mut Lowering<'_>,
    k: &mut Kernel,
    v: ValueId,
    oshape: &[usize],
) -> Result<(ExprId, Option<Lit>), CodegenError> {
    let dt = lw.dtype(v)?;
    if let Some(l) = uniform_const(lw, v) {
        return Ok((k.push(Expr::Lit(l), dt), Some(l)));
    }
    let b = lw.buf(v)?;
    let s = lw.shape(v)?;
    let a = k.access(b, 0, broadcast_strides(&s, oshape));
    Ok((k.load(a, dt), None))
}

/// Appends the body of element-wise `op` applied to `args` (each an expression and, for a
/// literal operand, its value) to `k`; returns the result node.
///
/// `pow` with a literal exponent of 1, 2 or 3 becomes multiplications (the general
/// `exp(y·log x)` path is an order of magnitude slower and these are common: layer norms
/// square their deviations).
pub(super) fn body(
    k: &mut Kernel,
    op: &Op,
    args: &[(ExprId, Option<Lit>)],
    odt: DType,
) -> Result<ExprId, CodegenError> {
    let arg = |i: usize| -> Result<ExprId, CodegenError> {
        args.get(i)
            .map(|a| a.0)
            .ok_or_else(|| CodegenError::Internal(format!("`{}` needs operand {i}", op.mnemonic())))
    };
    let e = match op {
        Op::Unary(u) => {
            let x = arg(0)?;
            k.push(Expr::Unary(*u, x), odt)
        }
        Op::Binary(BinaryOp::Pow) if odt == DType::F32 => {
            let (x, y) = (arg(0)?, arg(1)?);
            match args.get(1).and_then(|a| a.1) {
                Some(Lit::F32(e)) if e == 1.0 => k.push(Expr::Unary(UnaryOp::Copy, x), odt),
                Some(Lit::F32(e)) if e == 2.0 => k.push(Expr::Binary(BinaryOp::Mul, x, x), odt),
                Some(Lit::F32(e)) if e == 3.0 => {
                    let sq = k.push(Expr::Binary(BinaryOp::Mul, x, x), odt);
                    k.push(Expr::Binary(BinaryOp::Mul, sq, x), odt)
                }
                _ => k.push(Expr::Binary(BinaryOp::Pow, x, y), odt),
            }
        }
        Op::Binary(b) => {
            let (x, y) = (arg(0)?, arg(1)?);
            k.push(Expr::Binary(*b, x, y), odt)
        }
        Op::Select => {
            let (c, x, y) = (arg(0)?, arg(1)?, arg(2)?);
            k.push(Expr::Select(c, x, y), odt)
        }
        Op::Clamp => {
            let (x, a, b) = (arg(0)?, arg(1)?, arg(2)?);
            let m = k.push(Expr::Binary(BinaryOp::Min, x, b), odt);
            k.push(Expr::Binary(BinaryOp::Max, m, a), odt)
        }
        Op::Cast { to } => {
            let x = arg(0)?;
            k.push(Expr::Cast(*to, x), *to)
        }
        Op::BatchNorm { epsilon } => {
            let (x, mean, var, offset, scale) = (arg(0)?, arg(1)?, arg(2)?, arg(3)?, arg(4)?);
            let f = DType::F32;
            let eps = k.push(Expr::Lit(Lit::F32(*epsilon)), f);
            let ve = k.push(Expr::Binary(BinaryOp::Add, var, eps), f);
            let sd = k.push(Expr::Unary(UnaryOp::Sqrt, ve), f);
            let xm = k.push(Expr::Binary(BinaryOp::Sub, x, mean), f);
            let sx = k.push(Expr::Binary(BinaryOp::Mul, scale, xm), f);
            let q = k.push(Expr::Binary(BinaryOp::Div, sx, sd), f);
            k.push(Expr::Binary(BinaryOp::Add, offset, q), f)
        }
        other => {
            return Err(CodegenError::Internal(format!(
                "`{}` is not element-wise",
                other.mnemonic()
            )));
        }
    };
    Ok(e)
}
