//! Analysis: the inverted-residual blocks (MobileNetV2's 1×1 expand → depthwise → 1×1
//! project, each with its epilogue chain, `passes::epilogue`; or a network's first layer →
//! depthwise → 1×1 project) that the back end computes
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
//! The expansion may instead be a dense conv of few input channels that the runtime's
//! direct kernel takes (`epilogue::few_channels`: an image's 3 channels at stride 2, up to
//! 16 at stride 1; square 3×3, 5×5 or 7×7 windows, equal strides of 1 or 2, no dilation, a
//! zero border, padding narrower than the window): MobileNetV2's first layer (3→32, 3×3
//! stride 2) feeding its first block, whose 1.6 MB output map then never reaches memory.
//! Written whole, that map's lines are mostly out of cache when the next run writes them
//! (the weights streamed since evict them): the layer took 0.41 ms in the network
//! against 0.27 alone.
//! Neither map is a graph output; the input and output rows have 5 columns or more (the
//! runtime's bit-identity across worker counts needs it). A block may also start at its depthwise conv (no
//! expansion, as MobileNetV2's first block): the depthwise conv then reads the block's
//! input in place. Blocks whose output map has fewer than
//! [`MIN_OUTPUT_ROWS`] rows stay layer by layer (see there).
//!
//! Not here: the lowering (`back::select::block`), the band height.

use super::epilogue::{EpilogueChain, always_fused, chain};
use crate::ir::{Border, DType, Graph, NodeId, Op, ValueId};

/// Output rows below which a block stays layer by layer. On mobilenet_v2's 7×7 stages
/// (960 expanded channels) two bands of 4 and 3 rows took 0.257 ms on two threads
/// against 0.223 layer by layer with the cores close, and cost 2 % on one thread (a
/// two-thread variant of `runtime/examples/band_bench.rs`, kept in commit 22a7a7a as
/// `band2_scratch.rs`; Zen 4, 2026-11-28): each band pays the GEMMs'
/// per-call setup on a product of a few dozen columns, and the halves are uneven.
pub const MIN_OUTPUT_ROWS: usize = 14;

/// One inverted-residual block.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Node indices of the expansion (none in a block that starts at its depthwise
    /// conv; a 1×1 conv, or a direct conv: [`Block::direct`]), the depthwise conv and the
    /// projection.
    pub expand: Option<usize>,
    pub depthwise: usize,
    pub project: usize,
    /// The block's input (the expansion's, or the depthwise conv's without one).
    pub x: ValueId,
    /// The expansion's and the depthwise conv's results (their chains' outputs): no slot.
    pub expanded: Option<ValueId>,
    pub dw_out: ValueId,
    /// The last node of the projection's chain (the projection itself without one).
    pub end: usize,
}

impl Block {
    /// Whether the expansion is a direct conv (not a 1×1 one).
    pub fn direct(&self, g: &Graph) -> bool {
        self.expand.is_some_and(|e| !pointwise(g, e))
    }

    /// The convs of the block, in order.
    pub fn convs(&self) -> Vec<usize> {
        self.expand
            .into_iter()
            .chain([self.depthwise, self.project])
            .collect()
    }

    /// Every node the block computes, the convs and their chains, in order.
    pub fn nodes(&self, g: &Graph, users: &[Vec<NodeId>]) -> Vec<usize> {
        let mut v = Vec::new();
        for c in self.convs() {
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
        let mut v: Vec<ValueId> = self.expanded.into_iter().chain([self.dw_out]).collect();
        for c in self.convs() {
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
        .then_some((a, xs, fs))
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

/// Whether the conv at `ni` is a dense conv of few input channels that the runtime's
/// direct kernel computes band by band (see the module doc).
fn direct(g: &Graph, ni: usize) -> bool {
    let Some((a, xs, fs)) = conv2d(g, ni) else {
        return false;
    };
    let pad = crate::ir::infer::resolved_conv_padding(a, &xs, &fs);
    let stride = [
        a.stride.first().copied().unwrap_or(1),
        a.stride.get(1).copied().unwrap_or(1),
    ];
    let dilation = [
        a.dilation.first().copied().unwrap_or(1),
        a.dilation.get(1).copied().unwrap_or(1),
    ];
    (a.groups == 1 || (a.groups == 0 && xs[1] == 1))
        && super::epilogue::few_channels(xs[1], &stride)
        && nnefc_runtime::conv_supported(fs[2], fs[3], stride[0], stride[1], dilation[0], dilation[1])
        && matches!(a.border, Border::Constant | Border::Ignore)
        // Zero padding narrower than the window: the geometries the runtime's block test
        // draws (wider padding stays layer by layer).
        && pad.iter().all(|&(lo, hi)| lo < fs[2] && hi < fs[2])
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

/// Whether the conv at `d` is depthwise (one input and one output channel per group)
/// with a zero border.
pub(crate) fn depthwise(g: &Graph, d: usize) -> bool {
    conv2d(g, d).is_some_and(|(a, xs, fs)| {
        let c = xs[1];
        let groups = if a.groups == 0 { c } else { a.groups };
        groups == c
            && fs[0] == c
            && fs[1] == 1
            && matches!(a.border, Border::Constant | Border::Ignore)
    })
}

/// The block from the depthwise conv at `dw` on (its input `x`), if its output alone
/// feeds a pointwise projection on a map of [`MIN_OUTPUT_ROWS`] rows or more.
fn from_depthwise(
    g: &Graph,
    users: &[Vec<NodeId>],
    expand: Option<(usize, ValueId)>,
    dw: usize,
) -> Option<Block> {
    let x = match expand {
        Some((e, _)) => *g.nodes.get(e)?.inputs.first()?,
        None => *g.nodes.get(dw)?.inputs.first()?,
    };
    let (dw_out, project) = feeds(g, users, dw, chain(g, users, dw).as_ref(), |p| {
        pointwise(g, p)
    })?;
    if g.nodes.get(project)?.inputs.first() != Some(&dw_out) || project <= dw {
        return None;
    }
    let y = *g.nodes.get(project)?.outputs.first()?;
    let (ys, xs) = (g.ty(y).shape()?, g.ty(x).shape()?);
    // Rows of 5 columns or more: the runtime's GEMM gives a column the same bits in
    // products of any width from 5 on (1–4 columns take its matrix-vector route), which
    // makes the bands' bits independent of the worker count.
    if ys.get(2).copied()? < MIN_OUTPUT_ROWS || ys.get(3).copied()? < 5 || xs.get(3).copied()? < 5 {
        return None;
    }
    let end = chain(g, users, project)
        .and_then(|c| c.nodes.last().copied())
        .unwrap_or(project);
    Some(Block {
        expand: expand.map(|e| e.0),
        depthwise: dw,
        project,
        x,
        expanded: expand.map(|e| e.1),
        dw_out,
        end,
    })
}

/// The block whose expansion is the conv at node `ni` (a pointwise or a direct conv),
/// if any.
pub fn block_at(g: &Graph, users: &[Vec<NodeId>], ni: usize) -> Option<Block> {
    if !pointwise(g, ni) && !direct(g, ni) {
        return None;
    }
    let (expanded, dw) = feeds(g, users, ni, chain(g, users, ni).as_ref(), |d| {
        depthwise(g, d)
    })?;
    if g.nodes.get(dw)?.inputs.first() != Some(&expanded) || dw <= ni {
        return None;
    }
    from_depthwise(g, users, Some((ni, expanded)), dw)
}

/// Every block of the graph, in node order: those with an expansion, then depthwise convs
/// that start one (no expansion before them, or one that does not make a block).
/// `users` is `g.users()`.
pub fn blocks(g: &Graph, users: &[Vec<NodeId>]) -> Vec<Block> {
    let mut v: Vec<Block> = (0..g.nodes.len())
        .filter_map(|ni| block_at(g, users, ni))
        .collect();
    let taken: Vec<usize> = v.iter().flat_map(|b| b.nodes(g, users)).collect();
    let rest: Vec<Block> = (0..g.nodes.len())
        .filter(|&d| depthwise(g, d) && !taken.contains(&d))
        .filter_map(|d| from_depthwise(g, users, None, d))
        .filter(|b| !b.nodes(g, users).iter().any(|n| taken.contains(n)))
        .collect();
    v.extend(rest);
    v.sort_by_key(|b| b.depthwise);
    v
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
            let expand = b
                .expand
                .map(|e| format!("{} → ", name(e)))
                .unwrap_or_default();
            let maps = match b.expanded {
                Some(e) => format!("{e} and {}", b.dw_out),
                None => format!("{}", b.dw_out),
            };
            format!(
                "block {expand}{} → {}: {maps} banded, no slot\n",
                name(b.depthwise),
                name(b.project),
            )
        })
        .collect()
}
