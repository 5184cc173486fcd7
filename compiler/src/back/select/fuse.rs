//! Element-wise fusion: chains (DAGs) of element-wise nodes become one kernel, one pass
//! over memory, with the intermediate values living only in registers.
//!
//! A *group* is a set of element-wise nodes (`elementwise::is_elementwise`) with one
//! *root* whose output escapes; every other member's output is read only by members and
//! is not a graph output, so it never needs memory. The kernel loops over the root's
//! output shape and evaluates the members in node order; an operand from outside the
//! group is read at its broadcast index into the root's shape. That is exact for any
//! member shape: a member's shape broadcasts into the root's (it feeds it), and NNEF
//! broadcasting composes (a non-unit extent survives unchanged to the root), so reading
//! outside operands at the root index gives every member the value it would have seen.
//!
//! Invariants the planner ([`plan`]) keeps:
//! - A member whose output is smaller than the root's is recomputed per root element, so
//!   it joins only when it is cheap (no transcendental function, [`cheap`]).
//! - The group runs where the root was. Outside operands of earlier members must still
//!   hold their values then: the memory plan may have reused their bytes after their last
//!   original reader. A group is kept only if no value written between an operand's last
//!   original reader and the root (including the root's output) overlaps the operand's
//!   slot ([`operands_survive`]); otherwise its members are lowered one by one.
//! - Nodes next to a convolution stay out: `select::conv` may fold them into its GEMM
//!   epilogue and skip them (`Lowering::skip`), which assumes they run alone.
//! - Only f32 nodes (f32 operands and result) join: their bodies always vectorize (every
//!   access moves by 0 or 1 along the innermost loop), so a fused loop is never a scalar
//!   loop replacing f32x4 ones. Bool/i32 element-wise nodes are lowered alone.
//! - Membership is final when lowering starts: members before the root are skipped at
//!   their own position, and materializing them later would write slots the plan may have
//!   given to other values in between.

use super::Lowering;
use super::elementwise::{body, is_elementwise, operand};
use crate::back::CodegenError;
use crate::back::kernel::{ExprId, Lit};
use crate::ir::plan::MemoryPlan;
use crate::ir::{BinaryOp, DType, Graph, Op, UnaryOp, ValueDef, ValueId};

/// Fusion groups of a graph: for each node, the root of its group when the group has at
/// least two members.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Groups {
    pub root_of: Vec<Option<usize>>,
}

impl Groups {
    /// Members of the group rooted at `root`, in node order (the root last).
    pub fn members(&self, root: usize) -> Vec<usize> {
        (0..=root)
            .filter(|&i| self.root_of.get(i).copied().flatten() == Some(root))
            .collect()
    }
}

/// Ops cheap enough to recompute per element of a larger output.
fn cheap(op: &Op, g: &Graph, ins: &[ValueId]) -> bool {
    match op {
        Op::Unary(u) => matches!(
            u,
            UnaryOp::Copy
                | UnaryOp::Neg
                | UnaryOp::Rcp
                | UnaryOp::Abs
                | UnaryOp::Sign
                | UnaryOp::Not
                | UnaryOp::Floor
                | UnaryOp::Ceil
                | UnaryOp::Round
                | UnaryOp::Sqr
                | UnaryOp::Sqrt
                | UnaryOp::Rsqr
                | UnaryOp::Rsqrt
                | UnaryOp::Relu
        ),
        Op::Binary(BinaryOp::Pow) => ins.get(1).and_then(|&e| g.const_of(e)).is_some_and(|t| {
            t.as_f32()
                .is_some_and(|d| d.iter().all(|&x| x == 1.0 || x == 2.0 || x == 3.0))
        }),
        Op::Binary(_) | Op::Select | Op::Clamp | Op::Cast { .. } => true,
        _ => false,
    }
}

fn volume(g: &Graph, v: ValueId) -> Option<usize> {
    g.ty(v).shape().map(|s| s.iter().product())
}

fn producer(g: &Graph, v: ValueId) -> Option<usize> {
    match g.value(v).def {
        ValueDef::Node(n, _) => Some(n.index()),
        _ => None,
    }
}

/// Forms the groups (greedy, from the last node backwards).
pub(crate) fn plan(g: &Graph, mem: &MemoryPlan) -> Groups {
    let n = g.nodes.len();
    let users = g.users();
    let mut is_output = vec![false; g.values.len()];
    for v in &g.outputs {
        if let Some(x) = is_output.get_mut(v.index()) {
            *x = true;
        }
    }
    // Nodes `select::conv` might fold into a GEMM epilogue: readers of a conv output and
    // their readers.
    let mut near_conv = vec![false; n];
    for (i, node) in g.nodes.iter().enumerate() {
        let reads_conv = |ni: usize| {
            g.nodes[ni]
                .inputs
                .iter()
                .any(|&v| producer(g, v).is_some_and(|p| matches!(g.nodes[p].op, Op::Conv(_))))
        };
        if reads_conv(i)
            || node
                .inputs
                .iter()
                .any(|&v| producer(g, v).is_some_and(reads_conv))
        {
            near_conv[i] = true;
        }
    }
    let fusible = |i: usize| {
        let node = &g.nodes[i];
        is_elementwise(&node.op)
            && !near_conv[i]
            && node.outputs.len() == 1
            && node
                .inputs
                .iter()
                .chain(&node.outputs)
                .all(|&v| g.ty(v).dtype == DType::F32 && g.ty(v).shape().is_some())
    };
    let mut root_of: Vec<Option<usize>> = vec![None; n];
    let mut taken = vec![false; n];
    for r in (0..n).rev() {
        if taken[r] || !fusible(r) {
            continue;
        }
        let Some(rvol) = g.nodes[r].outputs.first().and_then(|&v| volume(g, v)) else {
            continue;
        };
        let mut members = vec![r];
        let mut in_group = vec![false; n];
        in_group[r] = true;
        // Grow to a fixpoint: a producer joins once all readers of its output are members.
        loop {
            let mut grew = false;
            for m in members.clone() {
                for &v in &g.nodes[m].inputs {
                    let Some(p) = producer(g, v) else { continue };
                    if in_group[p] || taken[p] || !fusible(p) || is_output[v.index()] {
                        continue;
                    }
                    let all_inside = users[v.index()].iter().all(|u| in_group[u.index()]);
                    let small = volume(g, v).is_none_or(|pv| pv < rvol);
                    if !all_inside || (small && !cheap(&g.nodes[p].op, g, &g.nodes[p].inputs)) {
                        continue;
                    }
                    in_group[p] = true;
                    members.push(p);
                    grew = true;
                }
            }
            if !grew {
                break;
            }
        }
        if members.len() < 2 || !operands_survive(g, mem, &in_group, r) {
            continue;
        }
        for &m in &members {
            taken[m] = true;
            root_of[m] = Some(r);
        }
    }
    Groups { root_of }
}

/// Whether every outside operand of the group (members `in_group`, root `root`) still
/// holds its value when the group runs at `root` (see the module docs).
fn operands_survive(g: &Graph, mem: &MemoryPlan, in_group: &[bool], root: usize) -> bool {
    let overlap = |a: (usize, usize), b: (usize, usize)| a.0 < b.1 && b.0 < a.1;
    for (m, node) in g.nodes.iter().enumerate() {
        if !in_group.get(m).copied().unwrap_or(false) {
            continue;
        }
        for &v in &node.inputs {
            if producer(g, v).is_some_and(|p| in_group.get(p).copied().unwrap_or(false)) {
                continue;
            }
            let Some(s) = mem.slot(v) else { continue };
            if s.last >= root {
                continue;
            }
            let range = (s.offset, s.offset + s.size);
            // Values written in between (member outputs other than the root's are never
            // written, so their slots do not count).
            let clobbered = mem.slots.iter().enumerate().any(|(vi, o)| {
                let Some(o) = o else { return false };
                let internal = producer(g, ValueId(vi as u32))
                    .is_some_and(|p| p != root && in_group.get(p).copied().unwrap_or(false));
                !internal
                    && o.first > s.last
                    && o.first <= root
                    && overlap(range, (o.offset, o.offset + o.size))
            });
            if clobbered {
                return false;
            }
        }
    }
    true
}

/// Lowers the group with `members` (node order, root last) as one kernel.
pub(super) fn lower_group(lw: &mut Lowering<'_>, members: &[usize]) -> Result<(), CodegenError> {
    let g = lw.g;
    let Some(&root) = members.last() else {
        return Ok(());
    };
    let out = *g.nodes[root]
        .outputs
        .first()
        .ok_or_else(|| CodegenError::Internal("fused root without output".into()))?;
    let oshape = lw.shape(out)?;
    let ob = lw.buf(out)?;
    let name = format!("fused{}_{}", members.len(), g.nodes[root].op.mnemonic());
    let mut k = lw.kernel(&name, &oshape);
    // Expression (and literal value) of every member output, by value index.
    let mut vals: Vec<Option<(ExprId, Option<Lit>)>> = vec![None; g.values.len()];
    for &m in members {
        let node = &g.nodes[m];
        let mut args = Vec::with_capacity(node.inputs.len());
        for &v in &node.inputs {
            let a = match vals.get(v.index()).copied().flatten() {
                Some(a) => a,
                None => operand(lw, &mut k, v, &oshape)?,
            };
            args.push(a);
        }
        let res = *node
            .outputs
            .first()
            .ok_or_else(|| CodegenError::Internal("fused member without output".into()))?;
        let e = body(&mut k, &node.op, &args, lw.dtype(res)?)?;
        if let Some(slot) = vals.get_mut(res.index()) {
            *slot = Some((e, None));
        }
    }
    k.set_store(ob, 0, super::strides(&oshape));
    lw.push(k);
    Ok(())
}
