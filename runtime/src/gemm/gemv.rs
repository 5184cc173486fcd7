//! Matrix-vector bodies (the `m == 1`, `n == 1` and small-n-with-packed-A cases), written
//! once in portable Rust and marked `#[inline(always)]` so each kernel module instantiates
//! them inside its own `#[target_feature]` function, where LLVM vectorises them for that
//! instruction set. They stream the matrix exactly once. They do not use FMA (portable Rust
//! cannot request it without `std`); GEMV is bound by memory bandwidth, not arithmetic.

use super::MR;
use super::kernels::{Gemv, activate};

/// Output elements accumulated per pass of the axpy form (a stack buffer, 1 KiB).
const AXPY_CHUNK: usize = 256;

/// Stores one finished output: `y[o] = act((acc ? y[o] : 0) + s + bias[o])`.
///
/// # Safety
/// `o < g.len`; `g.y` and `g.bias` address element `o` as described by [`Gemv`].
#[inline(always)]
pub(crate) unsafe fn finish(g: &Gemv, o: usize, s: f32) {
    // SAFETY: element o of y (and of bias, if present) exists by the caller's contract.
    unsafe {
        let yp = g.y.offset(o as isize * g.incy);
        let mut v = if g.accumulate { *yp + s } else { s };
        if !g.bias.is_null() {
            v += *g.bias.offset(o as isize * g.bias_inc);
        }
        *yp = activate(v, g.act, g.lo, g.hi);
    }
}

/// Axpy form (`stride_out == 1`): for each chunk of outputs, add `x[kk] · row kk of M`
/// four rows at a time into a stack accumulator.
///
/// # Safety
/// `g` describes valid memory (see [`Gemv`]) and `g.stride_out == 1`.
#[inline(always)]
pub(crate) unsafe fn axpy_body(g: &Gemv) {
    let mut tmp = [0.0f32; AXPY_CHUNK];
    let mut o0 = 0;
    while o0 < g.len {
        let w = AXPY_CHUNK.min(g.len - o0);
        let t = &mut tmp[..w];
        t.fill(0.0);
        // SAFETY (whole block): row kk of M holds outputs o0..o0+w contiguously
        // (stride_out == 1) for every kk < k; x[kk] exists for kk < k.
        unsafe {
            let row = |kk: usize| {
                core::slice::from_raw_parts(g.mat.offset(kk as isize * g.stride_k + o0 as isize), w)
            };
            let xk = |kk: usize| *g.x.offset(kk as isize * g.incx);
            let mut kk = 0;
            while kk + 4 <= g.k {
                let (x0, x1, x2, x3) = (xk(kk), xk(kk + 1), xk(kk + 2), xk(kk + 3));
                let (r0, r1, r2, r3) = (row(kk), row(kk + 1), row(kk + 2), row(kk + 3));
                for ((t, (a, b)), (c, d)) in
                    t.iter_mut().zip(r0.iter().zip(r1)).zip(r2.iter().zip(r3))
                {
                    *t += (x0 * a + x1 * b) + (x2 * c + x3 * d);
                }
                kk += 4;
            }
            while kk < g.k {
                let x0 = xk(kk);
                for (t, a) in t.iter_mut().zip(row(kk)) {
                    *t += x0 * a;
                }
                kk += 1;
            }
            for (j, &s) in t.iter().enumerate() {
                finish(g, o0 + j, s);
            }
        }
        o0 += w;
    }
}

/// Dot form (`stride_k == 1`, `incx == 1`): one dot product of x with each column of M.
///
/// # Safety
/// `g` describes valid memory (see [`Gemv`]), `g.stride_k == 1` and `g.incx == 1`.
#[inline(always)]
pub(crate) unsafe fn dot_body(g: &Gemv) {
    // SAFETY: x has k contiguous elements (incx == 1).
    let x = unsafe { core::slice::from_raw_parts(g.x, g.k) };
    for o in 0..g.len {
        // SAFETY: column o of M has k contiguous elements (stride_k == 1).
        let col =
            unsafe { core::slice::from_raw_parts(g.mat.offset(o as isize * g.stride_out), g.k) };
        let s = dot(x, col);
        // SAFETY: o < len.
        unsafe { finish(g, o, s) };
    }
}

/// Dot product with 32 independent partial sums (vectorisable without reassociation).
#[inline(always)]
fn dot(x: &[f32], y: &[f32]) -> f32 {
    const L: usize = 32;
    let mut acc = [0.0f32; L];
    let (xc, yc) = (x.chunks_exact(L), y.chunks_exact(L));
    let tail: f32 = xc
        .remainder()
        .iter()
        .zip(yc.remainder())
        .map(|(a, b)| a * b)
        .sum();
    for (a, b) in xc.zip(yc) {
        for l in 0..L {
            acc[l] += a[l] * b[l];
        }
    }
    let mut width = L;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            acc[l] += acc[l + width];
        }
    }
    acc[0] + tail
}

/// Panel form: `mat` is packed A (`len = m` rows); each panel of `MR` rows is streamed once,
/// four k steps (24 contiguous floats) at a time.
///
/// # Safety
/// `g.mat` holds `packed_a_len(len, k)` floats in the packed-A format; x, y, bias valid.
#[inline(always)]
pub(crate) unsafe fn panel_body(g: &Gemv) {
    const STEP: usize = 4;
    let panels = g.len.div_ceil(MR);
    for p in 0..panels {
        // SAFETY: panel p is the k·MR floats starting at p·k·MR.
        let pan = unsafe { core::slice::from_raw_parts(g.mat.add(p * g.k * MR), g.k * MR) };
        let mut acc = [0.0f32; STEP * MR];
        let chunks = pan.chunks_exact(STEP * MR);
        let rest = chunks.remainder();
        let mut kk = 0;
        for a in chunks {
            // SAFETY: kk + STEP ≤ k, so x[kk .. kk+STEP] exist.
            let xs: [f32; STEP] =
                core::array::from_fn(|s| unsafe { *g.x.offset((kk + s) as isize * g.incx) });
            for l in 0..STEP * MR {
                acc[l] += a[l] * xs[l / MR];
            }
            kk += STEP;
        }
        for a in rest.chunks_exact(MR) {
            // SAFETY: kk < k.
            let xv = unsafe { *g.x.offset(kk as isize * g.incx) };
            for r in 0..MR {
                acc[r] += a[r] * xv;
            }
            kk += 1;
        }
        let rows = MR.min(g.len - p * MR);
        for r in 0..rows {
            let mut s = 0.0;
            for q in 0..STEP {
                s += acc[q * MR + r];
            }
            // SAFETY: p·MR + r < len.
            unsafe { finish(g, p * MR + r, s) };
        }
    }
}
