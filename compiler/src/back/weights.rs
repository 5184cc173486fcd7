//! External weights (`BackendOptions::external_weights`): moves every constant of a
//! selected [`Program`] into the weights file (`nnefc_runtime::weights` defines the format)
//! and makes the code address it as `weights + offset` ([`BufKind::Weights`]).
//!
//! It runs after selection, so the file holds the constants exactly as the code reads
//! them: packed GEMM panels, Winograd-transformed filters, index tables. Constants are
//! written in program order, so the same input gives the same file. Not here: the
//! run-time checks of the file (`object`), its format (`nnefc_runtime::weights`).

use super::kernel::{BufKind, Program};

/// What the code needs to know of the file it was compiled with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WeightsInfo {
    /// File size in bytes, header included.
    pub size: usize,
    /// The model hash the file carries.
    pub model_hash: u64,
    /// The checksum of the file's data.
    pub data_hash: u64,
}

/// Moves `program`'s constants into a weights file, which it returns with its summary;
/// afterwards the program has no constants.
pub fn externalize(program: &mut Program) -> (Vec<u8>, WeightsInfo) {
    use nnefc_runtime::weights::{field, write_file};
    let consts: Vec<&[u8]> = program.consts.iter().map(|c| c.as_slice()).collect();
    let (file, offsets) = write_file(&consts);
    for b in &mut program.buffers {
        if let BufKind::Const(c) = b.kind {
            b.kind = BufKind::Weights(offsets[c]);
        }
    }
    program.consts.clear();
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&file[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let info = WeightsInfo {
        size: file.len(),
        model_hash: word(field::MODEL_HASH),
        data_hash: word(field::DATA_HASH),
    };
    (file, info)
}
