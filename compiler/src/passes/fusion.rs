//! Analysis: element-wise fusion groups, decided on the graph before memory planning.
//! A *group* is a set of element-wise nodes ([`is_elementwise`]) with one *root* whose
//! output escapes; every other member's output is read only by members and is not a graph
//! output. The back end computes a group as one kernel at the root's position
//! (`back::select::fuse`), the members' outputs living only in registers.
//!
//! Because the decision is made here, `memory_plan` sees it: a member's output other than
//! the root's gets no arena slot, and every operand a member reads from outside the group
//! stays alive until the root runs (the fused kernel reads it there).
//!
//! Rules:
//! - A member whose output is smaller than the root's is recomputed per root element, so
//!   it joins only when it is cheap (no transcendental function, [`cheap`]).
//! - Nodes next to a convolution stay out: `passes::epilogue` chains may be folded into
//!   the conv, which assumes they run alone.
//! - Only f32 nodes (f32 operands and result) join: their bodies always vectorize, so a
//!   fused loop is never a scalar loop replacing f32x4 ones.
//! - Groups are formed greedily from the last node backwards; a producer joins once all
//!   readers of its output are members.
//!
//! Not here: the lowering (`back::select::fuse`), which also checks that a plan it is
//! given honours these lifetimes and lowers the members one by one when it does not.

use crate::ir::{BinaryOp, DType, Graph, Op, UnaryOp, ValueDef, ValueId};

/// Whether `op` computes each output element from the same element of its (broadcast)
/// operands.
pub fn is_elementwise(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(_)
            | Op::Binary(_)
            | Op::Select
            | Op::Clamp
            | Op::Cast { .. }
            | Op::BatchNorm { .. }
    )
}

/// Fusion groups of a graph: for each node, the root of its group when the group has at
/// least two members.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Groups {
    pub root_of: Vec<Option<usize>>,
}

impl Groups {
    /// Members of the group rooted at `root`, in node order (the root last).
    pub fn members(&self, root: usize) -> Vec<usize> {
        (0..=root)
            .filter(|&i| self.root_of.get(i).copied().flatten() == Some(root))
            .collect()
    }

    /// One line per group for `nnefc dump --stage plan`: its members (node index and op)
    /// and the value the root writes, e.g. `fused n4 relu, n6 add -> %v7`.
    pub fn describe(&self, g: &Graph) -> String {
        let mut out = String::new();
        for (r, node) in g.nodes.iter().enumerate() {
            if self.root_of.get(r).copied().flatten() != Some(r) {
                continue;
            }
            let members: Vec<String> = self
                .members(r)
                .iter()
                .map(|&m| format!("n{m} {}", g.nodes[m].op.mnemonic()))
                .collect();
            let root_out = node
                .outputs
                .first()
                .map(|v| v.to_string())
                .unwrap_or_default();
            out.push_str(&format!("fused {} -> {root_out}\n", members.join(", ")));
        }
        out
    }

    /// Whether `v`'s value lives only inside a fused kernel: the output of a member that
    /// is not its group's root.
    pub fn is_internal(&self, g: &Graph, v: ValueId) -> bool {
        producer(g, v).is_some_and(|n| {
            self.root_of
                .get(n)
                .copied()
                .flatten()
                .is_some_and(|r| r != n)
        })
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

/// The index of the node that computes `v` (`None` for inputs and constants).
pub(crate) fn producer(g: &Graph, v: ValueId) -> Option<usize> {
    match g.value(v).def {
        ValueDef::Node(n, _) => Some(n.index()),
        _ => None,
    }
}

/// Forms the groups (greedy, from the last node backwards).
pub fn groups(g: &Graph) -> Groups {
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
        if members.len() < 2 {
            continue;
        }
        for &m in &members {
            taken[m] = true;
            root_of[m] = Some(r);
        }
    }
    Groups { root_of }
}
