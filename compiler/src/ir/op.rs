//! The closed set of IR operations and their typed attributes.
//!
//! Every NNEF 1.0.5 primitive that computes something has a variant here, plus a small
//! "native" set of compound fragments the front end keeps whole because the middle and
//! back ends handle them better as one op (softmax, linear, batch normalization,
//! max/avg pooling, clamp and the common activations). Attribute names and spellings
//! follow NNEF (`stride`, `padding`, `dilation`, `border`, `groups`).
//!
//! Operand order is NNEF's parameter order; it is documented on each variant. Shape
//! rules live in `ir::infer`, numeric semantics in `ir::interp`; this file only says
//! what the attributes are.

use super::types::DType;

/// Element-wise unary functions; output shape = input shape.
/// Float ops take and give f32; `Not` takes and gives bool; `Copy` any dtype;
/// `Abs`, `Neg`, `Sign` also accept i32.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    Copy,
    Neg,
    Rcp,
    Exp,
    Log,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    Abs,
    Sign,
    Not,
    Floor,
    Ceil,
    /// Halves away from zero (C `round`).
    Round,
    // Native compound fragments (NNEF stdlib), kept whole:
    /// x²
    Sqr,
    /// √x
    Sqrt,
    /// x⁻²
    Rsqr,
    /// 1/√x
    Rsqrt,
    Log2,
    /// max(x, 0)
    Relu,
    /// 1/(1+e⁻ˣ)
    Sigmoid,
    /// log(eˣ + 1)
    Softplus,
    /// x·sigmoid(x)
    Silu,
    /// x·sigmoid(1.702·x) — NNEF's stdlib definition (an approximation of x·Φ(x)).
    Gelu,
    /// x < 0 ? alpha·(eˣ − 1) : x
    Elu {
        alpha: f32,
    },
    /// lambda · (x < 0 ? alpha·(eˣ − 1) : x)
    Selu {
        alpha: f32,
        lambda: f32,
    },
    /// x < 0 ? alpha·x : x
    LeakyRelu {
        alpha: f32,
    },
}

/// Element-wise binary functions with NNEF broadcasting (left-aligned; an extent of 1,
/// or a missing trailing dim, broadcasts). Arithmetic on f32 (and i32 where both are
/// i32); comparisons give bool; `And`/`Or` take bool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    /// Native compound `min`
    Min,
    /// Native compound `max`
    Max,
    Lt,
    Gt,
    Le,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinaryOp {
    /// Comparisons produce bool tensors.
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            BinaryOp::Lt | BinaryOp::Gt | BinaryOp::Le | BinaryOp::Ge | BinaryOp::Eq | BinaryOp::Ne
        )
    }
    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or)
    }
}

/// How a sliding window treats positions outside the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Border {
    /// Outside values are 0 (for pools: count in the divisor).
    Constant,
    /// Outside positions are skipped (for avg: excluded from the divisor; for max: ignored).
    Ignore,
    /// Clamp to the edge.
    Replicate,
    /// Mirror without repeating the edge.
    Reflect,
    /// Mirror repeating the edge.
    ReflectEven,
}

impl Border {
    pub fn mnemonic(self) -> &'static str {
        match self {
            Border::Constant => "constant",
            Border::Ignore => "ignore",
            Border::Replicate => "replicate",
            Border::Reflect => "reflect",
            Border::ReflectEven => "reflect-even",
        }
    }
    pub fn from_mnemonic(s: &str) -> Option<Border> {
        Some(match s {
            "constant" => Border::Constant,
            "ignore" => Border::Ignore,
            "replicate" => Border::Replicate,
            "reflect" => Border::Reflect,
            "reflect-even" => Border::ReflectEven,
            _ => return None,
        })
    }
}

/// Attributes of `conv` and `deconv`. `padding`, `stride` and `dilation` cover the
/// spatial dims only (length rank−2); an empty `padding` means automatic padding
/// (resolved by `ir::infer::conv_padding` once input extents are known), empty
/// `stride`/`dilation` mean all ones.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvAttrs {
    pub border: Border,
    pub padding: Vec<(usize, usize)>,
    pub stride: Vec<usize>,
    pub dilation: Vec<usize>,
    /// 0 means depthwise (groups = input channels).
    pub groups: usize,
    /// deconv only: requested output extents (full rank), empty = computed.
    pub output_shape: Vec<usize>,
}

impl Default for ConvAttrs {
    /// NNEF's defaults for `conv`: constant border, automatic padding, unit strides and
    /// dilations, one group.
    fn default() -> ConvAttrs {
        ConvAttrs {
            border: Border::Constant,
            padding: Vec::new(),
            stride: Vec::new(),
            dilation: Vec::new(),
            groups: 1,
            output_shape: Vec::new(),
        }
    }
}

/// Attributes of the window ops `box`, `debox`, `argmax_pool`, `sample`, `desample`
/// and the native pools. Every list covers **all** dims (length rank); empty `padding`
/// means automatic, empty `stride`/`dilation` all ones.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WindowAttrs {
    pub size: Vec<usize>,
    pub border: Border,
    pub padding: Vec<(usize, usize)>,
    pub stride: Vec<usize>,
    pub dilation: Vec<usize>,
    /// debox / desample only: requested output extents, empty = computed.
    pub output_shape: Vec<usize>,
}

/// Reductions that keep rank (reduced axes become extent 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    /// `sum_reduce(normalize = true)` / `mean_reduce`
    Mean,
    Max,
    Min,
    /// logical or
    Any,
    /// logical and
    All,
    /// i32 row-major linear index over the reduced axes of the maximum (first on ties)
    ArgMax,
    /// same for the minimum
    ArgMin,
}

/// Interpolation grid of `multilinear_upsample` / `roi_resample`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ResampleMethod {
    Symmetric,
    Asymmetric,
    Aligned,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RoiPoolOp {
    Avg,
    Max,
}

/// One IR operation. Operands are listed per variant in NNEF parameter order.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// (x) → y
    Unary(UnaryOp),
    /// (x, y) → z
    Binary(BinaryOp),
    /// (condition: bool, true_value, false_value) → output, broadcast over all three
    Select,
    /// (x, a, b) → max(min(x, b), a), broadcast over all three (native compound)
    Clamp,
    /// (input, filter, bias) → output. input `[N,C,s…]`, filter `[Cout, C/G, k…]`,
    /// bias `[1, Cout]` or a rank-0/`[1,1]` constant.
    Conv(ConvAttrs),
    /// (input, filter, bias) → output. filter `[Cin, Cout/G, k…]`.
    Deconv(ConvAttrs),
    /// (input) → output: window sum, divided by the window volume (or the in-bounds
    /// count with `Border::Ignore`) when `normalize`. `avg_pool` is `Box` with normalize.
    Box {
        window: WindowAttrs,
        normalize: bool,
    },
    /// (input) → output: the adjoint of `Box`.
    Debox {
        window: WindowAttrs,
        normalize: bool,
    },
    /// (input) → index: i32 row-major offset of the maximum inside each window.
    ArgmaxPool(WindowAttrs),
    /// (input, index) → output
    Sample(WindowAttrs),
    /// (input, index) → output
    Desample(WindowAttrs),
    /// (input) → output: window maximum (native compound `max_pool`); positions outside
    /// the input count as 0 for `Border::Constant` and are skipped for `Border::Ignore`.
    MaxPool(WindowAttrs),
    /// (input) → output, `factor` per spatial dim.
    MultilinearUpsample {
        factor: Vec<usize>,
        method: ResampleMethod,
        border: Border,
    },
    /// (input) → output; `axes` sorted, unique, each in `[0, rank)`.
    Reduce { op: ReduceOp, axes: Vec<usize> },
    /// (A, B) → C with batch broadcasting over leading dims.
    MatMul {
        transpose_a: bool,
        transpose_b: bool,
    },
    /// (input `[N,Cin]`, filter `[Cout,Cin]`, bias `[1,Cout]` or scalar) → `[N,Cout]`
    /// (native compound `linear`).
    Linear,
    /// (x) → softmax jointly over `axes` (native compound).
    Softmax { axes: Vec<usize> },
    /// (input, mean, variance, offset, scale) → offset + scale·(input−mean)/√(variance+ε)
    /// (native compound); the four parameters broadcast to input.
    BatchNorm { epsilon: f32 },
    /// (input) → output. NNEF attributes as written: `0` copies the input extent,
    /// one `-1` is inferred; `axis_count == -1` means "to the end".
    Reshape {
        shape: Vec<i64>,
        axis_start: usize,
        axis_count: i64,
    },
    /// (input) → output; `axes` sorted, each of extent 1.
    Squeeze { axes: Vec<usize> },
    /// (input) → output; `axes` index the output, sorted.
    Unsqueeze { axes: Vec<usize> },
    /// (input) → output; `axes` is a permutation of `0..axes.len()`, trailing dims stay.
    Transpose { axes: Vec<usize> },
    /// (value) → values… (one output per ratio)
    Split { axis: usize, ratios: Vec<usize> },
    /// (values…) → value
    Concat { axis: usize },
    /// (values…) → value with a new dim at `axis`
    Stack { axis: usize },
    /// (value) → values… with dim `axis` removed
    Unstack { axis: usize },
    /// (input) → output. NNEF 1.0.4 slice semantics; `begin`/`end` as written
    /// (negative counts from the end), `stride` empty = all ones.
    Slice {
        axes: Vec<usize>,
        begin: Vec<i64>,
        end: Vec<i64>,
        stride: Vec<i64>,
    },
    /// (input) → output; `repeats.len() == rank`
    Tile { repeats: Vec<usize> },
    /// (input) → output; `padding.len() == rank`. `value` is used with `Border::Constant`.
    Pad {
        padding: Vec<(usize, usize)>,
        border: Border,
        value: f32,
    },
    /// (input, indices: i32) → output
    Gather { axis: usize },
    /// (input) → output of dtype `to`; scalar→integer truncates, numeric→logical is ≠0.
    Cast { to: DType },
    /// (input, rois `[R,4]`, batch_index `[R]`) → `[R, C, output_size…]`
    RoiPool {
        op: RoiPoolOp,
        output_size: Vec<usize>,
    },
    /// (input, rois, batch_index) → `[R, C, output_size…]`
    RoiResample {
        output_size: Vec<usize>,
        method: ResampleMethod,
    },
}

impl Op {
    /// Short stable name used by the text IR (`add`, `conv`, `max_pool`, …).
    pub fn mnemonic(&self) -> &'static str {
        match self {
            Op::Unary(u) => match u {
                UnaryOp::Copy => "copy",
                UnaryOp::Neg => "neg",
                UnaryOp::Rcp => "rcp",
                UnaryOp::Exp => "exp",
                UnaryOp::Log => "log",
                UnaryOp::Sin => "sin",
                UnaryOp::Cos => "cos",
                UnaryOp::Tan => "tan",
                UnaryOp::Asin => "asin",
                UnaryOp::Acos => "acos",
                UnaryOp::Atan => "atan",
                UnaryOp::Sinh => "sinh",
                UnaryOp::Cosh => "cosh",
                UnaryOp::Tanh => "tanh",
                UnaryOp::Asinh => "asinh",
                UnaryOp::Acosh => "acosh",
                UnaryOp::Atanh => "atanh",
                UnaryOp::Abs => "abs",
                UnaryOp::Sign => "sign",
                UnaryOp::Not => "not",
                UnaryOp::Floor => "floor",
                UnaryOp::Ceil => "ceil",
                UnaryOp::Round => "round",
                UnaryOp::Sqr => "sqr",
                UnaryOp::Sqrt => "sqrt",
                UnaryOp::Rsqr => "rsqr",
                UnaryOp::Rsqrt => "rsqrt",
                UnaryOp::Log2 => "log2",
                UnaryOp::Relu => "relu",
                UnaryOp::Sigmoid => "sigmoid",
                UnaryOp::Softplus => "softplus",
                UnaryOp::Silu => "silu",
                UnaryOp::Gelu => "gelu",
                UnaryOp::Elu { .. } => "elu",
                UnaryOp::Selu { .. } => "selu",
                UnaryOp::LeakyRelu { .. } => "leaky_relu",
            },
            Op::Binary(b) => match b {
                BinaryOp::Add => "add",
                BinaryOp::Sub => "sub",
                BinaryOp::Mul => "mul",
                BinaryOp::Div => "div",
                BinaryOp::Pow => "pow",
                BinaryOp::Min => "min",
                BinaryOp::Max => "max",
                BinaryOp::Lt => "lt",
                BinaryOp::Gt => "gt",
                BinaryOp::Le => "le",
                BinaryOp::Ge => "ge",
                BinaryOp::Eq => "eq",
                BinaryOp::Ne => "ne",
                BinaryOp::And => "and",
                BinaryOp::Or => "or",
            },
            Op::Select => "select",
            Op::Clamp => "clamp",
            Op::Conv(_) => "conv",
            Op::Deconv(_) => "deconv",
            Op::Box { .. } => "box",
            Op::Debox { .. } => "debox",
            Op::ArgmaxPool(_) => "argmax_pool",
            Op::Sample(_) => "sample",
            Op::Desample(_) => "desample",
            Op::MaxPool(_) => "max_pool",
            Op::MultilinearUpsample { .. } => "multilinear_upsample",
            Op::Reduce { op, .. } => match op {
                ReduceOp::Sum => "sum_reduce",
                ReduceOp::Mean => "mean_reduce",
                ReduceOp::Max => "max_reduce",
                ReduceOp::Min => "min_reduce",
                ReduceOp::Any => "any_reduce",
                ReduceOp::All => "all_reduce",
                ReduceOp::ArgMax => "argmax_reduce",
                ReduceOp::ArgMin => "argmin_reduce",
            },
            Op::MatMul { .. } => "matmul",
            Op::Linear => "linear",
            Op::Softmax { .. } => "softmax",
            Op::BatchNorm { .. } => "batch_normalization",
            Op::Reshape { .. } => "reshape",
            Op::Squeeze { .. } => "squeeze",
            Op::Unsqueeze { .. } => "unsqueeze",
            Op::Transpose { .. } => "transpose",
            Op::Split { .. } => "split",
            Op::Concat { .. } => "concat",
            Op::Stack { .. } => "stack",
            Op::Unstack { .. } => "unstack",
            Op::Slice { .. } => "slice",
            Op::Tile { .. } => "tile",
            Op::Pad { .. } => "pad",
            Op::Gather { .. } => "gather",
            Op::Cast { .. } => "cast",
            Op::RoiPool {
                op: RoiPoolOp::Avg, ..
            } => "avg_roi_pool",
            Op::RoiPool {
                op: RoiPoolOp::Max, ..
            } => "max_roi_pool",
            Op::RoiResample { .. } => "roi_resample",
        }
    }
}
