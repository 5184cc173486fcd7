//! Loop-nest kernel description: what one generated function computes, before CLIF.
//!
//! A [`Kernel`] is a perfect loop nest over constant extents, a list of buffer
//! [`Access`]es (base + affine index + optional data-dependent terms), an expression
//! body in SSA form ([`ExprNode`] list), one store, and optionally a reduction over the
//! innermost loops. Every op in the back end's scope lowers to one or more kernels
//! (`back::select`); `back::schedule` rewrites kernels (collapse loops, choose the
//! vector width) and `back::emit` turns them into CLIF. The printed form is what
//! `nnefc dump --stage kernels` shows and what tests compare against.
//!
//! Index arithmetic is in elements: the flat element index an access touches at loop
//! point `(i_0, …, i_{n-1})` is `offset + Σ strides[l]·i_l + Σ scale·clamp(load(index))`.
//! The description does not hold schedules beyond the per-loop vector width, and holds no
//! Cranelift types.

use crate::ir::{BinaryOp, DType, UnaryOp};
use std::fmt;

/// Index of a buffer in [`Program::buffers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BufId(pub u32);
/// Index of an access in [`Kernel::accesses`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AccessId(pub u32);
/// Index of a node in [`Kernel::body`] (or [`Reduction::finalize`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExprId(pub u32);

/// Where a buffer's bytes are at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufKind {
    /// `inputs[i]` of the entry point (read-only).
    Input(usize),
    /// `outputs[i]` of the entry point.
    Output(usize),
    /// `workspace + offset` (arena slots and per-step scratch; offset 64-byte aligned).
    Workspace(usize),
    /// Read-only data object `consts[i]` of the [`Program`].
    Const(usize),
    /// `weights + offset`: a constant moved to the external weights file
    /// (`back::weights`; offset in bytes from the file's start, 64-byte aligned).
    Weights(usize),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    pub kind: BufKind,
    pub dtype: DType,
    /// Elements.
    pub len: usize,
}

/// A data-dependent index term: `scale · clamp(load(index), 0, bound − 1)`.
/// The clamp keeps every access in bounds whatever the index data says.
#[derive(Clone, Debug, PartialEq)]
pub struct Indirect {
    /// An i32 access of the same kernel.
    pub index: AccessId,
    pub scale: i64,
    pub bound: usize,
}

/// Element index = `offset + Σ strides[l]·i_l + Σ indirect terms`.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    pub buf: BufId,
    pub offset: i64,
    /// One stride per loop of the kernel (0 = the access does not move with that loop).
    pub strides: Vec<i64>,
    pub indirect: Vec<Indirect>,
}

/// A scalar constant in an expression.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lit {
    F32(f32),
    I32(i32),
    Bool(bool),
}

impl Lit {
    pub fn dtype(self) -> DType {
        match self {
            Lit::F32(_) => DType::F32,
            Lit::I32(_) => DType::I32,
            Lit::Bool(_) => DType::Bool,
        }
    }
}

/// One SSA node of a kernel body. Operands are earlier nodes.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Load(AccessId),
    Lit(Lit),
    /// The reduction result (only in [`Reduction::finalize`]).
    Acc,
    Unary(UnaryOp, ExprId),
    Binary(BinaryOp, ExprId, ExprId),
    /// cond (bool), then, else
    Select(ExprId, ExprId, ExprId),
    Cast(DType, ExprId),
}

#[derive(Clone, Debug, PartialEq)]
pub struct ExprNode {
    pub expr: Expr,
    pub ty: DType,
}

/// How the reduction loops combine body values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    Sum,
    Max,
    Min,
    /// logical or (bool)
    Any,
    /// logical and (bool)
    All,
    /// i32 linear index (over the reduction loops, row-major) of the first maximum
    ArgMax,
    ArgMin,
}

/// Loops `first_loop..` reduce; the store happens once per point of the outer loops,
/// after the reduction, with the value of `finalize` (whose last node is stored; it may
/// use [`Expr::Acc`] and loads that do not move with the reduction loops).
#[derive(Clone, Debug, PartialEq)]
pub struct Reduction {
    pub kind: ReduceKind,
    pub first_loop: usize,
    pub finalize: Vec<ExprNode>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Loop {
    pub extent: usize,
    /// Elements per step: 1 (scalar) or 4 (f32x4/i32x4, innermost loop only; the
    /// emitter adds a scalar tail for `extent % 4`).
    pub vector: usize,
    /// The loop's iterations may run as parallel tasks (outermost loop only; set by
    /// `schedule`): iterations write disjoint elements and no reduction crosses them.
    /// The kernel function then takes `(ctx, task, worker)` and runs the task's share
    /// `[task·E/n, (task+1)·E/n)` of this loop (see `back::object`).
    pub parallel: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub name: String,
    /// Outermost first.
    pub loops: Vec<Loop>,
    pub accesses: Vec<Access>,
    /// The last node is the value stored (or reduced).
    pub body: Vec<ExprNode>,
    pub store: AccessId,
    pub reduction: Option<Reduction>,
}

/// A matrix operand of a GEMM: element `(r, c)` of batch `b` is
/// `buf[batch_offset[b] + r·rs + c·cs]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Matrix {
    pub buf: BufId,
    pub rs: i64,
    pub cs: i64,
}

/// How the A operand of a [`GemmCall`] is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum APacking {
    /// Strided: element `(i, kk)` at `i·a.rs + kk·a.cs`.
    #[default]
    None,
    /// A constant in the runtime's 6-row panels (`nnefc_runtime::pack_a`), which every
    /// GEMM path reads: the runtime's kernels and the self-contained loop nests.
    Rows6,
    /// A constant in the runtime's 16-row lane panels (`nnefc_runtime::pack_a_lanes`),
    /// computed by the runtime's lane route; chosen only for runtime calls on AVX-512
    /// targets (`select::linalg::a_packing`). The self-contained GEMM loops can read it
    /// too, but never get it.
    Lanes16,
}

impl APacking {
    /// The value of `nnefc_runtime::GemmArgs::a_packed` for this format.
    pub fn abi_value(self) -> usize {
        match self {
            APacking::None => 0,
            APacking::Rows6 => 1,
            APacking::Lanes16 => nnefc_runtime::gemm::A_LANES,
        }
    }

    /// Rows per panel of a packed format (`None` for strided A).
    pub fn panel_rows(self) -> Option<usize> {
        match self {
            APacking::None => None,
            APacking::Rows6 => Some(nnefc_runtime::gemm::MR),
            APacking::Lanes16 => Some(nnefc_runtime::gemm::LANES),
        }
    }
}

impl fmt::Display for APacking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            APacking::None => "strided",
            APacking::Rows6 => "rows6",
            APacking::Lanes16 => "lanes16",
        })
    }
}

/// A call to the runtime's GEMM (`nnefc_sgemm_batch_parallel`), A strided or packed at
/// compile time (`a_packing`): `C[m×n] = A[m×k]·B[k×n] (+ bias per column)`, once per
/// batch entry.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmCall {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub a: Matrix,
    /// A's format: strided through `a.rs`/`a.cs`, or a constant already in one of the
    /// runtime's packed formats (then `rs`/`cs` are unused).
    pub a_packing: APacking,
    pub b: Matrix,
    /// C has unit column stride; `cs` is 1.
    pub c: Matrix,
    /// Per batch: element offsets into A, B and C.
    pub batches: Vec<[i64; 3]>,
    /// Optional bias, one f32 per column of C.
    pub bias: Option<BufId>,
    /// Byte offset of worker 0's GEMM scratch in the workspace (the same for every GEMM:
    /// the last region, see [`Program::worker_scratch`]).
    pub scratch: usize,
    /// Per-row bias, fused activation, accumulation (convolutions; default: none).
    pub epi: GemmEpi,
    /// Memory the call brings into the caches while it computes, for a later step: that
    /// step's constant matrix and its length in f32s (`select::prefetch`).
    pub prefetch: Option<(BufId, usize)>,
}

impl GemmCall {
    /// Every buffer the call reads or writes: A, B, C, column bias, row bias (present ones).
    pub fn buffers(&self) -> Vec<BufId> {
        [
            Some(self.a.buf),
            Some(self.b.buf),
            Some(self.c.buf),
            self.bias,
            self.epi.row_bias.as_ref().map(|r| r.0),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// The rest of the runtime's `GemmEpilogue` beyond the per-column bias of [`GemmCall`]:
/// `C = act((accumulate ? C_old : 0) + A·B + bias)`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct GemmEpi {
    /// One f32 per row of C: buffer and, per batch entry, the element offset of row 0.
    pub row_bias: Option<(BufId, Vec<i64>)>,
    pub activation: Activation,
    /// Add the product to the existing C.
    pub accumulate: bool,
}

/// Activation folded into a GEMM's epilogue.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Activation {
    #[default]
    None,
    Relu,
    Clamp(f32, f32),
    Sigmoid,
    /// x·sigmoid(x).
    Swish,
    /// (x·clamp(x + 3, 0, 6))·(1/6).
    HardSwish,
}

impl Activation {
    /// The activation of `x` as element-wise expressions, each added by `push`; the
    /// result's id (`x` itself for none). The loop-nest lowerings' form of what the
    /// runtime's kernels compute in their epilogue; the clamp is the element-wise ops'
    /// NaN-propagating min/max, so fused and unfused graphs agree on NaN.
    pub fn apply(self, x: ExprId, mut push: impl FnMut(Expr) -> ExprId) -> ExprId {
        match self {
            Activation::None => x,
            Activation::Relu => push(Expr::Unary(UnaryOp::Relu, x)),
            Activation::Clamp(lo, hi) => clamp_expr(x, lo, hi, &mut push),
            Activation::Sigmoid => push(Expr::Unary(UnaryOp::Sigmoid, x)),
            Activation::Swish => {
                let s = push(Expr::Unary(UnaryOp::Sigmoid, x));
                push(Expr::Binary(BinaryOp::Mul, x, s))
            }
            Activation::HardSwish => {
                let three = push(Expr::Lit(Lit::F32(3.0)));
                let t = push(Expr::Binary(BinaryOp::Add, x, three));
                let c = clamp_expr(t, 0.0, 6.0, &mut push);
                let m = push(Expr::Binary(BinaryOp::Mul, x, c));
                let sixth = push(Expr::Lit(Lit::F32(1.0 / 6.0)));
                push(Expr::Binary(BinaryOp::Mul, m, sixth))
            }
        }
    }

    /// The runtime's activation code (`nnefc_runtime::ACT_*`) and clamp bounds.
    pub fn runtime_code(self) -> (i64, f32, f32) {
        let code = |c: u32| i64::from(c);
        match self {
            Activation::None => (code(nnefc_runtime::ACT_NONE), 0.0, 0.0),
            Activation::Relu => (code(nnefc_runtime::ACT_RELU), 0.0, 0.0),
            Activation::Clamp(lo, hi) => (code(nnefc_runtime::ACT_CLAMP), lo, hi),
            Activation::Sigmoid => (code(nnefc_runtime::ACT_SIGMOID), 0.0, 0.0),
            Activation::Swish => (code(nnefc_runtime::ACT_SWISH), 0.0, 0.0),
            Activation::HardSwish => (code(nnefc_runtime::ACT_HARDSWISH), 0.0, 0.0),
        }
    }
}

/// `max(min(x, hi), lo)` as element-wise expressions added by `push` (the element-wise
/// ops' NaN-propagating min/max); the result's id.
fn clamp_expr(x: ExprId, lo: f32, hi: f32, push: &mut impl FnMut(Expr) -> ExprId) -> ExprId {
    let h = push(Expr::Lit(Lit::F32(hi)));
    let l = push(Expr::Lit(Lit::F32(lo)));
    let m = push(Expr::Binary(BinaryOp::Min, x, h));
    push(Expr::Binary(BinaryOp::Max, m, l))
}

/// One step of the entry point, in execution order.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Kernel(Kernel),
    Gemm(GemmCall),
    /// A GEMM emitted as a local register-blocked function (`emit::gemm`) instead of a
    /// runtime call: self-contained objects (`select::gemm_loops`).
    Tiled {
        name: String,
        gemm: GemmCall,
    },
    /// A 2-D window op over NCHW planes run by one of the runtime's vector kernels
    /// (depthwise or few-channel convolution, max pool: see [`WindowOp`]).
    Window(WindowCall),
    /// An inverted-residual block run band by band by the runtime
    /// (`nnefc_inverted_residual`, see [`BlockCall`]).
    Block(BlockCall),
}

/// One 1×1 conv of a [`BlockCall`]: its matrix (a constant in `packing`), its bias
/// (one value per output channel) and activation.
#[derive(Clone, Debug, PartialEq)]
pub struct Pointwise {
    pub matrix: BufId,
    pub packing: APacking,
    pub bias: BufId,
    pub activation: Activation,
}

/// The expansion of a [`BlockCall`].
#[derive(Clone, Debug, PartialEq)]
pub enum Expansion {
    /// A 1×1 conv.
    Pointwise(Pointwise),
    /// A direct conv of few input channels (`nnefc_conv` over each band's rows): its
    /// filter packed by `nnefc_runtime::pack_conv_filter`, its bias (`mid` values) and
    /// activation, and `[k, stride, pad top, pad left]` (square window, equal strides).
    Direct {
        filter: BufId,
        bias: BufId,
        activation: Activation,
        window: [usize; 4],
    },
}

impl Expansion {
    /// The activation ending the expansion.
    pub fn activation(&self) -> Activation {
        match self {
            Expansion::Pointwise(p) => p.activation,
            Expansion::Direct { activation, .. } => *activation,
        }
    }
}

/// One call of `nnefc_inverted_residual` (`nnefc_runtime::BlockArgs`): an expansion (a
/// 1×1 conv or a direct conv), a depthwise conv and a 1×1 projection over dense NCHW
/// tensors, computed `band` output rows at a time (after cutting the rows into `parts`)
/// in per-worker buffers, so that neither intermediate map exists whole.
#[derive(Clone, Debug, PartialEq)]
pub struct BlockCall {
    /// `[n, cin, mid, cout, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl, band, parts]`:
    /// `h`×`w` is the expanded map's extent (the depthwise conv's input).
    pub dims: [usize; 18],
    /// The block's input, `[n, cin, xh, xw]` (`input`).
    pub x: BufId,
    /// `[xh, xw]`: `[h, w]` unless the expansion is a direct conv.
    pub input: [usize; 2],
    /// None: no expansion (the depthwise conv reads `x`, `mid == cin`).
    pub expand: Option<Expansion>,
    /// The depthwise filter `[mid, kh, kw]`, its bias (`mid` values), its activation.
    pub filter: BufId,
    pub dw_bias: BufId,
    pub dw_activation: Activation,
    /// The projection; its activation ends the block.
    pub project: Pointwise,
    /// Added before the projection's activation, laid out like the output (may be it).
    pub residual: Option<BufId>,
    /// The output, `[n, cout, oh, ow]`.
    pub y: BufId,
    /// Workspace offset of worker 0's scratch (the GEMM scratch region, repeated per
    /// worker like a GEMM's).
    pub scratch: usize,
    /// Rows per band when the call runs on one thread, and the workspace offset of that
    /// run's scratch (the node's scratch); `None`: the bands above, in worker 0's.
    pub serial: Option<(usize, usize)>,
}

impl BlockCall {
    /// Every buffer the call reads or writes.
    pub fn buffers(&self) -> Vec<BufId> {
        let mut v = vec![self.x];
        match &self.expand {
            Some(Expansion::Pointwise(e)) => v.extend([e.matrix, e.bias]),
            Some(Expansion::Direct { filter, bias, .. }) => v.extend([*filter, *bias]),
            None => {}
        }
        v.extend([
            self.filter,
            self.dw_bias,
            self.project.matrix,
            self.project.bias,
        ]);
        v.extend(self.residual);
        v.push(self.y);
        v
    }
}

impl Step {
    /// Whether the step does a node's arithmetic (a GEMM or a depthwise call), as opposed
    /// to the data movement around it (im2col, padding, transforms).
    pub fn is_contraction(&self) -> bool {
        matches!(
            self,
            Step::Gemm(_) | Step::Tiled { .. } | Step::Window(_) | Step::Block(_)
        )
    }
}

/// One call of a runtime window kernel (`nnefc_runtime::DwArgs`, `ConvArgs` for
/// [`WindowOp::Dense`]): NCHW tensors, zero padding (skipped taps for the maximum),
/// optional residual and activation. Offsets and strides are in elements; rows have unit
/// stride.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowCall {
    /// `[n, c, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl]`.
    pub dims: [usize; 14],
    /// Input buffer, element offset, strides of sample, channel and row.
    pub x: (BufId, i64, [i64; 3]),
    pub op: WindowOp,
    /// Added before the activation, laid out like the output.
    pub residual: Option<BufId>,
    /// Output buffer and strides of sample, channel and row.
    pub y: (BufId, [i64; 3]),
    pub activation: Activation,
}

/// The banded form of [`WindowOp::WinogradFused`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WinogradBands {
    /// The conv's input: `[h, w, pt, pl]` (extents and zero padding above and left).
    pub input: [usize; 4],
    /// Tile rows per band.
    pub band: usize,
    /// Workspace offset of worker 0's scratch (the GEMM scratch region, repeated per
    /// worker like a GEMM's).
    pub scratch: usize,
}

/// What a [`WindowCall`] computes over each window.
#[derive(Clone, Debug, PartialEq)]
pub enum WindowOp {
    /// Depthwise convolution (`nnefc_dwconv`): the filter `[c, 1, kh, kw]` (dense), the
    /// bias and its stride between channels (0: one value).
    Conv { filter: BufId, bias: (BufId, i64) },
    /// Dense convolution of `cin` input channels into the call's channels
    /// (`nnefc_conv`): the filter packed by `nnefc_runtime::pack_conv_filter`, the bias
    /// and its stride between output channels. For a grouped convolution the call's
    /// samples are the groups, and `groups` holds the filter (floats) and bias strides
    /// between them (both 0 otherwise).
    Dense {
        filter: BufId,
        bias: (BufId, i64),
        cin: usize,
        groups: (i64, i64),
    },
    /// `max_pool` with the `ignore` border (`nnefc_maxpool`): taps outside the input are
    /// skipped.
    Max,
    /// The Winograd input transform (`nnefc_winograd_in`), F(2×2, 3×3) when the call's
    /// `kh × kw` is 4×4 (tiles `sh = sw = 2` apart) and F(4×4, 3×3) when it is 6×6 (4
    /// apart): the input is `h × w` planes read with `pt` zero rows above and `pl` zero
    /// columns to the left, and zeros past them (the conv's input in place, or an already
    /// padded view with `pt = pl = 0`), `oh × ow` the tiles; the output holds the
    /// `kh·kw` transformed elements of every tile, element `t` of channel `c` at plane
    /// `t·channels + c` (`y` strides: sample, plane, tile row).
    WinogradIn,
    /// The Winograd output transform (`nnefc_winograd_out`), tile size as for
    /// [`WindowOp::WinogradIn`] (`sh × sw` outputs per tile): the input is the
    /// tap products laid out as [`WindowOp::WinogradIn`]'s output (`x` strides: sample,
    /// plane, tile row; `oh × ow` tiles), the output `h × w`, plus the bias (and its stride
    /// between channels), the residual and the activation.
    WinogradOut { bias: (BufId, i64) },
    /// The Winograd F(4×4, 3×3) tap products fused with the output transform
    /// (`nnefc_winograd_fused`, `ConvArgs`): the input is [`WindowOp::WinogradIn`]'s
    /// output for `cin` channels (`x` strides: sample, plane, tile row; `oh × ow` tiles),
    /// `filter` the transformed filter `U_t[co][ci]` at `(t·channels + co)·cin + ci`, the
    /// output `h × w`, plus the bias (and its stride between channels), the residual and
    /// the activation. With `banded`, the input transform too, band by band of tile rows
    /// in each worker's scratch (`nnefc_winograd_banded`, `WinogradBandArgs`): `x` is
    /// then the conv's input, read in place as [`WindowOp::WinogradIn`] reads it.
    WinogradFused {
        filter: BufId,
        bias: (BufId, i64),
        cin: usize,
        banded: Option<WinogradBands>,
    },
    /// A dense convolution of `cin` input channels and the 3×3 `max_pool` (`ignore`
    /// border) over its output, fused (`nnefc_conv_pool`, `ConvPoolArgs`): the call's
    /// dims, input, bias and activation are the conv's (as for [`WindowOp::Dense`], the
    /// filter packed by `nnefc_runtime::pack_conv_pool_filter`), its output is the
    /// pool's, `pool` = `[oh, ow, stride, pt, pl]` (both strides equal).
    ConvPool {
        filter: BufId,
        bias: (BufId, i64),
        cin: usize,
        pool: [usize; 5],
    },
}

impl WindowOp {
    /// The runtime function a call of this op goes to (each takes the argument struct and
    /// the parallel-for).
    pub fn symbol(&self) -> &'static str {
        match self {
            WindowOp::Conv { .. } => "nnefc_dwconv",
            WindowOp::Dense { .. } => "nnefc_conv",
            WindowOp::Max => "nnefc_maxpool",
            WindowOp::WinogradIn => "nnefc_winograd_in",
            WindowOp::WinogradOut { .. } => "nnefc_winograd_out",
            WindowOp::WinogradFused {
                banded: Some(_), ..
            } => "nnefc_winograd_banded",
            WindowOp::WinogradFused { .. } => "nnefc_winograd_fused",
            WindowOp::ConvPool { .. } => "nnefc_conv_pool",
        }
    }
}

impl WindowCall {
    /// Every buffer the call reads or writes: input, filter, bias, residual, output.
    pub fn buffers(&self) -> Vec<BufId> {
        let (filter, bias) = match self.op {
            WindowOp::Conv { filter, bias }
            | WindowOp::Dense { filter, bias, .. }
            | WindowOp::WinogradFused { filter, bias, .. }
            | WindowOp::ConvPool { filter, bias, .. } => (Some(filter), Some(bias.0)),
            WindowOp::WinogradOut { bias } => (None, Some(bias.0)),
            WindowOp::Max | WindowOp::WinogradIn => (None, None),
        };
        [Some(self.x.0), filter, bias, self.residual, Some(self.y.0)]
            .into_iter()
            .flatten()
            .collect()
    }
}

/// Everything the object needs: buffers, read-only data and steps.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Program {
    pub buffers: Vec<Buffer>,
    /// Read-only data objects (little-endian bytes).
    pub consts: Vec<Vec<u8>>,
    pub steps: Vec<Step>,
    /// Bytes of workspace for one worker (arena + scratch + one GEMM scratch), a multiple
    /// of 64.
    pub workspace_size: usize,
    /// Bytes each further worker adds: the GEMM scratch, which is the last region of the
    /// workspace, is repeated per worker (worker `w` at `GemmCall::scratch + w·this`).
    pub worker_scratch: usize,
    /// Per step, the index of the graph node it computes (the node count for the copies
    /// of graph outputs at the end): what `--profile` attributes time to.
    pub step_nodes: Vec<usize>,
}

impl Program {
    /// Attributes every step added since the last call to graph node `node`.
    pub fn attribute_steps(&mut self, node: usize) {
        let n = self.steps.len();
        self.step_nodes.resize(n, node);
    }
}

impl Program {
    pub fn add_buffer(&mut self, kind: BufKind, dtype: DType, len: usize) -> BufId {
        if let Some(i) = self
            .buffers
            .iter()
            .position(|b| b.kind == kind && b.dtype == dtype && b.len == len)
        {
            return BufId(i as u32);
        }
        self.buffers.push(Buffer { kind, dtype, len });
        BufId(self.buffers.len() as u32 - 1)
    }
    pub fn buffer(&self, b: BufId) -> Option<&Buffer> {
        self.buffers.get(b.0 as usize)
    }
}

impl Kernel {
    /// A kernel over `extents` with no accesses yet; the store is set by [`Kernel::set_store`].
    pub fn new(name: impl Into<String>, extents: &[usize]) -> Kernel {
        Kernel {
            name: name.into(),
            loops: extents
                .iter()
                .map(|&e| Loop {
                    extent: e,
                    vector: 1,
                    parallel: false,
                })
                .collect(),
            accesses: Vec::new(),
            body: Vec::new(),
            store: AccessId(0),
            reduction: None,
        }
    }
    pub fn access(&mut self, buf: BufId, offset: i64, strides: Vec<i64>) -> AccessId {
        self.accesses.push(Access {
            buf,
            offset,
            strides,
            indirect: Vec::new(),
        });
        AccessId(self.accesses.len() as u32 - 1)
    }
    pub fn push(&mut self, expr: Expr, ty: DType) -> ExprId {
        self.body.push(ExprNode { expr, ty });
        ExprId(self.body.len() as u32 - 1)
    }
    pub fn load(&mut self, a: AccessId, ty: DType) -> ExprId {
        self.push(Expr::Load(a), ty)
    }
    pub fn set_store(&mut self, buf: BufId, offset: i64, strides: Vec<i64>) {
        self.store = self.access(buf, offset, strides);
    }
    pub fn ty(&self, e: ExprId) -> DType {
        self.body
            .get(e.0 as usize)
            .map(|n| n.ty)
            .unwrap_or(DType::F32)
    }
}

fn write_expr(f: &mut fmt::Formatter<'_>, prefix: &str, i: usize, n: &ExprNode) -> fmt::Result {
    write!(f, "    {prefix}{i}:{} = ", n.ty)?;
    match &n.expr {
        Expr::Load(a) => writeln!(f, "load a{}", a.0),
        Expr::Lit(Lit::F32(x)) => writeln!(f, "{x:?}"),
        Expr::Lit(Lit::I32(x)) => writeln!(f, "{x}"),
        Expr::Lit(Lit::Bool(x)) => writeln!(f, "{x}"),
        Expr::Acc => writeln!(f, "acc"),
        Expr::Unary(op, a) => writeln!(
            f,
            "{} {prefix}{}",
            crate::ir::Op::Unary(*op).mnemonic(),
            a.0
        ),
        Expr::Binary(op, a, b) => {
            writeln!(
                f,
                "{} {prefix}{}, {prefix}{}",
                crate::ir::Op::Binary(*op).mnemonic(),
                a.0,
                b.0
            )
        }
        Expr::Select(c, a, b) => writeln!(
            f,
            "select {prefix}{}, {prefix}{}, {prefix}{}",
            c.0, a.0, b.0
        ),
        Expr::Cast(t, a) => writeln!(f, "cast.{t} {prefix}{}", a.0),
    }
}

impl fmt::Display for Kernel {
    /// ```text
    /// kernel k0_relu
    ///   loop 12 x4
    ///   a0 = b0[0 + 1i0]
    ///   a1 = b1[0 + 1i0]
    ///     e0:f32 = load a0
    ///     e1:f32 = relu e0
    ///   store a1 = e1
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "kernel {}", self.name)?;
        for (i, l) in self.loops.iter().enumerate() {
            let role = match &self.reduction {
                Some(r) if i >= r.first_loop => " reduce",
                _ => "",
            };
            let vec = if l.vector > 1 {
                format!(" x{}", l.vector)
            } else {
                String::new()
            };
            let par = if l.parallel { " parallel" } else { "" };
            writeln!(f, "  loop i{i} < {}{vec}{par}{role}", l.extent)?;
        }
        for (i, a) in self.accesses.iter().enumerate() {
            write!(f, "  a{i} = b{}[{}", a.buf.0, a.offset)?;
            for (l, s) in a.strides.iter().enumerate() {
                if *s != 0 {
                    write!(f, " + {s}i{l}")?;
                }
            }
            for ind in &a.indirect {
                write!(f, " + {}*clamp(a{}, {})", ind.scale, ind.index.0, ind.bound)?;
            }
            writeln!(f, "]")?;
        }
        for (i, n) in self.body.iter().enumerate() {
            write_expr(f, "e", i, n)?;
        }
        if let Some(r) = &self.reduction {
            writeln!(f, "  reduce {:?}", r.kind)?;
            for (i, n) in r.finalize.iter().enumerate() {
                write_expr(f, "r", i, n)?;
            }
        }
        let last = |len: usize, p: &str| {
            if len == 0 {
                "none".to_string()
            } else {
                format!("{p}{}", len - 1)
            }
        };
        let value = match &self.reduction {
            Some(r) => last(r.finalize.len(), "r"),
            None => last(self.body.len(), "e"),
        };
        writeln!(f, "  store a{} = {value}", self.store.0)
    }
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.buffers.iter().enumerate() {
            let kind = match b.kind {
                BufKind::Input(k) => format!("input {k}"),
                BufKind::Output(k) => format!("output {k}"),
                BufKind::Workspace(o) => format!("workspace @{o}"),
                BufKind::Const(c) => format!("const {c}"),
                BufKind::Weights(o) => format!("weights @{o}"),
            };
            writeln!(f, "b{i}: {}[{}] {kind}", b.dtype, b.len)?;
        }
        writeln!(
            f,
            "workspace {} bytes + {} per extra worker",
            self.workspace_size, self.worker_scratch
        )?;
        for s in &self.steps {
            match s {
                Step::Kernel(k) => write!(f, "{k}")?,
                Step::Block(b) => {
                    let [
                        n,
                        cin,
                        mid,
                        cout,
                        h,
                        w,
                        oh,
                        ow,
                        kh,
                        kw,
                        sh,
                        sw,
                        dh,
                        dw,
                        pt,
                        pl,
                        band,
                        parts,
                    ] = b.dims;
                    let pw = |p: &Pointwise| {
                        format!(
                            "b{} packed={} bias=b{} {:?}",
                            p.matrix.0, p.packing, p.bias.0, p.activation
                        )
                    };
                    writeln!(
                        f,
                        "inverted_residual b{}[{n},{cout},{oh},{ow}] = b{}[{n},{cin},{},{}] \
                         in {parts} parts, bands of {band} rows{}{} scratch=@{}",
                        b.y.0,
                        b.x.0,
                        b.input[0],
                        b.input[1],
                        b.serial
                            .map(|(r, at)| format!(" (one thread: bands of {r} rows @{at})"))
                            .unwrap_or_default(),
                        b.residual
                            .map(|r| format!(" residual=b{}", r.0))
                            .unwrap_or_default(),
                        b.scratch
                    )?;
                    match &b.expand {
                        Some(Expansion::Pointwise(e)) => {
                            writeln!(f, "  expand to {mid}: {}", pw(e))?
                        }
                        Some(Expansion::Direct {
                            filter,
                            bias,
                            activation,
                            window: [k, s, ept, epl],
                        }) => writeln!(
                            f,
                            "  expand to {mid}: direct b{}[{k},{k}] to {h}x{w} stride=({s},{s}) \
                             pad=({ept},{epl}) bias=b{} {activation:?}",
                            filter.0, bias.0
                        )?,
                        None => {}
                    }
                    writeln!(
                        f,
                        "  depthwise * b{}[{kh},{kw}] stride=({sh},{sw}) dilation=({dh},{dw}) \
                         pad=({pt},{pl}) bias=b{} {:?}",
                        b.filter.0, b.dw_bias.0, b.dw_activation
                    )?;
                    writeln!(f, "  project: {} parallel", pw(&b.project))?
                }
                Step::Window(d) => {
                    let [n, c, h, w, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl] = d.dims;
                    let cx = match d.op {
                        WindowOp::Dense { cin, .. }
                        | WindowOp::WinogradFused { cin, .. }
                        | WindowOp::ConvPool { cin, .. } => cin,
                        _ => c,
                    };
                    // The output's extents: the pool's for a fused conv and pool.
                    let (yh, yw) = match d.op {
                        WindowOp::ConvPool { pool, .. } => (pool[0], pool[1]),
                        _ => (oh, ow),
                    };
                    // The input's: the conv's input for a banded Winograd layer.
                    let (h, w) = match d.op {
                        WindowOp::WinogradFused {
                            banded: Some(b), ..
                        } => (b.input[0], b.input[1]),
                        _ => (h, w),
                    };
                    let (name, op) = match d.op {
                        WindowOp::Conv { filter, bias } => (
                            "dwconv",
                            format!(" * b{}[{kh},{kw}]", filter.0)
                                + &format!(" bias=b{}/{}", bias.0.0, bias.1),
                        ),
                        WindowOp::Dense {
                            filter,
                            bias,
                            cin,
                            groups,
                        } => (
                            "conv",
                            format!(" from {cin} channels * b{}[{kh},{kw}]", filter.0)
                                + &format!(" bias=b{}/{}", bias.0.0, bias.1)
                                + if groups.0 != 0 { " per group" } else { "" },
                        ),
                        WindowOp::Max => ("maxpool", format!(" window=[{kh},{kw}]")),
                        WindowOp::WinogradIn => ("winograd_in", format!(" tiles {kh}x{kw}")),
                        WindowOp::WinogradOut { bias } => (
                            "winograd_out",
                            format!(" tiles {sh}x{sw} bias=b{}/{}", bias.0.0, bias.1),
                        ),
                        WindowOp::WinogradFused {
                            filter,
                            bias,
                            cin,
                            banded: None,
                        } => (
                            "winograd_fused",
                            format!(" tiles {sh}x{sw} from {cin} channels * b{}", filter.0)
                                + &format!(" bias=b{}/{}", bias.0.0, bias.1),
                        ),
                        WindowOp::WinogradFused {
                            filter,
                            bias,
                            cin,
                            banded: Some(b),
                        } => (
                            "winograd_banded",
                            format!(" tiles {sh}x{sw} from {cin} channels * b{}", filter.0)
                                + &format!(" bias=b{}/{}", bias.0.0, bias.1)
                                + &format!(
                                    " in bands of {} tile rows (input pad=({},{})) scratch=@{}",
                                    b.band, b.input[2], b.input[3], b.scratch
                                ),
                        ),
                        WindowOp::ConvPool {
                            filter,
                            bias,
                            cin,
                            pool: [_, _, ps, ppt, ppl],
                        } => (
                            "conv_pool",
                            format!(" from {cin} channels * b{}[{kh},{kw}]", filter.0)
                                + &format!(" bias=b{}/{}", bias.0.0, bias.1)
                                + &format!(
                                    " (conv [{oh},{ow}], then max_pool [3,3] \
                                     stride=({ps},{ps}) pad=({ppt},{ppl}); the conv's:)"
                                ),
                        ),
                    };
                    writeln!(
                        f,
                        "{name} b{}[{n},{c},{yh},{yw}] = b{}@{}[{n},{cx},{h},{w}]{op} \
                         stride=({sh},{sw}) dilation=({dh},{dw}) pad=({pt},{pl}){} {:?} parallel",
                        d.y.0.0,
                        d.x.0.0,
                        d.x.1,
                        d.residual
                            .map(|r| format!(" residual=b{}", r.0))
                            .unwrap_or_default(),
                        d.activation,
                    )?
                }
                Step::Gemm(g) | Step::Tiled { gemm: g, .. } => writeln!(
                    f,
                    "{}gemm b{}[{},{}] = b{}[{},{}]{} * b{}[{},{}] m={} n={} k={} batches={}{}{}",
                    if matches!(s, Step::Tiled { .. }) {
                        "tiled "
                    } else {
                        ""
                    },
                    g.c.buf.0,
                    g.c.rs,
                    g.c.cs,
                    g.a.buf.0,
                    g.a.rs,
                    g.a.cs,
                    match g.a_packing {
                        APacking::None => String::new(),
                        p => format!(" packed={p}"),
                    },
                    g.b.buf.0,
                    g.b.rs,
                    g.b.cs,
                    g.m,
                    g.n,
                    g.k,
                    g.batches.len(),
                    g.bias
                        .map(|b| format!(" bias b{}", b.0))
                        .unwrap_or_default(),
                    g.prefetch
                        .map(|(b, len)| format!(" prefetch b{}[{len}]", b.0))
                        .unwrap_or_default()
                )
                .and_then(|_| {
                    if g.epi == GemmEpi::default() {
                        return Ok(());
                    }
                    writeln!(
                        f,
                        "  epilogue row_bias={:?} activation={:?} accumulate={}",
                        g.epi.row_bias.as_ref().map(|(b, _)| b.0),
                        g.epi.activation,
                        g.epi.accumulate
                    )
                })?,
            }
        }
        Ok(())
    }
}
