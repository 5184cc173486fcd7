//! `deconv` with a constant filter as one GEMM over output phases (sub-pixel form), instead
//! of a direct window over a zero-inserted input (where most multiply-adds hit zeros).
//!
//! Per spatial dim, the forward relation of the adjoint is `o = i·s + t·d − p` (o: deconv
//! output, i: its input, t: tap). Write `o = s·q + r` with phase `r ∈ [0, s)`. A tap `t`
//! contributes to phase `r` exactly when `r + p − t·d ≡ 0 (mod s)`, and then reads
//! `i = q + δ` with `δ = (r + p − t·d) / s`; for a fixed `r` different taps give different
//! `δ`. With `δ_min`, `δ_max` over all `(r, t)` and `U = δ_max − δ_min + 1`, every phase is
//! a stride-1 window of `U` positions over `i = q + δ_min + u`, so all phases together are
//! one forward convolution:
//!
//! `C[(j, r…), q…] = Σ_{ci, u…} W'[(j, r…), (ci, u…)] · x[ci, q… + δ_min + u…]`,
//! `W'[(j, r…), (ci, u…)] = f[ci, j, t…]` where every dim's `(r, u)` names a tap `t`, else 0.
//!
//! Lowered as one im2col of the input (rows `(u…, ci)`, padded with zeros where
//! `q + δ_min + u` leaves it) and, per phase, GEMMs over only the window positions that
//! phase uses (`W'` without its zero blocks): the valid positions of the last dim form
//! runs of consecutive rows of the im2col matrix, so each (leading positions, run) is one
//! GEMM term `C_r (+)= A_term · col[rows]` with `A_term` packed at compile time; terms of
//! equal rank and depth across phases share one runtime call (batches), the first term of
//! a phase overwrites and later ones accumulate. Then one copy kernel per phase adds the
//! bias and scatters `C_r` into `y[s·q + r]` (clipped to the output extent). Cost: exactly
//! the deconv's own multiply-adds, about `Πs` times fewer than the zero-inserted direct
//! form.
//!
//! Used when the filter is constant, the border fills (constant/ignore) and the runtime
//! GEMM is available; everything else goes to `conv::deconv`.

use super::window::{Geometry, View, padded, value_view};
use super::{Lowering, strides};
use crate::back::CodegenError;
use crate::back::kernel::{APacking, Expr, GemmCall, GemmEpi, Matrix, Step};
use crate::ir::infer::{deconv_groups, resolved_deconv_padding};
use crate::ir::{BinaryOp, Border, ConvAttrs, DType, ValueId};

type R = Result<(), CodegenError>;

/// The phase decomposition of one spatial dim.
#[derive(Clone, Debug, PartialEq)]
struct DimPhases {
    s: usize,
    /// Output positions per phase (`⌈Y/s⌉`); phase `r` keeps those with `s·q + r < Y`.
    q: usize,
    /// Window length `U`.
    u: usize,
    /// `δ_min`: window position `u` reads input `q + δ_min + u`.
    dmin: i64,
    /// `taps[r][u]`: the filter tap phase `r` applies at window position `u`.
    taps: Vec<Vec<Option<usize>>>,
}

/// `None` when no tap reaches any phase (a filter extent of 0).
fn dim_phases(y: usize, k: usize, s: usize, d: usize, p: usize) -> Option<DimPhases> {
    let (si, di, pi) = (s as i64, d as i64, p as i64);
    let mut pairs = Vec::new();
    for r in 0..s {
        for t in 0..k {
            let v = r as i64 + pi - t as i64 * di;
            if v.rem_euclid(si) == 0 {
                pairs.push((r, t, v.div_euclid(si)));
            }
        }
    }
    let dmin = pairs.iter().map(|p| p.2).min()?;
    let dmax = pairs.iter().map(|p| p.2).max()?;
    let u = (dmax - dmin + 1) as usize;
    let mut taps = vec![vec![None; u]; s];
    for (r, t, delta) in pairs {
        taps[r][(delta - dmin) as usize] = Some(t);
    }
    Some(DimPhases {
        s,
        q: y.div_ceil(s),
        u,
        dmin,
        taps,
    })
}

/// Lowers `deconv` through the phase GEMM when it applies, else through `conv::deconv`.
pub(super) fn deconv(lw: &mut Lowering<'_>, a: &ConvAttrs, ins: &[ValueId], outs: &[ValueId]) -> R {
    if lw.direct_only || lw.self_contained || !matches!(a.border, Border::Constant | Border::Ignore)
    {
        return super::conv::deconv(lw, a, ins, outs);
    }
    let io = super::conv::conv_io(lw, ins, outs, "deconv")?;
    let Some(filter) =
        lw.g.const_of(io.f)
            .and_then(|t| t.as_f32().map(|d| d.to_vec()))
    else {
        return super::conv::deconv(lw, a, ins, outs);
    };
    let sp = io.xs.len() - 2;
    let (n, cin, cout) = (io.xs[0], io.xs[1], io.ys[1]);
    let groups = deconv_groups(a, cin);
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
    let shapes_ok = groups != 0
        && io.fs[0] == cin
        && cin % groups == 0
        && io.fs[1] * groups == cout
        && io.ys[0] == n
        && pad.len() == sp
        && stride.len() == sp
        && dilation.len() == sp
        && !stride.contains(&0)
        && !dilation.contains(&0)
        && filter.len() == io.fs.iter().product::<usize>();
    if !shapes_ok || io.ys.contains(&0) || io.xs.contains(&0) {
        // Errors and empty cases are reported/handled by the general path.
        return super::conv::deconv(lw, a, ins, outs);
    }
    let mut dims = Vec::with_capacity(sp);
    for d in 0..sp {
        match dim_phases(io.ys[2 + d], io.fs[2 + d], stride[d], dilation[d], pad[d].0) {
            // A window starting past the input's end reads only zeros: general path.
            Some(p) if p.dmin < io.xs[2 + d] as i64 => dims.push(p),
            _ => return super::conv::deconv(lw, a, ins, outs),
        }
    }
    let (cg, og) = (cin / groups, cout / groups);
    let svol: usize = dims.iter().map(|p| p.s).product();
    let uvol: usize = dims.iter().map(|p| p.u).product();
    let qvol: usize = dims.iter().map(|p| p.q).product();
    let kk = uvol * cg;
    let rshape: Vec<usize> = dims.iter().map(|p| p.s).collect();
    let ushape: Vec<usize> = dims.iter().map(|p| p.u).collect();
    let ust = strides(&ushape);

    // The terms of every phase, their filter blocks packed one after another.
    let fst = strides(&io.fs);
    let mut packed: Vec<f32> = Vec::new();
    let mut terms: Vec<Term> = Vec::new();
    for rf in 0..svol {
        let r = unflatten(rf, &rshape);
        let valid = |d: usize| -> Vec<usize> {
            (0..dims[d].u)
                .filter(|&u| dims[d].taps[r[d]][u].is_some())
                .collect()
        };
        let lead: Vec<Vec<usize>> = (0..sp - 1).map(valid).collect();
        let runs = runs(&valid(sp - 1));
        let mut index = 0;
        for prefix in product(&lead) {
            for &(u0, len) in &runs {
                let mut u = prefix.clone();
                u.push(u0);
                let row0 = (0..sp).map(|d| u[d] * ust[d] as usize).sum::<usize>() * cg;
                let k = len * cg;
                let mut a_offs = Vec::with_capacity(groups);
                for g in 0..groups {
                    let mut w = vec![0.0f32; og * k];
                    for j in 0..og {
                        for l in 0..len {
                            for ci in 0..cg {
                                let mut fi = (g * cg + ci) * fst[0] as usize + j * fst[1] as usize;
                                for d in 0..sp {
                                    let ud = if d + 1 == sp { u0 + l } else { u[d] };
                                    let t = dims[d].taps[r[d]][ud].ok_or_else(|| {
                                        CodegenError::Internal("deconv term without tap".into())
                                    })?;
                                    fi += t * fst[2 + d] as usize;
                                }
                                w[j * k + l * cg + ci] =
                                    filter.get(fi).copied().ok_or_else(|| {
                                        CodegenError::Internal("deconv filter index".into())
                                    })?;
                            }
                        }
                    }
                    let pk = nnefc_runtime::try_pack_a(og, k, &w, k, 1).map_err(|e| {
                        CodegenError::Internal(format!("packing the filter: {e:?}"))
                    })?;
                    a_offs.push(packed.len() as i64);
                    packed.extend(pk);
                }
                terms.push(Term {
                    phase: rf,
                    index,
                    row0,
                    k,
                    a_offs,
                });
                index += 1;
            }
        }
    }

    // B: the input itself when every window is one position at q (s = k, no padding),
    // else im2col rows (u…, ci) of the input shifted by δ_min and padded with zeros.
    let xb = lw.buf(io.x)?;
    let plane: usize = io.xs[2..].iter().product();
    let direct_b = dims
        .iter()
        .enumerate()
        .all(|(d, p)| p.u == 1 && p.dmin == 0 && p.q == io.xs[2 + d]);
    let (bbuf, boffs): (_, Vec<i64>) = if direct_b {
        (
            xb,
            (0..n * groups)
                .map(|i| ((i / groups) * cin * plane + (i % groups) * cg * plane) as i64)
                .collect(),
        )
    } else {
        let src = value_view(lw, io.x)?;
        // A positive δ_min skips input positions: shift the view instead of padding.
        let shift: i64 = (0..sp)
            .map(|d| dims[d].dmin.max(0) * src.strides[2 + d])
            .sum();
        let mut vin = vec![n, cin];
        vin.extend((0..sp).map(|d| io.xs[2 + d] - dims[d].dmin.max(0) as usize));
        let view = View {
            buf: src.buf,
            offset: src.offset + shift,
            strides: src.strides.clone(),
        };
        let mut gout = vec![n, cin];
        gout.extend(dims.iter().map(|p| p.q));
        let mut size = vec![1, 1];
        size.extend(dims.iter().map(|p| p.u));
        let mut gpad = vec![(0, 0), (0, 0)];
        gpad.extend(dims.iter().map(|p| ((-p.dmin).max(0) as usize, 0)));
        let geo = Geometry::new(&vin, &gout, &size, &[], &[], &gpad)?;
        let p = padded(lw, view, &geo, Border::Constant, 0.0)?;
        let col = lw.scratch(DType::F32, n * groups * kk * qvol);
        let mut ext = vec![n, groups];
        ext.extend(dims.iter().map(|p| p.u));
        ext.push(cg);
        ext.extend(dims.iter().map(|p| p.q));
        let mut k = lw.kernel("deconv_im2col", &ext);
        let mut ps = vec![p.strides[0], cg as i64 * p.strides[1]];
        ps.extend((0..sp).map(|d| p.strides[2 + d]));
        ps.push(p.strides[1]);
        ps.extend((0..sp).map(|d| p.strides[2 + d]));
        let acc = k.access(p.buf, p.offset, ps);
        k.load(acc, DType::F32);
        k.set_store(col, 0, strides(&ext));
        lw.push(k);
        (
            col,
            (0..n * groups).map(|i| (i * kk * qvol) as i64).collect(),
        )
    };

    // C[(n, g), r…, j, q…] in scratch; one GEMM call per (term index, k), the first
    // term of a phase overwriting its block of C and later ones accumulating.
    let abuf = {
        let len = packed.len();
        let bytes = packed.iter().flat_map(|x| x.to_le_bytes()).collect();
        lw.const_buf(bytes, DType::F32, len)
    };
    let cbuf = lw.scratch(DType::F32, n * groups * svol * og * qvol);
    let kmax = terms.iter().map(|t| t.k).max().unwrap_or(0);
    let scratch = lw.gemm_scratch(nnefc_runtime::sgemm_scratch_bytes(og, qvol, kmax));
    let mut keys: Vec<(usize, usize)> = terms.iter().map(|t| (t.index, t.k)).collect();
    keys.sort_unstable();
    keys.dedup();
    for (index, k) in keys {
        let mut batches = Vec::new();
        for t in terms.iter().filter(|t| t.index == index && t.k == k) {
            for i in 0..n * groups {
                batches.push([
                    t.a_offs[i % groups],
                    boffs[i] + (t.row0 * qvol) as i64,
                    ((i * svol + t.phase) * og * qvol) as i64,
                ]);
            }
        }
        lw.prog.steps.push(Step::Gemm(GemmCall {
            prefetch: None,
            m: og,
            n: qvol,
            k,
            a: Matrix {
                buf: abuf,
                rs: k as i64,
                cs: 1,
            },
            a_packing: APacking::Rows6,
            b: Matrix {
                buf: bbuf,
                rs: qvol as i64,
                cs: 1,
            },
            c: Matrix {
                buf: cbuf,
                rs: qvol as i64,
                cs: 1,
            },
            batches,
            bias: None,
            scratch,
            epi: GemmEpi {
                accumulate: index > 0,
                ..GemmEpi::default()
            },
        }));
    }

    // y[n, g·og + j, s·q + r] = C[(n, g), r, j, q] + bias, one kernel per phase (a phase
    // no tap reaches is the bias alone).
    let (bs_g, bs_j) = super::conv::bias_strides(lw, io.b, cout)?;
    let bb = lw.buf(io.b)?;
    let yb = lw.buf(io.y)?;
    let ys = strides(&io.ys);
    let qst = strides(&dims.iter().map(|p| p.q).collect::<Vec<_>>());
    for rf in 0..svol {
        let r = unflatten(rf, &rshape);
        let counts: Vec<usize> = (0..sp)
            .map(|d| io.ys[2 + d].saturating_sub(r[d]).div_ceil(dims[d].s))
            .collect();
        if counts.contains(&0) {
            continue;
        }
        let mut ext = vec![n, groups, og];
        ext.extend_from_slice(&counts);
        let mut k = lw.kernel("deconv_phase", &ext);
        let mut bst = vec![0, og as i64 * bs_g, bs_j];
        bst.extend(std::iter::repeat_n(0, sp));
        let ba = k.access(bb, 0, bst);
        let bv = k.load(ba, DType::F32);
        if terms.iter().any(|t| t.phase == rf) {
            let mut cs = vec![
                (groups * svol * og * qvol) as i64,
                (svol * og * qvol) as i64,
                qvol as i64,
            ];
            cs.extend_from_slice(&qst);
            let ca = k.access(cbuf, (rf * og * qvol) as i64, cs);
            let cv = k.load(ca, DType::F32);
            k.push(Expr::Binary(BinaryOp::Add, cv, bv), DType::F32);
        }
        let yoff: i64 = (0..sp).map(|d| r[d] as i64 * ys[2 + d]).sum();
        let mut yst = vec![ys[0], og as i64 * ys[1], ys[1]];
        yst.extend((0..sp).map(|d| dims[d].s as i64 * ys[2 + d]));
        k.set_store(yb, yoff, yst);
        lw.push(k);
    }
    Ok(())
}

/// One GEMM of a phase: `C_phase (+)= A · col[row0 .. row0 + k]`.
struct Term {
    phase: usize,
    /// Position among the phase's terms (0 overwrites C, later ones accumulate).
    index: usize,
    /// First row of the im2col matrix (rows are `(u…, ci)`).
    row0: usize,
    k: usize,
    /// Element offset of the packed filter block, per group.
    a_offs: Vec<i64>,
}

/// Maximal runs of consecutive values in an increasing list, as (start, length).
fn runs(v: &[usize]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for &x in v {
        match out.last_mut() {
            Some((s, l)) if *s + *l == x => *l += 1,
            _ => out.push((x, 1)),
        }
    }
    out
}

/// All combinations picking one value per list (row-major); one empty combination for
/// no lists, none when a list is empty.
fn product(lists: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for l in lists {
        out = out
            .into_iter()
            .flat_map(|p| {
                l.iter().map(move |&x| {
                    let mut q = p.clone();
                    q.push(x);
                    q
                })
            })
            .collect();
    }
    out
}

/// Row-major multi-index of flat index `f` in `shape`.
fn unflatten(mut f: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        let e = shape[d].max(1);
        idx[d] = f % e;
        f /= e;
    }
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_of_k4_s2_p1() {
        // o = 2i + t − 1: phase 0 takes taps 1 (i = q) and 3 (i = q − 1), phase 1 taps
        // 0 (i = q + 1) and 2 (i = q).
        let p = dim_phases(32, 4, 2, 1, 1).unwrap();
        assert_eq!(p.dmin, -1);
        assert_eq!(p.u, 3);
        assert_eq!(p.q, 16);
        assert_eq!(
            p.taps,
            vec![vec![Some(3), Some(1), None], vec![None, Some(2), Some(0)]]
        );
    }

    #[test]
    fn phases_when_stride_exceeds_filter() {
        // k = 1 < s = 3: phases 1 and 2 get no tap at all.
        let p = dim_phases(9, 1, 3, 1, 0).unwrap();
        assert_eq!((p.dmin, p.u, p.q), (0, 1, 3));
        assert_eq!(p.taps, vec![vec![Some(0)], vec![None], vec![None]]);
    }
}
