//! The graph IR shared by every stage after the front end.
//!
//! A [`Graph`] is a list of [`Node`]s in topological order over typed [`Value`]s.
//! Each value has a [`TensorType`] (dtype, extents, XLA-style layout). Ops are a closed
//! enum ([`Op`]) with typed attributes. Invariants (checked by `verify`):
//! - every operand is defined before use (input, constant, or an earlier node's output);
//! - every value's type equals what `infer` computes from its operands;
//! - graph outputs exist; constants' data match their types.
//!
//! `infer` holds every shape rule; `interp` is the numeric oracle; `print`/`parse` are
//! the text form. The IR knows nothing of NNEF syntax or of Cranelift.

pub mod graph;
pub mod infer;
pub mod interp;
pub mod op;
pub mod parse;
pub mod plan;
pub mod print;
pub mod rewrite;
pub mod tensor;
pub mod types;
pub mod verify;

pub use graph::{ConstId, Constant, Graph, Node, NodeId, Value, ValueDef, ValueId};
pub use op::{
    BinaryOp, Border, ConvAttrs, Op, ReduceOp, ResampleMethod, RoiPoolOp, UnaryOp, WindowAttrs,
};
pub use tensor::{Tensor, TensorData};
pub use types::{DType, Dim, Layout, TensorType};
