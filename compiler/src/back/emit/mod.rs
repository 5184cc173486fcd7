//! [`Kernel`] → CLIF function, through cranelift-frontend.
//!
//! A kernel function takes one pointer per non-constant buffer it touches (in [`BufId`]
//! order, see [`kernel_params`]) and returns nothing. Constants are addressed with
//! `symbol_value`. Loops are emitted rotated (one conditional branch per iteration, no
//! header test: extents are compile-time constants, so empty loops are simply not
//! emitted) with pointer-bumped induction variables: each access keeps a pointer per loop
//! level that is advanced by `stride · element size` every iteration.
//!
//! The innermost loop, when the schedule marked it `x4`, runs f32x4/i32x4 bodies (loads
//! that step 2 elements per iteration, e.g. stride-2 windows, are two loads and a shuffle;
//! such stores are one scalar store per lane)
//! unrolled (2× for elementwise, 4 independent accumulators for reductions), then the
//! leftover whole vectors, then a scalar tail, both straight-line. Accesses that do not
//! move with the innermost loop are loaded once as a scalar and splatted.
//!
//! Memory flags: every load is `notrap + readonly + can_move` (kernels never read the
//! buffer they write, and indirect indices are clamped, so every access is in bounds);
//! stores are `notrap`.
//!
//! A kernel whose loop 0 has the parallel role (`Loop::parallel`) runs a run-time range
//! of that loop ([`KernelEmitter::par`]): the pointers start at the range's first
//! iteration and the loop counts to a run-time bound, guarded for an empty range.
//!
//! Not here: choosing what to vectorize (`back::schedule`), op semantics
//! (`back::select`), the entry point (`back::object`).

pub(crate) mod expr;
pub(crate) mod gemm;
pub(crate) mod math;

use crate::back::CodegenError;
use crate::back::kernel::{Access, AccessId, BufId, BufKind, Expr, Kernel, Program, ReduceKind};
use crate::ir::{BinaryOp, DType};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::{F32, F32X4, I8, I8X16, I32, I32X4, I64};
use cranelift_codegen::ir::{InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::{FunctionBuilder, Variable};
use math::{Caps, Cx};

/// The non-constant buffers a tiled GEMM touches, in the order of its function
/// parameters: A, B, C, column bias, row bias (those present and not constant).
pub(crate) fn gemm_params(program: &Program, g: &crate::back::kernel::GemmCall) -> Vec<BufId> {
    let mut v: Vec<BufId> = g
        .buffers()
        .into_iter()
        .filter(|b| !matches!(program.buffer(*b).map(|x| x.kind), Some(BufKind::Const(_))))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The non-constant buffers a kernel touches, in the order of its function parameters.
pub(crate) fn kernel_params(program: &Program, kernel: &Kernel) -> Vec<BufId> {
    let mut v: Vec<BufId> = kernel
        .accesses
        .iter()
        .map(|a| a.buf)
        .filter(|b| !matches!(program.buffer(*b).map(|x| x.kind), Some(BufKind::Const(_))))
        .collect();
    v.sort();
    v.dedup();
    v
}

fn lane_type(dt: DType, lanes: usize) -> Type {
    match (dt, lanes) {
        (DType::F32, 4) => F32X4,
        (DType::I32, 4) => I32X4,
        (DType::F32, _) => F32,
        (DType::I32, _) => I32,
        (DType::Bool, _) => I8,
    }
}

/// Iterations of a counted loop: a compile-time extent (at least 2), or a run-time value.
#[derive(Clone, Copy)]
enum Trip {
    Const(usize),
    Dyn(Value),
}

/// The body of a counted loop: called once with the pointers of the current iteration.
type LoopBody<'f, S> = dyn FnMut(&mut S, &[Value]) -> Result<(), CodegenError> + 'f;

/// A node's part in a fused multiply-add.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fuse {
    No,
    /// An f32 multiply whose only use is a [`Fuse::Add`]: not emitted on its own.
    Mul,
    /// An f32 add of a [`Fuse::Mul`] and another value: emitted as one `fma`.
    Add,
}

/// Which `a·b + c` pairs of `nodes` become one fused multiply-add: with native FMA
/// (`fma`), an f32 add whose operand is an f32 multiply used nowhere else (the last node,
/// the stored value, counts as a use). One rounding instead of two: the convolution and
/// batch-norm bodies run faster and no less accurately. Without native FMA nothing fuses
/// (a software `fma` would be a libcall).
fn fma_pairs(nodes: &[crate::back::kernel::ExprNode], fma: bool) -> Vec<Fuse> {
    let mut out = vec![Fuse::No; nodes.len()];
    if !fma {
        return out;
    }
    let mut uses = vec![0usize; nodes.len()];
    for n in nodes {
        let mut count = |e: &crate::back::kernel::ExprId| {
            if let Some(u) = uses.get_mut(e.0 as usize) {
                *u += 1;
            }
        };
        match &n.expr {
            Expr::Unary(_, a) | Expr::Cast(_, a) => count(a),
            Expr::Binary(_, a, b) => {
                count(a);
                count(b);
            }
            Expr::Select(c, a, b) => {
                count(c);
                count(a);
                count(b);
            }
            Expr::Load(_) | Expr::Lit(_) | Expr::Acc => {}
        }
    }
    if let Some(u) = uses.last_mut() {
        *u += 1;
    }
    let is_mul = |i: usize, out: &[Fuse]| {
        out[i] == Fuse::No
            && uses[i] == 1
            && nodes[i].ty == DType::F32
            && matches!(nodes[i].expr, Expr::Binary(BinaryOp::Mul, ..))
    };
    for i in 0..nodes.len() {
        if nodes[i].ty != DType::F32 {
            continue;
        }
        if let Expr::Binary(BinaryOp::Add, a, b) = &nodes[i].expr {
            let (a, b) = (a.0 as usize, b.0 as usize);
            if a < i && is_mul(a, &out) {
                out[a] = Fuse::Mul;
                out[i] = Fuse::Add;
            } else if b < i && is_mul(b, &out) {
                out[b] = Fuse::Mul;
                out[i] = Fuse::Add;
            }
        }
    }
    out
}

/// Per-reduction mutable state: scalar accumulator, vector accumulators, argmax index.
struct Acc {
    scalar: Variable,
    vecs: Vec<Variable>,
    /// ArgMax/ArgMin: (best index, running counter).
    arg: Option<(Variable, Variable)>,
}

pub(crate) struct KernelEmitter<'a, 'b> {
    pub b: &'a mut FunctionBuilder<'b>,
    pub kernel: &'a Kernel,
    pub caps: Caps,
    /// Element type of each access.
    pub dtypes: Vec<DType>,
    pub ptr: Type,
    /// For a kernel whose loop 0 is parallel: the task's first iteration and iteration
    /// count of that loop (run-time values); `None` runs the whole loop.
    pub par: Option<(Value, Value)>,
    /// Per access, the access whose pointer it uses (itself, or an earlier access of the
    /// same buffer with the same strides), and the byte offset from that pointer
    /// ([`shared_pointers`]).
    pub rep: Vec<usize>,
    pub extra: Vec<i64>,
}

/// Accesses that can share one pointer: same buffer, same strides, no indirect terms.
/// A 3×3 window then walks one pointer with nine immediate offsets instead of nine
/// pointers (fewer registers live, fewer increments per iteration). Returns, per access,
/// its representative and its byte offset from the representative's pointer; callers
/// give a non-representative access its representative's base pointer.
pub(crate) fn shared_pointers(k: &Kernel, dtypes: &[DType]) -> (Vec<usize>, Vec<i64>) {
    let mut rep: Vec<usize> = (0..k.accesses.len()).collect();
    let mut extra = vec![0i64; k.accesses.len()];
    for (i, a) in k.accesses.iter().enumerate() {
        if !a.indirect.is_empty() || i == k.store.0 as usize {
            continue;
        }
        let esize = dtypes.get(i).map_or(4, |d| d.size() as i64);
        let found = (0..i).find(|&j| {
            let b = &k.accesses[j];
            rep[j] == j
                && j != k.store.0 as usize
                && b.buf == a.buf
                && b.strides == a.strides
                && b.indirect.is_empty()
        });
        if let Some(j) = found {
            let off = (a.offset - k.accesses[j].offset).saturating_mul(esize);
            // Keep room for the lane offsets added in `addr`.
            if off.unsigned_abs() < (1 << 30) {
                rep[i] = j;
                extra[i] = off;
            }
        }
    }
    (rep, extra)
}

impl KernelEmitter<'_, '_> {
    fn esize(&self, a: usize) -> i64 {
        self.dtypes.get(a).map(|d| d.size() as i64).unwrap_or(4)
    }
    fn access(&self, a: AccessId) -> Result<&Access, CodegenError> {
        self.kernel
            .accesses
            .get(a.0 as usize)
            .ok_or_else(|| CodegenError::Internal(format!("access a{} missing", a.0)))
    }

    /// Emits the whole nest; `bases[a]` is access `a`'s pointer with all loop indices 0.
    pub fn emit(&mut self, bases: &[Value]) -> Result<(), CodegenError> {
        let red_first = self.kernel.reduction.as_ref().map(|r| r.first_loop);
        let outer_empty = self
            .kernel
            .loops
            .iter()
            .enumerate()
            .any(|(i, l)| l.extent == 0 && red_first.is_none_or(|f| i < f));
        if outer_empty {
            return Ok(());
        }
        self.level(0, bases, None)
    }

    fn level(&mut self, l: usize, ptrs: &[Value], acc: Option<&Acc>) -> Result<(), CodegenError> {
        let k = self.kernel;
        if let Some(r) = &k.reduction
            && l == r.first_loop
            && acc.is_none()
        {
            let vector = k.loops.last().is_some_and(|x| x.vector == 4) && l < k.loops.len();
            let st = self.init_acc(r.kind, vector)?;
            self.level(l, ptrs, Some(&st))?;
            let v = self.finish_acc(r.kind, &st)?;
            let out = self.eval_nodes(&r.finalize, ptrs, 0, 1, Some(v))?;
            return self.store(ptrs, 0, 1, out);
        }
        if l == k.loops.len() {
            return self.point(ptrs, 0, 1, acc, 0);
        }
        let lp = &k.loops[l];
        if l + 1 == k.loops.len() && lp.vector == 4 {
            return self.vector_inner(l, ptrs, acc);
        }
        let steps: Vec<i64> = (0..k.accesses.len())
            .map(|a| k.accesses[a].strides.get(l).copied().unwrap_or(0) * self.esize(a))
            .collect();
        if l == 0
            && let Some((first, count)) = self.par
        {
            // This task's share of the parallel loop: start every moving pointer at
            // iteration `first`, run `count` iterations.
            let start: Vec<Value> = ptrs
                .iter()
                .zip(&steps)
                .map(|(&p, &st)| {
                    if st == 0 {
                        p
                    } else {
                        let off = self.b.ins().imul_imm_s(first, st);
                        self.b.ins().iadd(p, off)
                    }
                })
                .collect();
            return self.counted(Trip::Dyn(count), &start, &steps, &mut |s, cur| {
                s.level(l + 1, cur, acc)
            });
        }
        self.rotated(lp.extent, ptrs, &steps, &mut |s, cur| {
            s.level(l + 1, cur, acc)
        })
    }

    /// A counted loop of `n` iterations whose pointers advance by `steps` bytes.
    fn rotated(
        &mut self,
        n: usize,
        ptrs: &[Value],
        steps: &[i64],
        body: &mut LoopBody<'_, Self>,
    ) -> Result<(), CodegenError> {
        match n {
            0 => Ok(()),
            1 => body(self, ptrs),
            _ => self.counted(Trip::Const(n), ptrs, steps, body),
        }
    }

    /// The rotated loop behind [`Self::rotated`] and the parallel loop's task range: one
    /// pointer variable per moving representative access (accesses sharing a pointer,
    /// see [`shared_pointers`], reuse it), advanced by `steps` bytes per iteration. A
    /// run-time trip count may be 0, so it is tested before the first iteration.
    fn counted(
        &mut self,
        n: Trip,
        ptrs: &[Value],
        steps: &[i64],
        body: &mut LoopBody<'_, Self>,
    ) -> Result<(), CodegenError> {
        let mut vars: Vec<Option<Variable>> = Vec::with_capacity(ptrs.len());
        for (i, &p) in ptrs.iter().enumerate() {
            let r = self.rep.get(i).copied().unwrap_or(i);
            if steps.get(i).copied().unwrap_or(0) == 0 {
                vars.push(None);
            } else if r < i {
                // Shares its representative's pointer (same buffer and strides).
                vars.push(vars[r]);
            } else {
                let v = self.b.declare_var(self.ptr);
                self.b.def_var(v, p);
                vars.push(Some(v));
            }
        }
        let cnt = self.b.declare_var(I64);
        let zero = self.b.ins().iconst(I64, 0);
        self.b.def_var(cnt, zero);
        let blk = self.b.create_block();
        let exit = self.b.create_block();
        match n {
            Trip::Const(_) => {
                self.b.ins().jump(blk, &[]);
            }
            Trip::Dyn(n) => {
                let empty = self.b.ins().icmp_imm_s(IntCC::Equal, n, 0);
                self.b.ins().brif(empty, exit, &[], blk, &[]);
            }
        }
        self.b.switch_to_block(blk);
        let cur: Vec<Value> = vars
            .iter()
            .zip(ptrs)
            .map(|(v, &p)| v.map(|v| self.b.use_var(v)).unwrap_or(p))
            .collect();
        body(self, &cur)?;
        for (i, v) in vars.iter().enumerate() {
            if let Some(v) = *v
                && self.rep.get(i).copied().unwrap_or(i) == i
            {
                let p = self.b.use_var(v);
                let p = self.b.ins().iadd_imm_s(p, steps[i]);
                self.b.def_var(v, p);
            }
        }
        let c = self.b.use_var(cnt);
        let c = self.b.ins().iadd_imm_s(c, 1);
        self.b.def_var(cnt, c);
        let more = match n {
            Trip::Const(n) => self.b.ins().icmp_imm_s(IntCC::NotEqual, c, n as i64),
            Trip::Dyn(n) => self.b.ins().icmp(IntCC::NotEqual, c, n),
        };
        self.b.ins().brif(more, blk, &[], exit, &[]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    /// Innermost loop at 4 lanes: unrolled vector loop, leftover vectors, scalar tail.
    fn vector_inner(
        &mut self,
        l: usize,
        ptrs: &[Value],
        acc: Option<&Acc>,
    ) -> Result<(), CodegenError> {
        let k = self.kernel;
        let n = k.loops[l].extent;
        let nvec = n / 4;
        let tail = n % 4;
        let want = if acc.is_some() {
            acc.map(|a| a.vecs.len()).unwrap_or(1).max(1)
        } else {
            2
        };
        let unroll = if nvec >= want { want } else { 1 };
        let groups = nvec / unroll;
        let rem = nvec % unroll;
        let stride_bytes: Vec<i64> = (0..k.accesses.len())
            .map(|a| k.accesses[a].strides.get(l).copied().unwrap_or(0) * self.esize(a))
            .collect();
        let steps: Vec<i64> = stride_bytes.iter().map(|s| s * 4 * unroll as i64).collect();
        self.rotated(groups, ptrs, &steps, &mut |s, cur| {
            for u in 0..unroll {
                s.point(cur, 4 * u as i64, 4, acc, u)?;
            }
            Ok(())
        })?;
        let done = (groups * unroll * 4) as i64;
        let after: Vec<Value> = ptrs
            .iter()
            .zip(&stride_bytes)
            .map(|(&p, &s)| {
                if s != 0 && done != 0 {
                    self.b.ins().iadd_imm_s(p, s * done)
                } else {
                    p
                }
            })
            .collect();
        for r in 0..rem {
            self.point(&after, 4 * r as i64, 4, acc, 0)?;
        }
        for t in 0..tail {
            self.point(&after, (4 * rem + t) as i64, 1, acc, 0)?;
        }
        Ok(())
    }

    /// Address (pointer, immediate offset) of access `a` at `lane` elements along the innermost loop.
    fn addr(&mut self, ptrs: &[Value], a: usize, lane: i64) -> Result<(Value, i32), CodegenError> {
        let acc = self.access(AccessId(a as u32))?.clone();
        let inner = self.kernel.loops.len().checked_sub(1);
        let s = inner.and_then(|i| acc.strides.get(i).copied()).unwrap_or(0);
        let off = lane * s * self.esize(a) + self.extra.get(a).copied().unwrap_or(0);
        let mut p = *ptrs
            .get(a)
            .ok_or_else(|| CodegenError::Internal("pointer missing".into()))?;
        for ind in &acc.indirect {
            let ia = ind.index.0 as usize;
            let (ip, ioff) = self.addr(ptrs, ia, lane)?;
            let i = self.b.ins().load(
                I32,
                MemFlagsData::new()
                    .with_notrap()
                    .with_readonly()
                    .with_can_move(),
                ip,
                ioff,
            );
            let zero = self.b.ins().iconst(I32, 0);
            let hi = self.b.ins().iconst(
                I32,
                ind.bound.saturating_sub(1).min(i32::MAX as usize) as i64,
            );
            let i = self.b.ins().smax(i, zero);
            let i = self.b.ins().smin(i, hi);
            let i = self.b.ins().sextend(I64, i);
            let scale = ind.scale * self.esize(a);
            let i = self.b.ins().imul_imm_s(i, scale);
            p = self.b.ins().iadd(p, i);
        }
        let off = i32::try_from(off)
            .map_err(|_| CodegenError::Internal("offset exceeds 2 GiB".into()))?;
        Ok((p, off))
    }

    fn load(
        &mut self,
        ptrs: &[Value],
        a: usize,
        lane: i64,
        lanes: usize,
    ) -> Result<Value, CodegenError> {
        let dt = self.dtypes.get(a).copied().unwrap_or(DType::F32);
        let (p, off) = self.addr(ptrs, a, lane)?;
        let flags = MemFlagsData::new()
            .with_notrap()
            .with_readonly()
            .with_can_move();
        let inner = self.kernel.loops.len().checked_sub(1);
        let moves = inner
            .and_then(|i| self.kernel.accesses[a].strides.get(i).copied())
            .unwrap_or(0)
            != 0;
        if lanes == 4 && moves {
            let stride = inner
                .and_then(|i| self.kernel.accesses[a].strides.get(i).copied())
                .unwrap_or(0);
            if stride == 2 {
                return Ok(self.load_even(dt, flags, p, off));
            }
            return Ok(self.b.ins().load(lane_type(dt, 4), flags, p, off));
        }
        let v = self.b.ins().load(lane_type(dt, 1), flags, p, off);
        if dt == DType::Bool {
            // Normalize caller-provided bytes to 0/1.
            return Ok(self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0));
        }
        Ok(if lanes == 4 {
            self.b.ins().splat(lane_type(dt, 4), v)
        } else {
            v
        })
    }

    /// Four 32-bit elements at stride 2 (`p+off`, `+8`, `+16`, `+24` bytes): two 16-byte
    /// loads, at `off` (elements 0..4) and `off + 12` (elements 3..7), so nothing past
    /// the last element used is read, then one byte shuffle picks elements 0, 2, 4, 6.
    fn load_even(&mut self, dt: DType, flags: MemFlagsData, p: Value, off: i32) -> Value {
        let lo = self.b.ins().load(I8X16, flags, p, off);
        let hi = self.b.ins().load(I8X16, flags, p, off + 12);
        // lo lanes: e0 e1 e2 e3; hi lanes: e3 e4 e5 e6 → take lo.0, lo.2, hi.1, hi.3.
        let mut mask = Vec::with_capacity(16);
        for (base, lane) in [(0u8, 0u8), (0, 2), (16, 1), (16, 3)] {
            for byte in 0..4 {
                mask.push(base + 4 * lane + byte);
            }
        }
        let imm = self
            .b
            .func
            .dfg
            .immediates
            .push(cranelift_codegen::ir::ConstantData::from(mask));
        let v = self.b.ins().shuffle(lo, hi, imm);
        let little = MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little);
        self.b.ins().bitcast(lane_type(dt, 4), little, v)
    }

    fn eval_nodes(
        &mut self,
        nodes: &[crate::back::kernel::ExprNode],
        ptrs: &[Value],
        lane: i64,
        lanes: usize,
        acc: Option<Value>,
    ) -> Result<Value, CodegenError> {
        let mut vals = Vec::with_capacity(nodes.len());
        let mut tys = Vec::with_capacity(nodes.len());
        let fused = fma_pairs(nodes, self.caps.fma);
        for (i, n) in nodes.iter().enumerate() {
            let v = match &n.expr {
                Expr::Load(a) => self.load(ptrs, a.0 as usize, lane, lanes)?,
                // Emitted inside the add that consumes it.
                Expr::Binary(BinaryOp::Mul, x, _) if fused[i] == Fuse::Mul => vals
                    .get(x.0 as usize)
                    .copied()
                    .ok_or_else(|| CodegenError::Internal("fused multiply operand".into()))?,
                Expr::Binary(BinaryOp::Add, a, b) if fused[i] == Fuse::Add => {
                    let (m, other) = if fused[a.0 as usize] == Fuse::Mul {
                        (a, b)
                    } else {
                        (b, a)
                    };
                    let Expr::Binary(BinaryOp::Mul, x, y) = &nodes[m.0 as usize].expr else {
                        return Err(CodegenError::Internal("fused add without a mul".into()));
                    };
                    let get = |e: &crate::back::kernel::ExprId| {
                        vals.get(e.0 as usize)
                            .copied()
                            .ok_or_else(|| CodegenError::Internal("fused operand missing".into()))
                    };
                    let (xv, yv, zv) = (get(x)?, get(y)?, get(other)?);
                    self.b.ins().fma(xv, yv, zv)
                }
                _ => {
                    let mut cx = Cx {
                        b: &mut *self.b,
                        lanes,
                        caps: self.caps,
                    };
                    expr::lower(&mut cx, n, &vals, &tys, acc)?
                }
            };
            vals.push(v);
            tys.push(n.ty);
        }
        vals.last().copied().ok_or_else(|| {
            CodegenError::Internal(format!("kernel {} has an empty body", self.kernel.name))
        })
    }

    fn store(
        &mut self,
        ptrs: &[Value],
        lane: i64,
        lanes: usize,
        v: Value,
    ) -> Result<(), CodegenError> {
        let a = self.kernel.store.0 as usize;
        let inner = self.kernel.loops.len().checked_sub(1);
        let stride = inner
            .and_then(|i| self.kernel.accesses[a].strides.get(i).copied())
            .unwrap_or(0);
        if lanes == 4 && stride == 2 {
            // Strided vector store: one scalar store per lane.
            for l in 0..4u8 {
                let (p, off) = self.addr(ptrs, a, lane + l as i64)?;
                let e = self.b.ins().extractlane(v, l);
                self.b
                    .ins()
                    .store(MemFlagsData::new().with_notrap(), e, p, off);
            }
            return Ok(());
        }
        let (p, off) = self.addr(ptrs, a, lane)?;
        self.b
            .ins()
            .store(MemFlagsData::new().with_notrap(), v, p, off);
        Ok(())
    }

    /// One body evaluation at `lanes` lanes; stores it or folds it into the accumulator.
    fn point(
        &mut self,
        ptrs: &[Value],
        lane: i64,
        lanes: usize,
        acc: Option<&Acc>,
        slot: usize,
    ) -> Result<(), CodegenError> {
        let v = self.eval_nodes(&self.kernel.body, ptrs, lane, lanes, None)?;
        match (acc, &self.kernel.reduction) {
            (Some(st), Some(r)) => self.update_acc(r.kind, st, v, lanes, slot),
            _ => self.store(ptrs, lane, lanes, v),
        }
    }

    fn body_type(&self) -> DType {
        self.kernel.body.last().map(|n| n.ty).unwrap_or(DType::F32)
    }

    fn init_value(&mut self, kind: ReduceKind, dt: DType, lanes: usize) -> Value {
        let s = match (kind, dt) {
            (ReduceKind::Sum, DType::F32) => self.b.ins().f32const(0.0),
            (ReduceKind::Max | ReduceKind::ArgMax, DType::F32) => {
                self.b.ins().f32const(f32::NEG_INFINITY)
            }
            (ReduceKind::Min | ReduceKind::ArgMin, DType::F32) => {
                self.b.ins().f32const(f32::INFINITY)
            }
            (ReduceKind::Max | ReduceKind::ArgMax, DType::I32) => {
                self.b.ins().iconst(I32, i64::from(i32::MIN))
            }
            (ReduceKind::Min | ReduceKind::ArgMin, DType::I32) => {
                self.b.ins().iconst(I32, i64::from(i32::MAX))
            }
            (ReduceKind::All, _) => self.b.ins().iconst(I8, 1),
            (_, DType::I32) => self.b.ins().iconst(I32, 0),
            (_, _) => self.b.ins().iconst(I8, 0),
        };
        if lanes == 4 {
            self.b.ins().splat(lane_type(dt, 4), s)
        } else {
            s
        }
    }

    fn init_acc(&mut self, kind: ReduceKind, vector: bool) -> Result<Acc, CodegenError> {
        let dt = self.body_type();
        let scalar = self.b.declare_var(lane_type(dt, 1));
        let init = self.init_value(kind, dt, 1);
        self.b.def_var(scalar, init);
        let mut vecs = Vec::new();
        if vector {
            for _ in 0..4 {
                let v = self.b.declare_var(lane_type(dt, 4));
                let init = self.init_value(kind, dt, 4);
                self.b.def_var(v, init);
                vecs.push(v);
            }
        }
        let arg = if matches!(kind, ReduceKind::ArgMax | ReduceKind::ArgMin) {
            let best = self.b.declare_var(I32);
            let cnt = self.b.declare_var(I32);
            let z = self.b.ins().iconst(I32, 0);
            self.b.def_var(best, z);
            self.b.def_var(cnt, z);
            Some((best, cnt))
        } else {
            None
        };
        Ok(Acc { scalar, vecs, arg })
    }

    fn combine(&mut self, kind: ReduceKind, dt: DType, lanes: usize, a: Value, v: Value) -> Value {
        let mut cx = Cx {
            b: &mut *self.b,
            lanes,
            caps: self.caps,
        };
        match (kind, dt) {
            (ReduceKind::Sum, DType::F32) => cx.fadd(a, v),
            (ReduceKind::Sum, _) => cx.b.ins().iadd(a, v),
            (ReduceKind::Max, DType::F32) => cx.fmax(v, a),
            (ReduceKind::Min, DType::F32) => cx.fmin(v, a),
            (ReduceKind::Max, _) => cx.b.ins().smax(a, v),
            (ReduceKind::Min, _) => cx.b.ins().smin(a, v),
            (ReduceKind::Any, _) => cx.b.ins().bor(a, v),
            (ReduceKind::All, _) => cx.b.ins().band(a, v),
            (ReduceKind::ArgMax | ReduceKind::ArgMin, _) => a,
        }
    }

    fn update_acc(
        &mut self,
        kind: ReduceKind,
        st: &Acc,
        v: Value,
        lanes: usize,
        slot: usize,
    ) -> Result<(), CodegenError> {
        let dt = self.body_type();
        if let Some((best, cnt)) = st.arg {
            let cur = self.b.use_var(st.scalar);
            // f32: a NaN beats any number and nothing beats a NaN, so the index is the
            // first NaN's when there is one (NumPy's `argmax`; `ir::interp` agrees).
            let better = match (kind, dt) {
                (ReduceKind::ArgMax | ReduceKind::ArgMin, DType::F32) => {
                    let cc = if kind == ReduceKind::ArgMax {
                        FloatCC::UnorderedOrGreaterThan
                    } else {
                        FloatCC::UnorderedOrLessThan
                    };
                    let b = self.b.ins().fcmp(cc, v, cur);
                    let num = self.b.ins().fcmp(FloatCC::Ordered, cur, cur);
                    self.b.ins().band(b, num)
                }
                (ReduceKind::ArgMax, _) => self.b.ins().icmp(IntCC::SignedGreaterThan, v, cur),
                _ => self.b.ins().icmp(IntCC::SignedLessThan, v, cur),
            };
            // The first element always wins (the accumulator's initial ±∞ is no element).
            let c = self.b.use_var(cnt);
            let first = self.b.ins().icmp_imm_s(IntCC::Equal, c, 0);
            let better = self.b.ins().bor(better, first);
            let nv = self.b.ins().select(better, v, cur);
            self.b.def_var(st.scalar, nv);
            let bi = self.b.use_var(best);
            let nb = self.b.ins().select(better, c, bi);
            self.b.def_var(best, nb);
            let c1 = self.b.ins().iadd_imm_s(c, 1);
            self.b.def_var(cnt, c1);
            return Ok(());
        }
        let var = if lanes == 4 {
            *st.vecs
                .get(slot)
                .ok_or_else(|| CodegenError::Internal("vector accumulator missing".into()))?
        } else {
            st.scalar
        };
        let a = self.b.use_var(var);
        let n = self.combine(kind, dt, lanes, a, v);
        self.b.def_var(var, n);
        Ok(())
    }

    fn finish_acc(&mut self, kind: ReduceKind, st: &Acc) -> Result<Value, CodegenError> {
        if let Some((best, _)) = st.arg {
            return Ok(self.b.use_var(best));
        }
        let dt = self.body_type();
        let mut r = self.b.use_var(st.scalar);
        if !st.vecs.is_empty() {
            let mut v = self.b.use_var(st.vecs[0]);
            for x in &st.vecs[1..] {
                let x = self.b.use_var(*x);
                v = self.combine(kind, dt, 4, v, x);
            }
            for lane in 0..4u8 {
                let e = self.b.ins().extractlane(v, lane);
                r = self.combine(kind, dt, 1, r, e);
            }
        }
        Ok(r)
    }
}
