//! Graph + memory plan → [`Program`]: which buffers exist and which kernels run, in order.
//!
//! Buffers: graph input `i` → `inputs[i]`; a value listed as graph output (first listing
//! `j`) → `outputs[j]`; constants → read-only data; every other node output → its arena
//! slot. Per-node scratch (softmax rows, GEMM packing) sits after the arena and is reused
//! by every node, so the workspace is `arena + max scratch`.
//!
//! Op families live in sibling files, each with the index mapping it implements:
//! `elementwise` (unary, binary, select, clamp, cast, batch norm), `reduce` (reductions,
//! softmax), `movement` (reshape, transpose, split, concat, stack, unstack, slice, tile,
//! pad, gather), `linalg` (matmul, linear), `resample` (multilinear upsample, roi resample),
//! `roi` (roi pools). This file does not emit code.
//! pad, gather), `linalg` (matmul, linear). Chains of f32 element-wise nodes are fused
//! into one kernel first (`fuse`, see its invariants). This file does not emit code.

mod block;
mod conv;
mod deconv;
mod elementwise;
mod fuse;
mod gemm_loops;
mod linalg;
mod movement;
mod prefetch;
mod reduce;
mod resample;
mod roi;
mod window;
mod winograd;

use super::CodegenError;
use super::kernel::{BufId, BufKind, Kernel, Program, Step, WindowCall, WindowOp};
use super::schedule::schedule;
use crate::ir::plan::{MemoryPlan, SLOT_ALIGN};
use crate::ir::{DType, Graph, Node, NodeId, Op, ValueDef, ValueId};
use crate::passes::epilogue::PoolAfter;

/// Row-major element strides of a shape.
pub(crate) fn strides(shape: &[usize]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1] as i64;
    }
    s
}

/// Strides of an operand of shape `input` read at the index of an `out`-shaped loop nest
/// under NNEF broadcasting (left-aligned: missing trailing dims and extents of 1 repeat).
pub(crate) fn broadcast_strides(input: &[usize], out: &[usize]) -> Vec<i64> {
    let st = strides(input);
    (0..out.len())
        .map(|d| {
            if d < input.len() && input[d] != 1 {
                st[d]
            } else {
                0
            }
        })
        .collect()
}

pub(crate) struct Lowering<'g> {
    pub g: &'g Graph,
    pub plan: &'g MemoryPlan,
    pub prog: Program,
    /// Program const index per graph constant, assigned on first use.
    const_map: Vec<Option<usize>>,
    /// First listing of each value among the graph outputs.
    output_of: Vec<Option<usize>>,
    /// Bytes of scratch the current node uses (from `scratch_base`).
    scratch_used: usize,
    scratch_max: usize,
    /// Largest GEMM scratch of any call (per worker).
    gemm_scratch_max: usize,
    pub vectorize: bool,
    prefix: String,
    node_index: usize,
    /// Lower convolutions as plain reduction loop nests (no GEMM, no fusion).
    pub direct_only: bool,
    /// No runtime calls: GEMMs become Cranelift loop nests (see `back` module docs).
    pub self_contained: bool,
    /// Depthwise 2-D convolutions, convolutions of few input channels and 3×3 max pools
    /// call the runtime's vector kernels (`nnefc_dwconv`, `nnefc_conv`, `nnefc_maxpool`)
    /// instead of becoming f32x4 loop nests or im2col + GEMM: set when
    /// the target has AVX-512, whose 16-lane masked code the runtime has and Cranelift
    /// cannot emit.
    pub runtime_windows: bool,
    /// Constant A operands of runtime GEMMs may be packed in lane panels
    /// (`linalg::a_packing`): set when the target has AVX-512, whose lane route the
    /// runtime runs; never for self-contained objects.
    pub lane_gemm: bool,
    /// Nodes already computed by an earlier node (epilogue fusion in `conv`); `run` skips them.
    pub skip: Vec<bool>,
    /// Values without a slot that live in the scratch of the node computing them, by
    /// value: their offset in the workspace.
    redirect: Vec<Option<usize>>,
    /// The readers of every value (`Graph::users`), worked out once.
    pub users: Vec<Vec<NodeId>>,
    /// The max pool computed with the conv being lowered (`conv::conv`), if any: its
    /// pooled value, which has no slot, is placed in the node's scratch when first asked
    /// for ([`Lowering::buf`]), that is when the two are not one runtime call.
    pub pool_after: Option<PoolAfter>,
}

impl<'g> Lowering<'g> {
    pub fn new(g: &'g Graph, plan: &'g MemoryPlan, prefix: &str, vectorize: bool) -> Lowering<'g> {
        let mut output_of = vec![None; g.values.len()];
        for (j, v) in g.outputs.iter().enumerate() {
            if let Some(o) = output_of.get_mut(v.index())
                && o.is_none()
            {
                *o = Some(j);
            }
        }
        Lowering {
            g,
            plan,
            prog: Program::default(),
            const_map: vec![None; g.consts.len()],
            output_of,
            scratch_used: 0,
            scratch_max: 0,
            gemm_scratch_max: 0,
            vectorize,
            prefix: prefix.to_string(),
            node_index: 0,
            skip: vec![false; g.nodes.len()],
            redirect: vec![None; g.values.len()],
            users: g.users(),
            pool_after: None,
            direct_only: false,
            self_contained: false,
            runtime_windows: false,
            lane_gemm: false,
        }
    }

    pub fn shape(&self, v: ValueId) -> Result<Vec<usize>, CodegenError> {
        let val = self
            .g
            .values
            .get(v.index())
            .ok_or_else(|| CodegenError::Internal(format!("value {v} missing")))?;
        if !val.ty.layout.is_row_major() {
            return Err(CodegenError::Unsupported(format!(
                "non-row-major layout of {v}"
            )));
        }
        val.ty
            .shape()
            .ok_or_else(|| CodegenError::UnknownShape(format!("{v}: {}", val.ty)))
    }
    pub fn dtype(&self, v: ValueId) -> Result<DType, CodegenError> {
        self.g
            .values
            .get(v.index())
            .map(|x| x.ty.dtype)
            .ok_or_else(|| CodegenError::Internal(format!("value {v} missing")))
    }

    /// The buffer holding value `v`.
    pub fn buf(&mut self, v: ValueId) -> Result<BufId, CodegenError> {
        let val = self
            .g
            .values
            .get(v.index())
            .ok_or_else(|| CodegenError::Internal(format!("value {v} missing")))?;
        let dtype = val.ty.dtype;
        let len = self.shape(v)?.iter().product();
        let kind = match val.def {
            ValueDef::Input(i) => BufKind::Input(i),
            ValueDef::Const(c) => {
                let slot = self
                    .const_map
                    .get_mut(c.index())
                    .ok_or_else(|| CodegenError::Internal(format!("constant {c} missing")))?;
                let idx = match *slot {
                    Some(i) => i,
                    None => {
                        let t = &self.g.consts[c.index()].tensor;
                        self.prog.consts.push(t.to_le_bytes());
                        let i = self.prog.consts.len() - 1;
                        *slot = Some(i);
                        i
                    }
                };
                BufKind::Const(idx)
            }
            ValueDef::Node(..) => match self.output_of.get(v.index()).copied().flatten() {
                Some(j) => BufKind::Output(j),
                None if self.pool_after.is_some_and(|p| p.pooled == v)
                    || self.redirect[v.index()].is_some() =>
                {
                    let off = match self.redirect[v.index()] {
                        Some(off) => off,
                        None => {
                            let off = self.scratch_offset(len * dtype.size());
                            self.redirect[v.index()] = Some(off);
                            off
                        }
                    };
                    BufKind::Workspace(off)
                }
                None => {
                    let s = self
                        .plan
                        .slot(v)
                        .ok_or_else(|| CodegenError::Internal(format!("no memory slot for {v}")))?;
                    BufKind::Workspace(s.offset)
                }
            },
        };
        Ok(self.prog.add_buffer(kind, dtype, len))
    }

    /// A new read-only data object.
    pub fn const_buf(&mut self, bytes: Vec<u8>, dtype: DType, len: usize) -> BufId {
        self.prog.consts.push(bytes);
        let i = self.prog.consts.len() - 1;
        self.prog.add_buffer(BufKind::Const(i), dtype, len)
    }

    /// Scratch for the current node (64-byte aligned, after the arena).
    pub fn scratch(&mut self, dtype: DType, len: usize) -> BufId {
        let off = self.scratch_offset(len * dtype.size());
        self.prog.add_buffer(BufKind::Workspace(off), dtype, len)
    }

    /// Places value `v`, which has no slot, in the current node's scratch (an
    /// inverted-residual block lowered layer by layer, `block::lower`).
    fn in_scratch(&mut self, v: ValueId) -> Result<(), CodegenError> {
        let len: usize = self.shape(v)?.iter().product();
        let off = self.scratch_offset(len * self.dtype(v)?.size());
        self.redirect[v.index()] = Some(off);
        Ok(())
    }

    /// Reserves `bytes` of the current node's scratch; their workspace offset.
    fn scratch_offset(&mut self, bytes: usize) -> usize {
        let off = self.plan.arena_size + self.scratch_used;
        let bytes = bytes.div_ceil(SLOT_ALIGN) * SLOT_ALIGN;
        self.scratch_used += bytes.max(SLOT_ALIGN);
        self.scratch_max = self.scratch_max.max(self.scratch_used);
        off
    }
    /// Reserves `bytes` of GEMM scratch per worker. Every GEMM shares one region at the
    /// end of the workspace (repeated per worker), so the offset is only known when all
    /// nodes are lowered: the returned placeholder is replaced in [`Lowering::run`].
    pub fn gemm_scratch(&mut self, bytes: usize) -> usize {
        self.gemm_scratch_max = self.gemm_scratch_max.max(bytes);
        0
    }

    /// Among the steps of the node just lowered (those not yet attributed), the kernels
    /// whose outer extent equals that of a parallel kernel become parallel too, whatever
    /// their size, and so do kernels sharing an outer extent whose work together reaches
    /// `PARALLEL_MIN_POINTS`: the regions of one op then split the same way (a depthwise
    /// conv's borders by channel like its interior), instead of one thread walking every
    /// channel's border while the other idles and the caches hold the wrong channels.
    /// `object` runs such siblings as one fork-join.
    fn parallel_siblings(&mut self) {
        let from = self.prog.step_nodes.len();
        let points = super::schedule::parallel_work;
        // Loop-0 extents to split: those of a kernel that is parallel already, and those
        // whose kernels together have enough work (a depthwise conv on a 7×7 plane: no
        // region is large alone, all of them are; they then run as one fork-join).
        let mut totals: Vec<(usize, usize, bool)> = Vec::new();
        for s in &self.prog.steps[from..] {
            if let Step::Kernel(k) = s
                && let Some(l) = k.loops.first()
            {
                match totals.iter_mut().find(|t| t.0 == l.extent) {
                    Some(t) => {
                        t.1 = t.1.saturating_add(points(k));
                        t.2 |= l.parallel;
                    }
                    None => totals.push((l.extent, points(k), l.parallel)),
                }
            }
        }
        let extents: Vec<usize> = totals
            .iter()
            .filter(|t| t.2 || t.1 >= super::schedule::PARALLEL_MIN_POINTS)
            .map(|t| t.0)
            .collect();
        if extents.is_empty() {
            return;
        }
        for s in &mut self.prog.steps[from..] {
            if let Step::Kernel(k) = s
                && k.loops
                    .first()
                    .is_some_and(|l| !l.parallel && extents.contains(&l.extent))
            {
                super::schedule::mark_parallel(k);
            }
        }
    }

    /// Marks `nodes` as computed by an earlier node (`on`) or as running as usual again.
    pub fn set_skip(&mut self, nodes: &[usize], on: bool) {
        for &n in nodes {
            if let Some(s) = self.skip.get_mut(n) {
                *s = on;
            }
        }
    }

    /// Index of the node being lowered.
    pub fn node_idx(&self) -> usize {
        self.node_index
    }
    /// Sets the node that new steps are attributed to (`gemm_loops` re-lowering steps).
    pub fn set_node_idx(&mut self, node: usize) {
        self.node_index = node;
    }

    /// A fresh kernel named after the current node.
    pub fn kernel(&self, what: &str, extents: &[usize]) -> Kernel {
        let n = self.prog.steps.len();
        Kernel::new(
            format!("{}_k{}_n{}_{}", self.prefix, n, self.node_index, what),
            extents,
        )
    }
    /// Schedules `k` and appends it.
    pub fn push(&mut self, mut k: Kernel) {
        schedule(&mut k, self.vectorize);
        self.prog.steps.push(Step::Kernel(k));
    }

    /// A plain element copy `src → dst` of `len` elements.
    pub fn copy(&mut self, src: BufId, dst: BufId, dtype: DType, len: usize) {
        let mut k = self.kernel("copy", &[len]);
        let a = k.access(src, 0, vec![1]);
        k.load(a, dtype);
        k.set_store(dst, 0, vec![1]);
        self.push(k);
    }

    fn node(&mut self, n: &Node) -> Result<(), CodegenError> {
        let ins = &n.inputs;
        let outs = &n.outputs;
        match &n.op {
            Op::Unary(_)
            | Op::Binary(_)
            | Op::Select
            | Op::Clamp
            | Op::Cast { .. }
            | Op::BatchNorm { .. } => elementwise::lower(self, &n.op, ins, outs),
            Op::Reduce { op, axes } => reduce::reduce(self, *op, axes, ins, outs),
            Op::Softmax { axes } => reduce::softmax(self, axes, ins, outs),
            Op::MatMul {
                transpose_a,
                transpose_b,
            } => linalg::matmul(self, *transpose_a, *transpose_b, ins, outs),
            Op::Linear => linalg::linear(self, ins, outs),
            Op::Reshape { .. } | Op::Squeeze { .. } | Op::Unsqueeze { .. } => {
                movement::reshape(self, ins, outs)
            }
            Op::Transpose { axes } => movement::transpose(self, axes, ins, outs),
            Op::Split { axis, .. } => movement::split(self, *axis, ins, outs),
            Op::Concat { axis } => movement::concat(self, *axis, ins, outs),
            Op::Stack { axis } => movement::stack(self, *axis, ins, outs),
            Op::Unstack { axis } => movement::unstack(self, *axis, ins, outs),
            Op::Slice {
                axes,
                begin,
                end,
                stride,
            } => movement::slice(self, axes, begin, end, stride, ins, outs),
            Op::Tile { .. } => movement::tile(self, ins, outs),
            Op::Pad {
                padding,
                border,
                value,
            } => movement::pad(self, padding, *border, *value, ins, outs),
            Op::Gather { axis } => movement::gather(self, *axis, ins, outs),
            Op::Conv(a) => conv::conv(self, a, ins, outs),
            Op::Deconv(a) => deconv::deconv(self, a, ins, outs),
            Op::Box { window, normalize } => {
                window::box_filter(self, window, *normalize, ins, outs)
            }
            Op::Debox { window, normalize } => conv::debox(self, window, *normalize, ins, outs),
            Op::MaxPool(w) => window::max_pool(self, w, ins, outs),
            Op::ArgmaxPool(w) => window::argmax_pool(self, w, ins, outs),
            Op::Sample(w) => window::sample(self, w, ins, outs),
            Op::Desample(w) => conv::desample(self, w, ins, outs),
            Op::MultilinearUpsample {
                factor,
                method,
                border,
            } => resample::multilinear_upsample(self, factor, *method, *border, ins, outs),
            Op::RoiResample {
                output_size,
                method,
            } => resample::roi_resample(self, output_size, *method, ins, outs),
            Op::RoiPool { op, output_size } => roi::roi_pool(self, *op, output_size, ins, outs),
        }
    }

    /// Lowers every node, then copies graph outputs that are not written by a node
    /// (inputs, constants, repeated outputs).
    pub fn run(mut self) -> Result<Program, CodegenError> {
        let groups = fuse::plan(self.g, self.plan);
        // Inverted-residual blocks run at their projection: the nodes before it are theirs.
        let blocks = crate::passes::block::blocks(self.g, &self.users);
        let mut block_at = vec![None; self.g.nodes.len()];
        for (bi, b) in blocks.iter().enumerate() {
            for n in b.nodes(self.g, &self.users) {
                if n < b.project {
                    self.skip[n] = true;
                }
            }
            block_at[b.project] = Some(bi);
        }
        for (i, n) in self.g.nodes.iter().enumerate() {
            if i > 0 {
                self.parallel_siblings();
                self.prog.attribute_steps(i - 1);
            }
            self.node_index = i;
            self.scratch_used = 0;
            if self.skip.get(i).copied().unwrap_or(false) {
                continue;
            }
            if let Some(b) = block_at[i] {
                block::lower(&mut self, &blocks[b])?;
                continue;
            }
            match groups.root_of.get(i).copied().flatten() {
                // A fused member: computed inside its root's kernel.
                Some(r) if r != i => continue,
                Some(_) => fuse::lower_group(&mut self, &groups.members(i))?,
                None => self.node(n)?,
            }
        }
        self.parallel_siblings();
        self.prog
            .attribute_steps(self.g.nodes.len().saturating_sub(1));
        self.node_index = self.g.nodes.len();
        self.scratch_used = 0;
        for (j, &v) in self.g.outputs.iter().enumerate() {
            let direct = matches!(self.g.value(v).def, ValueDef::Node(..))
                && self.output_of.get(v.index()).copied().flatten() == Some(j);
            if direct {
                continue;
            }
            let dtype = self.dtype(v)?;
            let len: usize = self.shape(v)?.iter().product();
            let src = self.buf(v)?;
            let dst = self.prog.add_buffer(BufKind::Output(j), dtype, len);
            self.copy(src, dst, dtype, len);
        }
        self.prog.attribute_steps(self.g.nodes.len());
        if self.self_contained {
            gemm_loops::lower_all(&mut self)?;
        }
        let gemm_base = (self.plan.arena_size + self.scratch_max).div_ceil(SLOT_ALIGN) * SLOT_ALIGN;
        let per_worker = self.gemm_scratch_max.div_ceil(SLOT_ALIGN) * SLOT_ALIGN;
        for step in &mut self.prog.steps {
            match step {
                Step::Gemm(g) | Step::Tiled { gemm: g, .. } => g.scratch = gemm_base,
                Step::Block(b) => b.scratch = gemm_base,
                Step::Window(WindowCall {
                    op:
                        WindowOp::WinogradFused {
                            banded: Some(band), ..
                        },
                    ..
                }) => band.scratch = gemm_base,
                _ => {}
            }
        }
        prefetch::plan(&mut self.prog);
        self.prog.workspace_size = gemm_base + per_worker;
        self.prog.worker_scratch = per_worker;
        Ok(self.prog)
    }
}

/// Lowers a whole graph (runtime GEMM calls kept).
#[allow(dead_code)]
pub(crate) fn select(
    g: &Graph,
    plan: &MemoryPlan,
    prefix: &str,
    vectorize: bool,
) -> Result<Program, CodegenError> {
    Lowering::new(g, plan, prefix, vectorize).run()
}

/// [`select`] with the GEMMs as loop nests when `self_contained` (no runtime calls), and
/// depthwise and few-channel convolutions and 3×3 max pools as runtime calls when
/// `runtime_windows`, and lane-panel GEMMs
/// where they pay when `lane_gemm` (both only when not self-contained).
pub(crate) fn select_with(
    g: &Graph,
    plan: &MemoryPlan,
    prefix: &str,
    vectorize: bool,
    self_contained: bool,
    runtime_windows: bool,
    lane_gemm: bool,
) -> Result<Program, CodegenError> {
    let mut lw = Lowering::new(g, plan, prefix, vectorize);
    lw.self_contained = self_contained;
    lw.runtime_windows = runtime_windows && !self_contained;
    lw.lane_gemm = lane_gemm && !self_contained;
    lw.run()
}
