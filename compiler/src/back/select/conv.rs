//! Convolutions and the transposed window ops: `conv`, `deconv`, `debox`, `desample`.
//!
//! `conv` (direct form): the input is made border-free by `window::padded`, then one
//! reduction kernel per convolution computes
//! `out[n, g·og + j, y] = bias + Σ_{ci, t} P[n, g·cg + ci, y·s + t·d] · f[g·og + j, ci, t]`.
//!
//! Transposed ops are rewritten as gathers (the kernel IR has no scatter): with the forward
//! relation `x = y·s + t·d − p` (x: transposed op's output, y: its input), the input is
//! zero-inserted into a scratch `Q` (`Q[P0f + y·s] = in[y]`, zeros elsewhere, with
//! `P0 = (k−1)·d − p`, `P0f = max(P0, 0)`), and then
//! `out[x] = Σ_{t'} Q[x + (P0f − P0) + t'·d] · w[k−1−t']`, a stride-1 forward window with
//! flipped taps. Positions of `Q` past the last one read are not materialized. Only
//! constant/ignore borders are supported for transposed ops (the adjoint of a mirroring
//! border scatters onto mirrored positions; that is `Unsupported` here).
//! `debox` pre-scales each input value by its window's divisor; `desample` also
//! zero-inserts the index tensor (filled with −1) and keeps a tap only where the index
//! equals that tap.

use super::window::{Geometry, View, f32_table, padded, value_view};
use super::{Lowering, strides};
use crate::back::CodegenError;
use crate::back::kernel::{
    Activation, BufId, BufKind, Expr, ExprNode, GemmCall, GemmEpi, Lit, Matrix, ReduceKind,
    Reduction, Step, WindowCall, WindowOp,
};
use crate::ir::infer::{
    deconv_groups, resolved_conv_padding, resolved_deconv_padding,
    resolved_transposed_window_padding,
};
use crate::ir::{BinaryOp, Border, ConvAttrs, DType, Op, ValueId, WindowAttrs};
use crate::passes::epilogue::ChainActivation;

/// Operands and extents of a conv/deconv node.
pub(super) struct ConvIo {
    pub x: ValueId,
    pub f: ValueId,
    pub b: ValueId,
    pub y: ValueId,
    pub xs: Vec<usize>,
    pub fs: Vec<usize>,
    pub ys: Vec<usize>,
}

pub(super) fn conv_io(
    lw: &Lowering<'_>,
    ins: &[ValueId],
    outs: &[ValueId],
    op: &str,
) -> Result<ConvIo, CodegenError> {
    let (x, f, b, y) = match (ins, outs) {
        ([x, f, b], [y]) => (*x, *f, *b, *y),
        _ => {
            return Err(CodegenError::Invalid(format!(
                "`{op}` takes (input, filter, bias) and gives one output"
            )));
        }
    };
    for v in [x, f, b] {
        if lw.dtype(v)? != DType::F32 {
            return Err(CodegenError::Unsupported(format!(
                "`{op}` on {} tensors",
                lw.dtype(v)?
            )));
        }
    }
    let (xs, fs, ys) = (lw.shape(x)?, lw.shape(f)?, lw.shape(y)?);
    if xs.len() < 2 || fs.len() != xs.len() || ys.len() != xs.len() {
        return Err(CodegenError::Invalid(format!(
            "`{op}`: input {xs:?}, filter {fs:?}, output {ys:?} ranks differ or are < 2"
        )));
    }
    Ok(ConvIo {
        x,
        f,
        b,
        y,
        xs,
        fs,
        ys,
    })
}

/// Bias access strides over (group, channel-in-group) for `cout` channels: a single
/// value reads stride 0, `[1, cout]` reads its channel.
pub(super) fn bias_strides(
    lw: &Lowering<'_>,
    b: ValueId,
    cout: usize,
) -> Result<(i64, i64), CodegenError> {
    let len: usize = lw.shape(b)?.iter().product();
    if len == 1 {
        Ok((0, 0))
    } else if len == cout {
        Ok((1, 1))
    } else {
        Err(CodegenError::Invalid(format!(
            "bias of {len} values for {cout} output channels"
        )))
    }
}

/// A direct convolution over a border-free view: loops `[N, G, og, O…, cg, K…]`.
/// `w_off`/`w_st` give the filter element `(g, j, ci, t)` as
/// `w_off + g·w_st[0] + j·w_st[1] + ci·w_st[2] + Σ t_d·w_st[3 + d]`.
#[allow(clippy::too_many_arguments)]
fn direct(
    lw: &mut Lowering<'_>,
    name: &str,
    p: &View,
    p_off: i64,
    io: &ConvIo,
    groups: usize,
    cg: usize,
    og: usize,
    stride: &[usize],
    dilation: &[usize],
    ksize: &[usize],
    w_off: i64,
    w_st: &[i64],
) -> Result<(), CodegenError> {
    let sp = io.xs.len() - 2;
    let n = io.xs[0];
    let out_sp = &io.ys[2..];
    let mut ext = vec![n, groups, og];
    ext.extend_from_slice(out_sp);
    ext.push(cg);
    ext.extend_from_slice(ksize);
    let total = ext.len();
    let first_red = 3 + sp;
    let mut k = lw.kernel(name, &ext);
    // Input view.
    let mut ps = vec![p.strides[0], cg as i64 * p.strides[1], 0];
    ps.extend((0..sp).map(|d| stride[d] as i64 * p.strides[2 + d]));
    ps.push(p.strides[1]);
    ps.extend((0..sp).map(|d| dilation[d] as i64 * p.strides[2 + d]));
    let pa = k.access(p.buf, p.offset + p_off, ps);
    // Filter.
    let fb = lw.buf(io.f)?;
    let mut fst = vec![0, w_st[0], w_st[1]];
    fst.extend(std::iter::repeat_n(0, sp));
    fst.push(w_st[2]);
    fst.extend_from_slice(&w_st[3..]);
    let fa = k.access(fb, w_off, fst);
    let x = k.load(pa, DType::F32);
    let w = k.load(fa, DType::F32);
    k.push(Expr::Binary(BinaryOp::Mul, x, w), DType::F32);
    // Bias in the finalizer.
    let cout = io.ys[1];
    let (bg, bj) = bias_strides(lw, io.b, cout)?;
    let bb = lw.buf(io.b)?;
    let mut bst = vec![0i64; total];
    bst[1] = bg * og as i64;
    bst[2] = bj;
    let ba = k.access(bb, 0, bst);
    let fin = vec![
        ExprNode {
            expr: Expr::Acc,
            ty: DType::F32,
        },
        ExprNode {
            expr: Expr::Load(ba),
            ty: DType::F32,
        },
        ExprNode {
            expr: Expr::Binary(
                BinaryOp::Add,
                crate::back::kernel::ExprId(0),
                crate::back::kernel::ExprId(1),
            ),
            ty: DType::F32,
        },
    ];
    k.reduction = Some(Reduction {
        kind: ReduceKind::Sum,
        first_loop: first_red,
        finalize: fin,
    });
    let ost = strides(&io.ys);
    let mut sst = vec![ost[0], og as i64 * ost[1], ost[1]];
    sst.extend_from_slice(&ost[2..]);
    sst.extend(std::iter::repeat_n(0, 1 + sp));
    let yb = lw.buf(io.y)?;
    k.set_store(yb, 0, sst);
    lw.push(k);
    Ok(())
}

/// `conv`, and the `max_pool` after it when the graph computes the two together
/// (`passes::epilogue::pool_after`, which the memory plan saw: the pooled value has no
/// slot): one runtime call where [`pool_after`] finds it, else the conv as usual with
/// the pooled value in this node's scratch, then the pool from there.
pub(super) fn conv(
    lw: &mut Lowering<'_>,
    a: &ConvAttrs,
    ins: &[ValueId],
    outs: &[ValueId],
) -> Result<(), CodegenError> {
    let g = lw.g;
    let Some(pa) = crate::passes::epilogue::pool_after(g, &lw.users, lw.node_idx()) else {
        return conv_body(lw, a, ins, outs);
    };
    lw.pool_after = Some(pa);
    let done = conv_body(lw, a, ins, outs);
    lw.pool_after = None;
    done?;
    if !lw.skip.get(pa.pool).copied().unwrap_or(true) {
        // The pool reads what the conv's chain produces: every member must have been
        // folded into the conv (they all are for a conv `pool_after` accepts).
        let chain = crate::passes::epilogue::chain(g, &lw.users, lw.node_idx());
        if chain.is_some_and(|c| c.nodes.iter().any(|&n| !lw.skip[n])) {
            return Err(CodegenError::Internal(format!(
                "conv node {} did not fold the chain before its max pool",
                lw.node_idx()
            )));
        }
        let p = &g.nodes[pa.pool];
        let Op::MaxPool(w) = &p.op else {
            return Err(CodegenError::Internal("pool_after without a pool".into()));
        };
        super::window::max_pool(lw, w, &p.inputs, &p.outputs)?;
        lw.skip[pa.pool] = true;
    }
    Ok(())
}

/// `conv`: grouped N-d cross-correlation plus bias (direct loop nest).
fn conv_body(
    lw: &mut Lowering<'_>,
    a: &ConvAttrs,
    ins: &[ValueId],
    outs: &[ValueId],
) -> Result<(), CodegenError> {
    let io = conv_io(lw, ins, outs, "conv")?;
    let sp = io.xs.len() - 2;
    let c = io.xs[1];
    let cout = io.fs[0];
    let groups = if a.groups == 0 { c } else { a.groups };
    if groups == 0
        || c % groups != 0
        || cout % groups != 0
        || io.fs[1] * groups != c
        || io.ys[1] != cout
    {
        return Err(CodegenError::Invalid(format!(
            "{groups} groups do not fit input {:?} and filter {:?}",
            io.xs, io.fs
        )));
    }
    if io.ys.contains(&0) {
        return Ok(());
    }
    let pad = resolved_conv_padding(a, &io.xs, &io.fs);
    let mut full_pad = vec![(0, 0), (0, 0)];
    full_pad.extend_from_slice(&pad);
    let mut size = vec![1, 1];
    size.extend_from_slice(&io.fs[2..]);
    let mut geo_out = vec![io.xs[0], c];
    geo_out.extend_from_slice(&io.ys[2..]);
    let stride = if a.stride.is_empty() {
        vec![1; sp]
    } else {
        a.stride.clone()
    };
    let dilation = if a.dilation.is_empty() {
        vec![1; sp]
    } else {
        a.dilation.clone()
    };
    let mut fst = vec![1, 1];
    fst.extend_from_slice(&stride);
    let mut fdl = vec![1, 1];
    fdl.extend_from_slice(&dilation);
    let geo = Geometry::new(&io.xs, &geo_out, &size, &fst, &fdl, &full_pad)?;
    let src = value_view(lw, io.x)?;
    let (cg, og) = (c / groups, cout / groups);
    let kvol: usize = io.fs[2..].iter().product();
    let is_dw = cg == 1 && og == 1 && groups > 1 && kvol <= super::window::UNROLL_TAPS;
    if cg == 1
        && og == 1
        && groups > 1
        && sp == 2
        && lw.runtime_windows
        && !lw.direct_only
        && matches!(a.border, Border::Constant | Border::Ignore)
        && src.strides[3] == 1
    {
        return depthwise_call(lw, &src, &geo, &io, &stride, &dilation);
    }
    if is_dw
        && !lw.direct_only
        && matches!(a.border, Border::Constant | Border::Ignore)
        && depthwise_unpadded(lw, &src, &geo, &io, &stride, &dilation)?
    {
        return Ok(());
    }
    let filter_const =
        lw.g.const_of(io.f)
            .and_then(|t| t.as_f32().map(|d| d.to_vec()));
    // Winograd before the direct kernel: from 16 input channels (with the runtime's
    // transforms) it beats the direct kernel on the 3×3 stride-1 layers both take.
    if let Some(fw) = &filter_const
        && sp == 2
        && groups == 1
        && !lw.direct_only
        && !lw.self_contained
        && io.fs[2..] == [3, 3]
        && stride.iter().all(|&s| s == 1)
        && dilation.iter().all(|&d| d == 1)
        && matches!(a.border, Border::Constant | Border::Ignore)
        && super::winograd::worthwhile(
            c,
            cout,
            io.ys[2].div_ceil(2) * io.ys[3].div_ceil(2),
            lw.runtime_windows,
        )
    {
        let input = if lw.runtime_windows && src.strides[3] == 1 {
            // The runtime's input transform reads the zero padding itself.
            super::winograd::Input::InPlace {
                view: src,
                pt: geo.front[2],
                pl: geo.front[3],
            }
        } else {
            // The padded input covers every 4×4 tile: 2·tiles + 2 rows/columns.
            let mut wout = vec![io.xs[0], c];
            wout.extend(io.ys[2..].iter().map(|&e| 2 * e.div_ceil(2)));
            let wgeo = Geometry::new(&io.xs, &wout, &size, &fst, &fdl, &full_pad)?;
            super::winograd::Input::Padded(padded(lw, src, &wgeo, a.border, 0.0)?)
        };
        let fusion = fusion(lw, &io)?;
        return super::winograd::conv3x3(lw, input, &io, fw, fusion);
    }
    // A grouped conv's groups become the call's samples: one image only.
    if let Some(fw) = &filter_const
        && sp == 2
        && (groups == 1 || io.xs[0] == 1)
        && lw.runtime_windows
        && !lw.direct_only
        && direct_pays(cg, groups, &stride, io.ys[3])
        && nnefc_runtime::conv_supported(
            io.fs[2],
            io.fs[3],
            stride[0],
            stride[1],
            dilation[0],
            dilation[1],
        )
        && matches!(a.border, Border::Constant | Border::Ignore)
        && src.strides[3] == 1
    {
        if groups == 1
            && let Some(after) = pool_after(lw, &io)?
        {
            return conv_pool_call(lw, &src, &geo, &io, &stride, fw, after);
        }
        return direct_call(lw, &src, &geo, &io, &stride, fw, groups);
    }
    let p = padded(lw, src, &geo, a.border, 0.0)?;
    if lw.direct_only {
        let fs_st = strides(&io.fs);
        let mut w_st = vec![og as i64 * fs_st[0], fs_st[0], fs_st[1]];
        w_st.extend_from_slice(&fs_st[2..]);
        return direct(
            lw,
            "conv",
            &p,
            0,
            &io,
            groups,
            cg,
            og,
            &stride,
            &dilation,
            &io.fs[2..],
            0,
            &w_st,
        );
    }
    let fusion = fusion(lw, &io)?;
    if is_dw {
        return depthwise(lw, &p, &io, &stride, &dilation, fusion);
    }
    match filter_const {
        Some(f) => gemm(
            lw, &p, &io, &geo, groups, cg, og, &stride, &dilation, &f, fusion,
        ),
        _ => {
            let fs_st = strides(&io.fs);
            let mut w_st = vec![og as i64 * fs_st[0], fs_st[0], fs_st[1]];
            w_st.extend_from_slice(&fs_st[2..]);
            let Some(fu) = fusion else {
                return direct(
                    lw,
                    "conv",
                    &p,
                    0,
                    &io,
                    groups,
                    cg,
                    og,
                    &stride,
                    &dilation,
                    &io.fs[2..],
                    0,
                    &w_st,
                );
            };
            // Not fused after all: the following nodes run as usual.
            lw.set_skip(&fu.nodes, false);
            direct(
                lw,
                "conv",
                &p,
                0,
                &io,
                groups,
                cg,
                og,
                &stride,
                &dilation,
                &io.fs[2..],
                0,
                &w_st,
            )
        }
    }
}

/// Nodes after a conv folded into its GEMM epilogue: the value the fused chain produces,
/// the activation, an optional residual added before it, and the nodes skipped.
pub(super) struct Fusion {
    pub out: ValueId,
    pub activation: Activation,
    pub residual: Option<ValueId>,
    pub nodes: Vec<usize>,
}

/// Byte range of a workspace buffer (`None` for inputs/outputs/constants).
fn ws_range(lw: &mut Lowering<'_>, v: ValueId) -> Result<Option<(usize, usize)>, CodegenError> {
    let b = lw.buf(v)?;
    Ok(lw.prog.buffer(b).and_then(|x| match x.kind {
        BufKind::Workspace(off) => Some((off, off + x.len * x.dtype.size())),
        _ => None,
    }))
}

fn disjoint(lw: &mut Lowering<'_>, a: ValueId, b: ValueId) -> Result<bool, CodegenError> {
    Ok(match (ws_range(lw, a)?, ws_range(lw, b)?) {
        (Some(x), Some(y)) => x.1 <= y.0 || y.1 <= x.0,
        _ => a != b,
    })
}

/// A chain's activation as the kernels' epilogue takes it.
pub(super) fn activation_of(a: ChainActivation) -> Activation {
    match a {
        ChainActivation::None => Activation::None,
        ChainActivation::Relu => Activation::Relu,
        ChainActivation::Clamp(lo, hi) => Activation::Clamp(lo, hi),
        ChainActivation::Sigmoid => Activation::Sigmoid,
        ChainActivation::Swish => Activation::Swish,
        ChainActivation::HardSwish => Activation::HardSwish,
    }
}

/// The epilogue chain `conv → [add residual] → [relu | clamp(const, const)]` of this conv
/// (`passes::epilogue`, which the memory plan saw), kept when its final buffer does not
/// alias the conv input (the GEMM writes it while reading that input; the plan keeps the
/// input alive to prevent exactly that) and the residual is disjoint or in place.
/// Marks the fused nodes skipped.
fn fusion(lw: &mut Lowering<'_>, io: &ConvIo) -> Result<Option<Fusion>, CodegenError> {
    let Some(chain) = crate::passes::epilogue::chain(lw.g, &lw.users, lw.node_idx()) else {
        return Ok(None);
    };
    if chain.nodes.first() != Some(&(lw.node_idx() + 1)) {
        return Ok(None);
    }
    let (cur, residual, nodes) = (chain.out, chain.residual, chain.nodes);
    let activation = activation_of(chain.activation);
    let apart = disjoint(lw, cur, io.x)?
        && match residual {
            Some(r) => disjoint(lw, cur, r)? || lw.buf(cur)? == lw.buf(r)?,
            None => true,
        };
    if nodes.is_empty() || !apart {
        // The plan of `passes::memory_plan` never does this to an always-fused chain,
        // whose internal values have no slot to run the members alone in.
        if crate::passes::epilogue::always_fused(lw.g, lw.node_idx()) {
            return Err(CodegenError::Internal(format!(
                "the memory plan places the output of conv node {}'s epilogue chain over \
                 its input or residual",
                lw.node_idx()
            )));
        }
        return Ok(None);
    }
    lw.set_skip(&nodes, true);
    Ok(Some(Fusion {
        out: cur,
        activation,
        residual,
        nodes,
    }))
}

/// Bias as a per-channel buffer of `cout` floats (a single value is broadcast into scratch).
pub(super) fn bias_rows(
    lw: &mut Lowering<'_>,
    b: ValueId,
    cout: usize,
) -> Result<BufId, CodegenError> {
    let len: usize = lw.shape(b)?.iter().product();
    let bb = lw.buf(b)?;
    if len == cout {
        return Ok(bb);
    }
    if len != 1 {
        return Err(CodegenError::Invalid(format!(
            "bias of {len} values for {cout} output channels"
        )));
    }
    let dst = lw.scratch(DType::F32, cout);
    let mut k = lw.kernel("bias_bcast", &[cout]);
    let a = k.access(bb, 0, vec![0]);
    k.load(a, DType::F32);
    k.set_store(dst, 0, vec![1]);
    lw.push(k);
    Ok(dst)
}

/// Whether a 2-D conv of `cg` input channels per group (`groups` groups), stride
/// `stride` and `ow` output columns goes to the runtime's direct kernel (`nnefc_conv`)
/// rather than im2col + GEMM: the few channels of `passes::epilogue::few_channels`
/// (which also decides the fused conv + pool), and on maps of at least 28 output columns (two of
/// the kernel's 16-column blocks, nearly full) up to 32 channels, or 64 per group of a
/// grouped conv, and grouped convs of at most 16 per group on any map. There the column matrix (as large as the input times the filter area:
/// 43 MB for 384 channels in groups of 48 on 56×56) costs more than the direct kernel's
/// shorter register reuse; grouped products are also short (`og` rows). One layer per
/// model (`benches/grouped_layers.py` writes most of them), Zen 5, one thread, `nnefc
/// bench` median ms, im2col + GEMM → direct (ONNX
/// Runtime 1.32 through Python alongside):
///
/// | layer | im2col + GEMM | direct | ONNX Runtime |
/// |---|---|---|---|
/// | 128 ch in groups of 16, 3×3 s2, 112² | 1.55 | 0.61 | 0.89 |
/// | 384 in groups of 48, 3×3 s1, 56² | 11.83 | 4.82 | 4.70 |
/// | 512 in groups of 64, 3×3 s1, 56² | 12.69 | 8.20 | 8.34 |
/// | 384 in groups of 48, 3×3 s2, 112² | 13.78 | 5.68 | 7.12 |
/// | 384 in groups of 48, 3×3 s1, 28² | 1.80 | 1.10 | 1.08 |
/// | 256 in groups of 32, 3×3 s1, 28² | 0.59 | 0.51 | 0.52 |
/// | 256 in groups of 32, 3×3 s2, 56² | 0.71 | 0.55 | 0.54 |
/// | 192 in groups of 24, 3×3 s1, 28² | 0.37 | 0.29 | 0.55 |
/// | dense 32→64, 3×3 s2, 56² | 0.150 | 0.133 | 0.125 |
/// | dense 16→32, 3×3 s2, 112² | 0.174 | 0.144 | 0.143 |
/// | dense 24→48, 5×5 s1, 56² | 1.03 | 0.78 | 1.00 |
/// | dense 32→32, 5×5 s1, 56² | 0.81 | 0.69 | 0.71 |
///
/// Kept on im2col + GEMM, where direct measured slower: narrower maps (dense 32→64 3×3
/// s2 from 28² 0.035 → 0.039, from 40² 0.072 → 0.090; 512 in groups of 64 on 14²
/// 2.06 → 2.24) and dense layers of 64 channels (resnet18's 64→128 3×3 s2 on 56², 0.511 →
/// 0.527 in the network). Grouped convs of at most 16 channels per group take the direct
/// kernel on any map: RegNetX-400MF's 160 channels in groups of 16, 3×3 s2 from 28×28
/// (`benches/public_models.py`, `nnefc bench --profile`, two interleaved runs each)
/// 0.235–0.244 → 0.107 ms; regnet_y_400mf and resnext50_32x4d, whose layers of 8 and 16
/// per group switched too, unchanged as a whole (9.60–9.70 / 9.42–9.52 ms, 82.6–83.1 /
/// 81.7–82.9).
fn direct_pays(cg: usize, groups: usize, stride: &[usize], ow: usize) -> bool {
    crate::passes::epilogue::few_channels(cg, stride)
        || (ow >= 28 && cg <= if groups > 1 { 64 } else { 32 })
        || (groups > 1 && cg <= 16)
}

/// Dense conv as GEMM per (batch item, group): `C[og × pos] = A[og × K] · col[K × pos]`
/// with A the filter pre-packed at compile time, `col` the im2col of the border-free view
/// (or the input itself for an unpadded 1×1 stride-1 conv), bias per row and the fused
/// epilogue.
#[allow(clippy::too_many_arguments)]
fn gemm(
    lw: &mut Lowering<'_>,
    p: &View,
    io: &ConvIo,
    geo: &Geometry,
    groups: usize,
    cg: usize,
    og: usize,
    stride: &[usize],
    dilation: &[usize],
    filter: &[f32],
    fusion: Option<Fusion>,
) -> Result<(), CodegenError> {
    let sp = io.xs.len() - 2;
    let n = io.xs[0];
    let cout = io.ys[1];
    let kvol: usize = io.fs[2..].iter().product();
    let kk = cg * kvol;
    let pos: usize = io.ys[2..].iter().product();
    // Packed filter, group after group, in the format the shape runs fastest from.
    let a_packing = super::linalg::a_packing(lw, og, pos, kk);
    let plen = super::linalg::packed_len(a_packing, og, kk);
    let mut packed = Vec::with_capacity(plen.saturating_mul(groups));
    for g in 0..groups {
        let part = filter
            .get(g * og * kk..(g + 1) * og * kk)
            .ok_or_else(|| CodegenError::Invalid("filter too short".into()))?;
        packed.extend(super::linalg::pack_const(a_packing, og, kk, part, kk, 1)?);
    }
    let bytes = packed.iter().flat_map(|x| x.to_le_bytes()).collect();
    let abuf = lw.const_buf(bytes, DType::F32, packed.len());
    // B: the input itself or an im2col matrix per (n, g).
    let direct_b = io.fs[2..].iter().all(|&k| k == 1)
        && stride.iter().all(|&s| s == 1)
        && geo.front.iter().all(|&f| f == 0)
        && io.ys[2..] == io.xs[2..];
    let (bbuf, boffs): (BufId, Vec<i64>) = if direct_b {
        let xb = lw.buf(io.x)?;
        let pl: usize = io.xs[2..].iter().product();
        (
            xb,
            (0..n * groups)
                .map(|i| ((i / groups) * io.xs[1] * pl + (i % groups) * cg * pl) as i64)
                .collect(),
        )
    } else {
        let col = lw.scratch(DType::F32, n * groups * kk * pos);
        let mut ext = vec![n, groups, cg];
        ext.extend_from_slice(&io.fs[2..]);
        ext.extend_from_slice(&io.ys[2..]);
        let mut k = lw.kernel("im2col", &ext);
        let mut ps = vec![p.strides[0], cg as i64 * p.strides[1], p.strides[1]];
        ps.extend((0..sp).map(|d| dilation[d] as i64 * p.strides[2 + d]));
        ps.extend((0..sp).map(|d| stride[d] as i64 * p.strides[2 + d]));
        let a = k.access(p.buf, p.offset, ps);
        k.load(a, DType::F32);
        k.set_store(col, 0, strides(&ext));
        lw.push(k);
        (
            col,
            (0..n * groups).map(|i| (i * kk * pos) as i64).collect(),
        )
    };
    let (out, activation, residual) = match &fusion {
        Some(f) => (f.out, f.activation, f.residual),
        None => (io.y, Activation::None, None),
    };
    let cbuf = lw.buf(out)?;
    if let Some(r) = residual {
        let rb = lw.buf(r)?;
        if rb != cbuf {
            lw.copy(rb, cbuf, DType::F32, n * cout * pos);
        }
    }
    let rows = bias_rows(lw, io.b, cout)?;
    let scratch = lw.gemm_scratch(super::linalg::scratch_bytes(a_packing, og, pos, kk));
    let mut batches = Vec::with_capacity(n * groups);
    let mut bias_offs = Vec::with_capacity(n * groups);
    for ni in 0..n {
        for g in 0..groups {
            batches.push([
                (g * plen) as i64,
                boffs[ni * groups + g],
                (ni * cout * pos + g * og * pos) as i64,
            ]);
            bias_offs.push((g * og) as i64);
        }
    }
    lw.prog.steps.push(Step::Gemm(GemmCall {
        prefetch: None,
        m: og,
        n: pos,
        k: kk,
        a: Matrix {
            buf: abuf,
            rs: kk as i64,
            cs: 1,
        },
        a_packing,
        b: Matrix {
            buf: bbuf,
            rs: pos as i64,
            cs: 1,
        },
        c: Matrix {
            buf: cbuf,
            rs: pos as i64,
            cs: 1,
        },
        batches,
        bias: None,
        scratch,
        epi: GemmEpi {
            row_bias: Some((rows, bias_offs)),
            activation,
            accumulate: residual.is_some(),
        },
    }));
    Ok(())
}

/// Depthwise conv (one input and one output channel per group) over a border-free view:
/// one [`dw_region`] covering the whole output with every tap.
fn depthwise(
    lw: &mut Lowering<'_>,
    p: &View,
    io: &ConvIo,
    stride: &[usize],
    dilation: &[usize],
    fusion: Option<Fusion>,
) -> Result<(), CodegenError> {
    let sp = io.xs.len() - 2;
    let kvol: usize = io.fs[2..].iter().product();
    let taps: Vec<usize> = (0..kvol).collect();
    let region = DwRegion {
        front: vec![0; sp],
        lo: vec![0; sp],
        len: io.ys[2..].to_vec(),
        taps: &taps,
    };
    let (out, activation, residual) = match &fusion {
        Some(f) => (f.out, f.activation, f.residual),
        None => (io.y, Activation::None, None),
    };
    dw_region(
        lw, p, &region, io, stride, dilation, out, activation, residual,
    )
}

/// Depthwise 2-D conv as one call of the runtime's vector kernel ([`Step::Window`]),
/// reading the input in place (zero padding is the kernel's: no padded copy) with the bias,
/// the fused residual and activation in its epilogue.
fn depthwise_call(
    lw: &mut Lowering<'_>,
    src: &View,
    geo: &Geometry,
    io: &ConvIo,
    stride: &[usize],
    dilation: &[usize],
) -> Result<(), CodegenError> {
    let filter = lw.buf(io.f)?;
    conv_call(lw, src, geo, io, stride, dilation, 1, |bias| {
        WindowOp::Conv { filter, bias }
    })
}

/// The [`Step::Window`] call of a 2-D conv read in place: its output channels, window,
/// fused epilogue (`passes::epilogue`) and bias; `op` makes the operation from the bias
/// and its stride. With `groups > 1` (one image) the call's samples are the groups: each
/// `cin / groups` input channels into `cout / groups` output channels.
#[allow(clippy::too_many_arguments)]
fn conv_call(
    lw: &mut Lowering<'_>,
    src: &View,
    geo: &Geometry,
    io: &ConvIo,
    stride: &[usize],
    dilation: &[usize],
    groups: usize,
    op: impl FnOnce((BufId, i64)) -> WindowOp,
) -> Result<(), CodegenError> {
    let cout = io.ys[1] / groups;
    let fusion = fusion(lw, io)?;
    let (out, activation, residual) = match &fusion {
        Some(f) => (f.out, f.activation, f.residual),
        None => (io.y, Activation::None, None),
    };
    let (bias_sc, _) = bias_strides(lw, io.b, io.ys[1])?;
    let bias = lw.buf(io.b)?;
    let y = lw.buf(out)?;
    let residual = residual.map(|r| lw.buf(r)).transpose()?;
    let ost = strides(&io.ys);
    lw.prog.steps.push(Step::Window(WindowCall {
        dims: [
            io.xs[0] * groups,
            cout,
            io.xs[2],
            io.xs[3],
            io.ys[2],
            io.ys[3],
            io.fs[2],
            io.fs[3],
            stride[0],
            stride[1],
            dilation[0],
            dilation[1],
            geo.front[2],
            geo.front[3],
        ],
        x: (
            src.buf,
            src.offset,
            [
                if groups > 1 {
                    (io.xs[1] / groups) as i64 * src.strides[1]
                } else {
                    src.strides[0]
                },
                src.strides[1],
                src.strides[2],
            ],
        ),
        op: op((bias, bias_sc)),
        residual,
        y: (
            y,
            [
                if groups > 1 {
                    cout as i64 * ost[1]
                } else {
                    ost[0]
                },
                ost[1],
                ost[2],
            ],
        ),
        activation,
    }));
    Ok(())
}

/// Dense 2-D conv of few input channels as one call of the runtime's direct kernel
/// ([`Step::Window`] with [`WindowOp::Dense`], `nnefc_conv`): the input read in place (zero
/// padding is the kernel's), the filter packed at compile time
/// (`nnefc_runtime::pack_conv_filter`), bias, fused residual and activation in its
/// epilogue.
fn direct_call(
    lw: &mut Lowering<'_>,
    src: &View,
    geo: &Geometry,
    io: &ConvIo,
    stride: &[usize],
    filter: &[f32],
    groups: usize,
) -> Result<(), CodegenError> {
    let (cg, og) = (io.xs[1] / groups, io.ys[1] / groups);
    let (kh, kw) = (io.fs[2], io.fs[3]);
    // Group after group, each in the packed format.
    let per_group = og * cg * kh * kw;
    let mut packed = Vec::new();
    for g in 0..groups {
        let part = filter
            .get(g * per_group..(g + 1) * per_group)
            .ok_or_else(|| CodegenError::Invalid("filter too short".into()))?;
        packed.extend(
            nnefc_runtime::pack_conv_filter(og, cg, kh, kw, part)
                .map_err(|e| CodegenError::Internal(format!("packing the filter: {e:?}")))?,
        );
    }
    let filter_sn = if groups > 1 {
        nnefc_runtime::conv_filter_len(og, cg, kh, kw) as i64
    } else {
        0
    };
    let bytes = packed.iter().flat_map(|x| x.to_le_bytes()).collect();
    let filter = lw.const_buf(bytes, DType::F32, packed.len());
    conv_call(lw, src, geo, io, stride, &[1, 1], groups, |bias| {
        WindowOp::Dense {
            filter,
            bias,
            cin: cg,
            groups: (filter_sn, if groups > 1 { og as i64 * bias.1 } else { 0 }),
        }
    })
}

/// The `max_pool` the graph computes with this conv (`passes::epilogue::pool_after`),
/// which `conv_pool_call` takes as one runtime call.
struct PoolAfter {
    /// The chain's nodes, then the pool's.
    nodes: Vec<usize>,
    /// The chain's activation (applied before the maximum).
    activation: Activation,
    geo: Geometry,
    /// The pool's output.
    y: ValueId,
}

/// The `max_pool` the graph computes with this conv, when the runtime's fused kernel
/// (`nnefc_conv_pool`) takes it: its geometry is one the runtime's window maximum takes
/// ([`super::window::runtime_max_pool`]) and its output does not overlap the conv's
/// input (which the call reads while writing it; the memory plan keeps that input alive
/// to the pool). The graph-level conditions (the conv's shape, the chain, the pool alone
/// reading it) are those of `passes::epilogue::pool_after`, which `conv` found
/// (`Lowering::pool_after`).
fn pool_after(lw: &mut Lowering<'_>, io: &ConvIo) -> Result<Option<PoolAfter>, CodegenError> {
    let g = lw.g;
    let Some(pa) = lw.pool_after else {
        return Ok(None);
    };
    let (mut nodes, activation) = match crate::passes::epilogue::chain(g, &lw.users, lw.node_idx())
    {
        Some(ch) => (ch.nodes, activation_of(ch.activation)),
        None => (Vec::new(), Activation::None),
    };
    let p = &g.nodes[pa.pool];
    let (Op::MaxPool(w), [y]) = (&p.op, p.outputs.as_slice()) else {
        return Ok(None);
    };
    let geo = Geometry::from_window(w, &lw.shape(pa.pooled)?, &lw.shape(*y)?)?;
    if geo.empty() || !super::window::runtime_max_pool(&geo) || !disjoint(lw, *y, io.x)? {
        return Ok(None);
    }
    nodes.push(pa.pool);
    Ok(Some(PoolAfter {
        nodes,
        activation,
        geo,
        y: *y,
    }))
}

/// A first-layer conv and the 3×3 max pool after it as one call of the runtime's fused
/// kernel ([`Step::Window`] with [`WindowOp::ConvPool`], `nnefc_conv_pool`): the conv's
/// output lives only in the kernel's stack ring, 64 channels in the vector lanes, so
/// neither it nor the pool's input reaches memory. squeezenet1_1's stem (3→64, 3×3
/// stride 2, relu, pool 3×3 stride 2; Zen 5, one thread, `nnefc bench --profile`,
/// interleaved runs): 0.285–0.30 + 0.079–0.086 ms apart → 0.33 fused (0.275 alone);
/// resnet18's (7×7, pool pad 1) 1.105–1.15 + 0.083–0.13 → 1.19–1.21. Marks the chain
/// and the pool skipped.
fn conv_pool_call(
    lw: &mut Lowering<'_>,
    src: &View,
    geo: &Geometry,
    io: &ConvIo,
    stride: &[usize],
    filter: &[f32],
    after: PoolAfter,
) -> Result<(), CodegenError> {
    let (cin, cout) = (io.xs[1], io.ys[1]);
    let (kh, kw) = (io.fs[2], io.fs[3]);
    let packed = nnefc_runtime::pack_conv_pool_filter(cout, cin, kh, kw, filter)
        .map_err(|e| CodegenError::Internal(format!("packing the filter: {e:?}")))?;
    let bytes = packed.iter().flat_map(|x| x.to_le_bytes()).collect();
    let fbuf = lw.const_buf(bytes, DType::F32, packed.len());
    let (bias_sc, _) = bias_strides(lw, io.b, cout)?;
    let bias = lw.buf(io.b)?;
    let y = lw.buf(after.y)?;
    let pst = strides(&after.geo.output);
    lw.set_skip(&after.nodes, true);
    let (po, pf) = (&after.geo.output, &after.geo.front);
    lw.prog.steps.push(Step::Window(WindowCall {
        dims: [
            io.xs[0],
            cout,
            io.xs[2],
            io.xs[3],
            io.ys[2],
            io.ys[3],
            kh,
            kw,
            stride[0],
            stride[1],
            1,
            1,
            geo.front[2],
            geo.front[3],
        ],
        x: (
            src.buf,
            src.offset,
            [src.strides[0], src.strides[1], src.strides[2]],
        ),
        op: WindowOp::ConvPool {
            filter: fbuf,
            bias: (bias, bias_sc),
            cin,
            pool: [po[2], po[3], after.geo.stride[2], pf[2], pf[3]],
        },
        residual: None,
        y: (y, [pst[0], pst[1], pst[2]]),
        activation: after.activation,
    }));
    Ok(())
}

/// Most regions a zero-padded depthwise conv is split into before it falls back to a
/// padded copy (3×3 with padding on both sides of both dims gives 9).
const DW_MAX_REGIONS: usize = 16;

/// Depthwise conv with zero padding and no padded copy: along each spatial dim the
/// outputs are grouped into runs whose windows keep the same in-bounds taps (for 3×3 /
/// pad 1: first, interior, last), and each combination of runs is one [`dw_region`]
/// kernel reading the input directly with only its in-bounds taps. Returns `false`
/// (emitting nothing) when that would take more than [`DW_MAX_REGIONS`] kernels.
fn depthwise_unpadded(
    lw: &mut Lowering<'_>,
    src: &View,
    geo: &Geometry,
    io: &ConvIo,
    stride: &[usize],
    dilation: &[usize],
) -> Result<bool, CodegenError> {
    let sp = io.xs.len() - 2;
    let ksize = &io.fs[2..];
    let runs: Vec<Vec<super::window::TapRun>> = (0..sp)
        .map(|d| {
            super::window::tap_runs(
                io.ys[2 + d],
                io.xs[2 + d],
                ksize[d],
                stride[d],
                dilation[d],
                geo.front[2 + d],
            )
        })
        .collect();
    let cells: usize = runs.iter().map(|r| r.len()).product();
    if cells > DW_MAX_REGIONS {
        return Ok(false);
    }
    let fusion = fusion(lw, io)?;
    let (out, activation, residual) = match &fusion {
        Some(f) => (f.out, f.activation, f.residual),
        None => (io.y, Activation::None, None),
    };
    let front: Vec<usize> = geo.front[2..].to_vec();
    for cell in 0..cells {
        let mut rem = cell;
        let mut pick = vec![0usize; sp];
        for d in (0..sp).rev() {
            pick[d] = rem % runs[d].len();
            rem /= runs[d].len();
        }
        let lo: Vec<usize> = (0..sp).map(|d| runs[d][pick[d]].0).collect();
        let len: Vec<usize> = (0..sp).map(|d| runs[d][pick[d]].1).collect();
        // Flat taps (row-major over the window) in bounds along every dim.
        let taps: Vec<usize> = (0..ksize.iter().product::<usize>())
            .filter(|&t| {
                let mut rem = t;
                (0..sp).rev().all(|d| {
                    let e = ksize[d].max(1);
                    let td = rem % e;
                    rem /= e;
                    runs[d][pick[d]].2.contains(&td)
                })
            })
            .collect();
        let region = DwRegion {
            front: front.clone(),
            lo,
            len,
            taps: &taps,
        };
        dw_region(
            lw, src, &region, io, stride, dilation, out, activation, residual,
        )?;
    }
    Ok(true)
}

/// A box of depthwise outputs `[lo, lo + len)` per spatial dim and the taps it sums;
/// input coordinate of output `o`, tap `t` is `o·stride + t·dilation − front`.
struct DwRegion<'a> {
    front: Vec<usize>,
    lo: Vec<usize>,
    len: Vec<usize>,
    taps: &'a [usize],
}

/// One depthwise kernel over a region: taps unrolled into the body, the output width
/// innermost (f32x4 when the stride along it is 1 or 2), bias, the fused residual and
/// activation applied in the body.
#[allow(clippy::too_many_arguments)]
fn dw_region(
    lw: &mut Lowering<'_>,
    p: &View,
    r: &DwRegion<'_>,
    io: &ConvIo,
    stride: &[usize],
    dilation: &[usize],
    out: ValueId,
    activation: Activation,
    residual: Option<ValueId>,
) -> Result<(), CodegenError> {
    let sp = io.xs.len() - 2;
    let c = io.xs[1];
    let mut ext = vec![io.xs[0], c];
    ext.extend_from_slice(&r.len);
    if ext.contains(&0) {
        return Ok(());
    }
    let rank = ext.len();
    let ksize = &io.fs[2..];
    let fb = lw.buf(io.f)?;
    let fst = strides(&io.fs);
    let ost = strides(&io.ys);
    let (bg, _) = bias_strides(lw, io.b, c)?;
    let bb = lw.buf(io.b)?;
    let mut k = lw.kernel("dwconv", &ext);
    let mut ps = vec![p.strides[0], p.strides[1]];
    ps.extend((0..sp).map(|d| stride[d] as i64 * p.strides[2 + d]));
    let f = DType::F32;
    let mut bst = vec![0i64; rank];
    bst[1] = bg;
    let ba = k.access(bb, 0, bst);
    let mut acc = k.load(ba, f);
    let mut wst = vec![0i64; rank];
    wst[1] = fst[0];
    for &t in r.taps {
        let mut rem = t;
        let mut off = 0i64;
        let mut woff = 0i64;
        for d in (0..sp).rev() {
            let e = ksize[d].max(1);
            let td = rem % e;
            rem /= e;
            let x = (r.lo[d] * stride[d] + td * dilation[d]) as i64 - r.front[d] as i64;
            off += x * p.strides[2 + d];
            woff += td as i64 * fst[2 + d];
        }
        let xa = k.access(p.buf, p.offset + off, ps.clone());
        let wa = k.access(fb, woff, wst.clone());
        let x = k.load(xa, f);
        let w = k.load(wa, f);
        let m = k.push(Expr::Binary(BinaryOp::Mul, x, w), f);
        acc = k.push(Expr::Binary(BinaryOp::Add, acc, m), f);
    }
    let out_off: i64 = (0..sp).map(|d| r.lo[d] as i64 * ost[2 + d]).sum();
    if let Some(res) = residual {
        let rb = lw.buf(res)?;
        let ra = k.access(rb, out_off, ost.clone());
        let rv = k.load(ra, f);
        acc = k.push(Expr::Binary(BinaryOp::Add, acc, rv), f);
    }
    activation.apply(acc, |e| k.push(e, f));
    let ob = lw.buf(out)?;
    k.set_store(ob, out_off, ost);
    lw.push(k);
    Ok(())
}

/// Per-dim layout of a zero-inserted buffer (see the module doc).
struct Inserted {
    /// Where input 0 lands.
    front: usize,
    /// Read offset of output 0.
    shift: usize,
    /// Extent.
    extent: usize,
    /// Input positions copied.
    region: usize,
}

fn inserted(input: usize, output: usize, k: usize, s: usize, d: usize, p: usize) -> Inserted {
    let p0 = (k.saturating_sub(1) * d) as i64 - p as i64;
    let front = p0.max(0) as usize;
    let shift = (front as i64 - p0) as usize;
    let extent = output.saturating_sub(1) + shift + k.saturating_sub(1) * d + 1;
    let region = if extent <= front {
        0
    } else {
        input.min((extent - front).div_ceil(s.max(1)))
    };
    Inserted {
        front,
        shift,
        extent,
        region,
    }
}

/// Zero-inserts `src` (extents `shape`) into scratch: `Q[front + y·s] = src[y]·Π scale_d[y_d]`,
/// `fill` elsewhere. Returns the view and the read shift per dim.
fn zero_insert(
    lw: &mut Lowering<'_>,
    src: &View,
    dims: &[Inserted],
    stride: &[usize],
    dtype: DType,
    fill: Lit,
    scale: Option<f32>,
    scale_tables: &[(usize, crate::back::kernel::BufId)],
) -> Result<View, CodegenError> {
    let rank = dims.len();
    let ext: Vec<usize> = dims.iter().map(|d| d.extent).collect();
    let len: usize = ext.iter().product();
    let q = lw.scratch(dtype, len);
    let qst = strides(&ext);
    let mut k = lw.kernel("zero_fill", &[len]);
    k.push(Expr::Lit(fill), dtype);
    k.set_store(q, 0, vec![1]);
    lw.push(k);
    let region: Vec<usize> = dims.iter().map(|d| d.region).collect();
    if !region.contains(&0) {
        let mut k = lw.kernel("zero_insert", &region);
        let a = k.access(src.buf, src.offset, src.strides.clone());
        let mut v = k.load(a, dtype);
        if let Some(s) = scale {
            let c = k.push(Expr::Lit(Lit::F32(s)), DType::F32);
            v = k.push(Expr::Binary(BinaryOp::Mul, v, c), DType::F32);
        }
        for &(d, t) in scale_tables {
            let mut st = vec![0i64; rank];
            st[d] = 1;
            let ta = k.access(t, 0, st);
            let c = k.load(ta, DType::F32);
            v = k.push(Expr::Binary(BinaryOp::Mul, v, c), DType::F32);
        }
        let _ = v;
        let off: i64 = (0..rank).map(|d| dims[d].front as i64 * qst[d]).sum();
        let st: Vec<i64> = (0..rank).map(|d| stride[d] as i64 * qst[d]).collect();
        k.set_store(q, off, st);
        lw.push(k);
    }
    Ok(View {
        buf: q,
        offset: 0,
        strides: qst,
    })
}

/// Zero-inserts operand `x` for the adjoint of the forward window `fwd` (which maps the
/// adjoint's output extents to its input extents): the layout of every dim follows from
/// `fwd`. Shared by `debox` and `desample`.
fn zero_insert_adjoint(
    lw: &mut Lowering<'_>,
    x: ValueId,
    fwd: &Geometry,
    scale: Option<f32>,
    scale_tables: &[(usize, crate::back::kernel::BufId)],
) -> Result<(Vec<Inserted>, View), CodegenError> {
    let dims: Vec<Inserted> = (0..fwd.input.len())
        .map(|d| {
            inserted(
                fwd.output[d],
                fwd.input[d],
                fwd.size[d],
                fwd.stride[d],
                fwd.dilation[d],
                fwd.front[d],
            )
        })
        .collect();
    let src = value_view(lw, x)?;
    let q = zero_insert(
        lw,
        &src,
        &dims,
        &fwd.stride,
        DType::F32,
        Lit::F32(0.0),
        scale,
        scale_tables,
    )?;
    Ok((dims, q))
}

fn transposed_border(b: Border, op: &str) -> Result<(), CodegenError> {
    match b {
        Border::Constant | Border::Ignore => Ok(()),
        other => Err(CodegenError::Unsupported(format!(
            "`{op}` with border `{}`",
            other.mnemonic()
        ))),
    }
}

/// `deconv`: the adjoint of `conv`, as a stride-1 convolution of the zero-inserted input
/// with the flipped, channel-transposed filter.
pub(super) fn deconv(
    lw: &mut Lowering<'_>,
    a: &ConvAttrs,
    ins: &[ValueId],
    outs: &[ValueId],
) -> Result<(), CodegenError> {
    let io = conv_io(lw, ins, outs, "deconv")?;
    transposed_border(a.border, "deconv")?;
    let sp = io.xs.len() - 2;
    let cin = io.xs[1];
    let groups = deconv_groups(a, cin);
    if groups == 0
        || io.fs[0] != cin
        || cin % groups != 0
        || io.fs[1] * groups != io.ys[1]
        || io.ys[0] != io.xs[0]
    {
        return Err(CodegenError::Invalid(format!(
            "{groups} groups do not fit input {:?} and filter {:?}",
            io.xs, io.fs
        )));
    }
    if io.ys.contains(&0) {
        return Ok(());
    }
    let cout = io.ys[1];
    let (cg, og) = (cin / groups, cout / groups);
    let pad = resolved_deconv_padding(a, &io.xs, &io.fs, &io.ys);
    let stride = if a.stride.is_empty() {
        vec![1; sp]
    } else {
        a.stride.clone()
    };
    let dilation = if a.dilation.is_empty() {
        vec![1; sp]
    } else {
        a.dilation.clone()
    };
    if pad.len() != sp || stride.len() != sp || dilation.len() != sp {
        return Err(CodegenError::Invalid(
            "deconv padding/stride/dilation length".into(),
        ));
    }
    let mut dims = vec![
        Inserted {
            front: 0,
            shift: 0,
            extent: io.xs[0],
            region: io.xs[0],
        },
        Inserted {
            front: 0,
            shift: 0,
            extent: cin,
            region: cin,
        },
    ];
    for d in 0..sp {
        dims.push(inserted(
            io.xs[2 + d],
            io.ys[2 + d],
            io.fs[2 + d],
            stride[d],
            dilation[d],
            pad[d].0,
        ));
    }
    let mut full_stride = vec![1, 1];
    full_stride.extend_from_slice(&stride);
    let src = value_view(lw, io.x)?;
    let q = zero_insert(
        lw,
        &src,
        &dims,
        &full_stride,
        DType::F32,
        Lit::F32(0.0),
        None,
        &[],
    )?;
    let shift: i64 = (0..sp)
        .map(|d| dims[2 + d].shift as i64 * q.strides[2 + d])
        .sum();
    // Filter element (g, j, ci, t') = f[g·cg + ci, j, k−1−t'].
    let fs_st = strides(&io.fs);
    let mut w_st = vec![cg as i64 * fs_st[0], fs_st[1], fs_st[0]];
    w_st.extend((0..sp).map(|d| -fs_st[2 + d]));
    let w_off: i64 = (0..sp)
        .map(|d| (io.fs[2 + d] as i64 - 1) * fs_st[2 + d])
        .sum();
    let ones = vec![1; sp];
    direct(
        lw,
        "deconv",
        &q,
        shift,
        &io,
        groups,
        cg,
        og,
        &ones,
        &dilation,
        &io.fs[2..],
        w_off,
        &w_st,
    )
}

/// `debox`: the adjoint of `box` — zero-insert the (divisor-scaled) input, then a
/// stride-1 window sum.
pub(super) fn debox(
    lw: &mut Lowering<'_>,
    w: &WindowAttrs,
    normalize: bool,
    ins: &[ValueId],
    outs: &[ValueId],
) -> Result<(), CodegenError> {
    let (x, y) = match (ins.first(), outs.first()) {
        (Some(&x), Some(&y)) => (x, y),
        _ => {
            return Err(CodegenError::Invalid(
                "`debox` needs an input and an output".into(),
            ));
        }
    };
    if lw.dtype(x)? != DType::F32 {
        return Err(CodegenError::Unsupported(
            "`debox` on non-f32 tensors".into(),
        ));
    }
    transposed_border(w.border, "debox")?;
    let (xs, ys) = (lw.shape(x)?, lw.shape(y)?);
    if ys.contains(&0) {
        return Ok(());
    }
    let pad = resolved_transposed_window_padding(w, &xs, &ys);
    // The forward box maps `ys` to `xs`.
    let fwd = Geometry::new(&ys, &xs, &w.size, &w.stride, &w.dilation, &pad)?;
    let rank = xs.len();
    let mut tables = Vec::new();
    let mut scale = None;
    if normalize {
        if w.border == Border::Ignore {
            for d in 0..rank {
                let rc: Vec<f32> = (0..xs[d])
                    .map(|yy| match fwd.count(d, yy) {
                        0 => 1.0,
                        c => 1.0 / c as f32,
                    })
                    .collect();
                if rc.iter().any(|&v| v != 1.0) {
                    tables.push((d, f32_table(lw, &rc)));
                }
            }
        } else if fwd.volume() > 1 {
            scale = Some(1.0 / fwd.volume() as f32);
        }
    }
    let (dims, q) = zero_insert_adjoint(lw, x, &fwd, scale, &tables)?;
    let shift: i64 = (0..rank).map(|d| dims[d].shift as i64 * q.strides[d]).sum();
    let view = View {
        buf: q.buf,
        offset: shift,
        strides: q.strides.clone(),
    };
    let ext: Vec<usize> = dims.iter().map(|d| d.extent).collect();
    let geo = Geometry::new(&ext, &ys, &w.size, &[], &w.dilation, &vec![(0, 0); rank])?;
    let out = lw.buf(y)?;
    super::window::window_sum(lw, "debox", &view, &geo, out)
}

/// `desample`: the adjoint of `sample` — both the values and the indices are
/// zero-inserted; output `x` sums the values whose index designates the tap landing on `x`.
pub(super) fn desample(
    lw: &mut Lowering<'_>,
    w: &WindowAttrs,
    ins: &[ValueId],
    outs: &[ValueId],
) -> Result<(), CodegenError> {
    let (x, idx, y) = match (ins, outs) {
        ([x, i], [y]) => (*x, *i, *y),
        _ => {
            return Err(CodegenError::Invalid(
                "`desample` takes (input, index) and gives one output".into(),
            ));
        }
    };
    if lw.dtype(x)? != DType::F32 || lw.dtype(idx)? != DType::I32 {
        return Err(CodegenError::Unsupported(
            "`desample` needs f32 input and i32 index".into(),
        ));
    }
    transposed_border(w.border, "desample")?;
    let (xs, ys) = (lw.shape(x)?, lw.shape(y)?);
    if lw.shape(idx)? != xs {
        return Err(CodegenError::Invalid(
            "`desample` index shape differs from the input shape".into(),
        ));
    }
    if ys.contains(&0) {
        return Ok(());
    }
    let pad = resolved_transposed_window_padding(w, &xs, &ys);
    let fwd = Geometry::new(&ys, &xs, &w.size, &w.stride, &w.dilation, &pad)?;
    let rank = xs.len();
    let (dims, q) = zero_insert_adjoint(lw, x, &fwd, None, &[])?;
    let isrc = value_view(lw, idx)?;
    let qi = zero_insert(
        lw,
        &isrc,
        &dims,
        &fwd.stride,
        DType::I32,
        Lit::I32(-1),
        None,
        &[],
    )?;
    let shift: i64 = (0..rank).map(|d| dims[d].shift as i64 * q.strides[d]).sum();
    let vol = fwd.volume();
    let out = lw.buf(y)?;
    let ost = strides(&ys);
    let mut k = lw.kernel("desample", &ys);
    let zero = k.push(Expr::Lit(Lit::F32(0.0)), DType::F32);
    let mut acc = zero;
    for tp in 0..vol {
        // Tap t' reads Q[x + shift + t'·d]; it carries forward tap t = k−1−t'.
        let mut rem = tp;
        let mut tflip = 0usize;
        let mut off = shift;
        let mut mult = 1usize;
        let mut tprime = vec![0usize; rank];
        for d in (0..rank).rev() {
            let e = fwd.size[d].max(1);
            tprime[d] = rem % e;
            rem /= e;
        }
        for d in (0..rank).rev() {
            let e = fwd.size[d].max(1);
            tflip += (e - 1 - tprime[d]) * mult;
            mult *= e;
            off += (tprime[d] * fwd.dilation[d]) as i64 * q.strides[d];
        }
        let va = k.access(q.buf, off, q.strides.clone());
        let ia = k.access(qi.buf, off, qi.strides.clone());
        let v = k.load(va, DType::F32);
        let i = k.load(ia, DType::I32);
        let t = k.push(Expr::Lit(Lit::I32(tflip as i32)), DType::I32);
        let eq = k.push(Expr::Binary(BinaryOp::Eq, i, t), DType::Bool);
        let sel = k.push(Expr::Select(eq, v, zero), DType::F32);
        acc = k.push(Expr::Binary(BinaryOp::Add, acc, sel), DType::F32);
    }
    let _ = acc;
    k.set_store(out, 0, ost);
    lw.push(k);
    Ok(())
}
