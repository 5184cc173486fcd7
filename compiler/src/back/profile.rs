//! The step table of a profiled object (`BackendOptions::profile`): which graph node each
//! step of the entry point computes, its op, output shape and arithmetic work, so that
//! the times a `PREFIX_run_profiled` hook records can be attributed and rated.
//!
//! The table is exported as `PREFIX_profile_table`, a NUL-terminated text with one line
//! per step, in step order, tab-separated: `step node op shape flops` (`flops` is the
//! number of floating-point operations the step does, 2 per multiply-add, or 0 where the
//! rate is not meaningful, e.g. copies, im2col and element-wise ops). A hook
//! `void hook(void *ctx, size_t step)` passed to `PREFIX_run_profiled` is called after
//! each step finishes. Several steps may belong to one node (im2col then GEMM; the
//! regions of a depthwise conv): sum their times and flops per node. A node's arithmetic
//! goes to its contraction steps (GEMM and depthwise calls), shared evenly, or, when it
//! has none (a conv lowered as loop nests), evenly to all its steps. An inverted-residual
//! block (`passes::block`) is reported at its projection's node as op `inverted_residual`,
//! with the work of its three convs.
//!
//! Not here: timing (the caller's hook), the report (`nnefc bench --profile`).

use crate::ir::{Graph, Op};
use std::fmt::Write;

/// One line of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct StepInfo {
    /// The node's name: the name of its first output, or `%N` for node `N`.
    pub node: String,
    /// The op's NNEF name (`copy` for the copies of graph outputs).
    pub op: String,
    /// Extents of the node's first output, `1x64x56x56`.
    pub shape: String,
    /// Floating-point operations of the node (0: not rated).
    pub flops: f64,
}

/// Floating-point operations of node `i` (2 per multiply-add), for the contractions.
fn flops(g: &Graph, i: usize) -> f64 {
    let Some(n) = g.nodes.get(i) else { return 0.0 };
    let shape = |k: usize, ins: bool| -> Vec<usize> {
        let list = if ins { &n.inputs } else { &n.outputs };
        list.get(k)
            .and_then(|v| g.values.get(v.index()))
            .and_then(|v| v.ty.shape())
            .unwrap_or_default()
    };
    let vol = |s: &[usize]| s.iter().map(|&d| d as f64).product::<f64>();
    match &n.op {
        // Every output element: one multiply-add per filter element of its group.
        Op::Conv(_) => {
            let f = shape(1, true);
            let per_out = f.iter().skip(1).map(|&d| d as f64).product::<f64>();
            2.0 * vol(&shape(0, false)) * per_out
        }
        // Every input element is scattered through a filter of its group.
        Op::Deconv(_) => {
            let f = shape(1, true);
            let x = shape(0, true);
            let cin = x.get(1).copied().unwrap_or(1).max(1) as f64;
            2.0 * vol(&x) * vol(&f) / cin
        }
        // output volume × the contracted extent.
        Op::MatMul { .. } | Op::Linear => {
            let out = shape(0, false);
            let a = shape(0, true);
            let b = shape(1, true);
            let k = match &n.op {
                Op::Linear => b.last().copied().unwrap_or(0),
                Op::MatMul { transpose_a, .. } => {
                    let from_end = if *transpose_a { 2 } else { 1 };
                    a.len()
                        .checked_sub(from_end)
                        .and_then(|i| a.get(i))
                        .copied()
                        .unwrap_or(0)
                }
                _ => 0,
            };
            2.0 * vol(&out) * k as f64
        }
        _ => 0.0,
    }
}

/// The table text for `graph` with steps attributed by `step_nodes`; `contraction[s]`
/// says whether step `s` is a GEMM or depthwise call (where a node's arithmetic goes).
pub fn table(graph: &Graph, step_nodes: &[usize], contraction: &[bool]) -> String {
    let mut o = String::new();
    // An inverted-residual block (`passes::block`) runs at its projection's node: its
    // steps carry the three convs' work under the op name `inverted_residual`.
    let users = graph.users();
    let blocks = crate::passes::block::blocks(graph, &users);
    let block_of = |i: usize| blocks.iter().find(|b| b.project == i);
    let node_flops = |i: usize| match block_of(i) {
        Some(b) => b.convs().iter().map(|&c| flops(graph, c)).sum(),
        None => flops(graph, i),
    };
    let is_contraction = |s: usize| contraction.get(s).copied().unwrap_or(false);
    // Per node: its steps and its contraction steps.
    let mut counts: std::collections::BTreeMap<usize, (usize, usize)> = Default::default();
    for (s, &i) in step_nodes.iter().enumerate() {
        let e = counts.entry(i).or_default();
        e.0 += 1;
        e.1 += usize::from(is_contraction(s));
    }
    for (s, &i) in step_nodes.iter().enumerate() {
        let (steps, contractions) = counts.get(&i).copied().unwrap_or((1, 0));
        let step_flops = match (contractions, is_contraction(s)) {
            (0, _) => node_flops(i) / steps as f64,
            (k, true) => node_flops(i) / k as f64,
            (_, false) => 0.0,
        };
        let (node, op, shape) = match graph.nodes.get(i) {
            Some(n) => {
                let out = n.outputs.first().and_then(|v| graph.values.get(v.index()));
                let name = out
                    .and_then(|v| v.name.clone())
                    .unwrap_or_else(|| format!("%{i}"));
                let shape = out
                    .and_then(|v| v.ty.shape())
                    .map(|s| {
                        s.iter()
                            .map(|d| d.to_string())
                            .collect::<Vec<_>>()
                            .join("x")
                    })
                    .unwrap_or_default();
                let op = match block_of(i) {
                    Some(_) => "inverted_residual",
                    None => n.op.mnemonic(),
                };
                (name, op.to_string(), shape)
            }
            None => ("(outputs)".to_string(), "copy".to_string(), String::new()),
        };
        // Tabs and newlines would break the format; names never need them.
        let clean = |t: &str| t.replace(['\t', '\n'], " ");
        let _ = writeln!(
            o,
            "{s}\t{}\t{}\t{}\t{}",
            clean(&node),
            clean(&op),
            shape,
            step_flops
        );
    }
    o
}

/// Parses a table (from [`table`] or a loaded object's `PREFIX_profile_table`); lines that
/// do not have five fields are skipped.
pub fn parse(text: &str) -> Vec<StepInfo> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let [_, node, op, shape, flops] = f.as_slice() else {
                return None;
            };
            Some(StepInfo {
                node: node.to_string(),
                op: op.to_string(),
                shape: shape.to_string(),
                flops: flops.parse().unwrap_or(0.0),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{ConvAttrs, DType, TensorType};

    /// A conv of 2·(1·4·8·8)·(3·3·3) = 13824 flops: its arithmetic goes to its GEMM
    /// step (not to the im2col before it), or, lowered as two loop nests, half to each;
    /// the output copy at the end gets none.
    #[test]
    fn flops_go_to_the_contraction_steps() {
        let mut g = Graph::new("g");
        let x = g.add_input("x", TensorType::new(DType::F32, &[1, 3, 8, 8]));
        let w = g.add_input("w", TensorType::new(DType::F32, &[4, 3, 3, 3]));
        let b = g.add_input("b", TensorType::new(DType::F32, &[1, 4]));
        let y = g.add_node(
            Op::Conv(ConvAttrs {
                border: crate::ir::Border::Constant,
                padding: vec![(1, 1), (1, 1)],
                stride: vec![],
                dilation: vec![],
                groups: 1,
                output_shape: vec![],
            }),
            vec![x, w, b],
            vec![TensorType::new(DType::F32, &[1, 4, 8, 8])],
        )[0];
        g.outputs.push(y);
        let flops_of = |t: &str| -> Vec<f64> { parse(t).iter().map(|s| s.flops).collect() };
        let gemm = table(&g, &[0, 0, 1], &[false, true, false]);
        assert_eq!(flops_of(&gemm), vec![0.0, 13824.0, 0.0]);
        let loops = table(&g, &[0, 0, 1], &[false, false, false]);
        assert_eq!(flops_of(&loops), vec![6912.0, 6912.0, 0.0]);
    }
}
