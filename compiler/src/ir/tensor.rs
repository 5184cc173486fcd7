//! Dense tensor values held by the compiler: constants in the graph, and the values the
//! reference interpreter computes. Row-major, known extents. Not a compute library: no
//! arithmetic lives here.

use super::types::{DType, TensorType};

/// Element storage, one variant per [`DType`].
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    F32(Vec<f32>),
    I32(Vec<i32>),
    Bool(Vec<bool>),
}

/// A dense row-major tensor with known extents.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: TensorData,
}

impl Tensor {
    pub fn f32(shape: Vec<usize>, data: Vec<f32>) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        Tensor {
            shape,
            data: TensorData::F32(data),
        }
    }
    pub fn i32(shape: Vec<usize>, data: Vec<i32>) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        Tensor {
            shape,
            data: TensorData::I32(data),
        }
    }
    pub fn bool(shape: Vec<usize>, data: Vec<bool>) -> Tensor {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        Tensor {
            shape,
            data: TensorData::Bool(data),
        }
    }
    /// All-zero (false) tensor of a type.
    pub fn zeros(dtype: DType, shape: Vec<usize>) -> Tensor {
        let n = shape.iter().product();
        let data = match dtype {
            DType::F32 => TensorData::F32(vec![0.0; n]),
            DType::I32 => TensorData::I32(vec![0; n]),
            DType::Bool => TensorData::Bool(vec![false; n]),
        };
        Tensor { shape, data }
    }
    pub fn dtype(&self) -> DType {
        match self.data {
            TensorData::F32(_) => DType::F32,
            TensorData::I32(_) => DType::I32,
            TensorData::Bool(_) => DType::Bool,
        }
    }
    pub fn len(&self) -> usize {
        match &self.data {
            TensorData::F32(v) => v.len(),
            TensorData::I32(v) => v.len(),
            TensorData::Bool(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn ty(&self) -> TensorType {
        TensorType::new(self.dtype(), &self.shape)
    }
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_i32(&self) -> Option<&[i32]> {
        match &self.data {
            TensorData::I32(v) => Some(v),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<&[bool]> {
        match &self.data {
            TensorData::Bool(v) => Some(v),
            _ => None,
        }
    }
    /// Little-endian bytes as the compiled code stores them (bool: one byte, 0 or 1).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        match &self.data {
            TensorData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            TensorData::Bool(v) => v.iter().map(|&b| b as u8).collect(),
        }
    }
    /// Inverse of [`Tensor::to_le_bytes`]; `None` if the length does not match.
    pub fn from_le_bytes(dtype: DType, shape: Vec<usize>, bytes: &[u8]) -> Option<Tensor> {
        let n: usize = shape.iter().product();
        if bytes.len() != n * dtype.size() {
            return None;
        }
        let data = match dtype {
            DType::F32 => TensorData::F32(
                bytes
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            DType::I32 => TensorData::I32(
                bytes
                    .chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ),
            DType::Bool => TensorData::Bool(bytes.iter().map(|&b| b != 0).collect()),
        };
        Some(Tensor { shape, data })
    }
}
