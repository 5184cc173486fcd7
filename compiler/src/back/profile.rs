//! The step table of a profiled object (`BackendOptions::profile`): which graph node each
//! step of the entry point computes, its op, output shape and arithmetic work, so that
//! the times a `PREFIX_run_profiled` hook records can be attributed and rated.
//!
//! The table is exported as `PREFIX_profile_table`, a NUL-terminated text with one line
//! per step, in step order, tab-separated: `step node op shape flops` (`flops` is the
//! number of floating-point operations of the whole node, 2 per multiply-add, or 0 where
//! the rate is not meaningful, e.g. copies and element-wise ops). A hook
//! `void hook(void *ctx, size_t step)` passed to `PREFIX_run_profiled` is called after
//! each step finishes. Several steps may belong to one node (im2col then GEMM; the
//! regions of a depthwise conv): sum their times per node.
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

/// The table text for `graph` with steps attributed by `step_nodes`.
pub fn table(graph: &Graph, step_nodes: &[usize]) -> String {
    let mut o = String::new();
    for (s, &i) in step_nodes.iter().enumerate() {
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
                (name, n.op.mnemonic().to_string(), shape)
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
            flops(graph, i)
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
