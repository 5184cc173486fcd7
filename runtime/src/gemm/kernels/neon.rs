//! aarch64 kernel: a 6×16 NEON tile (24 q-register accumulators, A rows taken by lane from
//! two vector loads of the packed panel), plus the portable GEMV bodies (NEON is the
//! aarch64 baseline, so LLVM vectorises them with it). Reads the same packed-A format as
//! every other kernel. NEON needs no run-time detection on aarch64.
//!
//! Only standard, long-stable `core::arch::aarch64` intrinsics are used. On an x86-64
//! machine the runtime's unit tests (this kernel among the others) run for aarch64 under
//! qemu from `tests/all/runtime_aarch64.rs`, when `.ci/setup` installed the Rust target
//! and the cross tools.

use core::arch::aarch64::*;

use super::{Gemv, Kernel, KernelId, TileEpi};
use crate::gemm::{MR, gemv};

pub(crate) static KERNEL: Kernel = Kernel {
    id: KernelId::Neon,
    nr: 16,
    tile,
    edges: &[],
    edge_pair: None,
    edge_quad: None,
    gemv_axpy,
    gemv_dot,
    gemv_panel,
};

/// 6×16 NEON tile.
///
/// # Safety
/// `a` holds `kc·MR` floats, B rows `kk < kc` hold 16 floats at `b + kk·rsb`, C addresses a
/// 6×16 tile with row stride `rsc`, bias pointers (if non-null) address 6 / 16 floats.
unsafe fn tile(
    kc: usize,
    a: *const f32,
    b: *const f32,
    rsb: isize,
    c: *mut f32,
    rsc: isize,
    epi: &TileEpi,
) {
    // SAFETY: every load/store stays inside the panels, tile and bias of the contract; the
    // 2-float load at `ap + 4` reads rows 4 and 5 of the current k step.
    unsafe {
        let mut acc = [[vdupq_n_f32(0.0); 4]; MR];
        let (mut ap, mut bp) = (a, b);
        for _ in 0..kc {
            let bv = [
                vld1q_f32(bp),
                vld1q_f32(bp.add(4)),
                vld1q_f32(bp.add(8)),
                vld1q_f32(bp.add(12)),
            ];
            let a03 = vld1q_f32(ap);
            let a45 = vld1_f32(ap.add(4));
            for j in 0..4 {
                acc[0][j] = vfmaq_laneq_f32::<0>(acc[0][j], bv[j], a03);
                acc[1][j] = vfmaq_laneq_f32::<1>(acc[1][j], bv[j], a03);
                acc[2][j] = vfmaq_laneq_f32::<2>(acc[2][j], bv[j], a03);
                acc[3][j] = vfmaq_laneq_f32::<3>(acc[3][j], bv[j], a03);
                acc[4][j] = vfmaq_lane_f32::<0>(acc[4][j], bv[j], a45);
                acc[5][j] = vfmaq_lane_f32::<1>(acc[5][j], bv[j], a45);
            }
            ap = ap.add(MR);
            bp = bp.offset(rsb);
        }
        let zero = vdupq_n_f32(0.0);
        let (lo, hi) = (vdupq_n_f32(epi.lo), vdupq_n_f32(epi.hi));
        for (r, acc_r) in acc.iter().enumerate() {
            for (j, &s) in acc_r.iter().enumerate() {
                let cp = c.offset(r as isize * rsc).add(4 * j);
                let mut v = if epi.accumulate {
                    vaddq_f32(vld1q_f32(cp), s)
                } else {
                    s
                };
                if !epi.bias_row.is_null() {
                    v = vaddq_f32(v, vdupq_n_f32(*epi.bias_row.add(r)));
                }
                if !epi.bias_col.is_null() {
                    v = vaddq_f32(v, vld1q_f32(epi.bias_col.add(4 * j)));
                }
                // FMAX/FMIN are IEEE 754-2019 `maximum`/`minimum`, exactly the scalar
                // `activate`: NaN propagates, ReLU(−0) = +0.
                v = match epi.act {
                    1 => vmaxq_f32(v, zero),
                    2 => vmaxq_f32(vminq_f32(v, hi), lo),
                    super::ACT_SIGMOID | super::ACT_SWISH | super::ACT_HARDSWISH => {
                        // Lane by lane through the scalar code (the same bits as every
                        // other route; no NEON logistic yet).
                        let mut lanes = [0f32; 4];
                        vst1q_f32(lanes.as_mut_ptr(), v);
                        for x in &mut lanes {
                            *x = super::activate(*x, epi.act, epi.lo, epi.hi);
                        }
                        vld1q_f32(lanes.as_ptr())
                    }
                    _ => v,
                };
                vst1q_f32(cp, v);
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
