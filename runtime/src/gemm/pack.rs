//! Packing of A row panels (`MR` rows, k-major) and B column panels (`nr` columns,
//! k-major) into the contiguous layouts the micro-kernels stream. Padding rows/columns are
//! written as zeros so kernels never read uninitialised memory. It does not choose block
//! sizes; the driver does.

use super::MR;

/// Packs the `mc × kc` block of A at `a` (element `(i, kk)` at `a[i·rsa + kk·csa]`) into
/// `ceil(mc/MR)` panels of `kc × MR` floats at `dst`: `dst[(p·kc + kk)·MR + r] = A[p·MR+r][kk]`.
///
/// # Safety
/// `a` addresses every element of the block; `dst` has room for `ceil(mc/MR)·MR·kc` floats
/// and does not overlap `a`.
pub(crate) unsafe fn pack_a_panels(
    mc: usize,
    kc: usize,
    a: *const f32,
    rsa: isize,
    csa: isize,
    dst: *mut f32,
) {
    let panels = mc.div_ceil(MR);
    for p in 0..panels {
        let rows = MR.min(mc - p * MR);
        // SAFETY: panel p occupies dst[p·kc·MR .. (p+1)·kc·MR], inside the buffer.
        let out = unsafe { dst.add(p * kc * MR) };
        if csa == 1 && rows == MR {
            // Rows are contiguous in k: walk each row once, scatter into the panel.
            for r in 0..MR {
                // SAFETY: row p·MR+r exists (r < rows) and has kc contiguous elements.
                let row = unsafe { a.offset((p * MR + r) as isize * rsa) };
                for kk in 0..kc {
                    // SAFETY: kk < kc, r < MR: within the row and within the panel.
                    unsafe { *out.add(kk * MR + r) = *row.add(kk) };
                }
            }
        } else {
            for kk in 0..kc {
                for r in 0..MR {
                    let v = if r < rows {
                        // SAFETY: (p·MR + r, kk) is an element of the block.
                        unsafe { *a.offset((p * MR + r) as isize * rsa + kk as isize * csa) }
                    } else {
                        0.0
                    };
                    // SAFETY: within panel p.
                    unsafe { *out.add(kk * MR + r) = v };
                }
            }
        }
    }
}

/// Packs the `kc × nc` block of B at `b` (element `(kk, j)` at `b[kk·rsb + j·csb]`) into
/// `ceil(nc/nr)` panels of `kc × nr` floats at `dst`: `dst[(q·kc + kk)·nr + j] = B[kk][q·nr+j]`.
///
/// # Safety
/// `b` addresses every element of the block; `dst` has room for `ceil(nc/nr)·nr·kc` floats
/// and does not overlap `b`.
pub(crate) unsafe fn pack_b_panels(
    nr: usize,
    kc: usize,
    nc: usize,
    b: *const f32,
    rsb: isize,
    csb: isize,
    dst: *mut f32,
) {
    let panels = nc.div_ceil(nr);
    for q in 0..panels {
        let cols = nr.min(nc - q * nr);
        // SAFETY: panel q occupies dst[q·kc·nr .. (q+1)·kc·nr], inside the buffer.
        let out = unsafe { dst.add(q * kc * nr) };
        // SAFETY: column q·nr exists (cols ≥ 1).
        let base = unsafe { b.offset((q * nr) as isize * csb) };
        if csb == 1 {
            for kk in 0..kc {
                // SAFETY: row kk of the panel has `cols` contiguous source elements and nr
                // destination slots; the tail past `cols` is zeroed.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        base.offset(kk as isize * rsb),
                        out.add(kk * nr),
                        cols,
                    );
                    core::ptr::write_bytes(out.add(kk * nr + cols), 0, nr - cols);
                }
            }
        } else if rsb == 1 {
            // Columns are contiguous in k: read each column once.
            for j in 0..nr {
                if j < cols {
                    // SAFETY: column q·nr + j exists and has kc contiguous elements.
                    let col = unsafe { base.offset(j as isize * csb) };
                    for kk in 0..kc {
                        // SAFETY: in bounds of the column and of the panel.
                        unsafe { *out.add(kk * nr + j) = *col.add(kk) };
                    }
                } else {
                    for kk in 0..kc {
                        // SAFETY: within the panel.
                        unsafe { *out.add(kk * nr + j) = 0.0 };
                    }
                }
            }
        } else {
            for kk in 0..kc {
                for j in 0..nr {
                    let v = if j < cols {
                        // SAFETY: (kk, q·nr + j) is an element of the block.
                        unsafe { *base.offset(kk as isize * rsb + j as isize * csb) }
                    } else {
                        0.0
                    };
                    // SAFETY: within the panel.
                    unsafe { *out.add(kk * nr + j) = v };
                }
            }
        }
    }
}
