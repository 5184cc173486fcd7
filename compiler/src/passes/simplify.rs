//! `simplify`: local algebraic rewrites that remove work without changing results.
//!
//! Rewrites:
//! - `copy(x)`, and `reshape`/`squeeze`/`unsqueeze`/`transpose` whose result has the
//!   operand's extents in the same order (identity permutation or same dims), become `x`;
//! - `transpose(transpose(x))` becomes one transpose with the composed permutation;
//! - `x + (−0)`, `(−0) + x`, `x − (+0)`, `x · 1`, `1 · x` and `x / 1` (an f32 constant
//!   whose every element is that value, bit for bit, and whose broadcast does not change
//!   `x`'s type) become `x`. Only these identities are exact for every IEEE value: NaN
//!   stays NaN, ±∞ stays ±∞, and a zero keeps its sign. `x + (+0)` and `x − (−0)` are
//!   kept: for x = −0 they give +0 (−0 + +0 = +0), not x;
//! - `batch_normalization(conv(x, w, b), mean, var, offset, scale)` with constant
//!   parameters, where the conv result has no other use, becomes `conv(x, w', b')` with
//!   `w' = w · s`, `b' = (b − mean) · s + offset`, `s = scale / √(var + ε)` per output
//!   channel (folded in f64, stored as f32).
//!
//! A node whose result is a graph output is never replaced by an alias, so output names
//! and the ABI stay as the user wrote them. Not done here: fusion of elementwise chains
//! (the back end fuses epilogues), layout changes, anything needing shape knowledge beyond
//! the stored types.

use super::{Changed, Pass, PassError};
use crate::ir::graph::{Node, ValueId};
use crate::ir::rewrite::Rewriter;
use crate::ir::{BinaryOp, Graph, Op, Tensor, UnaryOp};

pub struct Simplify;

impl Pass for Simplify {
    fn name(&self) -> &'static str {
        "simplify"
    }

    fn run(&mut self, graph: &mut Graph) -> Result<Changed, PassError> {
        let users = graph.users();
        let is_output = |v: ValueId| graph.outputs.contains(&v);
        let mut rw = Rewriter::new(graph);
        let mut changed = Changed::No;
        // Conv nodes already folded into a following batch norm, by old output value.
        let mut folded_conv: Vec<Option<ValueId>> = vec![None; graph.values.len()];
        let internal = |m: &str| PassError::Internal {
            pass: "simplify",
            message: m.to_string(),
        };

        for (i, node) in graph.nodes.iter().enumerate() {
            let out = node.outputs.first().copied();
            // Pattern: batch norm of a single-use conv with constant parameters.
            if let (Op::BatchNorm { epsilon }, Some(out)) = (&node.op, out) {
                if let Some(new_out) =
                    fold_batch_norm(graph, &users, node, *epsilon, &mut rw, &folded_conv)
                {
                    rw.alias(out, new_out);
                    changed = Changed::Yes;
                    continue;
                }
            }
            if let (Op::Conv(_), Some(out)) = (&node.op, out) {
                // Defer a conv that a batch norm will absorb: emitted by fold_batch_norm.
                if is_foldable_conv(graph, &users, i, out) {
                    folded_conv[out.index()] = Some(out);
                    continue;
                }
            }
            if let Some(out) = out {
                if !is_output(out) {
                    if let Some(x) = identity_operand(graph, node) {
                        let nx = rw
                            .map(x)
                            .ok_or_else(|| internal("operand read before definition"))?;
                        rw.alias(out, nx);
                        changed = Changed::Yes;
                        continue;
                    }
                }
                if let Some((x, axes)) = composed_transpose(graph, node) {
                    let nx = rw
                        .map(x)
                        .ok_or_else(|| internal("operand read before definition"))?;
                    let ty = graph.ty(out).clone();
                    let new = rw.add_node(Op::Transpose { axes }, vec![nx], vec![ty]);
                    rw.alias(out, new[0]);
                    changed = Changed::Yes;
                    continue;
                }
            }
            if !rw.copy_node(node) {
                return Err(internal("operand read before definition"));
            }
        }
        // A deferred conv whose batch norm then failed to fold would leave the batch
        // norm's result undefined: `finish` reports that as an internal error rather
        // than producing a wrong graph (is_foldable_conv and fold_batch_norm agree).
        if changed == Changed::Yes {
            *graph = rw
                .finish()
                .ok_or_else(|| internal("a graph output is undefined"))?;
        }
        Ok(changed)
    }
}

/// The operand a node passes through unchanged, if it is a no-op.
fn identity_operand(graph: &Graph, node: &Node) -> Option<ValueId> {
    let out = *node.outputs.first()?;
    let same_type = |x: ValueId| {
        graph.ty(x).dims == graph.ty(out).dims && graph.ty(x).dtype == graph.ty(out).dtype
    };
    match &node.op {
        Op::Unary(UnaryOp::Copy) => Some(node.inputs[0]),
        Op::Reshape { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } => {
            let x = node.inputs[0];
            (graph.ty(x).is_fully_known() && same_type(x)).then_some(x)
        }
        Op::Transpose { axes } => {
            let x = node.inputs[0];
            axes.iter().enumerate().all(|(i, &a)| i == a).then_some(x)
        }
        Op::Binary(op @ (BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div)) => {
            let (x, c) = (node.inputs[0], node.inputs[1]);
            // The neutral element, compared by bits: x + (−0) = x even for x = −0, while
            // x + (+0) is +0 there; x − (+0) = x + (−0).
            let neutral: f32 = match op {
                BinaryOp::Add => -0.0,
                BinaryOp::Sub => 0.0,
                _ => 1.0,
            };
            let is_neutral = |t: &Tensor| {
                t.as_f32()
                    .is_some_and(|d| d.iter().all(|v| v.to_bits() == neutral.to_bits()))
            };
            if same_type(x) && graph.const_of(c).is_some_and(is_neutral) {
                return Some(x);
            }
            // (−0) + x and 1 · x (addition and multiplication commute in IEEE arithmetic).
            if matches!(op, BinaryOp::Add | BinaryOp::Mul)
                && same_type(c)
                && graph.const_of(x).is_some_and(is_neutral)
            {
                return Some(c);
            }
            None
        }
        _ => None,
    }
}

/// `transpose(transpose(x, p), q)` → `(x, p∘q)` when both cover the same rank.
fn composed_transpose(graph: &Graph, node: &Node) -> Option<(ValueId, Vec<usize>)> {
    let Op::Transpose { axes: outer } = &node.op else {
        return None;
    };
    let inner_v = node.inputs[0];
    let crate::ir::ValueDef::Node(inner_n, _) = graph.value(inner_v).def else {
        return None;
    };
    let inner = graph.node(inner_n);
    let Op::Transpose { axes: inner_axes } = &inner.op else {
        return None;
    };
    let rank = graph.ty(inner.inputs[0]).rank();
    let full = |p: &[usize]| -> Vec<usize> { p.iter().copied().chain(p.len()..rank).collect() };
    let (p, q) = (full(inner_axes), full(outer));
    if p.len() != rank || q.len() != rank {
        return None;
    }
    // out[i] = mid[q[i]] = x[p[q[i]]]
    Some((inner.inputs[0], q.iter().map(|&i| p[i]).collect()))
}

/// A conv whose only user is a batch norm that `fold_batch_norm` will absorb.
fn is_foldable_conv(
    graph: &Graph,
    users: &[Vec<crate::ir::NodeId>],
    _conv_index: usize,
    out: ValueId,
) -> bool {
    if graph.outputs.contains(&out) || users[out.index()].len() != 1 {
        return false;
    }
    let user = graph.node(users[out.index()][0]);
    matches!(user.op, Op::BatchNorm { .. })
        && user.inputs[0] == out
        && user.inputs[1..]
            .iter()
            .all(|&v| graph.const_of(v).is_some())
        && conv_fold_parts(graph, out, user).is_some()
}

struct ConvParts<'g> {
    conv: &'g Node,
    filter: &'g Tensor,
    bias: &'g Tensor,
    channels: usize,
}

fn conv_fold_parts<'g>(graph: &'g Graph, conv_out: ValueId, bn: &Node) -> Option<ConvParts<'g>> {
    let crate::ir::ValueDef::Node(n, 0) = graph.value(conv_out).def else {
        return None;
    };
    let conv = graph.node(n);
    let Op::Conv(_) = conv.op else { return None };
    let filter = graph.const_of(conv.inputs[1])?;
    let bias = graph.const_of(conv.inputs[2])?;
    filter.as_f32()?;
    let channels = *filter.shape.first()?;
    // Every batch-norm parameter must be expressible per output channel.
    for &p in &bn.inputs[1..] {
        per_channel(graph.const_of(p)?, channels)?;
    }
    per_channel(bias, channels)?;
    Some(ConvParts {
        conv,
        filter,
        bias,
        channels,
    })
}

/// Values of a tensor that broadcasts per channel against `[N, C, ...]`: shape `[]`,
/// `[1]`, `[1, 1]`, `[1, C]`, `[1, C, 1, ...]` (NNEF left-aligned broadcasting).
fn per_channel(t: &Tensor, channels: usize) -> Option<Vec<f64>> {
    let data = t.as_f32()?;
    let ok_shape = match t.shape.as_slice() {
        [] => true,
        [first, rest @ ..] if *first == 1 => match rest {
            [] => true,
            [c, tail @ ..] => (*c == channels || *c == 1) && tail.iter().all(|&d| d == 1),
        },
        _ => false,
    };
    if !ok_shape {
        return None;
    }
    match data.len() {
        1 => Some(vec![data[0] as f64; channels]),
        n if n == channels => Some(data.iter().map(|&v| v as f64).collect()),
        _ => None,
    }
}

fn fold_batch_norm(
    graph: &Graph,
    users: &[Vec<crate::ir::NodeId>],
    bn: &Node,
    epsilon: f32,
    rw: &mut Rewriter,
    folded_conv: &[Option<ValueId>],
) -> Option<ValueId> {
    let conv_out = bn.inputs[0];
    folded_conv.get(conv_out.index()).copied().flatten()?;
    if !is_foldable_conv(graph, users, 0, conv_out) {
        return None;
    }
    let parts = conv_fold_parts(graph, conv_out, bn)?;
    let c = parts.channels;
    let p = |i: usize| per_channel(graph.const_of(bn.inputs[i])?, c);
    let (mean, var, offset, scale) = (p(1)?, p(2)?, p(3)?, p(4)?);
    let bias = per_channel(parts.bias, c)?;
    let s: Vec<f64> = (0..c)
        .map(|k| scale[k] / (var[k] + epsilon as f64).sqrt())
        .collect();
    let w = parts.filter.as_f32()?;
    let per_out = w.len() / c.max(1);
    let new_w: Vec<f32> = w
        .iter()
        .enumerate()
        .map(|(i, &v)| (v as f64 * s[i / per_out.max(1)]) as f32)
        .collect();
    let new_b: Vec<f32> = (0..c)
        .map(|k| ((bias[k] - mean[k]) * s[k] + offset[k]) as f32)
        .collect();
    let x = rw.map(parts.conv.inputs[0])?;
    let w_v = rw.add_const(Tensor::f32(parts.filter.shape.clone(), new_w), None);
    let b_v = rw.add_const(Tensor::f32(vec![1, c], new_b), None);
    let ty = graph.ty(bn.outputs[0]).clone();
    let out = rw.add_node(parts.conv.op.clone(), vec![x, w_v, b_v], vec![ty]);
    // The folded conv is the user's conv: it keeps the conv's name (else the batch norm's).
    rw.name_after(out[0], conv_out);
    rw.name_after(out[0], bn.outputs[0]);
    Some(out[0])
}
