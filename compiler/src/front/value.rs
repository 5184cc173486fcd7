//! Compile-time values of the NNEF evaluator.
//!
//! NNEF separates attributes (integers, scalars, logicals, strings, arrays and tuples of
//! them), which are known at compile time, from tensors, which exist only at run time.
//! A [`Value`] holds either; a tensor is a reference to an `ir::Value` already in the
//! graph being built. This module only represents and describes values; evaluation
//! lives in `eval`, conversions between types in `typeck`.

use crate::front::syntax::ast::{PrimType, TypeSpec};
use crate::ir::{DType, Graph, ValueId};

/// One compile-time value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Integer(i64),
    Scalar(f64),
    Logical(bool),
    Str(String),
    Array(Vec<Value>),
    Tuple(Vec<Value>),
    /// A run-time tensor: an IR value of the graph under construction.
    Tensor(ValueId),
}

impl Value {
    pub fn is_tensor(&self) -> bool {
        matches!(self, Value::Tensor(_))
    }

    /// Whether any tensor occurs in this value (arrays of tensors, tuples of tensors).
    pub fn contains_tensor(&self) -> bool {
        match self {
            Value::Tensor(_) => true,
            Value::Array(items) | Value::Tuple(items) => items.iter().any(Value::contains_tensor),
            _ => false,
        }
    }

    /// The type as NNEF would spell it, for messages: `integer`, `tensor<scalar>`,
    /// `(integer,integer)[]`. An empty array says `[]` (it fits every array type).
    pub fn describe(&self, graph: &Graph) -> String {
        match self {
            Value::Integer(_) => "integer".into(),
            Value::Scalar(_) => "scalar".into(),
            Value::Logical(_) => "logical".into(),
            Value::Str(_) => "string".into(),
            Value::Tensor(id) => {
                format!("tensor<{}>", prim_name(prim_of_dtype(graph.ty(*id).dtype)))
            }
            Value::Array(items) => match items.first() {
                Some(first) => format!("{}[]", first.describe(graph)),
                None => "empty array `[]`".into(),
            },
            Value::Tuple(items) => {
                let parts: Vec<String> = items.iter().map(|v| v.describe(graph)).collect();
                format!("({})", parts.join(","))
            }
        }
    }

    /// A short rendering of attribute values for messages and `string(x)`.
    pub fn render(&self) -> String {
        match self {
            Value::Integer(i) => i.to_string(),
            Value::Scalar(s) => render_scalar(*s),
            Value::Logical(b) => b.to_string(),
            Value::Str(s) => s.clone(),
            Value::Tensor(id) => format!("{id}"),
            Value::Array(items) => {
                let parts: Vec<String> = items.iter().map(Value::render_quoted).collect();
                format!("[{}]", parts.join(", "))
            }
            Value::Tuple(items) => {
                let parts: Vec<String> = items.iter().map(Value::render_quoted).collect();
                format!("({})", parts.join(", "))
            }
        }
    }

    fn render_quoted(&self) -> String {
        match self {
            Value::Str(s) => format!("'{s}'"),
            other => other.render(),
        }
    }
}

/// Scalars always show a `.` or an exponent, as NNEF literals do.
pub fn render_scalar(s: f64) -> String {
    let t = format!("{s}");
    if t.contains('.') || t.contains('e') || t.contains("inf") || t.contains("NaN") {
        t
    } else {
        format!("{t}.0")
    }
}

pub fn prim_name(p: PrimType) -> &'static str {
    match p {
        PrimType::Integer => "integer",
        PrimType::Scalar => "scalar",
        PrimType::Logical => "logical",
        PrimType::String => "string",
    }
}

pub fn prim_of_dtype(d: DType) -> PrimType {
    match d {
        DType::F32 => PrimType::Scalar,
        DType::I32 => PrimType::Integer,
        DType::Bool => PrimType::Logical,
    }
}

/// `None` for `string`: there are no string tensors.
pub fn dtype_of_prim(p: PrimType) -> Option<DType> {
    match p {
        PrimType::Scalar => Some(DType::F32),
        PrimType::Integer => Some(DType::I32),
        PrimType::Logical => Some(DType::Bool),
        PrimType::String => None,
    }
}

/// A type spec as NNEF spells it, with `?` replaced by its binding when known.
pub fn describe_spec(ty: &TypeSpec, generic: Option<PrimType>) -> String {
    match ty {
        TypeSpec::Prim(p, _) => prim_name(*p).into(),
        TypeSpec::Generic(_) => generic.map(prim_name).unwrap_or("?").into(),
        TypeSpec::Tensor(None, _) => "tensor<>".into(),
        TypeSpec::Tensor(Some(inner), _) => format!("tensor<{}>", describe_spec(inner, generic)),
        TypeSpec::Array(inner, _) => format!("{}[]", describe_spec(inner, generic)),
        TypeSpec::Tuple(items, _) => {
            let parts: Vec<String> = items.iter().map(|t| describe_spec(t, generic)).collect();
            format!("({})", parts.join(","))
        }
    }
}

/// Whether a type spec mentions `?` anywhere.
pub fn spec_uses_generic(ty: &TypeSpec) -> bool {
    match ty {
        TypeSpec::Generic(_) => true,
        TypeSpec::Prim(..) | TypeSpec::Tensor(None, _) => false,
        TypeSpec::Tensor(Some(inner), _) | TypeSpec::Array(inner, _) => spec_uses_generic(inner),
        TypeSpec::Tuple(items, _) => items.iter().any(spec_uses_generic),
    }
}

/// Whether a type spec is (or contains) a tensor type — tensor parameters and results.
pub fn spec_is_tensor(ty: &TypeSpec) -> bool {
    match ty {
        TypeSpec::Tensor(..) => true,
        TypeSpec::Prim(..) | TypeSpec::Generic(_) => false,
        TypeSpec::Array(inner, _) => spec_is_tensor(inner),
        TypeSpec::Tuple(items, _) => items.iter().any(spec_is_tensor),
    }
}

/// Whether `tensor<>` occurs in a type spec.
pub fn spec_has_unbound_tensor(ty: &TypeSpec) -> bool {
    match ty {
        TypeSpec::Tensor(None, _) => true,
        TypeSpec::Prim(..) | TypeSpec::Generic(_) => false,
        TypeSpec::Tensor(Some(inner), _) | TypeSpec::Array(inner, _) => {
            spec_has_unbound_tensor(inner)
        }
        TypeSpec::Tuple(items, _) => items.iter().any(spec_has_unbound_tensor),
    }
}
