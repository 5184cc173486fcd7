//! Tensor types of the graph IR: data type, extents (possibly unknown) and layout.
//!
//! A [`TensorType`] is `dtype + dims + layout`. Layouts follow XLA: `minor_to_major`
//! lists dimension indices from the fastest-varying to the slowest; row-major is
//! `[rank-1, ..., 1, 0]`. Every value is row-major until the layout-assignment pass
//! says otherwise. This module holds no shape *rules* (see `ir::infer`).

use std::fmt;

/// Element type of a tensor. NNEF `scalar` is f32, `integer` is i32, `logical` is a
/// one-byte bool (0 or 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    I32,
    Bool,
}

impl DType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::Bool => 1,
        }
    }
    /// Spelling in the text IR: `f32`, `i32`, `bool`.
    pub fn mnemonic(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::I32 => "i32",
            DType::Bool => "bool",
        }
    }
    pub fn from_mnemonic(s: &str) -> Option<DType> {
        Some(match s {
            "f32" => DType::F32,
            "i32" => DType::I32,
            "bool" => DType::Bool,
            _ => return None,
        })
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mnemonic())
    }
}

/// One extent: known, or not yet known during shape inference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    Known(usize),
    Unknown,
}

impl Dim {
    pub fn known(self) -> Option<usize> {
        match self {
            Dim::Known(n) => Some(n),
            Dim::Unknown => None,
        }
    }
    /// Merge two facts about the same extent (TensorFlow `Merge`): equal known extents
    /// stay, unknown yields to known, two different known extents conflict (`None`).
    pub fn merge(self, other: Dim) -> Option<Dim> {
        match (self, other) {
            (Dim::Known(a), Dim::Known(b)) if a != b => None,
            (Dim::Known(a), _) | (_, Dim::Known(a)) => Some(Dim::Known(a)),
            _ => Some(Dim::Unknown),
        }
    }
    /// Relax (TensorFlow `Relax`): keep only what both agree on.
    pub fn relax(self, other: Dim) -> Dim {
        match (self, other) {
            (Dim::Known(a), Dim::Known(b)) if a == b => Dim::Known(a),
            _ => Dim::Unknown,
        }
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Known(n) => write!(f, "{n}"),
            Dim::Unknown => f.write_str("?"),
        }
    }
}

/// Physical order of a tensor's dimensions (XLA `minor_to_major`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    pub minor_to_major: Vec<usize>,
}

impl Layout {
    pub fn row_major(rank: usize) -> Layout {
        Layout {
            minor_to_major: (0..rank).rev().collect(),
        }
    }
    pub fn is_row_major(&self) -> bool {
        self.minor_to_major
            .iter()
            .rev()
            .enumerate()
            .all(|(i, &d)| i == d)
    }
}

/// The type of an IR value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub dtype: DType,
    pub dims: Vec<Dim>,
    pub layout: Layout,
}

impl TensorType {
    /// A row-major tensor type with known extents.
    pub fn new(dtype: DType, shape: &[usize]) -> TensorType {
        TensorType {
            dtype,
            dims: shape.iter().map(|&n| Dim::Known(n)).collect(),
            layout: Layout::row_major(shape.len()),
        }
    }
    /// A row-major tensor type with possibly unknown extents.
    pub fn with_dims(dtype: DType, dims: Vec<Dim>) -> TensorType {
        let rank = dims.len();
        TensorType {
            dtype,
            dims,
            layout: Layout::row_major(rank),
        }
    }
    pub fn scalar(dtype: DType) -> TensorType {
        TensorType::new(dtype, &[])
    }
    pub fn rank(&self) -> usize {
        self.dims.len()
    }
    /// The extents if all are known.
    pub fn shape(&self) -> Option<Vec<usize>> {
        self.dims.iter().map(|d| d.known()).collect()
    }
    pub fn is_fully_known(&self) -> bool {
        self.dims.iter().all(|d| matches!(d, Dim::Known(_)))
    }
    /// Number of elements, if all extents are known and the product fits in `usize`.
    pub fn volume(&self) -> Option<usize> {
        self.shape()?
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }
    /// Size in bytes, if all extents are known and the size fits in `usize`.
    pub fn byte_size(&self) -> Option<usize> {
        self.volume()?.checked_mul(self.dtype.size())
    }
}

impl fmt::Display for TensorType {
    /// `f32[1,3,224,224]`, with `{3,2,1,0}` appended when the layout is not row-major.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")?;
        if !self.layout.is_row_major() {
            f.write_str("{")?;
            for (i, d) in self.layout.minor_to_major.iter().enumerate() {
                if i > 0 {
                    f.write_str(",")?;
                }
                write!(f, "{d}")?;
            }
            f.write_str("}")?;
        }
        Ok(())
    }
}
