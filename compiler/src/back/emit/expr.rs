//! Lowering of one kernel expression node ([`Expr`]) to CLIF at a given lane count.
//!
//! Value representation: f32 → `f32`/`f32x4`, i32 → `i32`/`i32x4`, bool → `i8` holding
//! 0 or 1 (scalar only; `back::schedule` never vectorizes a body that touches bool).
//! Integer division by zero and `i32::MIN / −1` give 0 instead of trapping. This file
//! does not decide what is vectorizable: [`vectorizable`] answers, the schedule asks.

use super::math::Cx;
use crate::back::CodegenError;
use crate::back::kernel::{Expr, ExprNode, Lit};
use crate::ir::{BinaryOp, DType, UnaryOp};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F32, I8, I32};
use cranelift_codegen::ir::{InstBuilder, Value};

/// Whether a node has an f32x4/i32x4 lowering.
pub(crate) fn vectorizable(n: &ExprNode, operand_ty: impl Fn(usize) -> DType) -> bool {
    if n.ty == DType::Bool {
        return false;
    }
    match &n.expr {
        Expr::Load(_) | Expr::Lit(_) | Expr::Acc => true,
        Expr::Unary(op, a) => {
            let t = operand_ty(a.0 as usize);
            match t {
                DType::F32 => !matches!(op, UnaryOp::Not),
                DType::I32 => matches!(
                    op,
                    UnaryOp::Copy | UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sign
                ),
                DType::Bool => false,
            }
        }
        Expr::Binary(op, a, _) => match operand_ty(a.0 as usize) {
            DType::F32 => !op.is_comparison() && !op.is_logical(),
            DType::I32 => matches!(
                op,
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Min | BinaryOp::Max
            ),
            DType::Bool => false,
        },
        Expr::Select(..) => false,
        Expr::Cast(to, a) => matches!(
            (operand_ty(a.0 as usize), to),
            (DType::F32, DType::F32) | (DType::I32, DType::I32) | (DType::I32, DType::F32)
        ),
    }
}

fn unsupported(what: String) -> CodegenError {
    CodegenError::Unsupported(what)
}

/// Lowers `n` given its operand values (`args` indexed by expression id).
pub(crate) fn lower(
    cx: &mut Cx<'_, '_>,
    n: &ExprNode,
    args: &[Value],
    tys: &[DType],
    acc: Option<Value>,
) -> Result<Value, CodegenError> {
    let arg = |i: crate::back::kernel::ExprId| -> Result<(Value, DType), CodegenError> {
        match (args.get(i.0 as usize), tys.get(i.0 as usize)) {
            (Some(v), Some(t)) => Ok((*v, *t)),
            _ => Err(CodegenError::Internal(format!(
                "expression operand e{} out of range",
                i.0
            ))),
        }
    };
    Ok(match &n.expr {
        Expr::Load(_) => {
            return Err(CodegenError::Internal(
                "load lowered as an expression".into(),
            ));
        }
        Expr::Acc => {
            acc.ok_or_else(|| CodegenError::Internal("acc outside a reduction finalizer".into()))?
        }
        Expr::Lit(l) => match l {
            Lit::F32(x) => cx.fc(*x),
            Lit::I32(x) => cx.ic(*x),
            Lit::Bool(x) => cx.b.ins().iconst(I8, i64::from(*x)),
        },
        Expr::Unary(op, a) => {
            let (x, t) = arg(*a)?;
            unary(cx, *op, x, t)?
        }
        Expr::Binary(op, a, b) => {
            let (x, t) = arg(*a)?;
            let (y, _) = arg(*b)?;
            binary(cx, *op, x, y, t)?
        }
        Expr::Select(c, a, b) => {
            let (c, _) = arg(*c)?;
            let (x, _) = arg(*a)?;
            let (y, _) = arg(*b)?;
            cx.b.ins().select(c, x, y)
        }
        Expr::Cast(to, a) => {
            let (x, from) = arg(*a)?;
            cast(cx, x, from, *to)
        }
    })
}

fn cast(cx: &mut Cx<'_, '_>, x: Value, from: DType, to: DType) -> Value {
    let fty = cx.fty();
    let ity = cx.ity();
    match (from, to) {
        (a, b) if a == b => x,
        (DType::F32, DType::I32) => cx.b.ins().fcvt_to_sint_sat(ity, x),
        (DType::I32, DType::F32) => cx.b.ins().fcvt_from_sint(fty, x),
        (DType::F32, DType::Bool) => {
            let z = cx.fc(0.0);
            cx.b.ins().fcmp(FloatCC::NotEqual, x, z)
        }
        (DType::I32, DType::Bool) => cx.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0),
        (DType::Bool, DType::I32) => cx.b.ins().uextend(I32, x),
        (DType::Bool, DType::F32) => {
            let i = cx.b.ins().uextend(I32, x);
            cx.b.ins().fcvt_from_sint(F32, i)
        }
        _ => x,
    }
}

fn unary(cx: &mut Cx<'_, '_>, op: UnaryOp, x: Value, t: DType) -> Result<Value, CodegenError> {
    use UnaryOp as U;
    if t == DType::Bool {
        return match op {
            U::Not => Ok(cx.b.ins().bxor_imm_s(x, 1)),
            U::Copy => Ok(x),
            _ => Err(unsupported(format!(
                "{} on bool",
                crate::ir::Op::Unary(op).mnemonic()
            ))),
        };
    }
    if t == DType::I32 {
        return match op {
            U::Copy => Ok(x),
            U::Neg => Ok(cx.b.ins().ineg(x)),
            U::Abs => Ok(cx.b.ins().iabs(x)),
            U::Sign => {
                let z = cx.ic(0);
                let one = cx.ic(1);
                let m1 = cx.ic(-1);
                let pos = cx.icmp(IntCC::SignedGreaterThan, x, z);
                let neg = cx.icmp(IntCC::SignedLessThan, x, z);
                let r = cx.sel(neg, m1, z);
                Ok(cx.sel(pos, one, r))
            }
            _ => Err(unsupported(format!(
                "{} on i32",
                crate::ir::Op::Unary(op).mnemonic()
            ))),
        };
    }
    Ok(match op {
        U::Copy => x,
        U::Neg => cx.b.ins().fneg(x),
        U::Rcp => cx.rcp(x),
        U::Exp => cx.exp(x),
        U::Log => cx.log(x),
        U::Log2 => {
            let l = cx.log(x);
            cx.fmulc(l, std::f32::consts::LOG2_E)
        }
        U::Sin => cx.sincos(x, false),
        U::Cos => cx.sincos(x, true),
        U::Tan => {
            let s = cx.sincos(x, false);
            let c = cx.sincos(x, true);
            cx.fdiv(s, c)
        }
        U::Atan => cx.atan(x),
        U::Asin => {
            // asin x = atan(x / √(1 − x²))
            let xx = cx.fmul(x, x);
            let d = cx.crsub(1.0, xx);
            let s = cx.b.ins().sqrt(d);
            let q = cx.fdiv(x, s);
            cx.atan(q)
        }
        U::Acos => {
            let xx = cx.fmul(x, x);
            let d = cx.crsub(1.0, xx);
            let s = cx.b.ins().sqrt(d);
            let q = cx.fdiv(x, s);
            let a = cx.atan(q);
            cx.crsub(std::f32::consts::FRAC_PI_2, a)
        }
        U::Sinh | U::Cosh => {
            let e = cx.exp(x);
            let n = cx.b.ins().fneg(x);
            let ei = cx.exp(n);
            let s = if op == U::Sinh {
                cx.fsub(e, ei)
            } else {
                cx.fadd(e, ei)
            };
            cx.fmulc(s, 0.5)
        }
        U::Tanh => cx.tanh(x),
        U::Asinh => {
            // sign(x)·ln(|x| + √(x²+1)); ln|x| + ln 2 above 10⁴ (where the two agree to
            // f32 precision), so x² cannot overflow.
            let a = cx.b.ins().fabs(x);
            let aa = cx.fmul(a, a);
            let d = cx.faddc(aa, 1.0);
            let s = cx.b.ins().sqrt(d);
            let sum = cx.fadd(a, s);
            let l = large_arg_log(cx, a, sum);
            cx.copysign(l, x)
        }
        U::Acosh => {
            // ln(x + √(x²−1)), and ln x + ln 2 above 10⁴ as asinh; NaN below 1 (a huge
            // negative x would otherwise give ln(x + ∞) = ∞).
            let xx = cx.fmul(x, x);
            let d = cx.faddc(xx, -1.0);
            let s = cx.b.ins().sqrt(d);
            let sum = cx.fadd(x, s);
            let l = large_arg_log(cx, x, sum);
            let one = cx.fc(1.0);
            let ok = cx.fcmp(FloatCC::GreaterThanOrEqual, x, one);
            let nan = cx.fc(f32::NAN);
            cx.sel(ok, l, nan)
        }
        U::Atanh => {
            let one = cx.fc(1.0);
            let p = cx.fadd(one, x);
            let m = cx.fsub(one, x);
            let q = cx.fdiv(p, m);
            let l = cx.log(q);
            cx.fmulc(l, 0.5)
        }
        U::Abs => cx.b.ins().fabs(x),
        U::Sign => cx.fsign(x),
        U::Not => return Err(unsupported("not on f32".into())),
        U::Floor => cx.b.ins().floor(x),
        U::Ceil => cx.b.ins().ceil(x),
        U::Round => cx.round(x),
        U::Sqr => cx.fmul(x, x),
        U::Sqrt => cx.b.ins().sqrt(x),
        U::Rsqr => {
            let xx = cx.fmul(x, x);
            cx.rcp(xx)
        }
        U::Rsqrt => {
            let s = cx.b.ins().sqrt(x);
            cx.rcp(s)
        }
        U::Relu => {
            let z = cx.fc(0.0);
            cx.fmax(x, z)
        }
        U::Sigmoid => cx.sigmoid(x),
        U::Softplus => {
            // max(x,0) + ln(1 + e^{−|x|}): no overflow for large x.
            let z = cx.fc(0.0);
            let m = cx.fmax(x, z);
            let a = cx.b.ins().fabs(x);
            let na = cx.b.ins().fneg(a);
            let e = cx.exp(na);
            let e1 = cx.faddc(e, 1.0);
            let l = cx.log(e1);
            cx.fadd(m, l)
        }
        U::Silu => {
            let s = cx.sigmoid(x);
            cx.fmul(x, s)
        }
        U::Gelu => {
            let y = cx.fmulc(x, 1.702);
            let s = cx.sigmoid(y);
            cx.fmul(x, s)
        }
        U::Elu { alpha } => elu(cx, x, alpha, 1.0),
        U::Selu { alpha, lambda } => elu(cx, x, alpha, lambda),
        U::LeakyRelu { alpha } => {
            let z = cx.fc(0.0);
            let neg = cx.fcmp(FloatCC::LessThan, x, z);
            let ax = cx.fmulc(x, alpha);
            cx.sel(neg, ax, x)
        }
    })
}

/// ln(sum), or ln(a) + ln 2 where a > 10⁴ (`sum` ≈ 2a there, but its x² may overflow;
/// ±∞ and NaN come through either way).
fn large_arg_log(cx: &mut Cx<'_, '_>, a: Value, sum: Value) -> Value {
    let lim = cx.fc(1e4);
    let big = cx.fcmp(FloatCC::GreaterThan, a, lim);
    let arg = cx.sel(big, a, sum);
    let l = cx.log(arg);
    let ln2 = cx.fc(std::f32::consts::LN_2);
    let z = cx.fc(0.0);
    let add = cx.sel(big, ln2, z);
    cx.fadd(l, add)
}

/// lambda · (x < 0 ? alpha·(eˣ − 1) : x)
fn elu(cx: &mut Cx<'_, '_>, x: Value, alpha: f32, lambda: f32) -> Value {
    let z = cx.fc(0.0);
    let neg = cx.fcmp(FloatCC::LessThan, x, z);
    let e = cx.exp(x);
    let em1 = cx.faddc(e, -1.0);
    let a = cx.fmulc(em1, alpha);
    let r = cx.sel(neg, a, x);
    if lambda == 1.0 {
        r
    } else {
        cx.fmulc(r, lambda)
    }
}

fn binary(
    cx: &mut Cx<'_, '_>,
    op: BinaryOp,
    x: Value,
    y: Value,
    t: DType,
) -> Result<Value, CodegenError> {
    use BinaryOp as B;
    let name = || crate::ir::Op::Binary(op).mnemonic();
    match t {
        DType::F32 => Ok(match op {
            B::Add => cx.fadd(x, y),
            B::Sub => cx.fsub(x, y),
            B::Mul => cx.fmul(x, y),
            B::Div => cx.fdiv(x, y),
            B::Pow => cx.pow(x, y),
            B::Min => cx.fmin(x, y),
            B::Max => cx.fmax(x, y),
            B::Lt => cx.fcmp(FloatCC::LessThan, x, y),
            B::Gt => cx.fcmp(FloatCC::GreaterThan, x, y),
            B::Le => cx.fcmp(FloatCC::LessThanOrEqual, x, y),
            B::Ge => cx.fcmp(FloatCC::GreaterThanOrEqual, x, y),
            B::Eq => cx.fcmp(FloatCC::Equal, x, y),
            B::Ne => cx.fcmp(FloatCC::NotEqual, x, y),
            B::And | B::Or => return Err(unsupported(format!("{} on f32", name()))),
        }),
        DType::I32 => Ok(match op {
            B::Add => cx.b.ins().iadd(x, y),
            B::Sub => cx.b.ins().isub(x, y),
            B::Mul => cx.b.ins().imul(x, y),
            B::Div => {
                // Guard the two trapping cases: y = 0 and MIN / −1 (both give 0).
                let zero = cx.b.ins().iconst(I32, 0);
                let one = cx.b.ins().iconst(I32, 1);
                let yz = cx.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
                let ym1 = cx.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
                let xmin = cx.b.ins().icmp_imm_s(IntCC::Equal, x, i64::from(i32::MIN));
                let ovf = cx.b.ins().band(ym1, xmin);
                let bad = cx.b.ins().bor(yz, ovf);
                let ys = cx.b.ins().select(bad, one, y);
                let q = cx.b.ins().sdiv(x, ys);
                cx.b.ins().select(bad, zero, q)
            }
            B::Min => cx.b.ins().smin(x, y),
            B::Max => cx.b.ins().smax(x, y),
            B::Lt => cx.icmp(IntCC::SignedLessThan, x, y),
            B::Gt => cx.icmp(IntCC::SignedGreaterThan, x, y),
            B::Le => cx.icmp(IntCC::SignedLessThanOrEqual, x, y),
            B::Ge => cx.icmp(IntCC::SignedGreaterThanOrEqual, x, y),
            B::Eq => cx.icmp(IntCC::Equal, x, y),
            B::Ne => cx.icmp(IntCC::NotEqual, x, y),
            B::Pow | B::And | B::Or => return Err(unsupported(format!("{} on i32", name()))),
        }),
        DType::Bool => Ok(match op {
            B::And => cx.b.ins().band(x, y),
            B::Or => cx.b.ins().bor(x, y),
            B::Eq => cx.icmp(IntCC::Equal, x, y),
            B::Ne => cx.icmp(IntCC::NotEqual, x, y),
            _ => return Err(unsupported(format!("{} on bool", name()))),
        }),
    }
}
