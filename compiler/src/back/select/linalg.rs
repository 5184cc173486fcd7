//! matmul and linear as calls to the runtime's GEMM (`nnefc_sgemm`, or
//! `nnefc_sgemm_packed_a` with A packed at compile time when it is a constant).
//!
//! - matmul(A, B): `C[b…, i, j] = Σ_k A[b…, i, k]·B[b…, k, j]` (operands transposed in
//!   place through their strides), batch dims broadcast (extent 1 repeats); one call per
//!   output batch entry. Operands must have equal rank ≥ 2.
//! - linear(x, W, bias): `y[i, j] = Σ_k x[i, k]·W[j, k] + bias[j]`; W is read as B with
//!   strides (1, Cin); a one-element bias is widened to a row of Cout. One row of x
//!   against constant weights, on targets that take the lane route, is computed as
//!   `yᵀ = W·xᵀ` with W in lane panels and the bias per row of the product.
//!
//! A constant A is packed in the runtime's 6-row panels, or in its 16-row lane panels when
//! the runtime's AVX-512 lane route is faster for the shape ([`a_packing`], which
//! convolutions use too).
//!
//! Only f32. Not here: the GEMM itself (runtime crate) or epilogue fusion of later ops.

use super::{Lowering, strides};
use crate::back::CodegenError;
use crate::back::kernel::{APacking, BufId, GemmCall, GemmEpi, Matrix, Step};
use crate::ir::{DType, ValueId};

type R = Result<(), CodegenError>;

fn f32_only(lw: &Lowering<'_>, vs: &[ValueId], what: &str) -> R {
    for &v in vs {
        if lw.dtype(v)? != DType::F32 {
            return Err(CodegenError::Unsupported(format!(
                "{what} on {}",
                lw.dtype(v)?
            )));
        }
    }
    Ok(())
}

/// The packed format for the constant A of a product `C[m×n] = A[m×k]·B[k×n]` run by the
/// runtime: lane panels ([`APacking::Lanes16`]) when the object calls the runtime on an
/// AVX-512 target (`Lowering::lane_gemm`) and the cost model below expects them to be
/// faster, else 6-row panels.
///
/// The model counts the multiply-adds each route issues, padding included:
/// - 6-row panels: `ceil(m/6)·6` rows × the lanes the 6-row AVX-512 tiles compute for `n`
///   columns ([`six_row_lanes`]: 49 columns cost 64) × k, plus `6·k·n` for packing B (which
///   small `m` amortizes badly);
/// - lane panels: `ceil(m/16)·16` rows × n × `(k + 10.5)`: no column padding, but a fixed
///   cost per 16×28 tile (old C, k-block sums, epilogue, register transposes) worth about
///   10.5 k steps.
///
/// The three constants (6, 10.5, and a 5 % margin, since dropped: see below) were a
/// least-squares fit of the log speed ratio over 29 shapes measured on the AMD Zen 4
/// machine (one core, a scratch benchmark of `nnefc_sgemm_packed_a` against
/// `nnefc_sgemm_parallel` with lane panels, operands in cache). Measured lane/6-row GFLOP/s (ratio; model's prediction):
/// 1280×49×320 110.9/82.1 (1.35; 1.27), 320×49×960 115.3/81.6 (1.41; 1.33),
/// 960×49×160 105.9/82.3 (1.29; 1.23), 160×49×960 115.3/80.6 (1.43; 1.35),
/// 512×49×256 110.1/84.2 (1.31; 1.28), 512×49×2304 114.8/83.0 (1.38; 1.32),
/// 96×196×576 113.9/100.8 (1.13; 1.10), 64×196×384 112.5/92.9 (1.21; 1.16),
/// 256×196×1152 115.1/103.5 (1.11; 1.08), 32×784×192 108.7/86.1 (1.26; 1.24),
/// 16×12544×32 76.8/67.4 (1.14; 1.13), 16×3025×64 91.8/72.3 (1.27; 1.29),
/// 64×169×576 113.1/96.0 (1.18; 1.15), 48×729×256 109.8/100.5 (1.09; 1.09),
/// 128×784×576 112.8/105.2 (1.07; 1.06), 64×12544×147 92.1/81.7 (1.13; 1.05),
/// 64×3025×144 103.2/99.2 (1.04; 1.05), 1000×169×512 111.8/108.3 (1.03; 1.02),
/// 256×196×128 104.7/101.9 (1.03; 1.01), 576×196×96 100.8/103.2 (0.98; 0.97),
/// 384×196×64 93.7/99.9 (0.94; 0.93), 32×12544×27 70.9/76.8 (0.92; 0.94),
/// 128×784×64 94.0/102.9 (0.91; 0.93), 192×169×48 85.1/95.9 (0.89; 0.88),
/// 24×3136×144 79.0/91.2 (0.87; 0.87), 192×784×32 77.9/103.0 (0.76; 0.78),
/// 144×3136×24 68.9/95.8 (0.72; 0.72), 64×3025×16 56.9/82.2 (0.69; 0.68),
/// 96×12544×16 55.7/89.8 (0.62; 0.64); and 1000×1×1280 33.2/23.7 (1.40; the 6-row
/// route is a GEMV there, which the model does not describe, but it does pick lanes).
/// So: lane panels for few columns (7×7 maps) and for deep products whose width the
/// 64-column tiles pad; 6-row panels for shallow products (k ≲ 100) on wide maps and
/// for m far from a multiple of 16.
///
/// The margin is now 0: on AMD Zen 5, where lane panels run in pairs (`gemm/lanes.rs` in
/// the runtime), the shapes the model puts between 1.00 and 1.05 measured lane/6-row
/// 1.04–1.09 (64×784×128, 64×3025×128, 96×196×128, 96×729×256, 96×3136×384,
/// 128×784×256, 256×196×128, 1000×169×512, 160×729×384; same benchmark), with two
/// exceptions at 0.97–0.99 (192×3136×256, 512×784×512); the Zen 4 measurements above in
/// that band were 1.03–1.04 too.
///
/// In the networks (`nnefc bench --profile`, best of three runs with lane panels and
/// three without, ms per layer): mobilenet_v2 conv52 (1280×49×320) 0.51 → 0.41, conv51
/// 0.38 → 0.30, conv43/46/49 (960×49×160) 0.19 → 0.16, conv45/48 0.19 → 0.15, conv42
/// 0.12 → 0.09, the 14×14 and 28×28 projections 10–25 % faster; resnet18 conv16
/// (512×49×2304) 1.50 → 1.18, conv11 (256×196×1152) 1.20 → 1.08, conv6 (128×784×576)
/// 1.22 → 1.16, conv1 (64×12544×147) even (3.47 / 3.43, after the lane route learnt to
/// stream a B larger than L2 once); squeezenet1_1 conv5 (16×3025×128) 0.18 → 0.13,
/// conv11 (32×729×256) 0.15 → 0.11, conv7 (64×3025×144) 0.62 → 0.59. No layer that
/// switched got slower beyond the noise (±2 %).
pub(super) fn a_packing(lw: &Lowering<'_>, m: usize, n: usize, k: usize) -> APacking {
    if lw.lane_gemm && lanes_pay(m, n, k) {
        APacking::Lanes16
    } else {
        APacking::Rows6
    }
}

/// The cost model of [`a_packing`]: whether lane panels are expected to be faster than
/// 6-row panels for `C[m×n] = A[m×k]·B[k×n]` on an AVX-512 CPU.
pub(crate) fn lanes_pay(m: usize, n: usize, k: usize) -> bool {
    if m == 0 || n == 0 || k == 0 {
        return false;
    }
    // 2–24 rows over at least 16 columns: the runtime's few-row route (`gemm::tall`, all
    // rows in registers, B read in place) takes 6-row panels, and beats lane panels on
    // every such shape measured (scratch benchmark, one core, operands in cache, GFLOP/s
    // few-row / lanes): 16×12544×32 97/77, 16×3025×64 97/92, 16×3025×128 96/92,
    // 24×3136×144 113/79, 24×3136×96 110/–.
    if (2..=24).contains(&m) && n >= 16 {
        return false;
    }
    let (nf, kf) = (n as f64, k as f64);
    // 25–64 rows (`FEW_ROWS_MAX_M`): the few-row route again (two panels a pass; from 33
    // rows only where k ≥ 2m, else the blocked 6×64 tiles, which measured at least as fast
    // there: `gemm::tall::takes` in the runtime), whose
    // cost is `m` rows × the columns of its 32-column tiles × `(k + 10)` (a per-tile cost,
    // fit like the lane panels' 10.5), against the lane panels' `lanes`, which pad the rows
    // to a multiple of 16. AMD Zen 4, one core, operands in cache (`gemm_bench Avx512
    // custom M N K` against `gemm_bench lanes custom M N K`, GFLOP/s few-row / lanes):
    // where the model picks the few-row route 36×3136×48 97/72, 30×3136×48 96/90,
    // 36×196×384 98/86, 36×100×64 82/75, 36×49×300 85/84, 32×12544×32 90/85, 32×64×32
    // 96/87, 32×3136×64 100/100, 48×3136×48 99/96, 64×3136×64 100/97, 64×3136×32 92/85,
    // 40×3136×64 100/84, 64×12544×16 76/65, 64×3025×16 78/70, 64×12544×147 107/103,
    // 64×3025×144 107/106, 64×3136×576 109/110, 64×3136×256 110/111; where it picks lane
    // panels 32×784×192 108/110, 32×784×144 107/109, 30×196×200 96/104, 30×36×200
    // 62/103, 28×16×20 46/55, 64×196×384 97/114, 64×729×576 109/114, 48×196×1152 96/116,
    // 48×784×128 106/107, 48×729×256 111/112, 64×784×64 100/101, 64×784×32 92/90. All
    // on the faster side but four, which are within 2 % (64×3136×576, 64×3136×256,
    // 64×784×32, and the tie 32×3136×64).
    let lanes = (m.div_ceil(16) * 16) as f64 * nf * (kf + 10.5);
    if (25..=nnefc_runtime::gemm::FEW_ROWS_MAX_M).contains(&m) && n >= 16 {
        let few_rows = m as f64 * (n.div_ceil(32) * 32) as f64 * (kf + 10.0);
        return lanes < few_rows;
    }
    let rows6 = (m.div_ceil(6) * 6) as f64 * six_row_lanes(n) as f64 * kf + 6.0 * kf * nf;
    rows6 >= lanes
}

/// Columns of C the runtime's AVX-512 6-row tiles compute for a product `n` wide: 16 up
/// to 16 columns, 32 up to 32, else whole 64-column tiles and, for the rest, the
/// narrower 32- and 16-column tiles when they compute fewer lanes than a 64-column one
/// (`kernels::for_width` and `driver::edge_columns` in the runtime).
///
/// Products at most 16 wide count double: their 6×16 tile holds six sums, too few to
/// keep two 512-bit FMA pipes busy (4-cycle latency), so on AMD Zen 5 it runs at half
/// the speed of the wider tiles (scratch benchmark, one core, GFLOP/s 6-row / lanes:
/// 512×16×512 122/240, 256×16×256 121/227, 512×16×4608 113/244; resnet18's Winograd
/// products on its 7×7 maps are 16 wide). On Zen 4 (one 512-bit FMA a cycle) the two
/// routes are about even there, so lane panels lose nothing.
fn six_row_lanes(n: usize) -> usize {
    if n <= 16 {
        return 32;
    }
    if n <= 32 {
        return 32;
    }
    let (full, rest) = (n / 64 * 64, n % 64);
    if rest == 0 {
        return full;
    }
    let edge = rest / 32 * 32 + (rest % 32) / 16 * 16 + if rest % 16 > 0 { 16 } else { 0 };
    full + edge.min(64)
}

/// `data` (an `m × k` matrix with strides `(rs, cs)`) packed in `packing`'s format.
pub(super) fn pack_const(
    packing: APacking,
    m: usize,
    k: usize,
    data: &[f32],
    rs: usize,
    cs: usize,
) -> Result<Vec<f32>, CodegenError> {
    let packed = match packing {
        APacking::Lanes16 => nnefc_runtime::try_pack_a_lanes(m, k, data, rs, cs),
        APacking::Rows6 | APacking::None => nnefc_runtime::try_pack_a(m, k, data, rs, cs),
    };
    packed.map_err(|e| CodegenError::Internal(format!("packing A: {e:?}")))
}

/// Floats of `packing`'s format for an `m × k` matrix.
pub(super) fn packed_len(packing: APacking, m: usize, k: usize) -> usize {
    match packing {
        APacking::Lanes16 => nnefc_runtime::packed_a_lanes_len(m, k),
        APacking::Rows6 | APacking::None => nnefc_runtime::packed_a_len(m, k),
    }
}

/// GEMM scratch bytes of a product with A in `packing` (lane panels need none).
pub(super) fn scratch_bytes(packing: APacking, m: usize, n: usize, k: usize) -> usize {
    match packing {
        APacking::Lanes16 => 0,
        APacking::Rows6 | APacking::None => nnefc_runtime::sgemm_scratch_bytes(m, n, k),
    }
}

/// A as a packed constant when it is one and does not vary over the batch, with its
/// format.
fn packed_a(
    lw: &mut Lowering<'_>,
    a: ValueId,
    (m, n, k): (usize, usize, usize),
    rs: i64,
    cs: i64,
) -> Result<Option<(BufId, APacking)>, CodegenError> {
    let Some(t) = lw.g.const_of(a) else {
        return Ok(None);
    };
    let Some(data) = t.as_f32() else {
        return Ok(None);
    };
    if data.len() != m * k {
        return Ok(None);
    }
    let packing = a_packing(lw, m, n, k);
    let p = pack_const(packing, m, k, data, rs as usize, cs as usize)?;
    let bytes = p.iter().flat_map(|x| x.to_le_bytes()).collect();
    Ok(Some((lw.const_buf(bytes, DType::F32, p.len()), packing)))
}

pub(super) fn matmul(
    lw: &mut Lowering<'_>,
    ta: bool,
    tb: bool,
    ins: &[ValueId],
    outs: &[ValueId],
) -> R {
    let (&a, &b) = match ins {
        [a, b] => (a, b),
        _ => return Err(CodegenError::Invalid("matmul needs two operands".into())),
    };
    let c = *outs
        .first()
        .ok_or_else(|| CodegenError::Invalid("matmul without output".into()))?;
    f32_only(lw, &[a, b, c], "matmul")?;
    let (ash, bsh, csh) = (lw.shape(a)?, lw.shape(b)?, lw.shape(c)?);
    let r = csh.len();
    if r < 2 || ash.len() != r || bsh.len() != r {
        return Err(CodegenError::Unsupported(format!(
            "matmul of ranks {}, {} → {}",
            ash.len(),
            bsh.len(),
            r
        )));
    }
    let (m, n) = (csh[r - 2], csh[r - 1]);
    let k = if ta { ash[r - 2] } else { ash[r - 1] };
    let (a_st, b_st, c_st) = (strides(&ash), strides(&bsh), strides(&csh));
    let (ars, acs) = if ta {
        (a_st[r - 1], a_st[r - 2])
    } else {
        (a_st[r - 2], a_st[r - 1])
    };
    let (brs, bcs) = if tb {
        (b_st[r - 1], b_st[r - 2])
    } else {
        (b_st[r - 2], b_st[r - 1])
    };
    // Batch offsets over the output's batch dims (row-major), broadcasting extent-1 dims.
    let bdims = &csh[..r - 2];
    let nb: usize = bdims.iter().product();
    let mut batches = Vec::with_capacity(nb);
    let mut idx = vec![0usize; bdims.len()];
    for _ in 0..nb {
        let mut off = [0i64; 3];
        for (d, &i) in idx.iter().enumerate() {
            off[0] += if ash[d] == 1 { 0 } else { i as i64 * a_st[d] };
            off[1] += if bsh[d] == 1 { 0 } else { i as i64 * b_st[d] };
            off[2] += i as i64 * c_st[d];
        }
        batches.push(off);
        for d in (0..bdims.len()).rev() {
            idx[d] += 1;
            if idx[d] < bdims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let a_batched = ash[..r - 2].iter().any(|&e| e != 1);
    let packed = if a_batched || m == 0 || k == 0 {
        None
    } else {
        packed_a(lw, a, (m, n, k), ars, acs)?
    };
    let (abuf, a_packing) = match packed {
        Some(p) => p,
        None => (lw.buf(a)?, APacking::None),
    };
    let bbuf = lw.buf(b)?;
    let cbuf = lw.buf(c)?;
    let scratch = lw.gemm_scratch(scratch_bytes(a_packing, m, n, k));
    lw.prog.steps.push(Step::Gemm(GemmCall {
        prefetch: None,
        m,
        n,
        k,
        a: Matrix {
            buf: abuf,
            rs: ars,
            cs: acs,
        },
        a_packing,
        b: Matrix {
            buf: bbuf,
            rs: brs,
            cs: bcs,
        },
        c: Matrix {
            buf: cbuf,
            rs: n as i64,
            cs: 1,
        },
        batches,
        bias: None,
        scratch,
        epi: Default::default(),
    }));
    Ok(())
}

pub(super) fn linear(lw: &mut Lowering<'_>, ins: &[ValueId], outs: &[ValueId]) -> R {
    let (&x, &w, &bias) = match ins {
        [x, w, b] => (x, w, b),
        _ => return Err(CodegenError::Invalid("linear needs three operands".into())),
    };
    let y = *outs
        .first()
        .ok_or_else(|| CodegenError::Invalid("linear without output".into()))?;
    f32_only(lw, &[x, w, bias, y], "linear")?;
    let (xsh, wsh, ysh) = (lw.shape(x)?, lw.shape(w)?, lw.shape(y)?);
    let (&[m, k], &[n, k2], &[m2, n2]) = (xsh.as_slice(), wsh.as_slice(), ysh.as_slice()) else {
        return Err(CodegenError::Invalid(
            "linear expects [N,Cin]·[Cout,Cin] → [N,Cout]".into(),
        ));
    };
    if k != k2 || m != m2 || n != n2 {
        return Err(CodegenError::Invalid("linear shapes disagree".into()));
    }
    let bvol: usize = lw.shape(bias)?.iter().product();
    let bias_buf = if bvol == n {
        lw.buf(bias)?
    } else if bvol == 1 {
        // Widen to one value per column.
        let src = lw.buf(bias)?;
        let dst = lw.scratch(DType::F32, n);
        let mut kk = lw.kernel("linear_bias", &[n]);
        let a = kk.access(src, 0, vec![0]);
        kk.load(a, DType::F32);
        kk.set_store(dst, 0, vec![1]);
        lw.push(kk);
        dst
    } else {
        return Err(CodegenError::Invalid(format!(
            "linear bias has {bvol} elements for {n} outputs"
        )));
    };
    let xbuf = lw.buf(x)?;
    let ybuf = lw.buf(y)?;
    if m == 1
        && lw.lane_gemm
        && let Some(data) = lw.g.const_of(w).and_then(|t| t.as_f32())
        && data.len() == n * k
    {
        // One row against constant weights, on the lane route's targets: computed as
        // yᵀ = W·xᵀ with W in lane panels, one sequential stream the hardware prefetchers
        // follow, where the dot form reads four rows of W 4·k bytes apart. mobilenet_v2's
        // 1000×1280 classifier, weights out of cache (scratch benchmark cycling ten
        // copies, Zen 5, one core): 0.174 ms (29 GB/s) → 0.098 ms (52 GB/s).
        let p = pack_const(APacking::Lanes16, n, k, data, k, 1)?;
        let bytes = p.iter().flat_map(|x| x.to_le_bytes()).collect();
        let abuf = lw.const_buf(bytes, DType::F32, p.len());
        let one = |buf| Matrix { buf, rs: 1, cs: 1 };
        let scratch = lw.gemm_scratch(0);
        lw.prog.steps.push(Step::Gemm(GemmCall {
            prefetch: None,
            m: n,
            n: 1,
            k,
            a: one(abuf),
            a_packing: APacking::Lanes16,
            b: one(xbuf),
            c: one(ybuf),
            batches: vec![[0, 0, 0]],
            bias: None,
            scratch,
            epi: GemmEpi {
                row_bias: Some((bias_buf, vec![0])),
                ..Default::default()
            },
        }));
        return Ok(());
    }
    let wbuf = lw.buf(w)?;
    let scratch = lw.gemm_scratch(nnefc_runtime::sgemm_scratch_bytes(m, n, k));
    lw.prog.steps.push(Step::Gemm(GemmCall {
        prefetch: None,
        m,
        n,
        k,
        a: Matrix {
            buf: xbuf,
            rs: k as i64,
            cs: 1,
        },
        a_packing: APacking::None,
        b: Matrix {
            buf: wbuf,
            rs: 1,
            cs: k as i64,
        },
        c: Matrix {
            buf: ybuf,
            rs: n as i64,
            cs: 1,
        },
        batches: vec![[0, 0, 0]],
        bias: Some(bias_buf),
        scratch,
        epi: Default::default(),
    }));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{lanes_pay, six_row_lanes};

    /// The rule on the measured shapes: lane panels where they measured faster,
    /// 6-row panels where they (or, for 2–64 rows, the few-row route) measured faster.
    #[test]
    fn lane_rule_follows_the_measurements() {
        for (m, n, k) in [
            (1280, 49, 320),
            (320, 49, 960),
            (960, 49, 160),
            (160, 49, 960),
            (96, 196, 576),
            (64, 196, 384),
            (1000, 1, 1280),
            (512, 49, 256),
            (512, 49, 2304),
            (32, 784, 192),
            (32, 784, 144),
            (30, 196, 200),
            (30, 36, 200),
            (28, 16, 20),
            (64, 196, 384),
            (64, 729, 576),
            (48, 196, 1152),
        ] {
            assert!(
                lanes_pay(m, n, k),
                "{m}×{n}×{k}: lane panels measured faster"
            );
        }
        for (m, n, k) in [
            // The few-row route of the 6-row panels.
            (16, 12544, 32),
            (16, 3025, 64),
            (16, 3025, 128),
            (24, 3136, 96),
            (576, 196, 96),
            (24, 3136, 144),
            (96, 12544, 16),
            (144, 3136, 24),
            (192, 784, 32),
            (32, 12544, 27),
            (32, 12544, 32),
            (32, 3136, 64),
            (36, 3136, 48),
            (30, 3136, 48),
            (36, 196, 384),
            (36, 100, 64),
            (36, 49, 300),
            (32, 64, 32),
            (48, 3136, 48),
            (64, 3136, 32),
            (40, 3136, 64),
            (64, 12544, 16),
            (64, 12544, 147),
            (128, 784, 64),
            (384, 196, 64),
            (1, 1000, 1280),
            (0, 49, 320),
            (16, 49, 0),
        ] {
            assert!(
                !lanes_pay(m, n, k),
                "{m}×{n}×{k}: 6-row panels measured faster"
            );
        }
    }

    #[test]
    fn six_row_lanes_counts_the_runtime_tiles() {
        let cases = [
            (1, 32),
            (16, 32),
            (17, 32),
            (32, 32),
            (33, 48),
            (49, 64),
            (64, 64),
        ];
        for (n, lanes) in cases {
            assert_eq!(six_row_lanes(n), lanes, "n = {n}");
        }
        // 33 = 32 + 1 (16); 196 = 3·64 + 4 (16); 169 = 2·64 + 41 (32 + 16); 3136 = 49·64.
        assert_eq!(six_row_lanes(196), 208);
        assert_eq!(six_row_lanes(169), 176);
        assert_eq!(six_row_lanes(3136), 3136);
    }
}
