//! matmul and linear as calls to the runtime's GEMM (`nnefc_sgemm`, or
//! `nnefc_sgemm_packed_a` with A packed at compile time when it is a constant).
//!
//! - matmul(A, B): `C[b…, i, j] = Σ_k A[b…, i, k]·B[b…, k, j]` (operands transposed in
//!   place through their strides), batch dims broadcast (extent 1 repeats); one call per
//!   output batch entry. Operands must have equal rank ≥ 2.
//! - linear(x, W, bias): `y[i, j] = Σ_k x[i, k]·W[j, k] + bias[j]`; W is read as B with
//!   strides (1, Cin); a one-element bias is widened to a row of Cout.
//!
//! Only f32. Not here: the GEMM itself (runtime crate) or epilogue fusion of later ops.

use super::{Lowering, strides};
use crate::back::CodegenError;
use crate::back::kernel::{BufId, GemmCall, Matrix, Step};
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

/// A as a packed constant when it is one and does not vary over the batch.
fn packed_a(
    lw: &mut Lowering<'_>,
    a: ValueId,
    m: usize,
    k: usize,
    rs: i64,
    cs: i64,
) -> Result<Option<BufId>, CodegenError> {
    let Some(t) = lw.g.const_of(a) else {
        return Ok(None);
    };
    let Some(data) = t.as_f32() else {
        return Ok(None);
    };
    if data.len() != m * k {
        return Ok(None);
    }
    let p = nnefc_runtime::try_pack_a(m, k, data, rs as usize, cs as usize)
        .map_err(|e| CodegenError::Internal(format!("packing A: {e:?}")))?;
    let bytes = p.iter().flat_map(|x| x.to_le_bytes()).collect();
    Ok(Some(lw.const_buf(bytes, DType::F32, p.len())))
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
        packed_a(lw, a, m, k, ars, acs)?
    };
    let abuf = match packed {
        Some(p) => p,
        None => lw.buf(a)?,
    };
    let bbuf = lw.buf(b)?;
    let cbuf = lw.buf(c)?;
    let scratch = lw.gemm_scratch(nnefc_runtime::sgemm_scratch_bytes(m, n, k));
    lw.prog.steps.push(Step::Gemm(GemmCall {
        m,
        n,
        k,
        a: Matrix {
            buf: abuf,
            rs: ars,
            cs: acs,
        },
        a_packed: packed.is_some(),
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
    let wbuf = lw.buf(w)?;
    let ybuf = lw.buf(y)?;
    let scratch = lw.gemm_scratch(nnefc_runtime::sgemm_scratch_bytes(m, n, k));
    lw.prog.steps.push(Step::Gemm(GemmCall {
        m,
        n,
        k,
        a: Matrix {
            buf: xbuf,
            rs: k as i64,
            cs: 1,
        },
        a_packed: false,
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
