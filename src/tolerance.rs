//! The numeric acceptance rule for a model's output against a reference:
//! `|ours − expected| ≤ 1e-4 · max(1, max|expected|)`, element by element.
//!
//! Used by `nnefc run --compare`, the end-to-end tests and the examples' tests. It compares
//! whole tensors of equal shape and dtype only; it does not align or broadcast.

use nnefc_compiler::ir::{Tensor, TensorData};
use std::fmt;

/// Relative factor of the tolerance.
pub const RELATIVE: f32 = 1e-4;

/// The outcome of comparing two tensors of the same shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Largest `|ours − expected|`.
    pub max_abs_diff: f32,
    /// Largest `|expected|`.
    pub max_abs_expected: f32,
    /// The tolerance applied: `1e-4 · max(1, max|expected|)`.
    pub tolerance: f32,
    /// Flat index of the worst element (0 for empty tensors).
    pub worst_index: usize,
    /// Number of elements compared.
    pub len: usize,
    /// `true` when a value is NaN on one side only.
    pub nan_mismatch: bool,
}

impl Comparison {
    /// Whether every element is within the tolerance.
    pub fn passed(&self) -> bool {
        !self.nan_mismatch && self.max_abs_diff <= self.tolerance
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: max |diff| = {:.3e} at element {} (tolerance {:.3e}, max |expected| = {:.4}, {} elements{})",
            if self.passed() { "match" } else { "MISMATCH" },
            self.max_abs_diff,
            self.worst_index,
            self.tolerance,
            self.max_abs_expected,
            self.len,
            if self.nan_mismatch {
                ", NaN on one side"
            } else {
                ""
            }
        )
    }
}

/// Why two tensors cannot be compared at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompareError {
    /// The shapes differ.
    Shape {
        /// Our shape.
        ours: Vec<usize>,
        /// The reference's shape.
        expected: Vec<usize>,
    },
    /// The element types differ.
    DType {
        /// Our dtype's name.
        ours: String,
        /// The reference's dtype's name.
        expected: String,
    },
}

impl fmt::Display for CompareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompareError::Shape { ours, expected } => {
                write!(
                    f,
                    "shape {ours:?} differs from the expected shape {expected:?}"
                )
            }
            CompareError::DType { ours, expected } => {
                write!(
                    f,
                    "element type {ours} differs from the expected {expected}"
                )
            }
        }
    }
}

impl std::error::Error for CompareError {}

/// Compares `ours` with `expected` under the acceptance rule. A trailing or leading
/// extent of 1 is not ignored: shapes must be equal.
pub fn compare(ours: &Tensor, expected: &Tensor) -> Result<Comparison, CompareError> {
    if ours.shape != expected.shape {
        return Err(CompareError::Shape {
            ours: ours.shape.clone(),
            expected: expected.shape.clone(),
        });
    }
    let as_f32 = |t: &Tensor| -> Vec<f32> {
        match &t.data {
            TensorData::F32(v) => v.clone(),
            TensorData::I32(v) => v.iter().map(|&x| x as f32).collect(),
            TensorData::Bool(v) => v.iter().map(|&x| f32::from(u8::from(x))).collect(),
        }
    };
    if ours.dtype() != expected.dtype() {
        return Err(CompareError::DType {
            ours: ours.dtype().to_string(),
            expected: expected.dtype().to_string(),
        });
    }
    let (a, b) = (as_f32(ours), as_f32(expected));
    let max_abs_expected = b
        .iter()
        .filter(|x| x.is_finite())
        .fold(0f32, |m, x| m.max(x.abs()));
    let mut c = Comparison {
        max_abs_diff: 0.0,
        max_abs_expected,
        tolerance: RELATIVE * max_abs_expected.max(1.0),
        worst_index: 0,
        len: a.len(),
        nan_mismatch: false,
    };
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        if x.is_nan() != y.is_nan() {
            c.nan_mismatch = true;
            c.worst_index = i;
            continue;
        }
        // Equal infinities and NaN on both sides agree.
        let d = if x == y || (x.is_nan() && y.is_nan()) {
            0.0
        } else {
            (x - y).abs()
        };
        if d > c.max_abs_diff || d.is_nan() {
            c.max_abs_diff = d;
            c.worst_index = i;
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_scales_with_the_largest_expected_value() {
        let e = Tensor::f32(vec![3], vec![100.0, -2.0, 0.5]);
        let ok = Tensor::f32(vec![3], vec![100.009, -2.0, 0.5]);
        let bad = Tensor::f32(vec![3], vec![100.0, -2.0, 0.52]);
        assert!(compare(&ok, &e).expect("same shape").passed());
        let c = compare(&bad, &e).expect("same shape");
        assert!(!c.passed());
        assert_eq!(c.worst_index, 2);
        let small = Tensor::f32(vec![1], vec![0.5]);
        assert!(
            compare(&Tensor::f32(vec![1], vec![0.50009]), &small)
                .expect("same shape")
                .passed()
        );
        assert!(
            !compare(&Tensor::f32(vec![1], vec![0.5002]), &small)
                .expect("same shape")
                .passed()
        );
    }

    #[test]
    fn shape_and_nan_are_mismatches() {
        let e = Tensor::f32(vec![2], vec![1.0, 2.0]);
        assert!(compare(&Tensor::f32(vec![1, 2], vec![1.0, 2.0]), &e).is_err());
        assert!(
            !compare(&Tensor::f32(vec![2], vec![f32::NAN, 2.0]), &e)
                .expect("same shape")
                .passed()
        );
        let nan = Tensor::f32(vec![1], vec![f32::NAN]);
        assert!(compare(&nan, &nan).expect("same shape").passed());
    }
}
