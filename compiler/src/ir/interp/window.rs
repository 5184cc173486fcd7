//! Sliding-window ops (spec §3.5, §5): `conv`, `deconv`, `box`, `debox`, `argmax_pool`,
//! `sample`, `desample` and the native `max_pool`.
//!
//! One geometry serves them all. A forward op reads, for output position `y` and tap `t`
//! of each windowed dim, input coordinate `x = y·s + t·d − p` (§5.2); the border mode
//! (§5.6) maps an outside `x` into the input (replicate, reflect, reflect-even) or marks
//! the tap as outside (constant: reads 0 and counts; ignore: skipped). A transposed op is
//! computed as the exact adjoint of its forward op: each of its input values is scattered
//! to the forward op's input positions through the same mapping, so for
//! replicate/reflect borders the contributions of mirrored taps land on the mirrored
//! positions. Conv and deconv go through an im2col-style gather so their inner loop is a
//! contiguous f64 dot product.
//!
//! Output extents and resolved (automatic) padding come from `ir::infer`, so the oracle
//! and the compiler cannot disagree on geometry. Not here: shape rules, and anything
//! layout- or speed-related.

use super::linalg::dot;
use super::{Result, f32_data, i32_data, invalid, strides};
use crate::ir::infer::{
    conv_groups, deconv_groups, resolved_conv_padding, resolved_deconv_padding,
    resolved_transposed_window_padding, resolved_window_padding,
};
use crate::ir::op::{Border, ConvAttrs, WindowAttrs};
use crate::ir::tensor::Tensor;

/// Geometry of a forward window op over some dims: extents read (`input`), extents
/// produced (`output`), and per dim a table `map[y·k + t]` of the (border-mapped) input
/// coordinate each tap reads, `None` for an outside tap under constant/ignore borders.
struct Geometry {
    input: Vec<usize>,
    output: Vec<usize>,
    size: Vec<usize>,
    maps: Vec<Vec<Option<usize>>>,
    in_strides: Vec<usize>,
}

impl Geometry {
    /// `input`/`output` are the forward op's extents; `pad` the front/back padding.
    #[allow(clippy::too_many_arguments)]
    fn new(
        op: &'static str,
        input: Vec<usize>,
        output: Vec<usize>,
        size: Vec<usize>,
        stride: &[usize],
        dilation: &[usize],
        pad: &[(usize, usize)],
        border: Border,
    ) -> Result<Geometry> {
        let rank = input.len();
        let lengths = [
            output.len(),
            size.len(),
            stride.len(),
            dilation.len(),
            pad.len(),
        ];
        if lengths.iter().any(|&l| l != rank) {
            return Err(invalid(
                op,
                format!("window attributes {lengths:?} do not all cover the {rank} windowed dims"),
            ));
        }
        let mut maps = Vec::with_capacity(rank);
        for d in 0..rank {
            let (n, k) = (input[d], size[d]);
            let mut map = Vec::with_capacity(output[d] * k);
            for y in 0..output[d] {
                for t in 0..k {
                    let x = (y * stride[d] + t * dilation[d]) as i64 - pad[d].0 as i64;
                    map.push(border_map(op, x, n, border)?);
                }
            }
            maps.push(map);
        }
        let in_strides = strides(&input);
        Ok(Geometry {
            input,
            output,
            size,
            maps,
            in_strides,
        })
    }

    fn window_volume(&self) -> usize {
        self.size.iter().product()
    }

    /// Fills `taps` with the input offset read by each tap of the window at output
    /// position `pos`, taps in row-major order (so a tap's index is its offset inside
    /// the window, as `argmax_pool` reports it). `scratch` avoids an allocation.
    fn taps(&self, pos: &[usize], taps: &mut Vec<Option<usize>>, scratch: &mut Vec<Option<usize>>) {
        taps.clear();
        taps.push(Some(0));
        for (d, &y) in pos.iter().enumerate() {
            let k = self.size[d];
            let row = &self.maps[d][y * k..(y + 1) * k];
            std::mem::swap(taps, scratch);
            taps.clear();
            for &prefix in scratch.iter() {
                for &x in row {
                    taps.push(match (prefix, x) {
                        (Some(p), Some(x)) => Some(p + x * self.in_strides[d]),
                        _ => None,
                    });
                }
            }
        }
    }
}

/// Where tap coordinate `x` reads in an extent of `n` (§5.6); the rule is
/// `ir::infer::border_source`, shared with the back end.
pub(super) fn border_map(
    op: &'static str,
    x: i64,
    n: usize,
    border: Border,
) -> Result<Option<usize>> {
    crate::ir::infer::border_source(x, n, border).map_err(|e| invalid(op, e.message))
}

/// Advances a row-major multi-index; false once it wraps around.
pub(super) fn next_index(index: &mut [usize], shape: &[usize]) -> bool {
    for d in (0..index.len()).rev() {
        index[d] += 1;
        if index[d] < shape[d] {
            return true;
        }
        index[d] = 0;
    }
    false
}

/// A per-dim attribute list: empty means all ones.
fn ones_or(list: &[usize], rank: usize) -> Vec<usize> {
    if list.is_empty() {
        vec![1; rank]
    } else {
        list.to_vec()
    }
}

/// The geometry of a forward window op (`box`, `argmax_pool`, `sample`, `max_pool`)
/// from `input` extents to `output` extents (as `infer` computed them).
fn window_forward(
    op: &'static str,
    w: &WindowAttrs,
    input: &[usize],
    output: &[usize],
) -> Result<Geometry> {
    let rank = input.len();
    let pad = resolved_window_padding(w, input);
    let (stride, dilation) = (ones_or(&w.stride, rank), ones_or(&w.dilation, rank));
    Geometry::new(
        op,
        input.to_vec(),
        output.to_vec(),
        w.size.clone(),
        &stride,
        &dilation,
        &pad,
        w.border,
    )
}

/// The geometry of the forward op a transposed window op (`debox`, `desample`) mapping
/// `input` to `output` is the adjoint of: it reads `output` and produces `input`.
fn window_transposed(
    op: &'static str,
    w: &WindowAttrs,
    input: &[usize],
    output: &[usize],
) -> Result<Geometry> {
    let rank = input.len();
    let pad = resolved_transposed_window_padding(w, input, output);
    let (stride, dilation) = (ones_or(&w.stride, rank), ones_or(&w.dilation, rank));
    Geometry::new(
        op,
        output.to_vec(),
        input.to_vec(),
        w.size.clone(),
        &stride,
        &dilation,
        &pad,
        w.border,
    )
}

/// Runs `f(output offset, taps)` for every output position of `g`, in row-major order.
fn for_each_window(
    g: &Geometry,
    mut f: impl FnMut(usize, &[Option<usize>]) -> Result<()>,
) -> Result<()> {
    let count: usize = g.output.iter().product();
    if count == 0 {
        return Ok(());
    }
    let mut pos = vec![0; g.output.len()];
    let mut taps = Vec::with_capacity(g.window_volume());
    let mut scratch = Vec::with_capacity(g.window_volume());
    for o in 0..count {
        g.taps(&pos, &mut taps, &mut scratch);
        f(o, &taps)?;
        next_index(&mut pos, &g.output);
    }
    Ok(())
}

/// `box`: window sums, divided by the window volume (or, with `ignore`, by the number of
/// in-bounds taps) when `normalize`.
pub(super) fn box_filter(
    w: &WindowAttrs,
    normalize: bool,
    input: &Tensor,
    out_shape: &[usize],
) -> Result<Tensor> {
    let op = "box";
    let x = f32_data(op, "input", input)?;
    let g = window_forward(op, w, &input.shape, out_shape)?;
    let volume = g.window_volume() as f64;
    let mut out = vec![0f32; g.output.iter().product()];
    for_each_window(&g, |o, taps| {
        let (mut sum, mut count) = (0f64, 0usize);
        for off in taps.iter().flatten() {
            sum += x[*off] as f64;
            count += 1;
        }
        out[o] = if !normalize {
            sum as f32
        } else if w.border == Border::Ignore {
            if count == 0 {
                0.0
            } else {
                (sum / count as f64) as f32
            }
        } else {
            (sum / volume) as f32
        };
        Ok(())
    })?;
    Ok(Tensor::f32(g.output.clone(), out))
}

/// `debox`: the adjoint of `box` — each input value is spread over its window (divided as
/// `box` divides the window's sum when `normalize`).
pub(super) fn debox(
    w: &WindowAttrs,
    normalize: bool,
    input: &Tensor,
    out_shape: &[usize],
) -> Result<Tensor> {
    let op = "debox";
    let x = f32_data(op, "input", input)?;
    let g = window_transposed(op, w, &input.shape, out_shape)?;
    let volume = g.window_volume() as f64;
    let mut acc = vec![0f64; g.input.iter().product()];
    for_each_window(&g, |o, taps| {
        let divisor = if !normalize {
            1.0
        } else if w.border == Border::Ignore {
            taps.iter().flatten().count().max(1) as f64
        } else {
            volume
        };
        let v = x[o] as f64 / divisor;
        for off in taps.iter().flatten() {
            acc[*off] += v;
        }
        Ok(())
    })?;
    Ok(Tensor::f32(
        g.input.clone(),
        acc.into_iter().map(|v| v as f32).collect(),
    ))
}

/// `max_pool`: window maximum ([`super::elementwise::maximum`]: a NaN tap gives NaN);
/// outside taps read 0 under `constant` and are skipped under `ignore` (an all-outside
/// window gives −∞).
pub(super) fn max_pool(w: &WindowAttrs, input: &Tensor, out_shape: &[usize]) -> Result<Tensor> {
    let op = "max_pool";
    let x = f32_data(op, "input", input)?;
    let g = window_forward(op, w, &input.shape, out_shape)?;
    let mut out = vec![0f32; g.output.iter().product()];
    for_each_window(&g, |o, taps| {
        let mut best = f32::NEG_INFINITY;
        for tap in taps {
            let v = match tap {
                Some(off) => x[*off],
                None if w.border == Border::Ignore => continue,
                None => 0.0,
            };
            best = super::elementwise::maximum(best, v);
        }
        out[o] = best;
        Ok(())
    })?;
    Ok(Tensor::f32(g.output.clone(), out))
}

/// `argmax_pool`: the row-major offset inside each window of its first maximum, or of its
/// first NaN (as `argmax_reduce`); outside taps are treated as in `max_pool` (an
/// all-outside `ignore` window gives 0).
pub(super) fn argmax_pool(w: &WindowAttrs, input: &Tensor, out_shape: &[usize]) -> Result<Tensor> {
    let op = "argmax_pool";
    let x = f32_data(op, "input", input)?;
    let g = window_forward(op, w, &input.shape, out_shape)?;
    let mut out = vec![0i32; g.output.iter().product()];
    for_each_window(&g, |o, taps| {
        let mut best: Option<(usize, f32)> = None;
        for (t, tap) in taps.iter().enumerate() {
            let v = match tap {
                Some(off) => x[*off],
                None if w.border == Border::Ignore => continue,
                None => 0.0,
            };
            if best.is_none_or(|(_, b)| !b.is_nan() && (v > b || v.is_nan())) {
                best = Some((t, v));
            }
        }
        out[o] = best.map_or(0, |(t, _)| t as i32);
        Ok(())
    })?;
    Ok(Tensor::i32(g.output.clone(), out))
}

/// The tap an index designates, with a clear error when it is outside the window.
fn tap_of(op: &'static str, taps: &[Option<usize>], index: i32) -> Result<Option<usize>> {
    usize::try_from(index)
        .ok()
        .and_then(|i| taps.get(i).copied())
        .ok_or_else(|| {
            invalid(
                op,
                format!("index {index} is outside a window of {} taps", taps.len()),
            )
        })
}

/// `sample`: per window, the input element at the window offset `index` designates (an
/// outside tap reads 0).
pub(super) fn sample(
    w: &WindowAttrs,
    input: &Tensor,
    index: &Tensor,
    out_shape: &[usize],
) -> Result<Tensor> {
    let op = "sample";
    let x = f32_data(op, "input", input)?;
    let idx = i32_data(op, "index", index)?;
    let g = window_forward(op, w, &input.shape, out_shape)?;
    if index.shape != g.output {
        return Err(invalid(
            op,
            format!(
                "index shape {:?} differs from output shape {:?}",
                index.shape, g.output
            ),
        ));
    }
    let mut out = vec![0f32; g.output.iter().product()];
    for_each_window(&g, |o, taps| {
        out[o] = tap_of(op, taps, idx[o])?.map_or(0.0, |off| x[off]);
        Ok(())
    })?;
    Ok(Tensor::f32(g.output.clone(), out))
}

/// `desample`: the adjoint of `sample` — each input value is added at the window position
/// its index designates; outside taps drop their value.
pub(super) fn desample(
    w: &WindowAttrs,
    input: &Tensor,
    index: &Tensor,
    out_shape: &[usize],
) -> Result<Tensor> {
    let op = "desample";
    let x = f32_data(op, "input", input)?;
    let idx = i32_data(op, "index", index)?;
    if index.shape != input.shape {
        return Err(invalid(
            op,
            format!(
                "index shape {:?} differs from input shape {:?}",
                index.shape, input.shape
            ),
        ));
    }
    let g = window_transposed(op, w, &input.shape, out_shape)?;
    let mut acc = vec![0f64; g.input.iter().product()];
    for_each_window(&g, |o, taps| {
        if let Some(off) = tap_of(op, taps, idx[o])? {
            acc[off] += x[o] as f64;
        }
        Ok(())
    })?;
    Ok(Tensor::f32(
        g.input.clone(),
        acc.into_iter().map(|v| v as f32).collect(),
    ))
}

/// Per-output-channel bias: a single value (rank 0 or all extents 1) or `[1, C]`.
fn bias_values(op: &'static str, bias: &Tensor, channels: usize) -> Result<Vec<f64>> {
    let b = f32_data(op, "bias", bias)?;
    if b.len() == 1 {
        return Ok(vec![b[0] as f64; channels]);
    }
    if bias.shape == [1, channels] {
        return Ok(b.iter().map(|&v| v as f64).collect());
    }
    Err(invalid(
        op,
        format!(
            "bias of shape {:?} is neither a single value nor [1, {channels}]",
            bias.shape
        ),
    ))
}

/// input `[N, C, s…]` and filter of the same rank, as `infer` guarantees.
fn conv_operands<'a>(
    op: &'static str,
    input: &'a Tensor,
    filter: &'a Tensor,
    out: &[usize],
) -> Result<(&'a [f32], &'a [f32])> {
    let rank = input.shape.len();
    if rank < 2 || filter.shape.len() != rank || out.len() != rank {
        return Err(invalid(
            op,
            format!(
                "input {:?}, filter {:?} and result {out:?} differ in rank",
                input.shape, filter.shape
            ),
        ));
    }
    Ok((
        f32_data(op, "input", input)?,
        f32_data(op, "filter", filter)?,
    ))
}

/// `conv`: grouped N-d cross-correlation plus per-channel bias. input `[N, C, s…]`,
/// filter `[Cout, C/G, k…]`; `groups == 0` is depthwise (G = C).
pub(super) fn conv(
    a: &ConvAttrs,
    input: &Tensor,
    filter: &Tensor,
    bias: &Tensor,
    out_shape: &[usize],
) -> Result<Tensor> {
    let op = "conv";
    let (x, f) = conv_operands(op, input, filter, out_shape)?;
    let rank = input.shape.len();
    let (n, c) = (input.shape[0], input.shape[1]);
    let cout = filter.shape[0];
    let groups = conv_groups(a, c);
    if groups == 0
        || !c.is_multiple_of(groups)
        || !cout.is_multiple_of(groups)
        || filter.shape[1] * groups != c
    {
        return Err(invalid(
            op,
            format!(
                "{groups} groups do not fit input {:?} and filter {:?}",
                input.shape, filter.shape
            ),
        ));
    }
    let b = bias_values(op, bias, cout)?;
    let pad = resolved_conv_padding(a, &input.shape, &filter.shape);
    let (stride, dilation) = (ones_or(&a.stride, rank - 2), ones_or(&a.dilation, rank - 2));
    let g = Geometry::new(
        op,
        input.shape[2..].to_vec(),
        out_shape[2..].to_vec(),
        filter.shape[2..].to_vec(),
        &stride,
        &dilation,
        &pad,
        a.border,
    )?;

    let (cg, og) = (c / groups, cout / groups);
    let in_plane: usize = g.input.iter().product();
    let positions: usize = g.output.iter().product();
    let taps_n = g.window_volume();
    let k = cg * taps_n;
    let mut out = vec![0f32; n * cout * positions];
    // col[p·k + ci·taps + t]: the value tap t of input channel ci reads for position p.
    let mut col = vec![0f32; positions * k];
    let mut tap_table = Vec::with_capacity(positions * taps_n);
    for_each_window(&g, |_, taps| {
        tap_table.extend_from_slice(taps);
        Ok(())
    })?;
    for ni in 0..n {
        for gi in 0..groups {
            for p in 0..positions {
                let taps = &tap_table[p * taps_n..(p + 1) * taps_n];
                for ci in 0..cg {
                    let base = (ni * c + gi * cg + ci) * in_plane;
                    let row = &mut col[p * k + ci * taps_n..p * k + (ci + 1) * taps_n];
                    for (slot, tap) in row.iter_mut().zip(taps) {
                        *slot = tap.map_or(0.0, |off| x[base + off]);
                    }
                }
            }
            for oi in 0..og {
                let oc = gi * og + oi;
                let weights = &f[oc * k..(oc + 1) * k];
                let dst = &mut out[(ni * cout + oc) * positions..(ni * cout + oc + 1) * positions];
                for (p, d) in dst.iter_mut().enumerate() {
                    *d = (b[oc] + dot(weights, &col[p * k..(p + 1) * k])) as f32;
                }
            }
        }
    }
    let mut shape = vec![n, cout];
    shape.extend_from_slice(&g.output);
    Ok(Tensor::f32(shape, out))
}

/// `deconv`: the adjoint of `conv` with respect to its input, plus per-channel bias.
/// input `[N, Cin, s…]`, filter `[Cin, Cout/G, k…]`; `groups == 0` is depthwise
/// (G = `output_shape[1]` if given, else Cin). The kernel scatters through the border
/// mapping, so it is the exact adjoint for every border mode, though `infer` admits only
/// `constant` and `ignore` for transposed ops.
pub(super) fn deconv(
    a: &ConvAttrs,
    input: &Tensor,
    filter: &Tensor,
    bias: &Tensor,
    out_shape: &[usize],
) -> Result<Tensor> {
    let op = "deconv";
    let (x, f) = conv_operands(op, input, filter, out_shape)?;
    let rank = input.shape.len();
    let (n, cin) = (input.shape[0], input.shape[1]);
    let groups = deconv_groups(a, cin);
    let cout = filter.shape[1] * groups;
    if groups == 0
        || filter.shape[0] != cin
        || !cin.is_multiple_of(groups)
        || out_shape[..2] != [n, cout]
    {
        return Err(invalid(
            op,
            format!(
                "{groups} groups do not fit input {:?}, filter {:?} and result {out_shape:?}",
                input.shape, filter.shape
            ),
        ));
    }
    let b = bias_values(op, bias, cout)?;
    let pad = resolved_deconv_padding(a, &input.shape, &filter.shape, out_shape);
    let (stride, dilation) = (ones_or(&a.stride, rank - 2), ones_or(&a.dilation, rank - 2));
    let g = Geometry::new(
        op,
        out_shape[2..].to_vec(),
        input.shape[2..].to_vec(),
        filter.shape[2..].to_vec(),
        &stride,
        &dilation,
        &pad,
        a.border,
    )?;

    let (cg, og) = (cin / groups, cout / groups);
    let in_plane: usize = g.output.iter().product();
    let out_plane: usize = g.input.iter().product();
    let taps_n = g.window_volume();
    let k = og * taps_n;
    let mut tap_table = Vec::with_capacity(in_plane * taps_n);
    for_each_window(&g, |_, taps| {
        tap_table.extend_from_slice(taps);
        Ok(())
    })?;
    let mut acc = vec![0f64; n * cout * out_plane];
    // wt[(j·taps + t)·cg + ci] = filter[g·cg + ci, j, t]; xt[p·cg + ci] = input[n, g·cg + ci, p]:
    // both contiguous along the contracted input channel.
    let mut wt = vec![0f32; k * cg];
    let mut xt = vec![0f32; in_plane * cg];
    for gi in 0..groups {
        for ci in 0..cg {
            for jt in 0..k {
                wt[jt * cg + ci] = f[(gi * cg + ci) * k + jt];
            }
        }
        for ni in 0..n {
            for ci in 0..cg {
                let base = (ni * cin + gi * cg + ci) * in_plane;
                for p in 0..in_plane {
                    xt[p * cg + ci] = x[base + p];
                }
            }
            for p in 0..in_plane {
                let taps = &tap_table[p * taps_n..(p + 1) * taps_n];
                let xs = &xt[p * cg..(p + 1) * cg];
                for j in 0..og {
                    let dst = (ni * cout + gi * og + j) * out_plane;
                    for (t, tap) in taps.iter().enumerate() {
                        if let Some(off) = tap {
                            let jt = j * taps_n + t;
                            acc[dst + off] += dot(&wt[jt * cg..(jt + 1) * cg], xs);
                        }
                    }
                }
            }
        }
    }
    let out = acc
        .chunks(out_plane.max(1))
        .enumerate()
        .flat_map(|(plane, vals)| {
            let bias = b[plane % cout.max(1)];
            vals.iter().map(move |&v| (v + bias) as f32)
        })
        .collect();
    let mut shape = vec![n, cout];
    shape.extend_from_slice(&g.input);
    Ok(Tensor::f32(shape, out))
}
