//! Reading and writing whole tensors as NNEF `.dat` files, for `nnefc run`, the benchmarks
//! and the tests.
//!
//! A thin layer over [`nnefc_compiler::front::dat`] that adds file I/O with the path in
//! every error and picks the item type from the tensor's dtype. Quantized files are
//! refused here: a model input is plain data.

use nnefc_compiler::front::dat::{self, ItemKind, ItemType};
use nnefc_compiler::ir::{DType, Tensor};
use std::fmt;
use std::path::{Path, PathBuf};

/// Why a `.dat` file could not be read or written.
#[derive(Debug)]
pub enum DatFileError {
    /// The file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The bytes are not a valid `.dat` file, or the tensor cannot be written as one.
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: dat::DatError,
    },
    /// The file holds quantized codes, which are not a valid model input.
    Quantized {
        /// The file.
        path: PathBuf,
    },
    /// The file is not a regular file (a FIFO, a device), or its size disagrees with
    /// its header; the message names the path.
    Refused(nnefc_compiler::front::load::LoadError),
}

impl fmt::Display for DatFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatFileError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            DatFileError::Format { path, source } => write!(f, "{}: {source}", path.display()),
            DatFileError::Refused(e) => write!(f, "{e}"),
            DatFileError::Quantized { path } => {
                write!(
                    f,
                    "{}: holds quantized codes; a model input must be plain data",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for DatFileError {}

/// Reads a `.dat` file into a tensor (f32, i32 or bool). Only regular files are
/// opened, and the header is checked against the file size before the data is read
/// (`front::load::read_dat_file`).
pub fn read(path: &Path) -> Result<Tensor, DatFileError> {
    use nnefc_compiler::front::load::{LoadError, read_dat_file};
    let bytes = read_dat_file(path).map_err(|e| match e {
        LoadError::Io { source, .. } => DatFileError::Io {
            path: path.to_path_buf(),
            source,
        },
        LoadError::Dat { source, .. } => DatFileError::Format {
            path: path.to_path_buf(),
            source,
        },
        LoadError::NotFound(_) => DatFileError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        },
        other => DatFileError::Refused(other),
    })?;
    let t = dat::read_dat(&bytes).map_err(|source| DatFileError::Format {
        path: path.to_path_buf(),
        source,
    })?;
    if t.quant.is_some() {
        return Err(DatFileError::Quantized {
            path: path.to_path_buf(),
        });
    }
    Ok(t.data)
}

/// The item type a tensor of `dtype` is written with: float32, int32 or 8-bit bool.
pub fn item_type(dtype: DType) -> ItemType {
    match dtype {
        DType::F32 => ItemType::F32,
        DType::I32 => ItemType::new(ItemKind::Signed, 32),
        DType::Bool => ItemType::new(ItemKind::Bool, 8),
    }
}

/// Writes a tensor as a `.dat` file.
pub fn write(path: &Path, tensor: &Tensor) -> Result<(), DatFileError> {
    let bytes = dat::write_dat(tensor, item_type(tensor.dtype())).map_err(|source| {
        DatFileError::Format {
            path: path.to_path_buf(),
            source,
        }
    })?;
    std::fs::write(path, bytes).map_err(|source| DatFileError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_every_dtype() {
        let dir = tempfile::tempdir().expect("temp dir");
        for t in [
            Tensor::f32(vec![2, 2], vec![1.0, -2.5, 3.0, 0.0]),
            Tensor::i32(vec![3], vec![-7, 0, 9]),
            Tensor::bool(vec![1, 3], vec![true, false, true]),
        ] {
            let p = dir.path().join("t.dat");
            write(&p, &t).expect("write");
            assert_eq!(read(&p).expect("read"), t);
        }
        let missing = read(&dir.path().join("nope.dat")).expect_err("missing file");
        assert!(missing.to_string().contains("nope.dat"), "{missing}");
    }
}
