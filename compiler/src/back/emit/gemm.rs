//! Register-blocked f32x4 GEMM for self-contained objects ([`Step::Tiled`]): one CLIF
//! function per GEMM step, `C = act((accumulate ? C : 0) + A·B + bias)` for every batch
//! entry, calling nothing outside the object.
//!
//! Blocking (cranelift.md §5.5): C is cut into `MR × NR` tiles (`NR` = 8 = two f32x4
//! columns; `MR` = 6 when A is in the runtime's packed-panel format so a tile is one
//! panel, else 4). A tile keeps its `MR·NR/4` vector accumulators in SSA variables across
//! the k loop; each k step loads one row slice of B (two vector loads when B's columns are
//! contiguous, else lane inserts), splats one A element per row and does
//! `acc = fma(a, b, acc)` (`fma` only when the ISA has it natively — aarch64 always;
//! otherwise `fmul` + `fadd`). Edge tiles: the last `m mod MR` rows use a shorter tile,
//! the last `n mod 8` columns a one-vector tile and/or a scalar tile (scalar accumulators).
//! The epilogue adds the old C (accumulate), the per-column and per-row bias, applies the
//! activation and stores. Batches with evenly spaced offsets run in a loop, others are
//! unrolled.
//!
//! Not here: packing B or cache blocking (A and B are read in place: fine for the
//! moderate sizes cross-compiled models use, slower than the runtime's packed GEMM on big
//! ones), threads.
//!
//! [`Step::Tiled`]: crate::back::kernel::Step::Tiled

use crate::back::CodegenError;
use crate::back::emit::math::{Caps, Cx};
use crate::back::kernel::{APacking, Activation, GemmCall};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{F32, F32X4, I64};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::{FunctionBuilder, Variable};

/// Columns per tile.
pub(crate) const NR: usize = 8;
/// k steps per iteration of the k loop.
const KU: usize = 4;
/// Rows per tile when A is not packed.
const MR_PLAIN: usize = 4;
/// Rows of a packed-A panel (the runtime's format).
pub(crate) const MR_PACKED: usize = nnefc_runtime::gemm::MR;

/// Base pointers of the GEMM's buffers (before batch offsets).
pub(crate) struct GemmPtrs {
    pub a: Value,
    pub b: Value,
    pub c: Value,
    pub bias: Option<Value>,
    pub row_bias: Option<Value>,
}

/// Whether [`emit`] can lower `g`: A strided or in 6-row panels (lane panels are left to
/// `select::gemm_loops`' reduction loops; `select` never gives them to a self-contained
/// object anyway), and every byte offset it folds into an immediate fits.
pub(crate) fn supported(g: &GemmCall) -> bool {
    if g.a_packing == APacking::Lanes16 {
        return false;
    }
    let fits = |x: i64| i32::try_from(x).is_ok() && i32::try_from(-x).is_ok();
    let mr = if g.a_packing == APacking::Rows6 {
        MR_PACKED
    } else {
        MR_PLAIN
    } as i64;
    let (a_row, a_step) = if g.a_packing == APacking::Rows6 {
        (4, MR_PACKED as i64 * 4)
    } else {
        (g.a.rs * 4, g.a.cs * 4)
    };
    let (ku, nr) = (KU as i64, NR as i64);
    fits(a_row.abs() * mr + a_step.abs() * ku)
        && fits((g.b.cs * 4).abs() * nr + (g.b.rs * 4).abs() * ku)
        && fits((g.c.rs * 4).abs() * mr + nr * 4)
        && g.c.cs == 1
        && g.row_bias_ok()
}

impl GemmCall {
    fn row_bias_ok(&self) -> bool {
        match &self.epi.row_bias {
            Some((_, offs)) => offs.len() == self.batches.len(),
            None => true,
        }
    }
}

/// The body of a counted loop: called once with the loop's current pointers.
type LoopBody<'f, 'a, 'b> = dyn FnMut(&mut Gx<'a, 'b>, &[Value]) -> Result<(), CodegenError> + 'f;

struct Gx<'a, 'b> {
    b: &'a mut FunctionBuilder<'b>,
    g: &'a GemmCall,
    fma: bool,
    caps: Caps,
    ptr: Type,
}

fn flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

impl<'a, 'b> Gx<'a, 'b> {
    /// A counted loop of `n ≥ 1` iterations over pointers that advance by `steps` bytes.
    fn counted(
        &mut self,
        n: usize,
        ptrs: &[Value],
        steps: &[i64],
        body: &mut LoopBody<'_, 'a, 'b>,
    ) -> Result<(), CodegenError> {
        if n == 0 {
            return Ok(());
        }
        if n == 1 {
            return body(self, ptrs);
        }
        let vars: Vec<Variable> = ptrs
            .iter()
            .map(|&p| {
                let v = self.b.declare_var(self.ptr);
                self.b.def_var(v, p);
                v
            })
            .collect();
        let cnt = self.b.declare_var(I64);
        let zero = self.b.ins().iconst(I64, 0);
        self.b.def_var(cnt, zero);
        let blk = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(blk, &[]);
        self.b.switch_to_block(blk);
        let cur: Vec<Value> = vars.iter().map(|v| self.b.use_var(*v)).collect();
        body(self, &cur)?;
        for (v, s) in vars.iter().zip(steps) {
            if *s != 0 {
                let p = self.b.use_var(*v);
                let p = self.b.ins().iadd_imm_s(p, *s);
                self.b.def_var(*v, p);
            }
        }
        let c = self.b.use_var(cnt);
        let c = self.b.ins().iadd_imm_s(c, 1);
        self.b.def_var(cnt, c);
        let more = self.b.ins().icmp_imm_s(IntCC::NotEqual, c, n as i64);
        self.b.ins().brif(more, blk, &[], exit, &[]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    fn madd(&mut self, a: Value, b: Value, acc: Value) -> Value {
        if self.fma {
            self.b.ins().fma(a, b, acc)
        } else {
            let p = self.b.ins().fmul(a, b);
            self.b.ins().fadd(p, acc)
        }
    }

    /// Four B elements at `p + off` (contiguous: one load; else lane inserts).
    fn load_b4(&mut self, p: Value, off: i64) -> Result<Value, CodegenError> {
        let cs = self.g.b.cs * 4;
        if cs == 4 {
            return Ok(self.b.ins().load(F32X4, flags(), p, imm(off)?));
        }
        let x0 = self.b.ins().load(F32, flags(), p, imm(off)?);
        let mut v = self.b.ins().splat(F32X4, x0);
        for l in 1..4u8 {
            let x = self
                .b
                .ins()
                .load(F32, flags(), p, imm(off + i64::from(l) * cs)?);
            v = self.b.ins().insertlane(v, x, l);
        }
        Ok(v)
    }

    /// One tile of `rows × (4·vecs + scalars)` at pointers `[a, b, c, bias?, row_bias?]`.
    fn tile(
        &mut self,
        rows: usize,
        vecs: usize,
        scalars: usize,
        p: &[Value],
    ) -> Result<(), CodegenError> {
        let g = self.g;
        let (a_row, a_step) = if g.a_packing == APacking::Rows6 {
            (4, (MR_PACKED * 4) as i64)
        } else {
            (g.a.rs * 4, g.a.cs * 4)
        };
        let b_col = g.b.cs * 4;
        let mut accs: Vec<Variable> = Vec::new();
        let zv = self.b.ins().f32const(0.0);
        let zvv = self.b.ins().splat(F32X4, zv);
        for _ in 0..rows {
            for _ in 0..vecs {
                let v = self.b.declare_var(F32X4);
                self.b.def_var(v, zvv);
                accs.push(v);
            }
            for _ in 0..scalars {
                let v = self.b.declare_var(F32);
                self.b.def_var(v, zv);
                accs.push(v);
            }
        }
        let per_row = vecs + scalars;
        let b_step = g.b.rs * 4;
        // One k step at byte offsets (oa, ob) from the loop's A and B pointers.
        let step = |s: &mut Self, pa: Value, pb: Value, oa: i64, ob: i64| {
            let mut bv = Vec::with_capacity(per_row);
            for v in 0..vecs {
                bv.push(s.load_b4(pb, ob + (4 * v) as i64 * b_col)?);
            }
            for j in 0..scalars {
                let off = ob + (4 * vecs + j) as i64 * b_col;
                bv.push(s.b.ins().load(F32, flags(), pb, imm(off)?));
            }
            for r in 0..rows {
                let a =
                    s.b.ins()
                        .load(F32, flags(), pa, imm(oa + r as i64 * a_row)?);
                let av = if vecs > 0 {
                    Some(s.b.ins().splat(F32X4, a))
                } else {
                    None
                };
                for (j, &b) in bv.iter().enumerate() {
                    let var = accs[r * per_row + j];
                    let acc = s.b.use_var(var);
                    let x = if j < vecs { av.unwrap_or(a) } else { a };
                    let y = s.madd(x, b, acc);
                    s.b.def_var(var, y);
                }
            }
            Ok::<(), CodegenError>(())
        };
        // k unrolled by KU (loop overhead per FMA), then the leftover steps.
        let (kb, krem) = (g.k / KU, g.k % KU);
        self.counted(
            kb,
            &p[..2],
            &[a_step * KU as i64, b_step * KU as i64],
            &mut |s, cur| {
                for u in 0..KU as i64 {
                    step(s, cur[0], cur[1], u * a_step, u * b_step)?;
                }
                Ok(())
            },
        )?;
        if krem > 0 {
            let pa = self.b.ins().iadd_imm_s(p[0], a_step * (kb * KU) as i64);
            let pb = self.b.ins().iadd_imm_s(p[1], b_step * (kb * KU) as i64);
            for u in 0..krem as i64 {
                step(self, pa, pb, u * a_step, u * b_step)?;
            }
        }
        // Epilogue.
        let pc = p[2];
        let mut extra = p[3..].iter().copied();
        let pbias = if g.bias.is_some() { extra.next() } else { None };
        let prb = if g.epi.row_bias.is_some() {
            extra.next()
        } else {
            None
        };
        let c_row = g.c.rs * 4;
        for r in 0..rows {
            let rb = match prb {
                Some(q) => Some(self.b.ins().load(F32, flags(), q, imm(r as i64 * 4)?)),
                None => None,
            };
            for j in 0..per_row {
                let vec = j < vecs;
                let col = if vec { 4 * j } else { 4 * vecs + (j - vecs) };
                let off = r as i64 * c_row + col as i64 * 4;
                let ty = if vec { F32X4 } else { F32 };
                let mut x = self.b.use_var(accs[r * per_row + j]);
                if g.epi.accumulate {
                    let old = self.b.ins().load(ty, flags(), pc, imm(off)?);
                    x = self.b.ins().fadd(old, x);
                }
                if let Some(q) = pbias {
                    let bv = self.b.ins().load(ty, flags(), q, imm(col as i64 * 4)?);
                    x = self.b.ins().fadd(x, bv);
                }
                if let Some(rb) = rb {
                    let rv = if vec {
                        self.b.ins().splat(F32X4, rb)
                    } else {
                        rb
                    };
                    x = self.b.ins().fadd(x, rv);
                }
                x = self.activation(x, vec);
                self.b.ins().store(flags(), x, pc, imm(off)?);
            }
        }
        Ok(())
    }

    /// The fused activation (relu/clamp with the element-wise ops' NaN-propagating min/max
    /// ([`Cx::fmax`]), so fused and unfused graphs agree on NaN.
    fn activation(&mut self, x: Value, vec: bool) -> Value {
        let mut cx = Cx {
            b: &mut *self.b,
            lanes: if vec { 4 } else { 1 },
            caps: self.caps,
        };
        match self.g.epi.activation {
            Activation::None => x,
            Activation::Relu => {
                let z = cx.fc(0.0);
                cx.fmax(x, z)
            }
            Activation::Clamp(lo, hi) => {
                let h = cx.fc(hi);
                let l = cx.fc(lo);
                let m = cx.fmin(x, h);
                cx.fmax(m, l)
            }
            Activation::Sigmoid => cx.sigmoid(x),
            Activation::Swish => {
                let s = cx.sigmoid(x);
                cx.fmul(x, s)
            }
            Activation::HardSwish => {
                let t = cx.faddc(x, 3.0);
                let (six, zero) = (cx.fc(6.0), cx.fc(0.0));
                let m = cx.fmin(t, six);
                let c = cx.fmax(m, zero);
                let p = cx.fmul(x, c);
                let sixth = cx.fc(1.0 / 6.0);
                cx.fmul(p, sixth)
            }
        }
    }

    /// Every tile of one batch entry; `p = [a, b, c, bias?, row_bias?]` at the entry.
    fn matrix(&mut self, p: &[Value]) -> Result<(), CodegenError> {
        let g = self.g;
        let mr = if g.a_packing == APacking::Rows6 {
            MR_PACKED
        } else {
            MR_PLAIN
        };
        let (mb, mrem) = (g.m / mr, g.m % mr);
        let (nb, nrem) = (g.n / NR, g.n % NR);
        let a_block = if g.a_packing == APacking::Rows6 {
            (mr * g.k * 4) as i64
        } else {
            mr as i64 * g.a.rs * 4
        };
        let has_bias = g.bias.is_some();
        // Pointer steps per row block: a, b (0), c, bias (0), row bias.
        let mut row_steps = vec![a_block, 0, mr as i64 * g.c.rs * 4];
        if has_bias {
            row_steps.push(0);
        }
        if g.epi.row_bias.is_some() {
            row_steps.push((mr * 4) as i64);
        }
        let rows_of = |s: &mut Self, p: &[Value], vecs: usize, scalars: usize| {
            s.counted(mb, p, &row_steps, &mut |s, cur| {
                s.tile(mr, vecs, scalars, cur)
            })?;
            if mrem > 0 {
                let q: Vec<Value> = p
                    .iter()
                    .zip(&row_steps)
                    .map(|(&x, &st)| s.b.ins().iadd_imm_s(x, st * mb as i64))
                    .collect();
                s.tile(mrem, vecs, scalars, &q)?;
            }
            Ok::<(), CodegenError>(())
        };
        // Pointer steps per column block: a (0), b, c, bias, row bias (0).
        let mut col_steps = vec![0, g.b.cs * 4 * NR as i64, (NR * 4) as i64];
        if has_bias {
            col_steps.push((NR * 4) as i64);
        }
        if g.epi.row_bias.is_some() {
            col_steps.push(0);
        }
        self.counted(nb, p, &col_steps, &mut |s, cur| rows_of(s, cur, NR / 4, 0))?;
        if nrem > 0 {
            let q: Vec<Value> = p
                .iter()
                .zip(&col_steps)
                .map(|(&x, &st)| self.b.ins().iadd_imm_s(x, st * nb as i64))
                .collect();
            rows_of(self, &q, nrem / 4, nrem % 4)?;
        }
        Ok(())
    }
}

fn imm(x: i64) -> Result<i32, CodegenError> {
    i32::try_from(x).map_err(|_| CodegenError::Internal("GEMM offset exceeds 2 GiB".into()))
}

/// Emits the whole GEMM (all batch entries) into the current block of `b`.
pub(crate) fn emit(
    b: &mut FunctionBuilder<'_>,
    g: &GemmCall,
    p: &GemmPtrs,
    caps: Caps,
    ptr: Type,
) -> Result<(), CodegenError> {
    if g.m == 0 || g.n == 0 || g.batches.is_empty() {
        return Ok(());
    }
    let mut gx = Gx {
        b,
        g,
        fma: caps.fma,
        caps,
        ptr,
    };
    // Per batch entry: element offsets of [a, b, c, bias, row bias].
    let offs: Vec<Vec<i64>> = g
        .batches
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let mut v = vec![o[0], o[1], o[2]];
            if g.bias.is_some() {
                v.push(0);
            }
            if let Some((_, rb)) = &g.epi.row_bias {
                v.push(rb.get(i).copied().unwrap_or(0));
            }
            v
        })
        .collect();
    let mut bases = vec![p.a, p.b, p.c];
    bases.extend(p.bias);
    if g.epi.row_bias.is_some() {
        bases.push(
            p.row_bias
                .ok_or_else(|| CodegenError::Internal("row bias pointer missing".into()))?,
        );
    }
    let at = |gx: &mut Gx<'_, '_>, o: &[i64]| -> Vec<Value> {
        bases
            .iter()
            .zip(o)
            .map(|(&x, &e)| {
                if e == 0 {
                    x
                } else {
                    gx.b.ins().iadd_imm_s(x, e * 4)
                }
            })
            .collect()
    };
    let first = at(&mut gx, &offs[0]);
    let delta: Vec<i64> = match offs.get(1) {
        Some(o1) => o1.iter().zip(&offs[0]).map(|(x, y)| x - y).collect(),
        None => vec![0; bases.len()],
    };
    let even = offs.windows(2).all(|w| {
        w[1].iter()
            .zip(&w[0])
            .zip(&delta)
            .all(|((x, y), d)| x - y == *d)
    });
    if even {
        let steps: Vec<i64> = delta.iter().map(|d| d * 4).collect();
        gx.counted(offs.len(), &first, &steps, &mut |s, cur| s.matrix(cur))
    } else {
        gx.matrix(&first)?;
        for o in &offs[1..] {
            let q = at(&mut gx, o);
            gx.matrix(&q)?;
        }
        Ok(())
    }
}
