//! Lowering: the ONLY mapping from NNEF operation names to `ir::Op`.
//!
//! Every primitive of the NNEF 1.0.5 standard library, and the compound fragments of the
//! [`NATIVE`] set, become one IR node here; each function carries the NNEF signature as
//! a comment. Arguments arrive bound and type-checked (`expand`, `typeck`); this module
//! converts attribute values to typed IR attributes (rejecting negative extents, unknown
//! border names, ...), computes result types with `ir::infer`, and adds nodes to the
//! graph. `external`, `variable` and `constant` create graph inputs and constants.
//! It does not inline fragments and does not optimize.

use super::eval::{EResult, Evaluator};
use super::expand::Bound;
use super::index::Fragment;
use super::quantize::VarData;
use super::syntax::ast::PrimType;
use super::value::{Value, dtype_of_prim, prim_name};
use crate::diag::{Diagnostic, Span};
use crate::ir::{
    self, BinaryOp, Border, ConvAttrs, DType, Dim, Op, ReduceOp, ResampleMethod, RoiPoolOp, Tensor,
    TensorType, UnaryOp, ValueId, WindowAttrs,
};

/// Compound fragments kept whole as one IR op instead of being expanded from their
/// stdlib bodies. The single table of the native set.
pub const NATIVE: &[&str] = &[
    "relu",
    "sigmoid",
    "tanh",
    "sqr",
    "sqrt",
    "rsqr",
    "rsqrt",
    "log2",
    "softplus",
    "silu",
    "gelu",
    "elu",
    "selu",
    "leaky_relu",
    "min",
    "max",
    "clamp",
    "softmax",
    "linear",
    "batch_normalization",
    "mean_reduce",
    "max_pool",
    "avg_pool",
    "nearest_upsample",
    "area_downsample",
    "nearest_downsample",
];

pub fn is_native(name: &str) -> bool {
    NATIVE.contains(&name)
}

/// Typed access to bound arguments, with errors at the argument's span.
struct Args<'b> {
    b: &'b Bound,
    op: &'b str,
}

impl Args<'_> {
    fn get(&self, p: &str) -> EResult<(&Value, Span)> {
        self.b.values.get(p).map(|(v, s)| (v, *s)).ok_or_else(|| {
            Diagnostic::error(format!(
                "internal: the standard-library signature of `{}` has no parameter `{p}`",
                self.op
            ))
            .at(self.b.call_span, "while lowering this operation")
        })
    }
    fn bad(&self, p: &str, span: Span, want: &str) -> Diagnostic {
        Diagnostic::error(format!("invalid value for `{p}` of `{}`", self.op))
            .at(span, format!("expected {want}"))
    }
    fn tensor(&self, p: &str) -> EResult<ValueId> {
        match self.get(p)? {
            (Value::Tensor(id), _) => Ok(*id),
            (_, s) => Err(self.bad(p, s, "a tensor")),
        }
    }
    fn tensors(&self, p: &str) -> EResult<Vec<ValueId>> {
        match self.get(p)? {
            (Value::Array(items), s) => items
                .iter()
                .map(|v| match v {
                    Value::Tensor(id) => Ok(*id),
                    _ => Err(self.bad(p, s, "an array of tensors")),
                })
                .collect(),
            (_, s) => Err(self.bad(p, s, "an array of tensors")),
        }
    }
    fn int(&self, p: &str) -> EResult<i64> {
        match self.get(p)? {
            (Value::Integer(i), _) => Ok(*i),
            (_, s) => Err(self.bad(p, s, "an integer")),
        }
    }
    fn uint(&self, p: &str) -> EResult<usize> {
        let (_, s) = self.get(p)?;
        let i = self.int(p)?;
        usize::try_from(i).map_err(|_| self.bad(p, s, &format!("an integer ≥ 0, found {i}")))
    }
    fn ints(&self, p: &str) -> EResult<Vec<i64>> {
        match self.get(p)? {
            (Value::Array(items), s) => items
                .iter()
                .map(|v| match v {
                    Value::Integer(i) => Ok(*i),
                    _ => Err(self.bad(p, s, "an array of integers")),
                })
                .collect(),
            (_, s) => Err(self.bad(p, s, "an array of integers")),
        }
    }
    fn uints(&self, p: &str) -> EResult<Vec<usize>> {
        let (_, s) = self.get(p)?;
        self.ints(p)?
            .into_iter()
            .map(|i| {
                usize::try_from(i).map_err(|_| self.bad(p, s, &format!("integers ≥ 0, found {i}")))
            })
            .collect()
    }
    /// Strides, dilations, sizes, factors: every item ≥ 1.
    fn positives(&self, p: &str) -> EResult<Vec<usize>> {
        let (_, s) = self.get(p)?;
        let v = self.uints(p)?;
        match v.iter().find(|&&x| x == 0) {
            Some(_) => Err(self.bad(p, s, "integers ≥ 1, found 0")),
            None => Ok(v),
        }
    }
    fn scalar(&self, p: &str) -> EResult<f32> {
        match self.get(p)? {
            (Value::Scalar(x), _) => Ok(*x as f32),
            (_, s) => Err(self.bad(p, s, "a scalar")),
        }
    }
    fn logical(&self, p: &str) -> EResult<bool> {
        match self.get(p)? {
            (Value::Logical(b), _) => Ok(*b),
            (_, s) => Err(self.bad(p, s, "a logical")),
        }
    }
    fn string(&self, p: &str) -> EResult<(&str, Span)> {
        match self.get(p)? {
            (Value::Str(x), s) => Ok((x.as_str(), s)),
            (_, s) => Err(self.bad(p, s, "a string")),
        }
    }
    fn pairs(&self, p: &str) -> EResult<Vec<(usize, usize)>> {
        let (v, s) = self.get(p)?;
        let Value::Array(items) = v else {
            return Err(self.bad(p, s, "an array of (integer, integer) pairs"));
        };
        items
            .iter()
            .map(|it| match it {
                Value::Tuple(pq) => match pq.as_slice() {
                    [Value::Integer(a), Value::Integer(b)] => {
                        match (usize::try_from(*a), usize::try_from(*b)) {
                            (Ok(a), Ok(b)) => Ok((a, b)),
                            _ => Err(self.bad(p, s, &format!("padding ≥ 0, found ({a}, {b})"))),
                        }
                    }
                    _ => Err(self.bad(p, s, "(integer, integer) pairs")),
                },
                _ => Err(self.bad(p, s, "(integer, integer) pairs")),
            })
            .collect()
    }
    fn border(&self, p: &str) -> EResult<Border> {
        let (b, s) = self.string(p)?;
        Border::from_mnemonic(b).ok_or_else(|| {
            Diagnostic::error(format!("unknown border mode '{b}' for `{}`", self.op)).at(
                s,
                "expected 'constant', 'ignore', 'replicate', 'reflect' or 'reflect-even'",
            )
        })
    }
    fn method(&self, p: &str) -> EResult<ResampleMethod> {
        let (m, s) = self.string(p)?;
        Ok(match m {
            "symmetric" => ResampleMethod::Symmetric,
            "asymmetric" => ResampleMethod::Asymmetric,
            "aligned" => ResampleMethod::Aligned,
            _ => {
                return Err(Diagnostic::error(format!(
                    "unknown resampling method '{m}' for `{}`",
                    self.op
                ))
                .at(s, "expected 'symmetric', 'asymmetric' or 'aligned'"));
            }
        })
    }
    fn window(&self, with_output_shape: bool) -> EResult<WindowAttrs> {
        Ok(WindowAttrs {
            size: self.positives("size")?,
            border: self.border("border")?,
            padding: self.pairs("padding")?,
            stride: self.positives("stride")?,
            dilation: self.positives("dilation")?,
            output_shape: if with_output_shape {
                self.uints("output_shape")?
            } else {
                Vec::new()
            },
        })
    }
    fn conv(&self, with_output_shape: bool) -> EResult<ConvAttrs> {
        Ok(ConvAttrs {
            border: self.border("border")?,
            padding: self.pairs("padding")?,
            stride: self.positives("stride")?,
            dilation: self.positives("dilation")?,
            groups: self.uint("groups")?,
            output_shape: if with_output_shape {
                self.uints("output_shape")?
            } else {
                Vec::new()
            },
        })
    }
}

fn unary_op(name: &str) -> Option<UnaryOp> {
    Some(match name {
        "copy" => UnaryOp::Copy,
        "neg" => UnaryOp::Neg,
        "rcp" => UnaryOp::Rcp,
        "exp" => UnaryOp::Exp,
        "log" => UnaryOp::Log,
        "sin" => UnaryOp::Sin,
        "cos" => UnaryOp::Cos,
        "tan" => UnaryOp::Tan,
        "asin" => UnaryOp::Asin,
        "acos" => UnaryOp::Acos,
        "atan" => UnaryOp::Atan,
        "sinh" => UnaryOp::Sinh,
        "cosh" => UnaryOp::Cosh,
        "tanh" => UnaryOp::Tanh,
        "asinh" => UnaryOp::Asinh,
        "acosh" => UnaryOp::Acosh,
        "atanh" => UnaryOp::Atanh,
        "abs" => UnaryOp::Abs,
        "sign" => UnaryOp::Sign,
        "not" => UnaryOp::Not,
        "floor" => UnaryOp::Floor,
        "ceil" => UnaryOp::Ceil,
        "round" => UnaryOp::Round,
        // Native compounds with one tensor parameter `x` and no attributes.
        "sqr" => UnaryOp::Sqr,
        "sqrt" => UnaryOp::Sqrt,
        "rsqr" => UnaryOp::Rsqr,
        "rsqrt" => UnaryOp::Rsqrt,
        "log2" => UnaryOp::Log2,
        "relu" => UnaryOp::Relu,
        "sigmoid" => UnaryOp::Sigmoid,
        "softplus" => UnaryOp::Softplus,
        "silu" => UnaryOp::Silu,
        "gelu" => UnaryOp::Gelu,
        _ => return None,
    })
}

fn binary_op(name: &str) -> Option<BinaryOp> {
    Some(match name {
        "add" => BinaryOp::Add,
        "sub" => BinaryOp::Sub,
        "mul" => BinaryOp::Mul,
        "div" => BinaryOp::Div,
        "pow" => BinaryOp::Pow,
        "lt" => BinaryOp::Lt,
        "gt" => BinaryOp::Gt,
        "le" => BinaryOp::Le,
        "ge" => BinaryOp::Ge,
        "eq" => BinaryOp::Eq,
        "ne" => BinaryOp::Ne,
        "and" => BinaryOp::And,
        "or" => BinaryOp::Or,
        // Native compounds `min(x, y)`, `max(x, y)`.
        "min" => BinaryOp::Min,
        "max" => BinaryOp::Max,
        _ => return None,
    })
}

fn reduce_op(name: &str) -> Option<ReduceOp> {
    Some(match name {
        "max_reduce" => ReduceOp::Max,
        "min_reduce" => ReduceOp::Min,
        "argmax_reduce" => ReduceOp::ArgMax,
        "argmin_reduce" => ReduceOp::ArgMin,
        "any_reduce" => ReduceOp::Any,
        "all_reduce" => ReduceOp::All,
        // Native compound `mean_reduce(input, axes)`.
        "mean_reduce" => ReduceOp::Mean,
        _ => return None,
    })
}

fn sorted_unique(mut v: Vec<usize>) -> Vec<usize> {
    v.sort_unstable();
    v.dedup();
    v
}

fn tensor_result(outs: Vec<ValueId>) -> Value {
    match <[ValueId; 1]>::try_from(outs) {
        Ok([v]) => Value::Tensor(v),
        Err(outs) => Value::Tuple(outs.into_iter().map(Value::Tensor).collect()),
    }
}

impl Evaluator<'_> {
    /// Adds one node, with result types from `ir::infer`.
    pub fn emit(&mut self, op: Op, inputs: Vec<ValueId>, span: Span) -> EResult<Vec<ValueId>> {
        if self.graph.nodes.len() >= self.opts.max_nodes {
            let what = format!("{} operations", self.opts.max_nodes);
            return Err(self.too_large(what, span, op.mnemonic()));
        }
        let tys: Vec<&TensorType> = inputs.iter().map(|v| self.graph.ty(*v)).collect();
        let out = ir::infer::infer(&op, &tys).map_err(|e| {
            let shapes: Vec<String> = tys.iter().map(|t| t.to_string()).collect();
            Diagnostic::error(format!("invalid operands for `{}`: {e}", op.mnemonic()))
                .at(span, "in this operation")
                .with_note(format!("operand types: {}", shapes.join(", ")))
        })?;
        let statement = self.stack.first().map_or(span, |f| f.call_span);
        self.node_spans.push(Some(statement));
        Ok(self.graph.add_node(op, inputs, out))
    }

    fn emit1(&mut self, op: Op, inputs: Vec<ValueId>, span: Span) -> EResult<Value> {
        self.emit(op, inputs, span).map(tensor_result)
    }

    /// Lowers a primitive or native-set invocation to IR.
    pub fn lower_op(&mut self, frag: &Fragment, b: &Bound) -> EResult<Value> {
        let name = frag.name();
        let a = Args { b, op: name };
        let span = b.call_span;
        if let Some(u) = unary_op(name) {
            // `op(x: tensor<scalar>) -> (y: tensor<scalar>)` (copy/not: `tensor<?>`/`tensor<logical>`)
            return self.emit1(Op::Unary(u), vec![a.tensor("x")?], span);
        }
        if let Some(bo) = binary_op(name) {
            // `op(x: tensor<scalar>, y: tensor<scalar>) -> (z: tensor<…>)`
            return self.emit1(Op::Binary(bo), vec![a.tensor("x")?, a.tensor("y")?], span);
        }
        if let Some(r) = reduce_op(name) {
            // `op(input: tensor<…>, axes: integer[]) -> (output: tensor<…>)`
            let axes = sorted_unique(a.uints("axes")?);
            return self.emit1(Op::Reduce { op: r, axes }, vec![a.tensor("input")?], span);
        }
        match name {
            // external<? = scalar>(shape: integer[]) -> (output: tensor<?>)
            "external" => self.lower_external(&a, b.generic),
            // variable<? = scalar>(shape: integer[], label: string) -> (output: tensor<?>)
            "variable" => self.lower_variable(&a, b.generic),
            // constant<? = scalar>(shape: integer[], value: ?[]) -> (output: tensor<?>)
            "constant" => self.lower_constant(&a, b.generic),
            // update<?>(variable: tensor<?>, value: tensor<?>) -> (result: tensor<?>)
            "update" => Err(Diagnostic::error("`update` is not supported")
                .at(span, "stateful graphs cannot be compiled")
                .with_note("nnefc compiles stateless inference graphs: remove the `update` and feed the state as an input")),
            // elu(x: tensor<scalar>, alpha: scalar = 1.0) -> (y: tensor<scalar>)
            "elu" => self.emit1(Op::Unary(UnaryOp::Elu { alpha: a.scalar("alpha")? }), vec![a.tensor("x")?], span),
            // selu(x: tensor<scalar>, alpha: scalar = 1.67326319, lambda: scalar = 1.05070102) -> (y)
            "selu" => self.emit1(
                Op::Unary(UnaryOp::Selu { alpha: a.scalar("alpha")?, lambda: a.scalar("lambda")? }),
                vec![a.tensor("x")?],
                span,
            ),
            // leaky_relu(x: tensor<scalar>, alpha: scalar) -> (y: tensor<scalar>)
            "leaky_relu" => {
                self.emit1(Op::Unary(UnaryOp::LeakyRelu { alpha: a.scalar("alpha")? }), vec![a.tensor("x")?], span)
            }
            // select<?>(condition: tensor<logical>, true_value: tensor<?>, false_value: tensor<?>) -> (output: tensor<?>)
            "select" => self.emit1(
                Op::Select,
                vec![a.tensor("condition")?, a.tensor("true_value")?, a.tensor("false_value")?],
                span,
            ),
            // clamp(x: tensor<scalar>, a: tensor<scalar>, b: tensor<scalar>) -> (y: tensor<scalar>)
            "clamp" => self.emit1(Op::Clamp, vec![a.tensor("x")?, a.tensor("a")?, a.tensor("b")?], span),
            // matmul(A: tensor<scalar>, B: tensor<scalar>, transposeA: logical = false, transposeB: logical = false) -> (C: tensor<scalar>)
            "matmul" => self.emit1(
                Op::MatMul { transpose_a: a.logical("transposeA")?, transpose_b: a.logical("transposeB")? },
                vec![a.tensor("A")?, a.tensor("B")?],
                span,
            ),
            // linear(input: tensor<scalar>, filter: tensor<scalar>, bias: tensor<scalar> = 0.0) -> (output: tensor<scalar>)
            "linear" => self.emit1(Op::Linear, vec![a.tensor("input")?, a.tensor("filter")?, a.tensor("bias")?], span),
            // conv(input, filter, bias: tensor<scalar> = 0.0, border: string = 'constant', padding: (integer,integer)[] = [],
            //      stride: integer[] = [], dilation: integer[] = [], groups: integer = 1) -> (output: tensor<scalar>)
            "conv" => {
                let attrs = a.conv(false)?;
                self.emit1(Op::Conv(attrs), vec![a.tensor("input")?, a.tensor("filter")?, a.tensor("bias")?], span)
            }
            // deconv(input, filter, bias = 0.0, border = 'constant', padding = [], stride = [], dilation = [],
            //        output_shape: integer[] = [], groups: integer = 1) -> (output: tensor<scalar>)
            "deconv" => {
                let attrs = a.conv(true)?;
                self.emit1(Op::Deconv(attrs), vec![a.tensor("input")?, a.tensor("filter")?, a.tensor("bias")?], span)
            }
            // box(input: tensor<scalar>, size: integer[], border = 'constant', padding = [], stride = [], dilation = [],
            //     normalize: logical = false) -> (output: tensor<scalar>)
            "box" => {
                let window = a.window(false)?;
                self.emit1(Op::Box { window, normalize: a.logical("normalize")? }, vec![a.tensor("input")?], span)
            }
            // debox(input, size, border, padding, stride, dilation, output_shape: integer[] = [], normalize: logical = false) -> (output)
            "debox" => {
                let window = a.window(true)?;
                self.emit1(Op::Debox { window, normalize: a.logical("normalize")? }, vec![a.tensor("input")?], span)
            }
            // avg_pool(input: tensor<scalar>, size: integer[], border = 'constant', padding = [], stride = [], dilation = []) -> (output)
            "avg_pool" => {
                let window = a.window(false)?;
                self.emit1(Op::Box { window, normalize: true }, vec![a.tensor("input")?], span)
            }
            // max_pool(input: tensor<scalar>, size: integer[], border = 'constant', padding = [], stride = [], dilation = []) -> (output)
            "max_pool" => {
                let window = a.window(false)?;
                self.emit1(Op::MaxPool(window), vec![a.tensor("input")?], span)
            }
            // argmax_pool(input: tensor<scalar>, size: integer[], border, padding, stride, dilation) -> (index: tensor<integer>)
            "argmax_pool" => {
                let window = a.window(false)?;
                self.emit1(Op::ArgmaxPool(window), vec![a.tensor("input")?], span)
            }
            // sample(input: tensor<scalar>, index: tensor<integer>, size: integer[], border, padding, stride, dilation) -> (output)
            "sample" => {
                let window = a.window(false)?;
                self.emit1(Op::Sample(window), vec![a.tensor("input")?, a.tensor("index")?], span)
            }
            // desample(input, index, size, border, padding, stride, dilation, output_shape: integer[] = []) -> (output)
            "desample" => {
                let window = a.window(true)?;
                self.emit1(Op::Desample(window), vec![a.tensor("input")?, a.tensor("index")?], span)
            }
            // nearest_downsample(input: tensor<scalar>, factor: integer[]) -> (output: tensor<scalar>)
            //   = box(input, size = [1] * dims, stride = [1,1] + factor, padding = [(0,0)] * dims)
            // area_downsample(input, factor) = box(..., size = [1,1] + factor, ..., normalize = true)
            // nearest_upsample(input, factor) = debox(input, size = [1,1] + factor, stride = [1,1] + factor, padding = [(0,0)] * dims)
            "nearest_downsample" | "area_downsample" | "nearest_upsample" => {
                let factor = a.positives("factor")?;
                let dims = factor.len() + 2;
                let block: Vec<usize> = [1, 1].into_iter().chain(factor.iter().copied()).collect();
                let size = if name == "nearest_downsample" { vec![1; dims] } else { block.clone() };
                let window = WindowAttrs {
                    size,
                    border: Border::Constant,
                    padding: vec![(0, 0); dims],
                    stride: block,
                    dilation: Vec::new(),
                    output_shape: Vec::new(),
                };
                let op = match name {
                    "nearest_downsample" => Op::Box { window, normalize: false },
                    "area_downsample" => Op::Box { window, normalize: true },
                    _ => Op::Debox { window, normalize: false },
                };
                self.emit1(op, vec![a.tensor("input")?], span)
            }
            // multilinear_upsample(input: tensor<scalar>, factor: integer[], method: string = 'symmetric',
            //                      border: string = 'replicate') -> (output: tensor<scalar>)
            "multilinear_upsample" => {
                let op = Op::MultilinearUpsample {
                    factor: a.positives("factor")?,
                    method: a.method("method")?,
                    border: a.border("border")?,
                };
                self.emit1(op, vec![a.tensor("input")?], span)
            }
            // sum_reduce(input: tensor<scalar>, axes: integer[], normalize: logical = false) -> (output: tensor<scalar>)
            "sum_reduce" => {
                let op = if a.logical("normalize")? { ReduceOp::Mean } else { ReduceOp::Sum };
                let axes = sorted_unique(a.uints("axes")?);
                self.emit1(Op::Reduce { op, axes }, vec![a.tensor("input")?], span)
            }
            // softmax(x: tensor<scalar>, axes: integer[] = [1]) -> (y: tensor<scalar>)
            "softmax" => {
                let axes = sorted_unique(a.uints("axes")?);
                self.emit1(Op::Softmax { axes }, vec![a.tensor("x")?], span)
            }
            // batch_normalization(input, mean, variance, offset, scale: tensor<scalar>, epsilon: scalar) -> (output)
            "batch_normalization" => {
                let inputs = vec![
                    a.tensor("input")?,
                    a.tensor("mean")?,
                    a.tensor("variance")?,
                    a.tensor("offset")?,
                    a.tensor("scale")?,
                ];
                self.emit1(Op::BatchNorm { epsilon: a.scalar("epsilon")? }, inputs, span)
            }
            // reshape<?>(input: tensor<?>, shape: integer[], axis_start: integer = 0, axis_count: integer = -1) -> (output: tensor<?>)
            "reshape" => {
                let op = Op::Reshape { shape: a.ints("shape")?, axis_start: a.uint("axis_start")?, axis_count: a.int("axis_count")? };
                self.emit1(op, vec![a.tensor("input")?], span)
            }
            // squeeze<?>(input: tensor<?>, axes: integer[]) -> (output: tensor<?>)
            "squeeze" => {
                self.emit1(Op::Squeeze { axes: sorted_unique(a.uints("axes")?) }, vec![a.tensor("input")?], span)
            }
            // unsqueeze<?>(input: tensor<?>, axes: integer[]) -> (output: tensor<?>)
            "unsqueeze" => {
                self.emit1(Op::Unsqueeze { axes: sorted_unique(a.uints("axes")?) }, vec![a.tensor("input")?], span)
            }
            // transpose<?>(input: tensor<?>, axes: integer[]) -> (output: tensor<?>)
            "transpose" => self.emit1(Op::Transpose { axes: a.uints("axes")? }, vec![a.tensor("input")?], span),
            // split<?>(value: tensor<?>, axis: integer, ratios: integer[]) -> (values: tensor<?>[])
            "split" => {
                let op = Op::Split { axis: a.uint("axis")?, ratios: a.positives("ratios")? };
                let outs = self.emit(op, vec![a.tensor("value")?], span)?;
                Ok(Value::Array(outs.into_iter().map(Value::Tensor).collect()))
            }
            // concat<?>(values: tensor<?>[], axis: integer) -> (value: tensor<?>)
            "concat" => self.lower_list(&a, Op::Concat { axis: a.uint("axis")? }, span),
            // stack<?>(values: tensor<?>[], axis: integer) -> (value: tensor<?>)
            "stack" => self.lower_list(&a, Op::Stack { axis: a.uint("axis")? }, span),
            // unstack<?>(value: tensor<?>, axis: integer) -> (values: tensor<?>[])
            "unstack" => {
                let outs = self.emit(Op::Unstack { axis: a.uint("axis")? }, vec![a.tensor("value")?], span)?;
                Ok(Value::Array(outs.into_iter().map(Value::Tensor).collect()))
            }
            // slice<?>(input: tensor<?>, axes: integer[], begin: integer[], end: integer[], stride: integer[] = []) -> (output: tensor<?>)
            "slice" => {
                let op = Op::Slice { axes: a.uints("axes")?, begin: a.ints("begin")?, end: a.ints("end")?, stride: a.ints("stride")? };
                self.emit1(op, vec![a.tensor("input")?], span)
            }
            // tile<?>(input: tensor<?>, repeats: integer[]) -> (output: tensor<?>)
            "tile" => self.emit1(Op::Tile { repeats: a.positives("repeats")? }, vec![a.tensor("input")?], span),
            // pad(input: tensor<scalar>, padding: (integer,integer)[], border: string = 'constant', value: scalar = 0.0) -> (output)
            "pad" => {
                let op = Op::Pad { padding: a.pairs("padding")?, border: a.border("border")?, value: a.scalar("value")? };
                self.emit1(op, vec![a.tensor("input")?], span)
            }
            // gather<?>(input: tensor<?>, indices: tensor<integer>, axis: integer = 0) -> (output: tensor<?>)
            "gather" => self.emit1(Op::Gather { axis: a.uint("axis")? }, vec![a.tensor("input")?, a.tensor("indices")?], span),
            // cast<?>(input: tensor<>) -> (output: tensor<?>)
            "cast" => {
                let to = b.generic.and_then(dtype_of_prim).ok_or_else(|| {
                    Diagnostic::error("`cast` needs a tensor data type").at(span, "write `cast<scalar>`, `cast<integer>` or `cast<logical>`")
                })?;
                self.emit1(Op::Cast { to }, vec![a.tensor("input")?], span)
            }
            // avg_roi_pool / max_roi_pool(input: tensor<scalar>, rois: tensor<scalar>, batch_index: tensor<integer>,
            //                             output_size: integer[]) -> (output: tensor<scalar>)
            "avg_roi_pool" | "max_roi_pool" => {
                let op = Op::RoiPool {
                    op: if name == "avg_roi_pool" { RoiPoolOp::Avg } else { RoiPoolOp::Max },
                    output_size: a.positives("output_size")?,
                };
                self.emit1(op, vec![a.tensor("input")?, a.tensor("rois")?, a.tensor("batch_index")?], span)
            }
            // roi_resample(input, rois, batch_index, output_size: integer[], method: string = 'symmetric') -> (output)
            "roi_resample" => {
                let op = Op::RoiResample { output_size: a.positives("output_size")?, method: a.method("method")? };
                self.emit1(op, vec![a.tensor("input")?, a.tensor("rois")?, a.tensor("batch_index")?], span)
            }
            _ => Err(Diagnostic::error(format!("operation `{name}` has no implementation in nnefc"))
                .at(span, "cannot compile this operation")
                .with_label(frag.def.name.span, "declared without a body here")
                .with_note("a fragment without body is a custom atomic operation; nnefc only implements the standard ones")),
        }
    }

    fn lower_list(&mut self, a: &Args, op: Op, span: Span) -> EResult<Value> {
        let values = a.tensors("values")?;
        if values.is_empty() {
            let (_, s) = a.get("values")?;
            return Err(
                Diagnostic::error(format!("`{}` needs at least one tensor", a.op))
                    .at(s, "this array is empty"),
            );
        }
        self.emit1(op, values, span)
    }

    fn dtype(generic: Option<PrimType>, span: Span) -> EResult<DType> {
        generic.and_then(dtype_of_prim).ok_or_else(|| {
            Diagnostic::error("invalid tensor data type")
                .at(span, "expected `scalar`, `integer` or `logical`")
        })
    }

    /// A declared shape must fit `ir::infer::MAX_TENSOR_BYTES`, like every inferred one.
    fn fits(a: &Args, dtype: DType, dims: &[Dim]) -> EResult<()> {
        let ty = TensorType::with_dims(dtype, dims.to_vec());
        ir::infer::check_tensor_size("the declared tensor", &ty).map_err(|e| {
            Diagnostic::error(format!("`{}` declares a tensor that is too large", a.op))
                .at(a.b.call_span, e.message)
        })
    }

    /// Declared extents, each ≥ 1 (spec rule 31).
    fn extents(a: &Args) -> EResult<Vec<usize>> {
        let (_, s) = a.get("shape")?;
        let shape = a.ints("shape")?;
        shape
            .iter()
            .map(|&d| {
                usize::try_from(d).ok().filter(|&d| d >= 1).ok_or_else(|| {
                    Diagnostic::error(format!("invalid extent {d} in the shape of `{}`", a.op))
                        .at(s, "expected extents ≥ 1")
                })
            })
            .collect()
    }

    fn lower_external(&mut self, a: &Args, generic: Option<PrimType>) -> EResult<Value> {
        let span = a.b.call_span;
        let dtype = Self::dtype(generic, span)?;
        let Some(name) = self.external_name.clone() else {
            return Err(Diagnostic::error(
                "`external` must be the whole right-hand side of a graph-input assignment",
            )
            .at(span, "used inside an expression")
            .with_note("write `input = external<scalar>(shape = [...]);` on its own line"));
        };
        let declared = Self::extents(a)?;
        let dims: Vec<Dim> = match self.opts.input_shapes.get(&name) {
            None => declared.iter().map(|&d| Dim::Known(d)).collect(),
            Some(over) => {
                if over.len() != declared.len() {
                    return Err(Diagnostic::error(format!(
                        "the shape override for input `{name}` has rank {}, the graph declares rank {}",
                        over.len(),
                        declared.len()
                    ))
                    .at(span, format!("declared shape {declared:?}")));
                }
                over.iter()
                    .map(|d| d.map_or(Dim::Unknown, Dim::Known))
                    .collect()
            }
        };
        Self::fits(a, dtype, &dims)?;
        let id = self
            .graph
            .add_input(name, TensorType::with_dims(dtype, dims));
        Ok(Value::Tensor(id))
    }

    fn lower_variable(&mut self, a: &Args, generic: Option<PrimType>) -> EResult<Value> {
        let span = a.b.call_span;
        let dtype = Self::dtype(generic, span)?;
        let shape = Self::extents(a)?;
        let known: Vec<Dim> = shape.iter().map(|&d| Dim::Known(d)).collect();
        Self::fits(a, dtype, &known)?;
        let (label, lspan) = a.string("label")?;
        let label = label.to_string();
        if label.is_empty()
            || !label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "/\\-_.".contains(c))
        {
            return Err(
                Diagnostic::error(format!("invalid variable label '{label}'"))
                    .at(lspan, "expected ASCII letters, digits and / \\ - _ . only"),
            );
        }
        if let Some((id, prev_shape)) = self.labels.get(&label) {
            // Shared weights: one constant, shapes must agree.
            if *prev_shape != shape {
                return Err(Diagnostic::error(format!(
                    "variable '{label}' is declared twice with different shapes"
                ))
                .at(span, format!("shape {shape:?} here, {prev_shape:?} before")));
            }
            return Ok(Value::Tensor(*id));
        }
        let ident = self.current_ident.clone();
        let tensor = match (self.variables)(&label) {
            VarData::Plain(t) => t,
            VarData::Quantized(dat) => {
                if dat.shape != shape {
                    return Err(Diagnostic::error(format!(
                        "the data of variable '{label}' has the wrong shape"
                    ))
                    .at(
                        span,
                        format!(
                            "declared {shape:?}, the file `{label}.dat` holds {:?}",
                            dat.shape
                        ),
                    ));
                }
                self.dequantize(ident.as_deref(), &dat, &label, span)?
            }
            VarData::Error(msg) => {
                return Err(Diagnostic::error(format!(
                    "cannot use the data of variable '{label}'"
                ))
                .at(lspan, msg));
            }
            VarData::Missing if self.opts.allow_missing_variables => {
                self.warnings.push(
                    Diagnostic::warning(format!("no data for variable '{label}': using zeros"))
                        .at(lspan, format!("expected a file `{label}.dat`")),
                );
                Tensor::zeros(dtype, shape.clone())
            }
            VarData::Missing => {
                return Err(
                    Diagnostic::error(format!("no data for variable '{label}'")).at(
                        lspan,
                        format!("expected a file `{label}.dat` next to graph.nnef"),
                    ),
                );
            }
        };
        if tensor.shape != shape {
            return Err(Diagnostic::error(format!(
                "the data of variable '{label}' has the wrong shape"
            ))
            .at(
                span,
                format!(
                    "declared {shape:?}, the file `{label}.dat` holds {:?}",
                    tensor.shape
                ),
            ));
        }
        if tensor.dtype() != dtype {
            return Err(Diagnostic::error(format!(
                "the data of variable '{label}' has the wrong data type"
            ))
            .at(
                span,
                format!(
                    "declared `tensor<{}>`, the file `{label}.dat` holds {} items",
                    generic.map(prim_name).unwrap_or("?"),
                    tensor.dtype()
                ),
            ));
        }
        let id = self.graph.add_const(tensor, Some(label.clone()), None);
        self.labels.insert(label, (id, shape));
        Ok(Value::Tensor(id))
    }

    fn lower_constant(&mut self, a: &Args, generic: Option<PrimType>) -> EResult<Value> {
        let span = a.b.call_span;
        let dtype = Self::dtype(generic, span)?;
        let shape = Self::extents(a)?;
        let (v, vspan) = a.get("value")?;
        let Value::Array(items) = v else {
            return Err(a.bad("value", vspan, "an array"));
        };
        // A literal tensor is materialized at compile time: bound it (1 GiB of f32) so a
        // declared shape cannot make the compiler allocate without limit.
        const MAX_CONSTANT_VOLUME: usize = 1 << 28;
        let volume = shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .filter(|&v| v <= MAX_CONSTANT_VOLUME)
            .ok_or_else(|| {
                Diagnostic::error("`constant` is too large to materialize").at(
                    span,
                    format!("shape {shape:?} has more than {MAX_CONSTANT_VOLUME} elements"),
                )
            })?;
        if items.len() != volume && items.len() != 1 {
            return Err(
                Diagnostic::error("`constant` has the wrong number of values").at(
                    vspan,
                    format!(
                        "expected 1 value or {volume} (the volume of {shape:?}), found {}",
                        items.len()
                    ),
                ),
            );
        }
        let n = volume;
        let pick = |i: usize| {
            if items.len() == 1 {
                &items[0]
            } else {
                &items[i]
            }
        };
        let wrong = || {
            a.bad(
                "value",
                vspan,
                &format!("values of type `{}`", generic.map(prim_name).unwrap_or("?")),
            )
        };
        let tensor = match dtype {
            DType::F32 => Tensor::f32(
                shape,
                (0..n)
                    .map(|i| {
                        if let Value::Scalar(x) = pick(i) {
                            Ok(*x as f32)
                        } else {
                            Err(wrong())
                        }
                    })
                    .collect::<EResult<_>>()?,
            ),
            DType::I32 => Tensor::i32(
                shape,
                (0..n)
                    .map(|i| match pick(i) {
                        Value::Integer(x) => {
                            i32::try_from(*x).map_err(|_| a.bad("value", vspan, "32-bit integers"))
                        }
                        _ => Err(wrong()),
                    })
                    .collect::<EResult<_>>()?,
            ),
            DType::Bool => Tensor::bool(
                shape,
                (0..n)
                    .map(|i| {
                        if let Value::Logical(x) = pick(i) {
                            Ok(*x)
                        } else {
                            Err(wrong())
                        }
                    })
                    .collect::<EResult<_>>()?,
            ),
        };
        Ok(Value::Tensor(self.graph.add_const(tensor, None, None)))
    }
}
