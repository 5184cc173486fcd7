//! Quantization in the front end: decoding quantized `.dat` codes to real values, and
//! simulated quantization of the tensors `graph.quant` names.
//!
//! A `graph.quant` entry `"t": op(args);` says the values of graph tensor `t` lie on
//! the grid of quantization fragment `op`. We (1) dequantize variables stored as
//! integer codes with that entry (or with the legacy header's min/max), and (2) insert
//! an invocation of `op(t, args...)` right after `t` is assigned, so the compiled graph
//! computes what a quantized runtime would (fake quantization). Parsing `graph.quant`
//! is `front::quant`'s job; this module does not choose integer kernels.

use super::dat::{DatTensor, ItemKind, QuantParams};
use super::eval::{EResult, Evaluator, Scope};
use super::expand::ArgVal;
use super::quant::{QuantEntry, QuantValue, QuantValueKind};
use super::syntax::ast::Ident;
use super::value::Value;
use crate::diag::{Diagnostic, Span};
use crate::ir::{Tensor, TensorData, ValueId};

/// What the model holds for one variable label.
pub enum VarData {
    Plain(Tensor),
    /// Integer codes (as f32) of a quantized tensor, to decode with `graph.quant` or
    /// the legacy header parameters.
    Quantized(DatTensor),
    /// No data file.
    Missing,
    /// The file exists but cannot be used; the message names it.
    Error(String),
}

fn qvalue(v: &QuantValue) -> Value {
    match &v.kind {
        QuantValueKind::Integer(i) => Value::Integer(*i),
        QuantValueKind::Scalar(s) => Value::Scalar(*s),
        QuantValueKind::Logical(b) => Value::Logical(*b),
        QuantValueKind::String(s) => Value::Str(s.clone()),
        QuantValueKind::Array(items) => Value::Array(items.iter().map(qvalue).collect()),
        QuantValueKind::Tuple(items) => Value::Tuple(items.iter().map(qvalue).collect()),
    }
}

/// Flattens a rectangular nested array of numbers; `None` if jagged or not numeric.
fn flatten(v: &Value, shape: &mut Vec<usize>, depth: usize, out: &mut Vec<f64>) -> Option<()> {
    match v {
        Value::Integer(i) => out.push(*i as f64),
        Value::Scalar(s) => out.push(*s),
        Value::Array(items) => {
            if shape.len() == depth {
                shape.push(items.len());
            } else if shape.get(depth) != Some(&items.len()) {
                return None;
            }
            for i in items {
                flatten(i, shape, depth + 1, out)?;
            }
        }
        _ => return None,
    }
    Some(())
}

/// A parameter value broadcast (NNEF left-aligned) to every element of `shape`.
fn broadcast(values: &[f64], vshape: &[usize], shape: &[usize]) -> Option<Vec<f64>> {
    if vshape.len() > shape.len() || vshape.iter().zip(shape).any(|(&a, &b)| a != 1 && a != b) {
        return None;
    }
    let n: usize = shape.iter().product();
    let mut out = Vec::with_capacity(n);
    for flat in 0..n {
        // Coordinates of `flat` in `shape`, then the matching index in `vshape`.
        let mut rem = flat;
        let mut coords = vec![0; shape.len()];
        for d in (0..shape.len()).rev() {
            coords[d] = rem % shape[d];
            rem /= shape[d];
        }
        let mut idx = 0;
        for (d, &e) in vshape.iter().enumerate() {
            idx = idx * e + if e == 1 { 0 } else { coords[d] };
        }
        out.push(*values.get(idx)?);
    }
    Some(out)
}

impl Evaluator<'_> {
    fn quant_param(&self, entry: &QuantEntry, name: &str, shape: &[usize]) -> EResult<Vec<f64>> {
        let arg = entry.arg(name).ok_or_else(|| {
            Diagnostic::error(format!(
                "`{}` entry for `{}` lacks `{name}`",
                entry.fragment, entry.tensor
            ))
            .at(entry.span, format!("expected `{name} = ...`"))
        })?;
        let mut vshape = Vec::new();
        let mut values = Vec::new();
        flatten(&qvalue(&arg.value), &mut vshape, 0, &mut values)
            .and_then(|_| broadcast(&values, &vshape, shape))
            .ok_or_else(|| {
                Diagnostic::error(format!("`{name}` does not fit tensor `{}`", entry.tensor)).at(
                    arg.value.span,
                    format!(
                        "expected a number or a rectangular array that broadcasts to {shape:?}"
                    ),
                )
            })
    }

    fn quant_flag(entry: &QuantEntry, name: &str, default: bool) -> bool {
        match entry.arg(name).map(|a| &a.value.kind) {
            Some(QuantValueKind::Logical(b)) => *b,
            _ => default,
        }
    }

    /// Real values of a quantized variable (spec §7.3, §7.4, §4.9 formulas).
    pub fn dequantize(
        &self,
        ident: Option<&str>,
        dat: &DatTensor,
        label: &str,
        span: Span,
    ) -> EResult<Tensor> {
        let codes: Vec<f64> = match &dat.data.data {
            TensorData::F32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::I32(v) => v.iter().map(|&x| x as f64).collect(),
            TensorData::Bool(v) => v.iter().map(|&x| x as u8 as f64).collect(),
        };
        let bits = dat.item.bits.min(62) as i32;
        let shape = dat.shape.clone();
        let values: Vec<f64> = match dat.quant {
            Some(QuantParams::LegacyLinear { min, max }) => {
                let r = 2f64.powi(bits) - 1.0;
                codes
                    .iter()
                    .map(|c| c / r * (max - min) as f64 + min as f64)
                    .collect()
            }
            Some(QuantParams::LegacyLogarithmic { .. }) => {
                return Err(Diagnostic::error(format!(
                    "variable '{label}' uses legacy logarithmic quantization"
                ))
                .at(span, "nnefc cannot decode these codes")
                .with_note("convert the file to float or linear quantization"));
            }
            Some(QuantParams::GraphQuant) | None => {
                let entry = ident.and_then(|i| self.quant.get(i)).ok_or_else(|| {
                    Diagnostic::error(format!("variable '{label}' holds quantized codes but graph.quant has no entry for it"))
                        .at(span, "cannot decode without quantization parameters")
                        .with_note(format!(
                            "add an entry such as `\"{}\": zero_point_linear_quantize(zero_point = 0, scale = 1.0, bits = {bits}, signed = {}, symmetric = false);`",
                            ident.unwrap_or("name"),
                            dat.item.kind == ItemKind::QuantizedSigned
                        ))
                })?;
                match entry.fragment.as_str() {
                    "zero_point_linear_quantize" => {
                        let zp = self.quant_param(entry, "zero_point", &shape)?;
                        let scale = self.quant_param(entry, "scale", &shape)?;
                        codes
                            .iter()
                            .zip(zp.iter().zip(&scale))
                            .map(|(c, (z, s))| (c - z) * s)
                            .collect()
                    }
                    "linear_quantize" | "min_max_linear_quantize" => {
                        let lo = self.quant_param(entry, "min", &shape)?;
                        let hi = self.quant_param(entry, "max", &shape)?;
                        let signed = Self::quant_flag(entry, "signed", false)
                            && entry.fragment != "linear_quantize";
                        let symmetric = Self::quant_flag(entry, "symmetric", false)
                            && entry.fragment != "linear_quantize";
                        let r = 2f64.powi(bits) - 1.0 - f64::from(u8::from(signed && symmetric));
                        let p = if signed {
                            2f64.powi(bits - 1) - f64::from(u8::from(symmetric))
                        } else {
                            0.0
                        };
                        codes
                            .iter()
                            .zip(lo.iter().zip(&hi))
                            .map(|(c, (l, h))| (c + p) / r * (h - l) + l)
                            .collect()
                    }
                    other => {
                        return Err(Diagnostic::error(format!("cannot decode codes quantized with `{other}`"))
                            .at(entry.fragment_span, "unsupported for quantized .dat files")
                            .with_note("nnefc decodes zero_point_linear_quantize, linear_quantize and min_max_linear_quantize"));
                    }
                }
            }
        };
        Ok(Tensor::f32(
            shape,
            values.into_iter().map(|v| v as f32).collect(),
        ))
    }

    /// Simulated quantization: `t` becomes `op(t, args...)` right after it is assigned.
    pub fn apply_quant(
        &mut self,
        name: &str,
        id: ValueId,
        scope: &mut Scope,
    ) -> EResult<Option<ValueId>> {
        let Some(entry) = self.quant.get(name).cloned() else {
            return Ok(None);
        };
        let frag = self.lookup(&Ident {
            name: entry.fragment.clone(),
            span: entry.fragment_span,
        })?;
        let Some(first) = frag.def.params.first() else {
            return Err(
                Diagnostic::error(format!("`{}` has no parameters", entry.fragment)).at(
                    entry.fragment_span,
                    "expected a quantization fragment whose first parameter is a tensor",
                ),
            );
        };
        let mut args = vec![ArgVal {
            name: None,
            value: Value::Tensor(id),
            span: entry.tensor_span,
        }];
        for a in &entry.args {
            if a.name == first.name.name {
                return Err(Diagnostic::error(format!(
                    "`{}` must not be given in graph.quant",
                    a.name
                ))
                .at(a.name_span, "bound to the quantized tensor implicitly"));
            }
            let mut v = qvalue(&a.value);
            // 1.0.5: tensor parameters may be (nested) array literals → constants.
            let is_tensor_param = frag.def.params.iter().any(|p| {
                p.name.name == a.name && matches!(p.ty, super::syntax::ast::TypeSpec::Tensor(..))
            });
            if is_tensor_param && matches!(v, Value::Array(_)) {
                v = self.array_constant(&v, a.value.span)?;
            }
            args.push(ArgVal {
                name: Some(Ident {
                    name: a.name.clone(),
                    span: a.name_span,
                }),
                value: v,
                span: a.value.span,
            });
        }
        let _ = scope;
        match self.invoke(frag, None, args, entry.span, entry.fragment_span)? {
            Value::Tensor(q) => Ok(Some(q)),
            other => {
                Err(
                    Diagnostic::error(format!("`{}` does not give one tensor", entry.fragment)).at(
                        entry.fragment_span,
                        format!("it gives `{}`", self.describe(&other)),
                    ),
                )
            }
        }
    }

    /// A rectangular numeric array literal as a constant tensor (f32, or i32 when all
    /// items are integers).
    fn array_constant(&mut self, v: &Value, span: Span) -> EResult<Value> {
        let mut shape = Vec::new();
        let mut values = Vec::new();
        flatten(v, &mut shape, 0, &mut values).ok_or_else(|| {
            Diagnostic::error("array literal must be rectangular and numeric")
                .at(span, "jagged or non-numeric array (must not be jagged)")
        })?;
        fn all_int(v: &Value) -> bool {
            match v {
                Value::Integer(_) => true,
                Value::Array(items) => items.iter().all(all_int),
                _ => false,
            }
        }
        let t = if all_int(v) {
            Tensor::i32(shape, values.iter().map(|&x| x as i32).collect())
        } else {
            Tensor::f32(shape, values.iter().map(|&x| x as f32).collect())
        };
        Ok(Value::Tensor(self.graph.add_const(t, None, None)))
    }
}
