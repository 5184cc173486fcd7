//! Run-time batch analysis: may a graph whose inputs get a batch extent `n` only at run
//! time be run as `n` independent one-sample runs, and which outputs then carry the batch?
//!
//! The session lowers the model twice, with the batch inputs' leading extent fixed to 1
//! and to 2, and this analysis compares the two graphs value by value. A value *carries*
//! the batch along axis `k` when its shapes differ exactly there, as 1 and 2. That alone
//! rules out most ways of mixing samples: a reduction over the batch axis, a reshape or
//! concatenation across it, a transpose that puts another axis in front of it all give
//! shapes that differ elsewhere or not at all. What shapes cannot show is checked per op:
//! softmax over the batch axis, a window that spans it, a gather along it, a reshape that
//! moves other data between samples, ROI ops (their `batch_index` picks samples). The
//! batch axis may move inside the graph (a transpose, a squeeze), but graph outputs must
//! have it first, as inputs do, so each sample's data is contiguous.
//!
//! Every attribute must also be the same at both batches: the one-sample program serves
//! every batch, so an attribute computed from the batch extent (`shape_of`) is refused.
//!
//! An accepted graph computes each sample from that sample's inputs alone, so running
//! the one-sample program once per sample equals running the batched graph. Not here:
//! lowering (the session), the sample loop (`back::object`). Diagnostics point at the
//! graph statement that produced the op (`front::Lowered::node_spans`).

use crate::diag::{Diagnostic, Span};
use crate::ir::{Graph, Op, ValueId};

/// Which inputs and outputs carry the run-time batch (along axis 0).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct RuntimeBatch {
    pub inputs: Vec<bool>,
    pub outputs: Vec<bool>,
}

/// The batch axis of a value: `Ok(None)` for a value shared by all samples, `Ok(Some(k))`
/// when it carries the batch along `k`, `Err(description)` when its shapes at batch 1 and
/// 2 differ otherwise.
fn batch_axis(g1: &Graph, g2: &Graph, v: ValueId) -> Result<Option<usize>, String> {
    let (t1, t2) = (g1.ty(v), g2.ty(v));
    let (Some(s1), Some(s2)) = (t1.shape(), t2.shape()) else {
        return Err(format!(
            "has unknown extents besides the run-time batch ({t1} at batch 1, {t2} at \
             batch 2): code generation needs them (--input-shape NAME=?,D1,...)"
        ));
    };
    let bad = || format!("is {t1} at batch 1 but {t2} at batch 2");
    if s1.len() != s2.len() {
        return Err(bad());
    }
    let diffs: Vec<usize> = (0..s1.len()).filter(|&i| s1[i] != s2[i]).collect();
    match diffs.as_slice() {
        [] => Ok(None),
        [k] if s1[*k] == 1 && s2[*k] == 2 => Ok(Some(*k)),
        _ => Err(bad()),
    }
}

/// Checks that `g1` (batch 1, as lowered) and `g2` (batch 2) describe a graph whose
/// samples are independent. `node_spans` are `g1`'s statement spans, `graph_span` where
/// the graph is declared.
pub fn analyze(
    g1: &Graph,
    g2: &Graph,
    node_spans: &[Option<Span>],
    graph_span: Span,
) -> Result<RuntimeBatch, Diagnostic> {
    let same_structure = g1.nodes.len() == g2.nodes.len()
        && g1.values.len() == g2.values.len()
        && g1.inputs == g2.inputs
        && g1.outputs == g2.outputs
        && g1.nodes.iter().zip(&g2.nodes).all(|(a, b)| {
            std::mem::discriminant(&a.op) == std::mem::discriminant(&b.op)
                && a.inputs == b.inputs
                && a.outputs == b.outputs
        });
    if !same_structure {
        return Err(Diagnostic::error(
            "the graph cannot take a run-time batch: its operations depend on the batch size",
        )
        .at(graph_span, "this graph")
        .with_note("compile it for a fixed batch (--input-shape NAME=N,...)"));
    }
    // The one-sample program serves every batch, so no attribute may depend on the
    // batch size (compared as printed, so that NaN attributes compare equal).
    for (i, (a, b)) in g1.nodes.iter().zip(&g2.nodes).enumerate() {
        if format!("{:?}", a.op) != format!("{:?}", b.op) {
            let span = node_spans.get(i).copied().flatten().unwrap_or(graph_span);
            return Err(Diagnostic::error(format!(
                "`{}` cannot take a run-time batch: its attributes depend on the batch size",
                a.op.mnemonic()
            ))
            .at(span, "in this operation")
            .with_note(format!("at batch 1: {:?}; at batch 2: {:?}", a.op, b.op)));
        }
    }
    let name = |v: ValueId| {
        g1.value(v)
            .name
            .clone()
            .map_or_else(|| format!("{v}"), |n| format!("`{n}`"))
    };
    let mut axes: Vec<Option<usize>> = vec![None; g1.values.len()];
    for &v in &g1.inputs {
        axes[v.index()] = batch_axis(g1, g2, v).map_err(|e| {
            Diagnostic::error(format!("input {} {e}", name(v))).at(graph_span, "in this graph")
        })?;
    }
    for (i, node) in g1.nodes.iter().enumerate() {
        let op = node.op.mnemonic();
        let span = node_spans.get(i).copied().flatten().unwrap_or(graph_span);
        let fail = |msg: String| {
            Diagnostic::error(format!(
                "`{op}` mixes the samples of the run-time batch: {msg}"
            ))
            .at(span, "in this operation")
            .with_note("with a run-time batch every operation must treat samples independently; compile for a fixed batch instead")
        };
        let ins: Vec<Option<usize>> = node.inputs.iter().map(|v| axes[v.index()]).collect();
        let mut outs = Vec::with_capacity(node.outputs.len());
        for &o in &node.outputs {
            let a =
                batch_axis(g1, g2, o).map_err(|e| fail(format!("its result {} {e}", name(o))))?;
            axes[o.index()] = a;
            outs.push(a);
        }
        let Some(k) = ins.iter().flatten().next().copied() else {
            if let Some(o) = node.outputs.iter().find(|o| axes[o.index()].is_some()) {
                return Err(fail(format!(
                    "its result {} depends on the batch size though no operand does",
                    name(*o)
                )));
            }
            continue;
        };
        if outs.iter().all(Option::is_none) {
            return Err(fail(format!(
                "an operand carries the batch along axis {k} but no result does (a reduction, \
                 slice or reshape across the batch)"
            )));
        }
        check_op(&node.op, &ins, &outs, g1, node).map_err(fail)?;
    }
    let mut batch = RuntimeBatch::default();
    for &v in &g1.inputs {
        batch.inputs.push(axes[v.index()].is_some());
    }
    for &v in &g1.outputs {
        match axes[v.index()] {
            None => batch.outputs.push(false),
            Some(0) => batch.outputs.push(true),
            Some(k) => {
                // Point at the statement that computed the output (the op that moved the
                // batch axis, or one after it), else at the graph.
                let span = match g1.value(v).def {
                    crate::ir::ValueDef::Node(n, _) => node_spans.get(n.index()).copied().flatten(),
                    _ => None,
                };
                let d = Diagnostic::error(format!(
                    "output {} carries the run-time batch along axis {k}; outputs must have it first",
                    name(v)
                ));
                return Err(match span {
                    Some(s) => d.at(s, "this result has the batch along another axis"),
                    None => d.at(graph_span, "in this graph"),
                });
            }
        }
    }
    Ok(batch)
}

/// What shapes do not show: ops that keep shapes but combine values along the batch axis.
fn check_op(
    op: &Op,
    ins: &[Option<usize>],
    outs: &[Option<usize>],
    g1: &Graph,
    node: &crate::ir::Node,
) -> Result<(), String> {
    let first = ins.first().copied().flatten();
    // Window-like ops treat axis 0 as the batch only if the batch is there and no other
    // operand (filter, bias, boxes) depends on the sample.
    let leading_only = || -> Result<(), String> {
        if first.is_some_and(|k| k != 0) {
            return Err(format!(
                "it treats axis 0 as the batch, but the run-time batch is along axis {}",
                first.unwrap_or(0)
            ));
        }
        if ins.iter().skip(1).any(Option::is_some) {
            return Err("an operand other than the input depends on the sample".into());
        }
        Ok(())
    };
    let window = |w: &crate::ir::WindowAttrs| -> Result<(), String> {
        leading_only()?;
        let spans = w.size.first().is_some_and(|&s| s != 1)
            || w.stride.first().is_some_and(|&s| s != 1)
            || w.padding.first().is_some_and(|&p| p != (0, 0));
        if spans {
            return Err("its window spans the batch axis".into());
        }
        Ok(())
    };
    let along = |axes: &[usize], what: &str| -> Result<(), String> {
        match first {
            Some(k) if axes.contains(&k) => Err(format!("it {what} along the batch axis {k}")),
            _ => Ok(()),
        }
    };
    match op {
        Op::Unary(_)
        | Op::Binary(_)
        | Op::Select
        | Op::Clamp
        | Op::Cast { .. }
        | Op::BatchNorm { .. }
        | Op::MatMul { .. }
        | Op::Transpose { .. }
        | Op::Split { .. }
        | Op::Concat { .. }
        | Op::Stack { .. }
        | Op::Unstack { .. }
        | Op::Slice { .. }
        | Op::Tile { .. }
        | Op::Pad { .. } => Ok(()),
        Op::Conv(_) | Op::Deconv(_) | Op::Linear | Op::MultilinearUpsample { .. } => leading_only(),
        Op::Box { window: w, .. } | Op::Debox { window: w, .. } => window(w),
        Op::ArgmaxPool(w) | Op::Sample(w) | Op::Desample(w) | Op::MaxPool(w) => window(w),
        Op::Reduce { axes, .. } => along(axes, "reduces"),
        Op::Softmax { axes } => along(axes, "normalizes"),
        Op::Gather { axis } => along(&[*axis], "gathers"),
        Op::RoiPool { .. } | Op::RoiResample { .. } => {
            Err("its `batch_index` operand selects samples".into())
        }
        Op::Reshape { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } => {
            // Row-major re-views keep samples apart when as many elements precede the
            // batch axis before and after.
            let (Some(k), Some(ko)) = (first, outs.first().copied().flatten()) else {
                return Ok(());
            };
            let before = |v: ValueId, k: usize| -> usize {
                g1.ty(v)
                    .shape()
                    .map_or(0, |s| s[..k].iter().product::<usize>())
            };
            if before(node.inputs[0], k) == before(node.outputs[0], ko) {
                Ok(())
            } else {
                Err("it moves data between samples (the batch axis is not kept as a whole)".into())
            }
        }
    }
}
