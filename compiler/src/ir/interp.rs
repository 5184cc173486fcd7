//! The reference interpreter: the numeric oracle for every compiled kernel, and the
//! engine constant folding runs.
//!
//! [`run`] evaluates a whole [`Graph`] node by node; [`eval_op`] evaluates one [`Op`] on
//! concrete tensors. Every op follows NNEF semantics exactly as stated in
//! `docs/research/nnef-spec.md` §3–§6 (the per-family submodules cite the rules they
//! implement). The code is written to be obviously right, not fast: plain loops over
//! precomputed offsets, accumulations in f64, no SIMD, no threads, no layout tricks.
//! Tensors are always row-major; the interpreter ignores IR layouts (they describe how
//! compiled code stores a value, not what the value is).
//!
//! Not here: shape rules. `ir::infer` owns them; [`eval_op`] runs it on the operand
//! types first, so the oracle accepts exactly what the compiler accepts and agrees with
//! it on every extent and every resolved padding. Nor any notion of quantization or of
//! NNEF syntax.

mod elementwise;
mod linalg;
mod movement;
mod reduce;
mod resample;
mod window;

#[cfg(test)]
mod tests;

use super::graph::{Graph, NodeId, ValueDef, ValueId};
use super::infer::infer;
use super::op::Op;
use super::tensor::{Tensor, TensorData};
use super::types::{Dim, TensorType};

/// Why an evaluation failed. Every malformed input (wrong arity, dtype, shape, attribute,
/// out-of-range index) ends here; the interpreter never panics on bad input.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum InterpError {
    #[error("graph has {expected} inputs but {got} tensors were given")]
    InputCount { expected: usize, got: usize },
    #[error("graph input {index} has type {expected}, but the tensor given is {got}")]
    InputType {
        index: usize,
        expected: Box<TensorType>,
        got: Box<TensorType>,
    },
    #[error("{op}: {message}")]
    Invalid { op: &'static str, message: String },
    #[error("{op}: {message} is not supported")]
    Unsupported { op: &'static str, message: String },
    #[error("graph value {0} is read before it is defined")]
    Undefined(ValueId),
    #[error("node {node} ({op}) computed {got}, but the graph declares {declared}")]
    ResultType {
        node: NodeId,
        op: &'static str,
        declared: Box<TensorType>,
        got: Box<TensorType>,
    },
    #[error("node {node}: {source}")]
    Node {
        node: NodeId,
        source: Box<InterpError>,
    },
}

pub(crate) type Result<T> = std::result::Result<T, InterpError>;

/// Shorthand for the common error: `op` rejects its operands or attributes.
pub(crate) fn invalid(op: &'static str, message: impl Into<String>) -> InterpError {
    InterpError::Invalid {
        op,
        message: message.into(),
    }
}

/// Evaluates `graph` on `inputs` (one tensor per graph input, in order) and returns the
/// graph outputs in order. Inputs are checked against the declared input types (dtype,
/// rank, and every known extent); every node's results are checked against the types the
/// graph declares for them, so a disagreement between `ir::infer` and the interpreter is
/// reported rather than silently propagated.
pub fn run(graph: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
    if inputs.len() != graph.inputs.len() {
        return Err(InterpError::InputCount {
            expected: graph.inputs.len(),
            got: inputs.len(),
        });
    }
    for (index, (&v, t)) in graph.inputs.iter().zip(inputs).enumerate() {
        let expected = value_type(graph, v)?;
        check_tensor(t, "input")?;
        if !type_admits(expected, t) {
            return Err(InterpError::InputType {
                index,
                expected: Box::new(expected.clone()),
                got: Box::new(t.ty()),
            });
        }
    }

    // Results of nodes, indexed by value id; graph inputs and constants are read in place.
    let mut computed: Vec<Option<Tensor>> = vec![None; graph.values.len()];
    for (i, node) in graph.nodes.iter().enumerate() {
        let id = NodeId(i as u32);
        let results = {
            let mut args = Vec::with_capacity(node.inputs.len());
            for &v in &node.inputs {
                args.push(lookup(graph, inputs, &computed, v)?);
            }
            eval_op(&node.op, &args).map_err(|e| InterpError::Node {
                node: id,
                source: Box::new(e),
            })?
        };
        if results.len() != node.outputs.len() {
            return Err(InterpError::Node {
                node: id,
                source: Box::new(invalid(
                    node.op.mnemonic(),
                    format!(
                        "the graph lists {} results, the op computes {}",
                        node.outputs.len(),
                        results.len()
                    ),
                )),
            });
        }
        for (&v, t) in node.outputs.iter().zip(results) {
            let declared = value_type(graph, v)?;
            if !type_admits(declared, &t) {
                return Err(InterpError::ResultType {
                    node: id,
                    op: node.op.mnemonic(),
                    declared: Box::new(declared.clone()),
                    got: Box::new(t.ty()),
                });
            }
            computed[v.index()] = Some(t);
        }
    }

    graph
        .outputs
        .iter()
        .map(|&v| lookup(graph, inputs, &computed, v).cloned())
        .collect()
}

fn value_type(graph: &Graph, v: ValueId) -> Result<&TensorType> {
    graph
        .values
        .get(v.index())
        .map(|val| &val.ty)
        .ok_or(InterpError::Undefined(v))
}

/// The tensor behind a value: a graph input, a constant, or an earlier node's result.
fn lookup<'a>(
    graph: &'a Graph,
    inputs: &'a [Tensor],
    computed: &'a [Option<Tensor>],
    v: ValueId,
) -> Result<&'a Tensor> {
    let value = graph
        .values
        .get(v.index())
        .ok_or(InterpError::Undefined(v))?;
    let found = match value.def {
        ValueDef::Input(i) => inputs.get(i),
        ValueDef::Const(c) => graph.consts.get(c.index()).map(|c| &c.tensor),
        ValueDef::Node(..) => computed.get(v.index()).and_then(|t| t.as_ref()),
    };
    found.ok_or(InterpError::Undefined(v))
}

/// Whether a concrete tensor is a value of `ty`: same dtype and rank, equal known extents
/// (unknown extents admit anything).
fn type_admits(ty: &TensorType, t: &Tensor) -> bool {
    ty.dtype == t.dtype()
        && ty.dims.len() == t.shape.len()
        && ty.dims.iter().zip(&t.shape).all(|(d, &n)| match d {
            Dim::Known(k) => *k == n,
            Dim::Unknown => true,
        })
}

/// A tensor built by hand may have data that does not fill its shape.
fn check_tensor(t: &Tensor, op: &'static str) -> Result<()> {
    let volume = t
        .shape
        .iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n));
    if volume != Some(t.len()) {
        return Err(invalid(
            op,
            format!("tensor of shape {:?} holds {} elements", t.shape, t.len()),
        ));
    }
    Ok(())
}

/// Evaluates a single op on concrete operands (in the op's NNEF parameter order) and
/// returns its results in order. Used by constant folding and by kernel tests.
///
/// The operands are first checked by `ir::infer` — the same rule the compiler uses — so
/// the interpreter accepts exactly the ops the verifier accepts and every result has
/// exactly the inferred shape; the kernels take their output extents and resolved
/// padding from it.
pub fn eval_op(op: &Op, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    let name = op.mnemonic();
    for t in inputs {
        check_tensor(t, name)?;
    }
    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
    let type_refs: Vec<&TensorType> = types.iter().collect();
    let inferred = infer(op, &type_refs).map_err(|e| invalid(name, e.message))?;
    let shapes = inferred
        .iter()
        .map(|t| {
            t.shape()
                .ok_or_else(|| invalid(name, format!("result type {t} is not fully known")))
        })
        .collect::<Result<Vec<_>>>()?;
    let results = dispatch(op, inputs, &shapes)?;
    // A kernel that disagrees with `infer` is a bug in one of them; say so.
    let agrees =
        results.len() == shapes.len() && results.iter().zip(&inferred).all(|(r, t)| r.ty() == *t);
    if !agrees {
        let got: Vec<String> = results.iter().map(|r| r.ty().to_string()).collect();
        let want: Vec<String> = inferred.iter().map(|t| t.to_string()).collect();
        return Err(invalid(
            name,
            format!("internal: computed {got:?} but ir::infer says {want:?}"),
        ));
    }
    Ok(results)
}

/// Runs the kernel of `op`. `shapes` are the result shapes `infer` computed (operand
/// counts and dtypes are already checked).
fn dispatch(op: &Op, x: &[&Tensor], shapes: &[Vec<usize>]) -> Result<Vec<Tensor>> {
    let out = shapes.first().map(Vec::as_slice).unwrap_or(&[]);
    let one = |t: Result<Tensor>| t.map(|t| vec![t]);
    match op {
        Op::Unary(u) => one(elementwise::unary(*u, x[0])),
        Op::Binary(b) => one(elementwise::binary(*b, x[0], x[1], out)),
        Op::Select => one(elementwise::select(x[0], x[1], x[2], out)),
        Op::Clamp => one(elementwise::clamp(x[0], x[1], x[2], out)),
        Op::Conv(attrs) => one(window::conv(attrs, x[0], x[1], x[2], out)),
        Op::Deconv(attrs) => one(window::deconv(attrs, x[0], x[1], x[2], out)),
        Op::Box {
            window: w,
            normalize,
        } => one(window::box_filter(w, *normalize, x[0], out)),
        Op::Debox {
            window: w,
            normalize,
        } => one(window::debox(w, *normalize, x[0], out)),
        Op::ArgmaxPool(w) => one(window::argmax_pool(w, x[0], out)),
        Op::Sample(w) => one(window::sample(w, x[0], x[1], out)),
        Op::Desample(w) => one(window::desample(w, x[0], x[1], out)),
        Op::MaxPool(w) => one(window::max_pool(w, x[0], out)),
        Op::MultilinearUpsample {
            factor,
            method,
            border,
        } => one(resample::multilinear_upsample(
            factor, *method, *border, x[0],
        )),
        Op::Reduce { op: r, axes } => one(reduce::reduce(*r, axes, x[0])),
        Op::MatMul {
            transpose_a,
            transpose_b,
        } => one(linalg::matmul(x[0], x[1], *transpose_a, *transpose_b, out)),
        Op::Linear => one(linalg::linear(x[0], x[1], x[2])),
        Op::Softmax { axes } => one(reduce::softmax(axes, x[0])),
        Op::BatchNorm { epsilon } => one(elementwise::batch_norm(
            *epsilon, x[0], x[1], x[2], x[3], x[4],
        )),
        Op::Reshape { .. } => one(Ok(Tensor {
            shape: out.to_vec(),
            data: x[0].data.clone(),
        })),
        Op::Squeeze { .. } | Op::Unsqueeze { .. } => one(Ok(Tensor {
            shape: out.to_vec(),
            data: x[0].data.clone(),
        })),
        Op::Transpose { axes } => one(movement::transpose(axes, x[0])),
        Op::Split { axis, ratios } => movement::split(*axis, ratios, x[0]),
        Op::Concat { axis } => one(movement::concat(*axis, x)),
        Op::Stack { axis } => one(movement::stack(*axis, x)),
        Op::Unstack { axis } => movement::unstack(*axis, x[0]),
        Op::Slice {
            axes,
            begin,
            end,
            stride,
        } => one(movement::slice(axes, begin, end, stride, x[0])),
        Op::Tile { repeats } => one(movement::tile(repeats, x[0])),
        Op::Pad {
            padding,
            border,
            value,
        } => one(movement::pad(padding, *border, *value, x[0])),
        Op::Gather { axis } => one(movement::gather(*axis, x[0], x[1])),
        Op::Cast { to } => one(elementwise::cast(*to, x[0])),
        Op::RoiPool { op: r, output_size } => {
            one(resample::roi_pool(*r, output_size, x[0], x[1], x[2]))
        }
        Op::RoiResample {
            output_size,
            method,
        } => one(resample::roi_resample(
            output_size,
            *method,
            x[0],
            x[1],
            x[2],
        )),
    }
}

/// The f32 elements of an operand, or an error naming the operand.
pub(crate) fn f32_data<'a>(op: &'static str, what: &str, t: &'a Tensor) -> Result<&'a [f32]> {
    t.as_f32()
        .ok_or_else(|| invalid(op, format!("{what} must be f32, got {}", t.dtype())))
}

/// The i32 elements of an operand, or an error naming the operand.
pub(crate) fn i32_data<'a>(op: &'static str, what: &str, t: &'a Tensor) -> Result<&'a [i32]> {
    t.as_i32()
        .ok_or_else(|| invalid(op, format!("{what} must be i32, got {}", t.dtype())))
}

/// The bool elements of an operand, or an error naming the operand.
pub(crate) fn bool_data<'a>(op: &'static str, what: &str, t: &'a Tensor) -> Result<&'a [bool]> {
    t.as_bool()
        .ok_or_else(|| invalid(op, format!("{what} must be bool, got {}", t.dtype())))
}

/// Row-major strides of a shape.
pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Elements `data[i]` for every `i` in `index`, in that order, for any dtype. Data
/// movement ops compute source offsets and call this; offsets are in range by
/// construction.
pub(crate) fn take(data: &TensorData, index: &[usize]) -> TensorData {
    match data {
        TensorData::F32(v) => TensorData::F32(index.iter().map(|&i| v[i]).collect()),
        TensorData::I32(v) => TensorData::I32(index.iter().map(|&i| v[i]).collect()),
        TensorData::Bool(v) => TensorData::Bool(index.iter().map(|&i| v[i]).collect()),
    }
}

/// Like [`take`], with `None` standing for `fill` (a constant border), converted to the
/// data's dtype (`fill as i32` for i32, `fill != 0` for bool).
pub(crate) fn take_or(data: &TensorData, index: &[Option<usize>], fill: f32) -> TensorData {
    match data {
        TensorData::F32(v) => {
            TensorData::F32(index.iter().map(|i| i.map_or(fill, |i| v[i])).collect())
        }
        TensorData::I32(v) => TensorData::I32(
            index
                .iter()
                .map(|i| i.map_or(fill as i32, |i| v[i]))
                .collect(),
        ),
        TensorData::Bool(v) => TensorData::Bool(
            index
                .iter()
                .map(|i| i.map_or(fill != 0.0, |i| v[i]))
                .collect(),
        ),
    }
}
