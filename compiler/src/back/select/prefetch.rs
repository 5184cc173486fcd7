//! Chooses which runtime GEMM calls prefetch a later step's weights (`GemmCall::prefetch`,
//! shown by `nnefc dump --stage kernels`): a matrix-vector product over a large constant
//! matrix (a classifier at batch 1) reads each weight once, from memory, at the speed of
//! memory; the GEMM a few steps before it (a network's last 1×1 convolution) is bound by
//! its multiply-adds and leaves the memory idle. That GEMM, when its A is in lane panels
//! (the runtime's tiles that issue the hints), prefetches the product's matrix into L2
//! while it computes, each of its products (a Winograd layer's 16) a share; evicted
//! from there, the lines stay in L3 for the product.
//!
//! Measured (Zen 4, mobilenet_v2, `nnefc bench --profile`, minima of four interleaved
//! runs, a scratch build of the same hints): one thread, the 1000×1280 classifier 0.216
//! → 0.114 ms and the 320→1280 layer before it 0.391 → 0.399; two threads 0.105 → 0.052
//! and 0.199 → 0.211.
//!
//! Not here: the hints themselves (the runtime's `nnefc_sgemm_batch_prefetch`), other
//! producers than lane-panel GEMMs, prefetching for anything but a constant matrix.

use crate::back::kernel::{APacking, BufKind, GemmCall, Program, Step};
use crate::back::object::BATCH_CHUNK;

/// Bytes of constant matrix from which a matrix-vector product's weights are worth
/// prefetching: more than a core's L2 keeps from one inference to the next.
const MIN_BYTES: usize = 1 << 20;
/// Most columns of a product that counts as reading its weights once.
const MAX_COLUMNS: usize = 4;
/// How many steps back the prefetching GEMM may be (a pooling and a reshape between).
const MAX_DISTANCE: usize = 4;
/// Multiply-adds per prefetched float the earlier GEMM must have, so that its
/// arithmetic outlasts the stream (the 320→1280 layer on 7×7 has 16 per float of the
/// classifier).
const MIN_MACS_PER_FLOAT: usize = 4;

/// The GEMM that may prefetch: products with A in lane panels of at least one pair, in
/// one runtime call ([`BATCH_CHUNK`] products at most; each takes its share).
fn producer(g: &GemmCall) -> bool {
    g.a_packing == APacking::Lanes16 && (1..=BATCH_CHUNK).contains(&g.batches.len()) && g.m >= 32
}

/// Sets `prefetch` on the GEMM before each matrix-vector product over a large constant
/// matrix, where one qualifies (see the module doc).
pub(super) fn plan(prog: &mut Program) {
    for i in 0..prog.steps.len() {
        let Step::Gemm(g) = &prog.steps[i] else {
            continue;
        };
        let a = &prog.buffers[g.a.buf.0 as usize];
        let constant = matches!(a.kind, BufKind::Const(_) | BufKind::Weights(_));
        if !constant || g.n > MAX_COLUMNS || a.len * 4 < MIN_BYTES || g.batches.len() != 1 {
            continue;
        }
        let (buf, len) = (g.a.buf, a.len);
        // The nearest GEMM before it, if it is near enough and qualifies.
        let before = (i.saturating_sub(MAX_DISTANCE)..i)
            .rev()
            .find(|&j| matches!(prog.steps[j], Step::Gemm(_)));
        if let Some(Step::Gemm(p)) = before.map(|j| &mut prog.steps[j])
            && producer(p)
            && p.prefetch.is_none()
            && p.m * p.n * p.k * p.batches.len() >= MIN_MACS_PER_FLOAT * len
        {
            p.prefetch = Some((buf, len));
        }
    }
}
