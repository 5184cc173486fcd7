//! Resampling ops: `multilinear_upsample` (spec §3.6) and the region-of-interest ops
//! `avg_roi_pool`, `max_roi_pool`, `roi_resample` (§3.9).
//!
//! Interpolation is written from sample coordinates, not from the equivalent deconv
//! kernels: output `j` of a dim with input extent `n` and factor `f` samples input
//! coordinate (in pixel-centre units) `(j + ½)/f − ½` (symmetric), `j/f` (asymmetric) or
//! `j·(n−1)/(n·f−1)` (aligned), linearly between its two neighbours. A neighbour outside
//! the input is read through the border (`replicate` clamps, `constant` reads 0; the
//! reflect modes mirror). For f = 2 this reproduces the reference kernels
//! `[¼, ¾, ¾, ¼]` (symmetric) and `[½, 1, ½]` (asymmetric).
//!
//! ROI convention (the spec leaves it open; this is ours, documented here and in the
//! report): `rois` is `[R, 2·S]` for S spatial dims, each row
//! `(begin_0, …, begin_{S−1}, end_0, …, end_{S−1})` in input pixel units, dims in tensor
//! order (so `(y1, x1, y2, x2)` for 2-d), the region being the half-open box
//! `[begin, end)`. `batch_index[r]` selects the batch item. Pools split the region into
//! `output_size` equal bins and cover each bin with the pixels `floor(bin begin) ..
//! ceil(bin end)` clipped to the input (an empty bin gives 0). `roi_resample` samples the
//! region like `multilinear_upsample` samples the whole input (a region of `[0, n)`
//! resampled to `n·f` equals the upsample), with replicate borders.

use super::window::{border_map, next_index};
use super::{InterpError, Result, f32_data, i32_data, invalid, strides};
use crate::ir::op::{Border, ResampleMethod, RoiPoolOp};
use crate::ir::tensor::Tensor;

/// Input coordinate (pixel-centre units) that output `j` of `out` samples from a region
/// `[begin, begin + len)` of the input.
fn sample_coordinate(method: ResampleMethod, j: usize, out: usize, begin: f64, len: f64) -> f64 {
    let j = j as f64;
    let out = out as f64;
    match method {
        ResampleMethod::Symmetric => begin + (j + 0.5) * len / out - 0.5,
        ResampleMethod::Asymmetric => begin + j * len / out,
        ResampleMethod::Aligned => {
            if out > 1.0 {
                begin + j * (len - 1.0) / (out - 1.0)
            } else {
                begin
            }
        }
    }
}

/// The two (input index, weight) taps of linear interpolation at `c` in an extent of
/// `n`; an index is `None` when the border reads 0 there.
fn linear_taps(
    op: &'static str,
    c: f64,
    n: usize,
    border: Border,
) -> Result<[(Option<usize>, f64); 2]> {
    let lo = c.floor();
    let frac = c - lo;
    let lo = lo as i64;
    Ok([
        (border_map(op, lo, n, border)?, 1.0 - frac),
        (border_map(op, lo + 1, n, border)?, frac),
    ])
}

/// Applies per-output-position taps along `axis` of an f64 buffer of `shape`.
fn apply_axis(
    data: &[f64],
    shape: &[usize],
    axis: usize,
    taps: &[[(Option<usize>, f64); 2]],
) -> (Vec<f64>, Vec<usize>) {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let n = shape[axis];
    let mut out = Vec::with_capacity(outer * taps.len() * inner);
    for o in 0..outer {
        for pair in taps {
            for k in 0..inner {
                let mut v = 0.0;
                for &(i, w) in pair {
                    if let Some(i) = i {
                        v += w * data[(o * n + i) * inner + k];
                    }
                }
                out.push(v);
            }
        }
    }
    let mut new_shape = shape.to_vec();
    new_shape[axis] = taps.len();
    (out, new_shape)
}

/// `multilinear_upsample`: input `[N, C, s…]`, output `[N, C, s·factor…]`.
pub(super) fn multilinear_upsample(
    factor: &[usize],
    method: ResampleMethod,
    border: Border,
    input: &Tensor,
) -> Result<Tensor> {
    let op = "multilinear_upsample";
    let x = f32_data(op, "input", input)?;
    let rank = input.shape.len();
    if rank < 2 || factor.len() != rank - 2 || factor.contains(&0) {
        return Err(invalid(
            op,
            format!(
                "factor {factor:?} must be ≥ 1 for each spatial dim of {:?}",
                input.shape
            ),
        ));
    }
    if border == Border::Ignore {
        return Err(InterpError::Unsupported {
            op,
            message: "border 'ignore'".into(),
        });
    }
    let mut data: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let mut shape = input.shape.clone();
    for (d, &f) in factor.iter().enumerate() {
        let axis = d + 2;
        let n = shape[axis];
        let out = n * f;
        let taps = (0..out)
            .map(|j| {
                linear_taps(
                    op,
                    sample_coordinate(method, j, out, 0.0, n as f64),
                    n,
                    border,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        (data, shape) = apply_axis(&data, &shape, axis, &taps);
    }
    Ok(Tensor::f32(
        shape,
        data.into_iter().map(|v| v as f32).collect(),
    ))
}

/// One region: batch item and per-dim `(begin, end)`.
struct Roi {
    batch: usize,
    bounds: Vec<(f64, f64)>,
}

fn rois_of(
    op: &'static str,
    input: &Tensor,
    rois: &Tensor,
    batch_index: &Tensor,
    output_size: &[usize],
) -> Result<Vec<Roi>> {
    let r = f32_data(op, "rois", rois)?;
    let b = i32_data(op, "batch_index", batch_index)?;
    let rank = input.shape.len();
    let spatial = rank.saturating_sub(2);
    if rank < 3 || output_size.len() != spatial || output_size.contains(&0) {
        return Err(invalid(
            op,
            format!(
                "output_size {output_size:?} must be ≥ 1 for each spatial dim of {:?}",
                input.shape
            ),
        ));
    }
    let count = rois.shape.first().copied().unwrap_or(0);
    if rois.shape != [count, 2 * spatial] || batch_index.shape != [count] {
        return Err(invalid(
            op,
            format!(
                "rois {:?} must be [R, {}] and batch_index {:?} [R]",
                rois.shape,
                2 * spatial,
                batch_index.shape
            ),
        ));
    }
    (0..count)
        .map(|i| {
            let row = &r[i * 2 * spatial..(i + 1) * 2 * spatial];
            let bounds: Vec<(f64, f64)> = (0..spatial)
                .map(|d| (row[d] as f64, row[spatial + d] as f64))
                .collect();
            if bounds
                .iter()
                .any(|&(lo, hi)| lo.partial_cmp(&hi).is_none_or(|o| o.is_gt()))
            {
                return Err(invalid(
                    op,
                    format!("roi {i} ends before it begins: {row:?}"),
                ));
            }
            let batch = usize::try_from(b[i])
                .ok()
                .filter(|&n| n < input.shape[0])
                .ok_or_else(|| {
                    invalid(
                        op,
                        format!("batch index {} outside [0, {})", b[i], input.shape[0]),
                    )
                })?;
            Ok(Roi { batch, bounds })
        })
        .collect()
}

/// `avg_roi_pool` / `max_roi_pool`: `[R, C, output_size…]`.
pub(super) fn roi_pool(
    kind: RoiPoolOp,
    output_size: &[usize],
    input: &Tensor,
    rois: &Tensor,
    batch_index: &Tensor,
) -> Result<Tensor> {
    let op = match kind {
        RoiPoolOp::Avg => "avg_roi_pool",
        RoiPoolOp::Max => "max_roi_pool",
    };
    let x = f32_data(op, "input", input)?;
    let regions = rois_of(op, input, rois, batch_index, output_size)?;
    let (c, spatial) = (input.shape[1], &input.shape[2..]);
    let plane: usize = spatial.iter().product();
    let st = strides(spatial);
    let bins: usize = output_size.iter().product();
    let mut out = Vec::with_capacity(regions.len() * c * bins);
    for roi in &regions {
        // Per bin, the pixel offsets it covers (shared by all channels).
        let mut covered: Vec<Vec<usize>> = Vec::with_capacity(bins);
        let mut bin = vec![0; output_size.len()];
        for _ in 0..bins {
            let mut ranges = Vec::with_capacity(spatial.len());
            for (d, &n) in spatial.iter().enumerate() {
                let (lo, hi) = roi.bounds[d];
                let step = (hi - lo) / output_size[d] as f64;
                let start = (lo + bin[d] as f64 * step).floor().max(0.0) as usize;
                let end = ((lo + (bin[d] + 1) as f64 * step).ceil().max(0.0) as usize).min(n);
                ranges.push((start.min(end), end));
            }
            let extents: Vec<usize> = ranges.iter().map(|(s, e)| e - s).collect();
            let volume: usize = extents.iter().product();
            let mut pixels = Vec::with_capacity(volume);
            let mut at = vec![0; extents.len()];
            for _ in 0..volume {
                pixels.push(
                    at.iter()
                        .zip(&ranges)
                        .zip(&st)
                        .map(|((i, (s, _)), stride)| (s + i) * stride)
                        .sum(),
                );
                next_index(&mut at, &extents);
            }
            covered.push(pixels);
            next_index(&mut bin, output_size);
        }
        for ch in 0..c {
            let base = (roi.batch * c + ch) * plane;
            for pixels in &covered {
                let v = if pixels.is_empty() {
                    0.0
                } else {
                    match kind {
                        RoiPoolOp::Avg => {
                            pixels.iter().map(|&p| x[base + p] as f64).sum::<f64>()
                                / pixels.len() as f64
                        }
                        // NaN-propagating, like `max_pool`.
                        RoiPoolOp::Max => pixels.iter().fold(f32::NEG_INFINITY, |m, &p| {
                            super::elementwise::maximum(m, x[base + p])
                        }) as f64,
                    }
                };
                out.push(v as f32);
            }
        }
    }
    let mut shape = vec![regions.len(), c];
    shape.extend_from_slice(output_size);
    Ok(Tensor::f32(shape, out))
}

/// `roi_resample`: each region multilinearly resampled to `output_size`.
pub(super) fn roi_resample(
    output_size: &[usize],
    method: ResampleMethod,
    input: &Tensor,
    rois: &Tensor,
    batch_index: &Tensor,
) -> Result<Tensor> {
    let op = "roi_resample";
    let x = f32_data(op, "input", input)?;
    let regions = rois_of(op, input, rois, batch_index, output_size)?;
    let (c, spatial) = (input.shape[1], input.shape[2..].to_vec());
    let plane: usize = spatial.iter().product();
    let mut out = Vec::new();
    for roi in &regions {
        // The batch item's [1, C, s…] slab, resampled one dim at a time.
        let start = roi.batch * c * plane;
        let mut data: Vec<f64> = x[start..start + c * plane]
            .iter()
            .map(|&v| v as f64)
            .collect();
        let mut shape = vec![1, c];
        shape.extend_from_slice(&spatial);
        for (d, &size) in output_size.iter().enumerate() {
            let (lo, hi) = roi.bounds[d];
            let taps = (0..size)
                .map(|j| {
                    linear_taps(
                        op,
                        sample_coordinate(method, j, size, lo, hi - lo),
                        spatial[d],
                        Border::Replicate,
                    )
                })
                .collect::<Result<Vec<_>>>()?;
            (data, shape) = apply_axis(&data, &shape, d + 2, &taps);
        }
        out.extend(data.into_iter().map(|v| v as f32));
    }
    let mut shape = vec![regions.len(), c];
    shape.extend_from_slice(output_size);
    Ok(Tensor::f32(shape, out))
}
