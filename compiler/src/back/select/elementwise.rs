//! Element-wise ops: one kernel over the output shape; operand `k` of shape `s_k` is read
//! at `x_k[broadcast(i)]` (NNEF left-aligned broadcasting: an extent of 1 or a missing
//! trailing dim contributes stride 0).
//!
//! - unary/binary/select/cast: the op itself;
//! - clamp(x, a, b) = max(min(x, b), a);
//! - batch_normalization = offset + scale·(x − mean)/√(variance + ε) (spec §4.9).

use super::{Lowering, broadcast_strides};
use crate::back::CodegenError;
use crate::back::kernel::{Expr, ExprId, Lit};
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
    let mut loads = Vec::new();
    for &v in ins {
        let b = lw.buf(v)?;
        let s = lw.shape(v)?;
        let dt = lw.dtype(v)?;
        let a = k.access(b, 0, broadcast_strides(&s, &oshape));
        loads.push(k.load(a, dt));
    }
    let arg = |i: usize| -> Result<ExprId, CodegenError> {
        loads
            .get(i)
            .copied()
            .ok_or_else(|| CodegenError::Internal(format!("`{}` needs operand {i}", op.mnemonic())))
    };
    match op {
        Op::Unary(u) => {
            let x = arg(0)?;
            k.push(Expr::Unary(*u, x), odt);
        }
        Op::Binary(b) => {
            let (x, y) = (arg(0)?, arg(1)?);
            k.push(Expr::Binary(*b, x, y), odt);
        }
        Op::Select => {
            let (c, x, y) = (arg(0)?, arg(1)?, arg(2)?);
            k.push(Expr::Select(c, x, y), odt);
        }
        Op::Clamp => {
            let (x, a, b) = (arg(0)?, arg(1)?, arg(2)?);
            let m = k.push(Expr::Binary(BinaryOp::Min, x, b), odt);
            k.push(Expr::Binary(BinaryOp::Max, m, a), odt);
        }
        Op::Cast { to } => {
            let x = arg(0)?;
            k.push(Expr::Cast(*to, x), *to);
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
            k.push(Expr::Binary(BinaryOp::Add, offset, q), f);
        }
        other => {
            return Err(CodegenError::Internal(format!(
                "`{}` is not element-wise",
                other.mnemonic()
            )));
        }
    }
    k.set_store(ob, 0, super::strides(&oshape));
    lw.push(k);
    Ok(())
}
