//! Lowering of element-wise fusion groups (`passes::fusion` decides them): each group
//! becomes one kernel, one pass over memory, with the intermediate values living only in
//! registers. The kernel loops over the root's output shape and evaluates the members in
//! node order; an operand from outside the group is read at its broadcast index into the
//! root's shape. That is exact for any member shape: a member's shape broadcasts into the
//! root's (it feeds it), and NNEF broadcasting composes (a non-unit extent survives
//! unchanged to the root), so reading outside operands at the root index gives every
//! member the value it would have seen.
//!
//! The group runs where the root was, so outside operands of earlier members must still
//! hold their values then. `passes::memory_plan` keeps them alive to the root; a plan
//! from elsewhere is checked ([`operands_survive`]) and a group it breaks is lowered
//! member by member. Membership is final when lowering starts: members before the root
//! are skipped at their own position.

use super::Lowering;
use super::elementwise::{body, operand};
use crate::back::CodegenError;
use crate::back::kernel::{ExprId, Lit};
use crate::ir::plan::MemoryPlan;
use crate::ir::{Graph, ValueId};
use crate::passes::fusion::{Groups, producer};

/// The groups of `passes::fusion` that `mem` lets run as one kernel (every member output
/// but the root's unplaced or unused, every outside operand intact at the root).
pub(crate) fn plan(g: &Graph, mem: &MemoryPlan) -> Groups {
    let mut groups = crate::passes::fusion::groups(g);
    let roots: Vec<usize> = (0..g.nodes.len())
        .filter(|&i| groups.root_of[i] == Some(i))
        .collect();
    for r in roots {
        let in_group: Vec<bool> = groups.root_of.iter().map(|x| *x == Some(r)).collect();
        if !operands_survive(g, mem, &in_group, r) {
            for x in groups.root_of.iter_mut().filter(|x| **x == Some(r)) {
                *x = None;
            }
        }
    }
    groups
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
