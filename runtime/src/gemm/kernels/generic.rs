//! The portable kernel: a 6×8 tile in plain Rust that LLVM vectorises for whatever the
//! compile-time target offers (SSE2 on x86-64, scalar elsewhere). It is the fallback on every
//! target and the reference for the others' tile epilogue. It does not use FMA.

use super::{Gemv, Kernel, KernelId, TileEpi, activate};
use crate::gemm::{MR, gemv};

const NR: usize = 8;

pub(crate) static KERNEL: Kernel = Kernel {
    id: KernelId::Generic,
    nr: NR,
    tile,
    edges: &[],
    edge_pair: None,
    edge_quad: None,
    gemv_axpy,
    gemv_dot,
    gemv_panel,
};

/// # Safety
/// See [`super::TileFn`]: `a` holds `kc·MR` floats, B rows `kk < kc` hold `NR` floats at
/// `b + kk·rsb`, C addresses an `MR × NR` tile, the epilogue's bias pointers address
/// `MR` / `NR` floats.
unsafe fn tile(
    kc: usize,
    a: *const f32,
    b: *const f32,
    rsb: isize,
    c: *mut f32,
    rsc: isize,
    epi: &TileEpi,
) {
    // SAFETY: the A panel is kc·MR floats long (caller contract).
    let a = unsafe { core::slice::from_raw_parts(a, kc * MR) };
    let mut acc = [[0.0f32; NR]; MR];
    for (kk, av) in a.chunks_exact(MR).enumerate() {
        // SAFETY: B row kk < kc has NR floats (caller contract).
        let bv: [f32; NR] = unsafe {
            b.offset(kk as isize * rsb)
                .cast::<[f32; NR]>()
                .read_unaligned()
        };
        for r in 0..MR {
            for j in 0..NR {
                acc[r][j] += av[r] * bv[j];
            }
        }
    }
    // SAFETY: forwarded caller contract.
    unsafe { store_tile(&acc, c, rsc, epi) };
}

/// Applies the tile epilogue to `acc` and stores it into C.
///
/// # Safety
/// C addresses an `MR × W` tile with row stride `rsc`; bias pointers address `MR` / `W` floats.
#[inline(always)]
pub(crate) unsafe fn store_tile<const W: usize>(
    acc: &[[f32; W]; MR],
    c: *mut f32,
    rsc: isize,
    epi: &TileEpi,
) {
    for (r, row) in acc.iter().enumerate() {
        for (j, &s) in row.iter().enumerate() {
            // SAFETY: (r, j) lies in the tile; bias_row[r] / bias_col[j] exist if non-null.
            unsafe {
                let cp = c.offset(r as isize * rsc).add(j);
                let mut v = if epi.accumulate { *cp + s } else { s };
                if !epi.bias_row.is_null() {
                    v += *epi.bias_row.add(r);
                }
                if !epi.bias_col.is_null() {
                    v += *epi.bias_col.add(j);
                }
                *cp = activate(v, epi.act, epi.lo, epi.hi);
            }
        }
    }
}

/// # Safety
/// See [`gemv::axpy_body`].
unsafe fn gemv_axpy(g: &Gemv) {
    // SAFETY: forwarded.
    unsafe { gemv::axpy_body(g) }
}

/// # Safety
/// See [`gemv::dot_body`].
unsafe fn gemv_dot(g: &Gemv) {
    // SAFETY: forwarded.
    unsafe { gemv::dot_body(g) }
}

/// # Safety
/// See [`gemv::panel_body`].
unsafe fn gemv_panel(g: &Gemv) {
    // SAFETY: forwarded.
    unsafe { gemv::panel_body(g) }
}
