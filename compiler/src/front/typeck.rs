//! Type checking of evaluated values against fragment signatures (spec §2.5).
//!
//! Because every attribute is known at compile time, arguments are checked as values:
//! [`deduce`] collects what each argument says about the generic `?`, and
//! [`Evaluator::coerce`] checks castability and performs the only implicit conversion
//! NNEF has, a primitive attribute becoming a rank-0 constant tensor where a tensor is
//! expected (`add(x, 1.0)`, `bias = 0.0`). Integer → scalar, logical ↔ numeric and
//! tensor → attribute are never converted. This module does not evaluate expressions.

use super::eval::Evaluator;
use super::syntax::ast::{PrimType, TypeSpec};
use super::value::{Value, dtype_of_prim, prim_of_dtype};
use crate::ir::{Graph, Tensor};

/// Adds to `out` every binding of `?` that `v` implies for a parameter of type `ty`.
pub fn deduce(v: &Value, ty: &TypeSpec, graph: &Graph, out: &mut Vec<PrimType>) {
    match (ty, v) {
        (TypeSpec::Generic(_), v) => {
            if let Some(p) = prim_of_value(v) {
                out.push(p);
            }
        }
        (TypeSpec::Tensor(Some(inner), _), v) if matches!(**inner, TypeSpec::Generic(_)) => match v
        {
            Value::Tensor(id) => out.push(prim_of_dtype(graph.ty(*id).dtype)),
            other => {
                if let Some(p) = prim_of_value(other) {
                    out.push(p);
                }
            }
        },
        (TypeSpec::Array(inner, _), Value::Array(items)) => {
            items.iter().for_each(|i| deduce(i, inner, graph, out))
        }
        (TypeSpec::Tuple(tys, _), Value::Tuple(items)) => {
            tys.iter()
                .zip(items)
                .for_each(|(t, i)| deduce(i, t, graph, out));
        }
        _ => {}
    }
}

fn prim_of_value(v: &Value) -> Option<PrimType> {
    match v {
        Value::Integer(_) => Some(PrimType::Integer),
        Value::Scalar(_) => Some(PrimType::Scalar),
        Value::Logical(_) => Some(PrimType::Logical),
        Value::Str(_) => Some(PrimType::String),
        _ => None,
    }
}

/// Resolves a type position that must name a primitive (`scalar`, or `?` when bound).
fn resolve_prim(ty: &TypeSpec, generic: Option<PrimType>) -> Option<PrimType> {
    match ty {
        TypeSpec::Prim(p, _) => Some(*p),
        TypeSpec::Generic(_) => generic,
        _ => None,
    }
}

/// Why a value does not fit a type (the caller words the diagnostic).
#[derive(Debug)]
pub struct Mismatch;

impl Evaluator<'_> {
    /// Checks `v` against `ty` (with `?` bound to `generic`) and converts primitive
    /// attributes to rank-0 constants where a tensor is expected.
    pub fn coerce(
        &mut self,
        v: Value,
        ty: &TypeSpec,
        generic: Option<PrimType>,
    ) -> Result<Value, Mismatch> {
        match ty {
            TypeSpec::Prim(..) | TypeSpec::Generic(_) => {
                let want = resolve_prim(ty, generic);
                match (prim_of_value(&v), want) {
                    (Some(p), Some(w)) if p == w => Ok(v),
                    // An unbound `?` (nothing to deduce from) accepts any primitive.
                    (Some(_), None) => Ok(v),
                    _ => Err(Mismatch),
                }
            }
            TypeSpec::Tensor(inner, _) => {
                let want = match inner {
                    None => None,
                    Some(t) => Some(resolve_prim(t, generic).ok_or(Mismatch)?),
                };
                match &v {
                    Value::Tensor(id) => {
                        let have = prim_of_dtype(self.graph.ty(*id).dtype);
                        if want.is_none_or(|w| w == have) {
                            Ok(v)
                        } else {
                            Err(Mismatch)
                        }
                    }
                    other => {
                        let p = prim_of_value(other).ok_or(Mismatch)?;
                        if want.is_some_and(|w| w != p) {
                            return Err(Mismatch);
                        }
                        let t = scalar_tensor(other).ok_or(Mismatch)?;
                        let _ = dtype_of_prim(p).ok_or(Mismatch)?;
                        Ok(Value::Tensor(self.graph.add_const(t, None, None)))
                    }
                }
            }
            TypeSpec::Array(inner, _) => match v {
                Value::Array(items) => {
                    let mut out = Vec::with_capacity(items.len());
                    for i in items {
                        out.push(self.coerce(i, inner, generic)?);
                    }
                    Ok(Value::Array(out))
                }
                _ => Err(Mismatch),
            },
            TypeSpec::Tuple(tys, _) => match v {
                Value::Tuple(items) if items.len() == tys.len() => {
                    let mut out = Vec::with_capacity(items.len());
                    for (i, t) in items.into_iter().zip(tys) {
                        out.push(self.coerce(i, t, generic)?);
                    }
                    Ok(Value::Tuple(out))
                }
                _ => Err(Mismatch),
            },
        }
    }
}

/// A rank-0 tensor holding one primitive attribute (`None` for strings and compounds).
pub fn scalar_tensor(v: &Value) -> Option<Tensor> {
    Some(match v {
        Value::Scalar(s) => Tensor::f32(vec![], vec![*s as f32]),
        Value::Integer(i) => Tensor::i32(vec![], vec![i32::try_from(*i).ok()?]),
        Value::Logical(b) => Tensor::bool(vec![], vec![*b]),
        _ => return None,
    })
}
