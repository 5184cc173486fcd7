//! Contractions: `matmul` (spec §3.10, batch dims broadcast) and the native `linear`
//! (`matmul(input, filter, transposeB = true) + bias`), plus the f64 dot product every
//! contraction in the interpreter (conv and deconv included) is built on.
//!
//! Operands are first copied so that both sides of every dot product are contiguous;
//! products are accumulated in f64 and rounded to f32 once. Not here: any blocking or
//! vectorization (this is the oracle, not a kernel).

use super::{Result, f32_data, invalid, strides};
use crate::ir::tensor::Tensor;

/// Σ a[i]·b[i] over the common length, accumulated in f64. Written as an indexed
/// `while` loop because the crate's dev profile is unoptimized and iterator adapters
/// would cost a call per element there.
pub(super) fn dot(a: &[f32], b: &[f32]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = 0f64;
    let mut i = 0;
    while i + 4 <= n {
        acc += a[i] as f64 * b[i] as f64
            + a[i + 1] as f64 * b[i + 1] as f64
            + a[i + 2] as f64 * b[i + 2] as f64
            + a[i + 3] as f64 * b[i + 3] as f64;
        i += 4;
    }
    while i < n {
        acc += a[i] as f64 * b[i] as f64;
        i += 1;
    }
    acc
}

/// Copies the `rows × cols` matrix at `m` (row-major) into `dst`, transposed when `t`,
/// so that `dst` holds `op(m)` row-major.
fn load_matrix(dst: &mut Vec<f32>, m: &[f32], rows: usize, cols: usize, t: bool) {
    dst.clear();
    if t {
        for c in 0..cols {
            for r in 0..rows {
                dst.push(m[r * cols + c]);
            }
        }
    } else {
        dst.extend_from_slice(&m[..rows * cols]);
    }
}

/// `matmul`: `op(A)·op(B)` over the last two dims; the leading (batch) dims broadcast
/// to those of `out` (§6).
pub(super) fn matmul(
    a: &Tensor,
    b: &Tensor,
    transpose_a: bool,
    transpose_b: bool,
    out_shape: &[usize],
) -> Result<Tensor> {
    let op = "matmul";
    let xa = f32_data(op, "A", a)?;
    let xb = f32_data(op, "B", b)?;
    let rank = a.shape.len();
    if rank < 2 || b.shape.len() != rank {
        return Err(invalid(
            op,
            format!(
                "A {:?} and B {:?} must have the same rank ≥ 2",
                a.shape, b.shape
            ),
        ));
    }
    let (ar, ac) = (a.shape[rank - 2], a.shape[rank - 1]);
    let (br, bc) = (b.shape[rank - 2], b.shape[rank - 1]);
    let (m, ka) = if transpose_a { (ac, ar) } else { (ar, ac) };
    let (kb, n) = if transpose_b { (bc, br) } else { (br, bc) };
    if ka != kb {
        return Err(invalid(
            op,
            format!("inner extents differ: A {:?}, B {:?}", a.shape, b.shape),
        ));
    }
    if out_shape.len() != rank {
        return Err(invalid(
            op,
            format!("result shape {out_shape:?} does not have rank {rank}"),
        ));
    }
    let batch = out_shape[..rank - 2].to_vec();
    let batch_count: usize = batch.iter().product();
    let (a_strides, b_strides) = (strides(&a.shape[..rank - 2]), strides(&b.shape[..rank - 2]));
    let mut out = Vec::with_capacity(batch_count * m * n);
    let (mut lhs, mut rhs) = (Vec::new(), Vec::new());
    let mut index = vec![0; batch.len()];
    for _ in 0..batch_count {
        // A stretched batch dim (extent 1) always reads its single matrix.
        let (mut oa, mut ob) = (0, 0);
        for (d, &i) in index.iter().enumerate() {
            oa += if a.shape[d] == 1 { 0 } else { i * a_strides[d] };
            ob += if b.shape[d] == 1 { 0 } else { i * b_strides[d] };
        }
        load_matrix(&mut lhs, &xa[oa * ar * ac..], ar, ac, transpose_a);
        // rhs holds op(B)ᵀ (n × k) so each output element is a contiguous dot product.
        load_matrix(&mut rhs, &xb[ob * br * bc..], br, bc, !transpose_b);
        for i in 0..m {
            for j in 0..n {
                out.push(dot(&lhs[i * ka..(i + 1) * ka], &rhs[j * ka..(j + 1) * ka]) as f32);
            }
        }
        super::window::next_index(&mut index, &batch);
    }
    Ok(Tensor::f32(out_shape.to_vec(), out))
}

/// `linear`: input `[N, Cin]`, filter `[Cout, Cin]`, bias a single value or `[1, Cout]`.
pub(super) fn linear(input: &Tensor, filter: &Tensor, bias: &Tensor) -> Result<Tensor> {
    let op = "linear";
    let x = f32_data(op, "input", input)?;
    let f = f32_data(op, "filter", filter)?;
    let bv = f32_data(op, "bias", bias)?;
    let (&[n, cin], &[cout, fcin]) = (input.shape.as_slice(), filter.shape.as_slice()) else {
        return Err(invalid(
            op,
            format!(
                "input {:?} and filter {:?} must be rank 2",
                input.shape, filter.shape
            ),
        ));
    };
    if cin != fcin {
        return Err(invalid(
            op,
            format!(
                "input {:?} and filter {:?} differ in Cin",
                input.shape, filter.shape
            ),
        ));
    }
    let bias_at = |c: usize| -> f64 {
        if bv.len() == 1 {
            bv[0] as f64
        } else {
            bv[c] as f64
        }
    };
    if bv.len() != 1 && bias.shape != [1, cout] {
        return Err(invalid(
            op,
            format!(
                "bias of shape {:?} is neither a single value nor [1, {cout}]",
                bias.shape
            ),
        ));
    }
    let mut out = Vec::with_capacity(n * cout);
    for i in 0..n {
        for c in 0..cout {
            out.push(
                (dot(&x[i * cin..(i + 1) * cin], &f[c * cin..(c + 1) * cin]) + bias_at(c)) as f32,
            );
        }
    }
    Ok(Tensor::f32(vec![n, cout], out))
}
