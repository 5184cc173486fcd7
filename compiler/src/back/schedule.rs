//! Kernel rewrites before emission: drop unit loops, merge loops that walk memory as
//! one, choose the vector width of the innermost loop.
//!
//! Merging loops `l` and `l+1` is legal when, for every access, `stride[l] ==
//! stride[l+1] · extent[l+1]` and both loops play the same role (parallel or reduction);
//! the merged loop visits the same points in the same order, so reductions (including
//! ArgMax's row-major index) are unchanged. Vectorizing the innermost loop is legal when
//! every access moves by 0, 1 or 2 elements along it (2: loads, and f32/i32 stores
//! outside reductions), indirect indices do not move with it,
//! and every body node has a vector lowering (`emit::expr::vectorizable`).
//!
//! Last, the outermost loop of a kernel with enough work gets the parallel role when its
//! iterations are independent: it is not a reduction loop, not the vector loop, and the
//! store of one iteration cannot touch another's elements (`|stride| ≥` the span the
//! inner loops cover, no indirect store). A lone vector loop is first cut into blocks of a
//! power-of-two size that divides it, so element-wise kernels split too. Because only the
//! range of that loop changes between tasks, every element is computed by the same
//! instructions whatever the number of tasks. Small kernels of a node that has a parallel
//! kernel over the same outer extent are made parallel too (`select` calls
//! [`mark_parallel`]): the border regions of a depthwise conv then split by channel like
//! its interior, so each thread keeps touching its own channels. This file does not tile
//! or reorder loops.

use super::emit::expr::vectorizable;
use super::kernel::{Expr, Kernel, Loop, ReduceKind};
use crate::ir::DType;

/// Applies all rewrites in order; `vectorize = false` keeps every loop scalar.
pub fn schedule(k: &mut Kernel, vectorize: bool) {
    drop_unit_loops(k);
    merge_loops(k);
    if vectorize {
        choose_vector(k);
    }
    choose_parallel(k);
}

/// Work of a loop nest (iterations of all loops, times the memory accesses of one
/// iteration over two, so that a copy counts one per point) below which it runs inline:
/// about 10 µs of element-wise work, several times the cost of handing tasks to
/// spinning helpers. A 3×3 depthwise conv (19 accesses a point) is split from about
/// 3 500 outputs.
pub const PARALLEL_MIN_POINTS: usize = 1 << 15;

/// The work of `k` as [`PARALLEL_MIN_POINTS`] counts it.
pub fn parallel_work(k: &Kernel) -> usize {
    k.loops
        .iter()
        .fold(1usize, |p, l| p.saturating_mul(l.extent))
        .saturating_mul(k.accesses.len().max(2))
        / 2
}

fn choose_parallel(k: &mut Kernel) {
    if k.loops.is_empty() || parallel_work(k) < PARALLEL_MIN_POINTS {
        return;
    }
    if k.loops.len() == 1 && k.reduction.is_none() {
        let e = k.loops[0].extent;
        let Some(c) = [4096usize, 2048, 1024, 512, 256]
            .into_iter()
            .find(|&c| e.is_multiple_of(c) && e / c >= 2)
        else {
            return;
        };
        k.loops[0].extent = c;
        k.loops.insert(
            0,
            Loop {
                extent: e / c,
                vector: 1,
                parallel: false,
            },
        );
        for a in &mut k.accesses {
            let s = a.strides.first().copied().unwrap_or(0);
            a.strides.insert(0, s * c as i64);
        }
        if let Some(r) = &mut k.reduction {
            r.first_loop += 1;
        }
    }
    mark_parallel(k);
}

/// Gives loop 0 the parallel role when that is legal (see the module docs), whatever the
/// amount of work. Returns whether it did.
pub fn mark_parallel(k: &mut Kernel) -> bool {
    if k.loops.is_empty() {
        return false;
    }
    let fr = first_red(k);
    if fr == 0 || k.loops[0].extent < 2 || (k.loops.len() == 1 && k.loops[0].vector > 1) {
        return false;
    }
    let Some(store) = k.accesses.get(k.store.0 as usize) else {
        return false;
    };
    if !store.indirect.is_empty() {
        return false;
    }
    let s0 = store.strides.first().copied().unwrap_or(0).unsigned_abs();
    let span: u64 = 1
        + (1..fr)
            .map(|l| {
                let s = store.strides.get(l).copied().unwrap_or(0).unsigned_abs();
                s.saturating_mul(k.loops[l].extent.saturating_sub(1) as u64)
            })
            .sum::<u64>();
    if s0 < span {
        return false;
    }
    k.loops[0].parallel = true;
    true
}

fn first_red(k: &Kernel) -> usize {
    k.reduction
        .as_ref()
        .map(|r| r.first_loop)
        .unwrap_or(k.loops.len())
}

fn remove_loop(k: &mut Kernel, l: usize) {
    k.loops.remove(l);
    for a in &mut k.accesses {
        if l < a.strides.len() {
            a.strides.remove(l);
        }
    }
    if let Some(r) = &mut k.reduction
        && r.first_loop > l
    {
        r.first_loop -= 1;
    }
}

fn drop_unit_loops(k: &mut Kernel) {
    let mut l = 0;
    while l < k.loops.len() {
        if k.loops[l].extent == 1 {
            remove_loop(k, l);
        } else {
            l += 1;
        }
    }
}

fn merge_loops(k: &mut Kernel) {
    let mut l = 0;
    while l + 1 < k.loops.len() {
        let fr = first_red(k);
        let same_role = (l + 1 < fr) || (l >= fr);
        let inner = k.loops[l + 1].extent as i64;
        let ok = same_role
            && k.accesses.iter().all(|a| {
                let so = a.strides.get(l).copied().unwrap_or(0);
                let si = a.strides.get(l + 1).copied().unwrap_or(0);
                so == si * inner
            });
        if ok {
            k.loops[l + 1].extent *= k.loops[l].extent;
            remove_loop(k, l);
        } else {
            l += 1;
        }
    }
}

fn choose_vector(k: &mut Kernel) {
    let Some(last) = k.loops.len().checked_sub(1) else {
        return;
    };
    if k.loops[last].extent < 4 {
        return;
    }
    if let Some(r) = &k.reduction {
        // Only an innermost reduction loop with an associative lane-wise combine.
        if r.first_loop > last
            || !matches!(r.kind, ReduceKind::Sum | ReduceKind::Max | ReduceKind::Min)
        {
            return;
        }
    }
    let strides_ok = k.accesses.iter().enumerate().all(|(i, a)| {
        let s = a.strides.get(last).copied().unwrap_or(0);
        let is_index = k
            .accesses
            .iter()
            .any(|b| b.indirect.iter().any(|ind| ind.index.0 as usize == i));
        // Stride 2 (stride-2 windows): loads are gathered by `emit` with a shuffle,
        // stores (f32/i32, outside reductions) scattered lane by lane.
        let is_store = i == k.store.0 as usize;
        let stored_ty = k.body.last().map(|n| n.ty);
        let even = s == 2
            && a.indirect.is_empty()
            && (!is_store
                || (k.reduction.is_none() && matches!(stored_ty, Some(DType::F32 | DType::I32))));
        s == 0 || ((s == 1 || even) && !is_index)
    });
    if !strides_ok {
        return;
    }
    let tys: Vec<DType> = k.body.iter().map(|n| n.ty).collect();
    let body_ok = k.body.iter().all(|n| {
        let ok = vectorizable(n, |i| tys.get(i).copied().unwrap_or(DType::Bool));
        // Loads of bool bytes stay scalar.
        ok && !matches!(n.expr, Expr::Load(_) if n.ty == DType::Bool)
    });
    if body_ok {
        k.loops[last].vector = 4;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::back::kernel::{BufId, Kernel};
    use crate::ir::{DType, UnaryOp};

    #[test]
    fn contiguous_nest_merges_and_vectorizes() {
        let mut k = Kernel::new("k", &[2, 1, 3, 5]);
        let a = k.access(BufId(0), 0, vec![15, 15, 5, 1]);
        let x = k.load(a, DType::F32);
        k.push(Expr::Unary(UnaryOp::Relu, x), DType::F32);
        k.set_store(BufId(1), 0, vec![15, 15, 5, 1]);
        schedule(&mut k, true);
        expect_test::expect![[r#"
            kernel k
              loop i0 < 30 x4
              a0 = b0[0 + 1i0]
              a1 = b1[0 + 1i0]
                e0:f32 = load a0
                e1:f32 = relu e0
              store a1 = e1
        "#]]
        .assert_eq(&k.to_string());
    }

    #[test]
    fn stride_two_accesses_vectorize_stride_three_does_not() {
        let mut k = Kernel::new("s2", &[3, 8]);
        let a = k.access(BufId(0), 0, vec![17, 2]);
        k.load(a, DType::F32);
        k.set_store(BufId(1), 0, vec![8, 1]);
        schedule(&mut k, true);
        assert_eq!(k.loops[1].vector, 4, "{k}");
        let mut k = Kernel::new("s2st", &[3, 8]);
        let a = k.access(BufId(0), 0, vec![8, 1]);
        k.load(a, DType::F32);
        k.set_store(BufId(1), 0, vec![17, 2]);
        schedule(&mut k, true);
        assert_eq!(k.loops[1].vector, 4, "{k}");
        let mut k = Kernel::new("s3st", &[3, 8]);
        let a = k.access(BufId(0), 0, vec![8, 1]);
        k.load(a, DType::F32);
        k.set_store(BufId(1), 0, vec![25, 3]);
        schedule(&mut k, true);
        assert_eq!(k.loops[1].vector, 1, "{k}");
    }

    #[test]
    fn transpose_stays_scalar() {
        let mut k = Kernel::new("t", &[3, 4]);
        let a = k.access(BufId(0), 0, vec![1, 3]);
        k.load(a, DType::F32);
        k.set_store(BufId(1), 0, vec![4, 1]);
        schedule(&mut k, true);
        expect_test::expect![[r#"
            kernel t
              loop i0 < 3
              loop i1 < 4
              a0 = b0[0 + 1i0 + 3i1]
              a1 = b1[0 + 4i0 + 1i1]
                e0:f32 = load a0
              store a1 = e0
        "#]]
        .assert_eq(&k.to_string());
    }
}
