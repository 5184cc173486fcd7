//! Analysis: the inverted-residual blocks (MobileNetV2's 1×1 expand → depthwise → 1×1
//! project, each with its epilogue chain, `passes::epilogue`) that the back end computes
//! as one banded call (`nnefc_inverted_residual`), decided on the graph so that the memory
//! plan sees them: the expanded and depthwise maps get no arena slot (they live in
//! per-worker band buffers, or, where the target lacks the runtime's kernels, in the
//! block's scratch), and the block's input stays alive to the end of the projection's
//! chain, which is where the block runs.
//!
//! A block is three 2-D convs with constant filters and biases whose chains
//! `epilogue::always_fused` folds: a 1×1 conv (one group, unit strides, no padding) whose
//! chain has no residual and whose output alone feeds a depthwise conv (one input and one
//! output channel per group, a `constant` or `ignore` border), whose chain has no residual
//! and whose output alone feeds a second 1×1 conv; that one's chain may add a residual.
//! Neither map is a graph output. Blocks whose output map has fewer than
//! [`MIN_OUTPUT_ROWS`] rows stay layer by layer (see there).
//!
//! Not here: the lowering (`back::select::block`), the band height.

use super::epilogue::{EpilogueChain, always_fused, chain};
use crate::ir::{Border, DType, Graph, NodeId, Op, ValueId};

/// Output rows below which a block stays layer by layer. On mobilenet_v2's 7×7 stages
/// (960 expanded channels) two bands of 4 and 3 rows took 0.257 ms on two threads
/// against 0.223 layer by layer with the cores close, and cost 2 % on one thread
/// (`runtime/examples/band_bench.rs`, Zen 4, 2026-11-28): each band pays the GEMMs'
/// per-call setup on a product of a few dozen columns, and the halves are uneven.
pub const MIN_OUTPUT_ROWS: usize = 14;

/// One inverted-residual block.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Node indices of the expansion, the depthwise conv and the projection.
    pub expand: usize,
    pub depthwise: usize,
    pub project: usize,
    /// The block's input (the expansion's).
    pub x: ValueId,
    /// The expansion's and the depthwise conv's results (their chains' outputs): no slot.
    pub expanded: ValueId,
    pub dw_out: ValueId,
    /// The last node of the projection's chain (the projection itself without one).
    pub end: usize,
}

impl Block {
    /// Every node the block computes, the three convs and their chains, in order.
    pub fn nodes(&self, g: &Graph, users: &[Vec<NodeId>]) -> Vec<usize> {
        let mut v = Vec::new();
        for c in [self.expand, self.depthwise, self.project] {
            v.push(c);
            if let Some(ch) = chain(g, users, c) {
                v.extend(ch.nodes);
            }
        }
        v
    }

    /// The values inside the block that get no slot: the two maps and the values inside
    /// the three chains (`EpilogueChain::internal`).
    pub fn internal(&self, g: &Graph, users: &[Vec<NodeId>]) -> Vec<ValueId> {
        let mut v = vec![self.expanded, self.dw_out];
        for c in [self.expand, self.depthwise, self.project] {
            if let Some(ch) = chain(g, users, c) {
                v.extend(ch.internal(g, c));
            }
        }
        v.sort_by_key(|x| x.index());
        v.dedup();
        v
    }
}

/// A conv's input, filter and output shapes, and its attributes, when it is a 2-D conv
/// with a constant filter and bias whose chain the back end always folds.
fn conv2d(g: &Graph, ni: usize) -> Option<(&crate::ir::ConvAttrs, Vec<usize>, Vec<usize>)> {
    let n = g.nodes.get(ni)?;
    let Op::Conv(a) = &n.op else {
        return None;
    };
    let (x, f, b) = (*n.inputs.first()?, *n.inputs.get(1)?, *n.inputs.get(2)?);
    let (xs, fs) = (g.ty(x).shape()?, g.ty(f).shape()?);
    (xs.len() == 4
        && fs.len() == 4
        && always_fused(g, ni)
        && g.const_of(b).is_some()
        && g.ty(x).dtype == DType::F32)
        .then(|| (a, xs.to_vec(), fs.to_vec()))
}

/// Whether the conv at `ni` is a pointwise (1×1, one group, unit strides, no padding)
/// conv.
fn pointwise(g: &Graph, ni: usize) -> bool {
    let Some((a, xs, fs)) = conv2d(g, ni) else {
        return false;
    };
    let pad = crate::ir::infer::resolved_conv_padding(a, &xs, &fs);
    fs[2..] == [1, 1]
        && (a.groups == 1 || (a.groups == 0 && xs[1] == 1))
        && a.stride.iter().all(|&s| s == 1)
        && pad.iter().all(|&p| p == (0, 0))
}

/// The value a conv's chain ends in (its own output without a chain), when the chain has
/// no residual and that value is read by `next` alone and is not a graph output.
fn feeds(
    g: &Graph,
    users: &[Vec<NodeId>],
    ni: usize,
    ch: Option<&EpilogueChain>,
    next: impl Fn(usize) -> bool,
) -> Option<(ValueId, usize)> {
    let out = match ch {
        Some(c) if c.residual.is_some() => return None,
        Some(c) => c.out,
        None => *g.nodes.get(ni)?.outputs.first()?,
    };
    let u = users.get(out.index())?;
    (u.len() == 1 && next(u[0].index()) && !g.outputs.contains(&out)).then(|| (out, u[0].index()))
}

/// The block whose expansion is the conv at node `ni`, if any.
pub fn block_at(g: &Graph, users: &[Vec<NodeId>], ni: usize) -> Option<Block> {
    if !pointwise(g, ni) {
        return None;
    }
    let x = *g.nodes.get(ni)?.inputs.first()?;
    let is_dw = |d: usize| {
        conv2d(g, d).is_some_and(|(a, xs, fs)| {
            let c = xs[1];
            let groups = if a.groups == 0 { c } else { a.groups };
            groups == c
                && fs[0] == c
                && fs[1] == 1
                && matches!(a.border, Border::Constant | Border::Ignore)
        })
    };
    let (expanded, dw) = feeds(g, users, ni, chain(g, users, ni).as_ref(), is_dw)?;
    if g.nodes.get(dw)?.inputs.first() != Some(&expanded) {
        return None;
    }
    let (dw_out, project) = feeds(g, users, dw, chain(g, users, dw).as_ref(), |p| {
        pointwise(g, p) && g.nodes[p].inputs.first().is_some()
    })?;
    if g.nodes.get(project)?.inputs.first() != Some(&dw_out) || project <= dw || dw <= ni {
        return None;
    }
    let y = *g.nodes.get(project)?.outputs.first()?;
    let rows = g.ty(y).shape().and_then(|s| s.get(2).copied())?;
    if rows < MIN_OUTPUT_ROWS {
        return None;
    }
    let end = chain(g, users, project)
        .and_then(|c| c.nodes.last().copied())
        .unwrap_or(project);
    Some(Block {
        expand: ni,
        depthwise: dw,
        project,
        x,
        expanded,
        dw_out,
        end,
    })
}

/// Every block of the graph, by expansion node. `users` is `g.users()`.
pub fn blocks(g: &Graph, users: &[Vec<NodeId>]) -> Vec<Block> {
    (0..g.nodes.len())
        .filter_map(|ni| block_at(g, users, ni))
        .collect()
}

/// `nnefc dump --stage plan`'s list of blocks, one line each (empty without blocks).
pub fn describe(g: &Graph) -> String {
    let users = g.users();
    let name = |ni: usize| {
        g.nodes[ni]
            .outputs
            .first()
            .map_or_else(|| format!("node {ni}"), |v| format!("{v}"))
    };
    blocks(g, &users)
        .iter()
        .map(|b| {
            format!(
                "block {} → {} → {}: {} and {} banded, no slot\n",
                name(b.expand),
                name(b.depthwise),
                name(b.project),
                b.expanded,
                b.dw_out
            )
        })
        .collect()
}
