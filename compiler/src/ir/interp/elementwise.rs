//! Element-wise ops (spec §3.2–§3.4, §4.1–§4.2, §4.7): unary functions and the native
//! activations, binary ops with NNEF left-aligned broadcasting (§6.1), `select`, `clamp`,
//! `batch_normalization` and `cast`.
//!
//! Float functions are evaluated in f64 and rounded once to f32 (for + − × ÷ that is the
//! same as f32 arithmetic; for transcendental functions it is more accurate). NaN and
//! infinity are IEEE-propagating, as in NumPy and ONNX Runtime: `min`, `max`, `relu` and
//! `clamp` return NaN when an operand is NaN ([`maximum`]/[`minimum`], IEEE 754-2019's
//! operations of those names) instead of what their stdlib `select` bodies would give,
//! and `sign(NaN)` is NaN. Integer arithmetic wraps like two's complement hardware;
//! integer division by zero is an error. Not here: reductions or any op that mixes
//! elements (they use [`maximum`]/[`minimum`] too).

use super::{Result, bool_data, f32_data, invalid, strides};
use crate::ir::op::{BinaryOp, UnaryOp};
use crate::ir::tensor::{Tensor, TensorData};
use crate::ir::types::DType;

/// For each element of `out` (row-major), the offset it reads in an operand of `shape`
/// that broadcasts to `out` (checked by `infer`); `None` when the shapes are equal
/// (offset = index).
fn broadcast_offsets(out: &[usize], shape: &[usize]) -> Option<Vec<usize>> {
    if out == shape {
        return None;
    }
    let src = strides(shape);
    // Stride per output dim: 0 where the operand has extent 1 or lacks the dim.
    let step: Vec<usize> = (0..out.len())
        .map(|d| match shape.get(d) {
            Some(&n) if n != 1 => src[d],
            _ => 0,
        })
        .collect();
    let count: usize = out.iter().product();
    let mut offsets = Vec::with_capacity(count);
    let mut index = vec![0; out.len()];
    let mut off = 0;
    for _ in 0..count {
        offsets.push(off);
        // Row-major increment, keeping `off` in step.
        for d in (0..out.len()).rev() {
            index[d] += 1;
            off += step[d];
            if index[d] < out[d] {
                break;
            }
            off -= step[d] * index[d];
            index[d] = 0;
        }
    }
    Some(offsets)
}

fn at(offsets: &Option<Vec<usize>>, i: usize) -> usize {
    offsets.as_ref().map_or(i, |o| o[i])
}

/// `f(x[i'], y[i''])` for every output element of the broadcast shape.
fn zip_broadcast<A: Copy, B: Copy, R>(
    out: &[usize],
    (xs, xshape): (&[A], &[usize]),
    (ys, yshape): (&[B], &[usize]),
    mut f: impl FnMut(A, B) -> Result<R>,
) -> Result<Vec<R>> {
    let (ox, oy) = (
        broadcast_offsets(out, xshape),
        broadcast_offsets(out, yshape),
    );
    let count: usize = out.iter().product();
    let mut r = Vec::with_capacity(count);
    for i in 0..count {
        r.push(f(xs[at(&ox, i)], ys[at(&oy, i)])?);
    }
    Ok(r)
}

/// IEEE 754-2019 `maximum`: NaN if either operand is NaN, and +0 above −0. The one
/// definition of `max` for every f32 path (element-wise, `relu`, `clamp`, reductions,
/// pools); compiled code agrees except that a tie of +0 and −0 may give either zero on x86.
pub(crate) fn maximum(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a == b {
        // Only ±0 compare equal with different bits: +0 wins.
        f32::from_bits(a.to_bits() & b.to_bits())
    } else if a > b {
        a
    } else {
        b
    }
}

/// IEEE 754-2019 `minimum`: NaN if either operand is NaN, and −0 below +0.
pub(crate) fn minimum(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if a == b {
        // Only ±0 compare equal with different bits: −0 wins.
        f32::from_bits(a.to_bits() | b.to_bits())
    } else if a < b {
        a
    } else {
        b
    }
}

fn unary_f64(u: UnaryOp, x: f64) -> f64 {
    let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
    match u {
        UnaryOp::Copy => x,
        UnaryOp::Neg => -x,
        UnaryOp::Rcp => 1.0 / x,
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tan => x.tan(),
        UnaryOp::Asin => x.asin(),
        UnaryOp::Acos => x.acos(),
        UnaryOp::Atan => x.atan(),
        UnaryOp::Sinh => x.sinh(),
        UnaryOp::Cosh => x.cosh(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Asinh => x.asinh(),
        UnaryOp::Acosh => x.acosh(),
        UnaryOp::Atanh => x.atanh(),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x // ±0 and NaN stay
            }
        }
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Round => x.round(), // halves away from zero, like C `round`
        UnaryOp::Sqr => x * x,
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqr => 1.0 / (x * x),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Log2 => x.log2(),
        // max(x, 0): NaN stays NaN, −0 gives +0.
        UnaryOp::Relu => maximum(x as f32, 0.0) as f64,
        UnaryOp::Sigmoid => sigmoid(x),
        // log(eˣ + 1) without overflow for large x.
        UnaryOp::Softplus => x.max(0.0) + (-x.abs()).exp().ln_1p(),
        UnaryOp::Silu => x * sigmoid(x),
        UnaryOp::Gelu => x * sigmoid(1.702 * x),
        UnaryOp::Elu { alpha } => {
            if x < 0.0 {
                alpha as f64 * x.exp_m1()
            } else {
                x
            }
        }
        UnaryOp::Selu { alpha, lambda } => {
            lambda as f64
                * if x < 0.0 {
                    alpha as f64 * x.exp_m1()
                } else {
                    x
                }
        }
        UnaryOp::LeakyRelu { alpha } => {
            if x < 0.0 {
                alpha as f64 * x
            } else {
                x
            }
        }
        // Logical; rejected before reaching here.
        UnaryOp::Not => x,
    }
}

/// Element-wise unary functions; `copy` takes any dtype, `abs`/`neg`/`sign` also i32,
/// `not` bool, everything else f32.
pub(super) fn unary(u: UnaryOp, x: &Tensor) -> Result<Tensor> {
    let op = crate::ir::op::Op::Unary(u).mnemonic();
    let shape = x.shape.clone();
    let data = match (&x.data, u) {
        (_, UnaryOp::Copy) => x.data.clone(),
        (TensorData::Bool(v), UnaryOp::Not) => TensorData::Bool(v.iter().map(|b| !b).collect()),
        (TensorData::I32(v), UnaryOp::Neg) => {
            TensorData::I32(v.iter().map(|a| a.wrapping_neg()).collect())
        }
        (TensorData::I32(v), UnaryOp::Abs) => {
            TensorData::I32(v.iter().map(|a| a.wrapping_abs()).collect())
        }
        (TensorData::I32(v), UnaryOp::Sign) => {
            TensorData::I32(v.iter().map(|a| a.signum()).collect())
        }
        (TensorData::F32(v), u) if u != UnaryOp::Not => {
            TensorData::F32(v.iter().map(|&a| unary_f64(u, a as f64) as f32).collect())
        }
        _ => return Err(invalid(op, format!("not defined on {}", x.dtype()))),
    };
    Ok(Tensor { shape, data })
}

fn int_binary(b: BinaryOp, x: i32, y: i32) -> Result<i32> {
    let op = crate::ir::op::Op::Binary(b).mnemonic();
    Ok(match b {
        BinaryOp::Add => x.wrapping_add(y),
        BinaryOp::Sub => x.wrapping_sub(y),
        BinaryOp::Mul => x.wrapping_mul(y),
        BinaryOp::Div => {
            if y == 0 {
                return Err(invalid(op, "integer division by zero"));
            }
            x.wrapping_div(y) // truncates toward zero, like C
        }
        BinaryOp::Pow => {
            if y >= 0 {
                x.wrapping_pow(y as u32)
            } else {
                // The real result truncated toward zero.
                match x {
                    0 => return Err(invalid(op, "0 raised to a negative power")),
                    1 => 1,
                    -1 => {
                        if y % 2 == 0 {
                            1
                        } else {
                            -1
                        }
                    }
                    _ => 0,
                }
            }
        }
        BinaryOp::Min => {
            if x < y {
                x
            } else {
                y
            }
        }
        BinaryOp::Max => {
            if x > y {
                x
            } else {
                y
            }
        }
        _ => return Err(invalid(op, "not an arithmetic op")),
    })
}

fn float_binary(b: BinaryOp, x: f32, y: f32) -> f32 {
    match b {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div => x / y,
        BinaryOp::Pow => (x as f64).powf(y as f64) as f32,
        BinaryOp::Min => minimum(x, y),
        BinaryOp::Max => maximum(x, y),
        // Comparisons and logical ops never reach here.
        _ => f32::NAN,
    }
}

fn compare<T: PartialOrd>(b: BinaryOp, x: T, y: T) -> bool {
    match b {
        BinaryOp::Lt => x < y,
        BinaryOp::Gt => x > y,
        BinaryOp::Le => x <= y,
        BinaryOp::Ge => x >= y,
        BinaryOp::Eq => x == y,
        _ => x != y,
    }
}

/// Binary ops broadcast to `out`: arithmetic on f32 or on two i32, comparisons on two
/// f32 or two i32 giving bool, `and`/`or` on bool.
pub(super) fn binary(b: BinaryOp, x: &Tensor, y: &Tensor, out: &[usize]) -> Result<Tensor> {
    let op = crate::ir::op::Op::Binary(b).mnemonic();
    let data = match (&x.data, &y.data) {
        (TensorData::F32(xs), TensorData::F32(ys)) if b.is_comparison() => TensorData::Bool(
            zip_broadcast(out, (xs, &x.shape), (ys, &y.shape), |p, q| {
                Ok(compare(b, p, q))
            })?,
        ),
        (TensorData::F32(xs), TensorData::F32(ys)) if !b.is_logical() => TensorData::F32(
            zip_broadcast(out, (xs, &x.shape), (ys, &y.shape), |p, q| {
                Ok(float_binary(b, p, q))
            })?,
        ),
        (TensorData::I32(xs), TensorData::I32(ys)) if b.is_comparison() => TensorData::Bool(
            zip_broadcast(out, (xs, &x.shape), (ys, &y.shape), |p, q| {
                Ok(compare(b, p, q))
            })?,
        ),
        (TensorData::I32(xs), TensorData::I32(ys)) if !b.is_logical() => TensorData::I32(
            zip_broadcast(out, (xs, &x.shape), (ys, &y.shape), |p, q| {
                int_binary(b, p, q)
            })?,
        ),
        (TensorData::Bool(xs), TensorData::Bool(ys)) if b.is_logical() => TensorData::Bool(
            zip_broadcast(out, (xs, &x.shape), (ys, &y.shape), |p, q| {
                Ok(if b == BinaryOp::And { p && q } else { p || q })
            })?,
        ),
        _ => {
            return Err(invalid(
                op,
                format!("not defined on {} and {}", x.dtype(), y.dtype()),
            ));
        }
    };
    Ok(Tensor {
        shape: out.to_vec(),
        data,
    })
}

/// `select(condition, t, f)` broadcast to `out`; `t` and `f` share any dtype.
pub(super) fn select(cond: &Tensor, t: &Tensor, f: &Tensor, out: &[usize]) -> Result<Tensor> {
    let op = "select";
    let c = bool_data(op, "condition", cond)?;
    let (oc, ot, of) = (
        broadcast_offsets(out, &cond.shape),
        broadcast_offsets(out, &t.shape),
        broadcast_offsets(out, &f.shape),
    );
    let count: usize = out.iter().product();
    let index: Vec<(bool, usize, usize)> = (0..count)
        .map(|i| (c[at(&oc, i)], at(&ot, i), at(&of, i)))
        .collect();
    fn pick<T: Copy>(index: &[(bool, usize, usize)], t: &[T], f: &[T]) -> Vec<T> {
        index
            .iter()
            .map(|&(c, i, j)| if c { t[i] } else { f[j] })
            .collect()
    }
    let data = match (&t.data, &f.data) {
        (TensorData::F32(a), TensorData::F32(b)) => TensorData::F32(pick(&index, a, b)),
        (TensorData::I32(a), TensorData::I32(b)) => TensorData::I32(pick(&index, a, b)),
        (TensorData::Bool(a), TensorData::Bool(b)) => TensorData::Bool(pick(&index, a, b)),
        _ => {
            return Err(invalid(
                op,
                format!("branches differ in dtype: {} and {}", t.dtype(), f.dtype()),
            ));
        }
    };
    Ok(Tensor {
        shape: out.to_vec(),
        data,
    })
}

/// `clamp(x, a, b) = max(min(x, b), a)` broadcast to `out` (f32 or i32); for f32 with
/// [`maximum`]/[`minimum`], so a NaN in `x`, `a` or `b` gives NaN.
pub(super) fn clamp(x: &Tensor, a: &Tensor, b: &Tensor, out: &[usize]) -> Result<Tensor> {
    let op = "clamp";
    let (ox, oa, ob) = (
        broadcast_offsets(out, &x.shape),
        broadcast_offsets(out, &a.shape),
        broadcast_offsets(out, &b.shape),
    );
    let count: usize = out.iter().product();
    fn clamp_all<T: Copy>(
        count: usize,
        o: [&Option<Vec<usize>>; 3],
        (x, a, b): (&[T], &[T], &[T]),
        min: impl Fn(T, T) -> T,
        max: impl Fn(T, T) -> T,
    ) -> Vec<T> {
        (0..count)
            .map(|i| {
                let (v, lo, hi) = (x[at(o[0], i)], a[at(o[1], i)], b[at(o[2], i)]);
                max(min(v, hi), lo)
            })
            .collect()
    }
    let o = [&ox, &oa, &ob];
    let data = match (&x.data, &a.data, &b.data) {
        (TensorData::F32(x), TensorData::F32(a), TensorData::F32(b)) => {
            TensorData::F32(clamp_all(count, o, (x, a, b), minimum, maximum))
        }
        (TensorData::I32(x), TensorData::I32(a), TensorData::I32(b)) => {
            TensorData::I32(clamp_all(count, o, (x, a, b), i32::min, i32::max))
        }
        _ => return Err(invalid(op, "operands must all be f32 or all be i32")),
    };
    Ok(Tensor {
        shape: out.to_vec(),
        data,
    })
}

/// `batch_normalization`: `offset + scale·(input − mean)/√(variance + ε)`; the four
/// parameters must broadcast to the input's shape (one-directional, §6.2).
pub(super) fn batch_norm(
    epsilon: f32,
    input: &Tensor,
    mean: &Tensor,
    variance: &Tensor,
    offset: &Tensor,
    scale: &Tensor,
) -> Result<Tensor> {
    let op = "batch_normalization";
    let x = f32_data(op, "input", input)?;
    let mut params = Vec::with_capacity(4);
    for (what, p) in [
        ("mean", mean),
        ("variance", variance),
        ("offset", offset),
        ("scale", scale),
    ] {
        // `infer` checked that the parameter broadcasts to the input.
        params.push((
            f32_data(op, what, p)?,
            broadcast_offsets(&input.shape, &p.shape),
        ));
    }
    let eps = epsilon as f64;
    let out = (0..x.len())
        .map(|i| {
            let [m, v, o, s] = [0, 1, 2, 3].map(|k| params[k].0[at(&params[k].1, i)] as f64);
            (o + s * (x[i] as f64 - m) / (v + eps).sqrt()) as f32
        })
        .collect();
    Ok(Tensor::f32(input.shape.clone(), out))
}

/// `cast<to>`: f32→i32 truncates toward zero (saturating; NaN gives 0), numeric→bool is
/// `≠ 0`, bool→numeric is 0/1.
pub(super) fn cast(to: DType, x: &Tensor) -> Result<Tensor> {
    let data = match (&x.data, to) {
        (TensorData::F32(v), DType::F32) => TensorData::F32(v.clone()),
        (TensorData::F32(v), DType::I32) => TensorData::I32(v.iter().map(|&a| a as i32).collect()),
        (TensorData::F32(v), DType::Bool) => {
            TensorData::Bool(v.iter().map(|&a| a != 0.0).collect())
        }
        (TensorData::I32(v), DType::F32) => TensorData::F32(v.iter().map(|&a| a as f32).collect()),
        (TensorData::I32(v), DType::I32) => TensorData::I32(v.clone()),
        (TensorData::I32(v), DType::Bool) => TensorData::Bool(v.iter().map(|&a| a != 0).collect()),
        (TensorData::Bool(v), DType::F32) => {
            TensorData::F32(v.iter().map(|&a| a as i32 as f32).collect())
        }
        (TensorData::Bool(v), DType::I32) => TensorData::I32(v.iter().map(|&a| a as i32).collect()),
        (TensorData::Bool(v), DType::Bool) => TensorData::Bool(v.clone()),
    };
    Ok(Tensor {
        shape: x.shape.clone(),
        data,
    })
}
