//! Analysis: the convolution epilogue chains `conv → [add residual] → [relu | clamp |
//! sigmoid | swish]` that the back end computes inside the convolution
//! (`back::select::conv` folds them into the GEMM epilogue or the direct kernels), decided
//! on the graph so that the memory plan can see them. Swish is NNEF's `silu` or the pair
//! `s = sigmoid(v); mul(v, s)` (either operand order), as converters write it
//! (EfficientNet, MnasNet-A, YOLO); fused, neither the conv's output nor σ reaches memory.
//! Hard swish (MobileNet v3) is the four nodes of `x·clamp(x + 3, 0, 6)/6` ([`hard_swish`]).
//!
//! A chain's nodes follow the conv directly in node order; each intermediate has exactly
//! one user (the next member; a swish's input has two, its sigmoid and its mul) and is not
//! a graph output; the residual has the conv's output shape and is f32; the clamp bounds
//! are scalar constants with `lo ≤ hi`.
//! `memory_plan` keeps the conv's input alive until the end of the chain, because the
//! fused kernel writes the chain's output while still reading that input: otherwise the
//! plan could give the output the input's bytes (the input dies at the conv) and the
//! fusion would have to be abandoned.
//!
//! Every lowering of a conv whose filter is a constant folds its chain ([`always_fused`]),
//! so the memory plan gives the chain's internal values ([`EpilogueChain::internal`]: the
//! conv's own output and the residual sum before the activation) no slot, and keeps the
//! residual apart from the chain's output unless they share one slot exactly (the fused
//! kernel adds the residual element by element, in place or from elsewhere). Other
//! chains keep their slots: select may run their members alone.
//!
//! A first-layer conv (few input channels, a filter the runtime's direct kernels take)
//! whose chain (without residual) or output alone feeds a 3×3 `max_pool` with the
//! `ignore` border ([`pool_after`]) is computed together with that pool: by the
//! runtime's fused kernel (`nnefc_conv_pool`) where the target has it, else with the
//! pooled value in the node's scratch. Either way that value gets no slot, and the conv's
//! input stays alive to the pool.
//!
//! Not here: the lowering itself.

use crate::ir::{BinaryOp, Border, DType, Graph, NodeId, Op, UnaryOp, ValueId};

/// The activation ending a chain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ChainActivation {
    None,
    Relu,
    Clamp(f32, f32),
    Sigmoid,
    /// x·sigmoid(x).
    Swish,
    /// x·clamp(x + 3, 0, 6)/6.
    HardSwish,
}

/// One epilogue chain after the conv at node index `conv`.
#[derive(Clone, Debug, PartialEq)]
pub struct EpilogueChain {
    /// The nodes folded into the conv, in order (1 to 5).
    pub nodes: Vec<usize>,
    /// The value the chain produces (written by the fused conv).
    pub out: ValueId,
    /// The residual added before the activation.
    pub residual: Option<ValueId>,
    pub activation: ChainActivation,
}

impl EpilogueChain {
    /// The values the fused conv at node `conv` never writes: its own output and every
    /// member's output but the chain's.
    pub fn internal(&self, g: &Graph, conv: usize) -> Vec<ValueId> {
        let mut vs: Vec<ValueId> = g
            .nodes
            .get(conv)
            .and_then(|n| n.outputs.first().copied())
            .into_iter()
            .collect();
        for &m in &self.nodes {
            if let Some(&v) = g.nodes.get(m).and_then(|n| n.outputs.first()) {
                vs.push(v);
            }
        }
        vs.retain(|&v| v != self.out);
        vs
    }
}

/// Whether the back end folds the epilogue chain of the conv at node `conv` whatever the
/// target: its filter is a constant and its output an f32 tensor with elements (every
/// `select::conv` lowering of such a conv takes the chain; with a computed filter the
/// loop-nest lowering runs the members alone, and an empty output lowers to nothing).
pub fn always_fused(g: &Graph, conv: usize) -> bool {
    let Some(n) = g.nodes.get(conv) else {
        return false;
    };
    let (Some(&f), Some(&y)) = (n.inputs.get(1), n.outputs.first()) else {
        return false;
    };
    matches!(n.op, Op::Conv(_))
        && g.const_of(f).is_some()
        && g.ty(y).dtype == DType::F32
        && g.ty(y).shape().is_some_and(|s| s.iter().all(|&e| e > 0))
}

fn scalar_const(g: &Graph, v: ValueId) -> Option<f32> {
    let d = g.const_of(v)?.as_f32()?;
    if d.len() == 1 { Some(d[0]) } else { None }
}

/// The epilogue chain after the conv at node `conv`, if any. `users` is
/// `g.users()`.
pub fn chain(g: &Graph, users: &[Vec<NodeId>], conv: usize) -> Option<EpilogueChain> {
    let node = g.nodes.get(conv)?;
    if !matches!(node.op, Op::Conv(_)) {
        return None;
    }
    let y = *node.outputs.first()?;
    let ys = g.ty(y).shape()?;
    let single =
        |v: ValueId| users.get(v.index()).is_some_and(|u| u.len() == 1) && !g.outputs.contains(&v);
    let mut cur = y;
    let mut at = conv + 1;
    let mut nodes = Vec::new();
    let mut residual = None;
    let mut activation = ChainActivation::None;
    if single(cur)
        && let Some(n) = g.nodes.get(at)
        && matches!(n.op, Op::Binary(BinaryOp::Add))
        && n.inputs.len() == 2
        && n.inputs.contains(&cur)
    {
        let other = if n.inputs[0] == cur {
            n.inputs[1]
        } else {
            n.inputs[0]
        };
        if other != cur
            && g.ty(other).shape().as_ref() == Some(&ys)
            && g.ty(other).dtype == DType::F32
            && g.ty(n.outputs[0]).shape().as_ref() == Some(&ys)
        {
            residual = Some(other);
            cur = n.outputs[0];
            nodes.push(at);
            at += 1;
        }
    }
    if single(cur)
        && let Some(n) = g.nodes.get(at)
        && n.inputs.first() == Some(&cur)
    {
        let act = match &n.op {
            Op::Unary(UnaryOp::Relu) => Some(ChainActivation::Relu),
            Op::Unary(UnaryOp::Sigmoid) if g.ty(n.outputs[0]).shape().as_ref() == Some(&ys) => {
                Some(ChainActivation::Sigmoid)
            }
            Op::Unary(UnaryOp::Silu) if g.ty(n.outputs[0]).shape().as_ref() == Some(&ys) => {
                Some(ChainActivation::Swish)
            }
            Op::Clamp
                if n.inputs.len() == 3 && g.ty(n.outputs[0]).shape().as_ref() == Some(&ys) =>
            {
                match (scalar_const(g, n.inputs[1]), scalar_const(g, n.inputs[2])) {
                    (Some(lo), Some(hi)) if lo <= hi => Some(ChainActivation::Clamp(lo, hi)),
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(a) = act {
            activation = a;
            cur = n.outputs[0];
            nodes.push(at);
        }
    } else if let Some(mul) = swish(g, users, cur, at, &ys) {
        activation = ChainActivation::Swish;
        cur = mul;
        nodes.extend([at, at + 1]);
    } else if let Some(out) = hard_swish(g, users, cur, at, &ys) {
        activation = ChainActivation::HardSwish;
        cur = out;
        nodes.extend(at..at + 4);
    }
    if nodes.is_empty() {
        return None;
    }
    Some(EpilogueChain {
        nodes,
        out: cur,
        residual,
        activation,
    })
}

/// The node indices that read `x`, in order (a node reading it twice twice).
fn readers(users: &[Vec<NodeId>], x: ValueId) -> Option<Vec<usize>> {
    users
        .get(x.index())
        .map(|u| u.iter().map(|n| n.index()).collect())
}

/// The output of `mul(v, sigmoid(v))` when nodes `at` and `at + 1` compute it from `v`
/// (of shape `ys`), which they alone read, and neither `v` nor σ is a graph output.
fn swish(g: &Graph, users: &[Vec<NodeId>], v: ValueId, at: usize, ys: &[usize]) -> Option<ValueId> {
    let (s, m) = (g.nodes.get(at)?, g.nodes.get(at + 1)?);
    let (&sv, &mv) = (s.outputs.first()?, m.outputs.first()?);
    let ok = matches!(s.op, Op::Unary(UnaryOp::Sigmoid))
        && s.inputs.as_slice() == [v]
        && matches!(m.op, Op::Binary(BinaryOp::Mul))
        && (m.inputs.as_slice() == [v, sv] || m.inputs.as_slice() == [sv, v])
        && readers(users, v)? == [at, at + 1]
        && readers(users, sv)? == [at + 1]
        && !g.outputs.contains(&v)
        && !g.outputs.contains(&sv)
        && g.ty(mv).dtype == DType::F32
        && g.ty(mv).shape().as_deref() == Some(ys);
    ok.then_some(mv)
}

/// The output of hard swish of `v` (of shape `ys`) when nodes `at .. at + 4` compute it
/// as converters spell it, `a = add(v, 3)`, `c = clamp(a, 0, 6)`, then either
/// `div(mul(v, c), 6)` (PyTorch's `x * clamp(x + 3, 0, 6) / 6`) or `mul(v, div(c, 6))`
/// (Keras' `x * relu6(x + 3) / 6`; the division may be a multiplication by 1/6),
/// commuted operands allowed; each intermediate read only by the next node (and `v` by
/// the add and its mul), none a graph output. The fused form computes
/// `(x·clamp(x + 3, 0, 6))·(1/6)`, within rounding of either.
fn hard_swish(
    g: &Graph,
    users: &[Vec<NodeId>],
    v: ValueId,
    at: usize,
    ys: &[usize],
) -> Option<ValueId> {
    let n: Vec<_> = (at..at + 4)
        .map(|i| g.nodes.get(i))
        .collect::<Option<_>>()?;
    let out = |i: usize| n[i].outputs.first().copied();
    let is = |x: ValueId, c: f32| scalar_const(g, x) == Some(c);
    // `op(x, constant c)` in either order, for a commutative op.
    let with_const = |i: usize, op: BinaryOp, x: ValueId, c: f32| {
        matches!(&n[i].op, Op::Binary(o) if *o == op)
            && match n[i].inputs.as_slice() {
                [p, q] => (*p == x && is(*q, c)) || (*q == x && is(*p, c) && op != BinaryOp::Div),
                _ => false,
            }
    };
    let scaled = |i: usize, x: ValueId| {
        with_const(i, BinaryOp::Div, x, 6.0) || with_const(i, BinaryOp::Mul, x, 1.0 / 6.0)
    };
    let times_v = |i: usize, x: ValueId| {
        matches!(n[i].op, Op::Binary(BinaryOp::Mul))
            && (n[i].inputs.as_slice() == [v, x] || n[i].inputs.as_slice() == [x, v])
    };
    let (a, c, third) = (out(0)?, out(1)?, out(2)?);
    let head = with_const(0, BinaryOp::Add, v, 3.0)
        && matches!(n[1].op, Op::Clamp)
        && n[1].inputs.len() == 3
        && n[1].inputs[0] == a
        && is(n[1].inputs[1], 0.0)
        && is(n[1].inputs[2], 6.0);
    let (torch, keras) = (
        times_v(2, c) && scaled(3, third),
        scaled(2, c) && times_v(3, third),
    );
    let v_readers = if torch { [at, at + 2] } else { [at, at + 3] };
    let y = out(3)?;
    let ok = head
        && (torch || keras)
        && readers(users, v)? == v_readers
        && readers(users, a)? == [at + 1]
        && readers(users, c)? == [at + 2]
        && readers(users, third)? == [at + 3]
        && ![v, a, c, third].iter().any(|x| g.outputs.contains(x))
        && g.ty(y).dtype == DType::F32
        && g.ty(y).shape().as_deref() == Some(ys);
    ok.then_some(y)
}

/// Whether a convolution of `cin` input channels (per group) goes to the runtime's direct
/// kernel (`back::select::conv`'s `direct_call`) rather than im2col + GEMM, and so may be
/// computed with the max pool after it ([`pool_after`]). Measured on this project's Zen 4
/// machine, one thread (scratch benchmark of `nnefc_conv`, against `nnefc bench --profile
/// --per-step` for the im2col + GEMM steps):
///
/// | layer | direct | im2col + GEMM |
/// |---|---|---|
/// | 3→64, 7×7 s2, 224² (resnet18) | 2.67 ms | 3.57 ms |
/// | 3→32, 3×3 s2, 224² (mobilenet_v2) | 0.26 ms | 0.49 ms |
/// | 3→64, 3×3 s2, 224² (squeezenet1_1) | 0.52 ms | 0.58 ms |
/// | 16→64, 3×3 s1, 55² (squeezenet1_1 fire) | 0.57 ms | 0.63 ms |
///
/// Stride 1 keeps the kernel at 95–100 GFLOP/s up to 16 input channels (a load per tap
/// column); stride 2 splits the input rows first and is only taken for image inputs. Beyond,
/// the GEMM (and from 32 channels Winograd) wins on reduction length. (3×3 stride-1 layers
/// of 16 channels go to Winograd before they get here when its transforms are the
/// runtime's: `back::select::winograd::worthwhile`.)
pub fn few_channels(cin: usize, stride: &[usize]) -> bool {
    cin <= 4 || (cin <= 16 && stride.iter().all(|&s| s == 1))
}

/// A `max_pool` computed together with the conv before it (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PoolAfter {
    /// The pool's node index.
    pub pool: usize,
    /// The value it pools: the chain's output, or the conv's when there is no chain.
    pub pooled: ValueId,
}

/// The 3×3 `max_pool` computed with the conv at node `conv`, if any: a 2-D conv whose
/// chain [`always_fused`] folds, one group of few input channels ([`few_channels`]), a
/// zero border and a filter `nnefc_runtime::conv_pool_takes` takes; its epilogue chain, if
/// any, without residual; then, next in node order, a `max_pool` (`ignore` border, 3×3,
/// equal strides of 1 or 2, no dilation, no padding of batch or channels) that alone
/// reads what they produce, which is not a graph output. `users` is `g.users()`.
pub fn pool_after(g: &Graph, users: &[Vec<NodeId>], conv: usize) -> Option<PoolAfter> {
    let n = g.nodes.get(conv)?;
    let Op::Conv(a) = &n.op else {
        return None;
    };
    let (x, f) = (*n.inputs.first()?, *n.inputs.get(1)?);
    let (xs, fs) = (g.ty(x).shape()?, g.ty(f).shape()?);
    if xs.len() != 4
        || fs.len() != 4
        || a.groups != 1
        || !matches!(a.border, Border::Constant | Border::Ignore)
        || !always_fused(g, conv)
    {
        return None;
    }
    let two = |v: &[usize]| match v {
        [] => Some([1, 1]),
        [p, q] => Some([*p, *q]),
        _ => None,
    };
    let (stride, dilation) = (two(&a.stride)?, two(&a.dilation)?);
    let (pooled, at) = match chain(g, users, conv) {
        Some(c) if c.residual.is_none() && c.nodes.first() == Some(&(conv + 1)) => {
            (c.out, c.nodes.last()? + 1)
        }
        Some(_) => return None,
        None => (*n.outputs.first()?, conv + 1),
    };
    let p = g.nodes.get(at)?;
    let Op::MaxPool(w) = &p.op else {
        return None;
    };
    let only_reader = users
        .get(pooled.index())
        .is_some_and(|u| u.len() == 1 && u[0].index() == at);
    let window_ok = w.border == Border::Ignore
        && w.size == [1, 1, 3, 3]
        && matches!(w.stride.as_slice(), [1, 1, s, t] if s == t)
        && (w.dilation.is_empty() || w.dilation.iter().all(|&d| d == 1))
        && (w.padding.is_empty() || w.padding[..2] == [(0, 0), (0, 0)]);
    let pool_stride = w.stride.get(2).copied().unwrap_or(0);
    let takes = nnefc_runtime::conv_pool_takes(
        [fs[2], fs[3], stride[0], stride[1], dilation[0], dilation[1]],
        fs[1],
        [3, 3, pool_stride, pool_stride, 1, 1],
    );
    (only_reader
        && !g.outputs.contains(&pooled)
        && p.inputs.as_slice() == [pooled]
        && p.outputs.len() == 1
        && g.ty(pooled).dtype == DType::F32
        && window_ok
        && takes
        && few_channels(fs[1], &stride))
    .then_some(PoolAfter { pool: at, pooled })
}
