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
    #[cfg(target_arch = "x86_64")]
    if csb == 1 && nr.is_multiple_of(16) && super::avx512_selected() {
        // SAFETY: the CPU has AVX-512F (the selected kernel needs it); same block.
        return unsafe { avx512::panels(nr, kc, nc, b, rsb, dst) };
    }
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

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use core::arch::x86_64::*;

    /// [`super::pack_b_panels`] for rows of contiguous columns and `nr` a multiple of 16, in
    /// the same panel order, each panel row copied by 16-column loads and stores inline
    /// (the last one masked, the panel's columns past the block zeroed). A `memcpy` call
    /// per panel row cost more than the copy: mobilenet_v2 makes about 9,800 of 256 bytes
    /// per inference; its 144→24 1×1 layer on 56² alone (`nnefc bench`, Zen 5, one
    /// thread) went from 0.115 to 0.109 ms. Reading each source row whole instead (one
    /// stream per row, stores spread over the panels) was no better there and 1–5 % worse
    /// for k = 16.
    ///
    /// # Safety
    /// As for [`super::pack_b_panels`] with `csb == 1`; the CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn panels(
        nr: usize,
        kc: usize,
        nc: usize,
        b: *const f32,
        rsb: isize,
        dst: *mut f32,
    ) {
        let zero = _mm512_setzero_ps();
        for q in 0..nc.div_ceil(nr) {
            let c0 = q * nr;
            let cols = nr.min(nc - c0);
            let (full, tail) = (cols / 16, cols % 16);
            for kk in 0..kc {
                // SAFETY (whole body): row kk of the block has columns c0..c0 + cols, and
                // panel q's row kk is nr floats inside the buffer.
                unsafe {
                    let src = b.offset(kk as isize * rsb).add(c0);
                    let out = dst.add((q * kc + kk) * nr);
                    for v in 0..full {
                        _mm512_storeu_ps(out.add(16 * v), _mm512_loadu_ps(src.add(16 * v)));
                    }
                    let mut j = 16 * full;
                    if tail > 0 {
                        let m: __mmask16 = (1u16 << tail) - 1;
                        _mm512_storeu_ps(out.add(j), _mm512_maskz_loadu_ps(m, src.add(j)));
                        j += 16;
                    }
                    while j < nr {
                        _mm512_storeu_ps(out.add(j), zero);
                        j += 16;
                    }
                }
            }
        }
    }
}
