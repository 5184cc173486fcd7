//! Self-contained GEMM: rewrites every runtime GEMM call ([`Step::Gemm`]) of a program into
//! Cranelift loop nests, for objects that must not call `nnefc-runtime` (cross targets,
//! see `back` module docs).
//!
//! Normally each GEMM becomes a [`Step::Tiled`]: a register-blocked f32x4 function
//! emitted by `emit::gemm`. Only when that cannot represent the call (offsets beyond the
//! immediate range, C with non-unit column stride) does the fallback below apply:
//! each batch entry becomes a reduction kernel `C[i, j] = act(Σ_kk A[i, kk]·B[kk, j] + bias)`
//! with the reduction innermost. A pre-packed A (either of the runtime's panel formats:
//! element `(i, kk)` at `(i / R)·k·R + kk·R + i % R` with `R` = 6 or 16 rows per panel,
//! `APacking::panel_rows`) is read in place by splitting the row loop into (panel,
//! row-in-panel) loops: one kernel for the full panels, one for the last partial panel. The inner loop vectorizes (4 accumulators) when A and B are both
//! contiguous along k. Not supported by the fallback: `accumulate` (convolutions only fuse a residual
//! on the runtime path, so this never occurs in programs `select` builds).

use super::Lowering;
use crate::back::CodegenError;
use crate::back::kernel::{Expr, ExprId, ExprNode, GemmCall, Kernel, ReduceKind, Reduction, Step};
use crate::ir::{BinaryOp, DType};

/// Rows `[row0, row0 + rows)` of one batch entry; `a_row` gives A's (offset, per-row stride
/// pattern): for packed A the rows are walked as `panels × rows per panel`.
fn kernel(
    lw: &Lowering<'_>,
    g: &GemmCall,
    bi: usize,
    row_loops: &[(usize, i64, i64, i64)],
    a_off: i64,
    a_k: i64,
) -> Result<Kernel, CodegenError> {
    let off = g
        .batches
        .get(bi)
        .ok_or_else(|| CodegenError::Internal("gemm batch missing".into()))?;
    // Loops: row loops…, n, k.
    let mut ext: Vec<usize> = row_loops.iter().map(|r| r.0).collect();
    ext.push(g.n);
    ext.push(g.k);
    let nl = ext.len();
    let mut k = lw.kernel("gemm", &ext);
    let mut ast: Vec<i64> = row_loops.iter().map(|r| r.1).collect();
    ast.extend([0, a_k]);
    let aa = k.access(g.a.buf, off[0] + a_off, ast);
    let mut bst = vec![0i64; row_loops.len()];
    bst.extend([g.b.cs, g.b.rs]);
    let ba = k.access(g.b.buf, off[1], bst);
    let x = k.load(aa, DType::F32);
    let y = k.load(ba, DType::F32);
    k.push(Expr::Binary(BinaryOp::Mul, x, y), DType::F32);
    let f = DType::F32;
    let mut fin = vec![ExprNode {
        expr: Expr::Acc,
        ty: f,
    }];
    let mut cur = ExprId(0);
    let add = |fin: &mut Vec<ExprNode>, e: Expr| {
        fin.push(ExprNode { expr: e, ty: f });
        ExprId(fin.len() as u32 - 1)
    };
    if let Some(b) = g.bias {
        let mut st = vec![0i64; nl];
        st[nl - 2] = 1;
        let a = k.access(b, 0, st);
        let v = add(&mut fin, Expr::Load(a));
        cur = add(&mut fin, Expr::Binary(BinaryOp::Add, cur, v));
    }
    if let Some((b, offs)) = &g.epi.row_bias {
        let mut st: Vec<i64> = row_loops.iter().map(|r| r.3).collect();
        st.extend([0, 0]);
        let o = offs.get(bi).copied().unwrap_or(0);
        let a = k.access(*b, o, st);
        let v = add(&mut fin, Expr::Load(a));
        cur = add(&mut fin, Expr::Binary(BinaryOp::Add, cur, v));
    }
    g.epi.activation.apply(cur, |e| add(&mut fin, e));
    k.reduction = Some(Reduction {
        kind: ReduceKind::Sum,
        first_loop: nl - 1,
        finalize: fin,
    });
    let mut cst: Vec<i64> = row_loops.iter().map(|r| r.2).collect();
    cst.extend([g.c.cs, 0]);
    k.set_store(g.c.buf, off[2], cst);
    Ok(k)
}

/// Replaces every GEMM step of the program by loop-nest kernels.
pub(super) fn lower_all(lw: &mut Lowering<'_>) -> Result<(), CodegenError> {
    let steps = std::mem::take(&mut lw.prog.steps);
    let nodes = std::mem::take(&mut lw.prog.step_nodes);
    for (s, node) in steps.into_iter().zip(nodes) {
        // The steps pushed for the previous original step belong to its node.
        lw.prog.attribute_steps(lw.node_idx());
        lw.set_node_idx(node);
        let g = match s {
            Step::Gemm(g) => g,
            other => {
                lw.prog.steps.push(other);
                continue;
            }
        };
        if g.m == 0 || g.n == 0 {
            continue;
        }
        if crate::back::emit::gemm::supported(&g) {
            let name = format!("{}_gemm", lw.kernel("tiled", &[]).name);
            lw.prog.steps.push(Step::Tiled { name, gemm: g });
            continue;
        }
        if g.epi.accumulate {
            return Err(CodegenError::Unsupported(
                "accumulating GEMM in a self-contained object".into(),
            ));
        }
        if g.m == 0 || g.n == 0 {
            continue;
        }
        for bi in 0..g.batches.len() {
            if let Some(mr) = g.a_packing.panel_rows() {
                let kk = g.k as i64;
                let full = g.m / mr;
                let rest = g.m % mr;
                if full > 0 {
                    let rl = [
                        (full, kk * mr as i64, mr as i64 * g.c.rs, mr as i64),
                        (mr, 1, g.c.rs, 1),
                    ];
                    let k = kernel(lw, &g, bi, &rl, 0, mr as i64)?;
                    lw.push(k);
                }
                if rest > 0 {
                    let base = (full * mr) as i64;
                    let mut g2 = g.clone();
                    g2.batches[bi][2] += base * g.c.rs;
                    if let Some((_, offs)) = &mut g2.epi.row_bias
                        && let Some(o) = offs.get_mut(bi)
                    {
                        *o += base;
                    }
                    let rl = [(rest, 1, g.c.rs, 1)];
                    let k = kernel(lw, &g2, bi, &rl, base * kk, mr as i64)?;
                    lw.push(k);
                }
            } else {
                let rl = [(g.m, g.a.rs, g.c.rs, 1)];
                let k = kernel(lw, &g, bi, &rl, 0, g.a.cs)?;
                lw.push(k);
            }
        }
    }
    lw.prog.attribute_steps(lw.node_idx());
    Ok(())
}
