//! Lowers an inverted-residual block (`passes::block`, which the memory plan saw: its
//! expanded and depthwise maps have no slot) at its projection's position: one call of
//! the runtime's `nnefc_inverted_residual` ([`Step::Block`]) where the target has the
//! runtime's window kernels, else the three convs one after another as usual, with the
//! two maps in this node's scratch.
//!
//! The call's geometry is decided here and shows in `nnefc dump --stage kernels`: the
//! output rows cut into [`PARTS`] parts and bands ([`band_rows`]), each worker's band
//! buffers in the GEMM scratch region (repeated per worker), and, for maps small enough
//! ([`SERIAL_WHOLE_BYTES`]), one band over the whole map when the call runs on one
//! thread, its buffers in this node's scratch. The expansion is a 1×1 conv (its matrix
//! packed for band-sized products) or a direct conv (its filter packed for
//! `nnefc_conv`, which the runtime runs over each band's rows).
//!
//! Not here: finding blocks, the runtime's band loop.

use super::Lowering;
use super::conv::{activation_of, bias_rows};
use super::linalg::{a_packing, pack_const};
use crate::back::CodegenError;
use crate::back::kernel::{Activation, BlockCall, Expansion, Pointwise, Step};
use crate::ir::infer::effective_window;
use crate::ir::{DType, Op, ValueId};
use crate::passes::block::Block;
use crate::passes::epilogue::{ChainActivation, chain};

/// Bytes of expanded rows a band may hold: a band of output rows is as tall as keeps its
/// expanded rows within this (about 40 % of a Zen 4 core's 1 MiB L2, which also holds
/// the depthwise rows, the matrices and the GEMM's packed panels).
const BAND_BYTES: usize = 400 << 10;

/// Parts the output rows are cut into before bands: one per worker of a two-core machine,
/// so that two workers get equal rows whatever the band height (more workers take
/// contiguous ranges of bands).
pub(crate) const PARTS: usize = 2;

/// Output rows per band for an expansion to `mid` channels of `w` columns read by a
/// depthwise window of `kh` rows (dilation `dh`, stride `sh`) into `oh` rows cut into
/// [`PARTS`] parts: a whole part when its expanded rows fit [`BAND_BYTES`], else the
/// tallest multiple of the depthwise kernel's row block (8 output rows at stride 1, 4 at
/// stride 2: `nnefc_dwconv`'s 3×3 bands) that fits, else the tallest band that fits.
/// mobilenet_v2's stages get bands of 4 rows (16→96→24 from 112², 378 KiB), 8 (56²),
/// 4 (56² → 28²) and whole parts from 28² on. One core (`band_bench`-style runs of the
/// runtime's kernels, Zen 4, warm caches), the 144-channel 56² stage layer by layer
/// against bands of 7 / 8 / 9 / 14 rows: 543–548 µs against 568 / 559 / 586 / 556:
/// a band that leaves the kernel's row block one row short or over costs 2–5 %.
pub(crate) fn band_rows(mid: usize, w: usize, oh: usize, [kh, sh, dh]: [usize; 3]) -> usize {
    let bytes = |b: usize| mid * ((b - 1) * sh + effective_window(kh, dh)) * w * 4;
    let part = oh.div_ceil(PARTS).max(1);
    if bytes(part) <= BAND_BYTES {
        return part;
    }
    let step = if sh == 1 { 8 } else { 4 };
    let fits = (1..part).rev().filter(|&b| bytes(b) <= BAND_BYTES);
    fits.clone()
        .find(|b| b % step == 0)
        .or_else(|| fits.clone().next())
        .unwrap_or(1)
}

/// Bytes of expanded map up to which a block run on one thread takes the whole map as
/// one band (its two maps in the node's scratch): such a map stays in L2 and L3 between
/// the layers, and bands only add their per-band costs (the GEMMs' calls, the expanded
/// rows two bands share moved up, the depthwise kernel's 8-row register bands cut
/// short). mobilenet_v2 on one thread (Zen 4, `nnefc bench --profile`, each block
/// against its three layers' sum): the 16→96→24 block from 112² (4.8 MB expanded) 6 %
/// faster in bands of 4 rows than layer by layer, the others 2–8 % slower in bands.
/// Not the 24→144→24 block on 56² (1.8 MB expanded), though: its two whole maps were
/// 3.6 MB of the workspace that every run writes, and the model's weights and maps are
/// more than the last-level cache keeps between runs (a scratch probe read a 5 MB array
/// back at 83 GB/s after 4 MB written elsewhere, at 23 after 16 MB): 2 MiB here → 1 MiB
/// took that block from 0.61 to 0.58 ms and mobilenet_v2 from 6.78 to 6.74 ms (`nnefc
/// bench -n 400`, eight interleaved rounds, each faster; workspace 6.05 → 3.75 MB).
const SERIAL_WHOLE_BYTES: usize = 1 << 20;

/// Taps from which `nnefc_dwconv` may take its lane kernel, whose bits differ from the
/// row kernels', for some band geometries and not others (`dwconv_lanes::takes`, 20
/// taps): such a block keeps its threaded bands on one thread too.
const LANE_TAPS: usize = 20;

/// The block `b`, at its projection's node (the current one).
pub(super) fn lower(lw: &mut Lowering<'_>, b: &Block) -> Result<(), CodegenError> {
    if lw.runtime_windows && !lw.direct_only {
        return call(lw, b);
    }
    // Layer by layer: each conv lowered at its own node index (which its chain and
    // lowering rules read), the two maps in the scratch of this node.
    let here = lw.node_idx();
    if let Some(e) = b.expanded {
        lw.in_scratch(e)?;
    }
    lw.in_scratch(b.dw_out)?;
    for ni in b.convs() {
        lw.set_node_idx(ni);
        let n = &lw.g.nodes[ni];
        lw.node(n)?;
    }
    lw.set_node_idx(here);
    Ok(())
}

/// A conv node's input, filter and bias values and their shapes.
fn operands(lw: &Lowering<'_>, ni: usize) -> Result<[(ValueId, Vec<usize>); 3], CodegenError> {
    let n = &lw.g.nodes[ni];
    let get = |k: usize| -> Result<(ValueId, Vec<usize>), CodegenError> {
        let v = *n
            .inputs
            .get(k)
            .ok_or_else(|| CodegenError::Internal(format!("conv node {ni} lacks operand {k}")))?;
        Ok((v, lw.shape(v)?))
    };
    Ok([get(0)?, get(1)?, get(2)?])
}

/// The activation ending the chain of the conv at `ni` (none without a chain).
fn chain_activation(lw: &Lowering<'_>, ni: usize) -> Activation {
    activation_of(chain(lw.g, &lw.users, ni).map_or(ChainActivation::None, |c| c.activation))
}

/// A 1×1 conv of `m` output channels from `k` as a [`Pointwise`], its matrix packed for
/// products of `n` columns.
fn pointwise(
    lw: &mut Lowering<'_>,
    ni: usize,
    [m, n, k]: [usize; 3],
) -> Result<Pointwise, CodegenError> {
    let [_, (f, _), (bias, _)] = operands(lw, ni)?;
    let g = lw.g;
    let data = g
        .const_of(f)
        .and_then(|t| t.as_f32())
        .ok_or_else(|| CodegenError::Internal(format!("conv node {ni}: filter not constant")))?;
    let packing = a_packing(lw, m, n, k);
    let packed = pack_const(packing, m, k, data, k, 1)?;
    let bytes = packed.iter().flat_map(|x| x.to_le_bytes()).collect();
    let matrix = lw.const_buf(bytes, DType::F32, packed.len());
    Ok(Pointwise {
        matrix,
        packing,
        bias: bias_rows(lw, bias, m)?,
        activation: chain_activation(lw, ni),
    })
}

/// The first two entries of a conv attribute (stride, dilation), 1 where absent.
fn two(v: &[usize]) -> [usize; 2] {
    [
        v.first().copied().unwrap_or(1),
        v.get(1).copied().unwrap_or(1),
    ]
}

/// The block's direct-conv expansion at node `e` (`passes::block`: square window, equal
/// strides, no dilation), producing `mid` channels.
fn direct(lw: &mut Lowering<'_>, e: usize, mid: usize) -> Result<Expansion, CodegenError> {
    let [(_, xs), (f, fs), (bias, _)] = operands(lw, e)?;
    let Op::Conv(a) = &lw.g.nodes[e].op else {
        return Err(CodegenError::Internal(format!("node {e} is not a conv")));
    };
    let pad = crate::ir::infer::resolved_conv_padding(a, &xs, &fs);
    let (k, s) = (fs[2], two(&a.stride)[0]);
    let data =
        lw.g.const_of(f)
            .and_then(|t| t.as_f32())
            .ok_or_else(|| CodegenError::Internal(format!("conv node {e}: filter not constant")))?;
    let packed = nnefc_runtime::pack_conv_filter(mid, xs[1], k, k, data)
        .map_err(|err| CodegenError::Internal(format!("packing the filter: {err:?}")))?;
    let bytes = packed.iter().flat_map(|x| x.to_le_bytes()).collect();
    let filter = lw.const_buf(bytes, DType::F32, packed.len());
    Ok(Expansion::Direct {
        filter,
        bias: bias_rows(lw, bias, mid)?,
        activation: chain_activation(lw, e),
        window: [k, s, pad[0].0, pad[1].0],
    })
}

/// The block as one runtime call.
fn call(lw: &mut Lowering<'_>, b: &Block) -> Result<(), CodegenError> {
    let [(x, xs), _, _] = operands(lw, b.expand.unwrap_or(b.depthwise))?;
    let [(_, ms), (filter, fs), (dw_bias, _)] = operands(lw, b.depthwise)?;
    let Op::Conv(a) = &lw.g.nodes[b.depthwise].op else {
        return Err(CodegenError::Internal(
            "block without a depthwise conv".into(),
        ));
    };
    // The expanded map `ms` is the input's extent unless the expansion is a direct conv.
    let (n, cin, h, w, mid) = (xs[0], xs[1], ms[2], ms[3], fs[0]);
    let (kh, kw) = (fs[2], fs[3]);
    let ([sh, sw], [dh, dw]) = (two(&a.stride), two(&a.dilation));
    let mid_shape = [n, mid, h, w];
    let pad = crate::ir::infer::resolved_conv_padding(a, &mid_shape, &fs);
    let (pt, pl) = (pad[0].0, pad[1].0);
    let ys = lw.shape(b.dw_out)?;
    let (oh, ow) = (ys[2], ys[3]);
    let out_chain = chain(lw.g, &lw.users, b.project);
    let y = out_chain
        .as_ref()
        .map_or_else(
            || lw.g.nodes[b.project].outputs.first().copied(),
            |c| Some(c.out),
        )
        .ok_or_else(|| CodegenError::Internal("projection without an output".into()))?;
    let cout = lw.shape(y)?[1];
    let band = band_rows(mid, w, oh, [kh, sh, dh]);
    let rows_in = ((band - 1) * sh + effective_window(kh, dh)).min(h);
    let expand = match b.expand {
        Some(e) if b.direct(lw.g) => Some(direct(lw, e, mid)?),
        Some(e) => Some(Expansion::Pointwise(pointwise(
            lw,
            e,
            [mid, rows_in * w, cin],
        )?)),
        None => None,
    };
    let project = pointwise(lw, b.project, [cout, band * ow, mid])?;
    let dw_bias = bias_rows(lw, dw_bias, mid)?;
    let filter = lw.buf(filter)?;
    let xb = lw.buf(x)?;
    let yb = lw.buf(y)?;
    let residual = match out_chain.as_ref().and_then(|c| c.residual) {
        Some(r) => Some(lw.buf(r)?),
        None => None,
    };
    if let Some(c) = &out_chain {
        lw.set_skip(&c.nodes, true);
    }
    let dims = [
        n, cin, mid, cout, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, band, PARTS,
    ];
    let mut args = runtime_args(&dims);
    if expand.is_some() {
        // Only whether there is an expansion matters to the scratch's size.
        args.expand = core::ptr::NonNull::dangling().as_ptr();
    }
    let scratch = lw.gemm_scratch(nnefc_runtime::block_scratch_bytes(&args));
    // Without an expansion the maps are no larger than the layers' own; the bands are
    // what such a block gains on one thread (nothing to keep in L2 but the depthwise rows).
    // A direct expansion keeps its bands too: its map written whole is what it avoids.
    let whole = matches!(expand, Some(Expansion::Pointwise(_)))
        && kh * kw < LANE_TAPS
        && mid * h * w * 4 <= SERIAL_WHOLE_BYTES;
    let serial = whole.then(|| {
        args.serial_band = oh;
        let bytes = nnefc_runtime::block_serial_scratch_bytes(&args);
        (oh, lw.scratch_offset(bytes))
    });
    lw.prog.steps.push(Step::Block(BlockCall {
        dims,
        x: xb,
        input: [xs[2], xs[3]],
        expand,
        filter,
        dw_bias,
        dw_activation: chain_activation(lw, b.depthwise),
        project,
        residual,
        y: yb,
        scratch,
        serial,
    }));
    Ok(())
}

/// The runtime's argument struct with `dims` and null pointers (what
/// `nnefc_runtime::block_scratch_bytes` reads).
fn runtime_args(d: &[usize; 18]) -> nnefc_runtime::BlockArgs {
    let null = core::ptr::null();
    nnefc_runtime::BlockArgs {
        n: d[0],
        cin: d[1],
        mid: d[2],
        cout: d[3],
        h: d[4],
        w: d[5],
        oh: d[6],
        ow: d[7],
        kh: d[8],
        kw: d[9],
        sh: d[10],
        sw: d[11],
        dh: d[12],
        dw: d[13],
        pt: d[14],
        pl: d[15],
        band: d[16],
        parts: d[17],
        x: null,
        expand: null,
        expand_packing: 1,
        expand_bias: null,
        expand_act: 0,
        filter: null,
        dw_bias: null,
        dw_act: 0,
        project: null,
        project_packing: 1,
        project_bias: null,
        res: null,
        y: core::ptr::null_mut(),
        act: 0,
        scratch: core::ptr::null_mut(),
        scratch_stride: 0,
        serial_band: 0,
        serial_scratch: core::ptr::null_mut(),
        xh: d[4],
        xw: d[5],
        ek: 1,
        es: 1,
        ept: 0,
        epl: 0,
        bounds: [0.0; 6],
    }
}
