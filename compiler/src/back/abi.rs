//! The C ABI of a compiled model beyond the entry point: status codes and the run-time
//! descriptor `PREFIX_info`.
//!
//! The entry points (`PREFIX_run`, `PREFIX_run_parallel`, `PREFIX_run_ex`,
//! `PREFIX_check_weights`; defined in `object`) return 0 or an `nnefc_runtime::Status`
//! code. `PREFIX_info` is an exported
//! `nnefc_runtime::ModelInfo` (`#[repr(C)]`) in read-only data, followed in the same data
//! object by its `TensorInfo` arrays, the extents and the NUL-terminated names; its
//! pointers are data relocations to itself. Only 64-bit pointer targets are supported
//! (the layout below assumes 8-byte pointers and `usize`); the test
//! `descriptor_layout_matches_runtime` checks it against the runtime's types.

use super::{CodegenError, ModelInterface, TensorInfo};
use crate::ir::DType;
use cranelift_module::{DataDescription, Linkage, Module};
use cranelift_object::ObjectModule;

/// Status codes (the runtime's, re-exported under the names the emitter uses).
pub use nnefc_runtime::Status;

/// Byte size of `ModelInfo`: name, num_inputs, inputs, num_outputs, outputs,
/// workspace_size, workspace_align, workspace_per_worker, weights_size,
/// weights_model_hash, weights_data_hash (11 × 8).
pub const MODEL_INFO_SIZE: usize = 88;
/// Byte size of `TensorInfo`: name ptr, dtype u32, rank u32, dims ptr, batched u32 (+4
/// bytes of padding).
pub const TENSOR_INFO_SIZE: usize = 32;

/// The runtime's dtype code.
pub fn dtype_code(d: DType) -> u32 {
    (match d {
        DType::F32 => nnefc_runtime::DType::F32,
        DType::I32 => nnefc_runtime::DType::I32,
        DType::Bool => nnefc_runtime::DType::Bool,
    }) as u32
}

/// Byte image of the descriptor plus the relocations to apply: (offset, target offset).
pub(crate) fn info_image(iface: &ModelInterface) -> (Vec<u8>, Vec<(usize, usize)>) {
    let all: Vec<&TensorInfo> = iface.inputs.iter().chain(&iface.outputs).collect();
    let tensors_at = MODEL_INFO_SIZE;
    let dims_at = tensors_at + all.len() * TENSOR_INFO_SIZE;
    let ndims: usize = all.iter().map(|t| t.shape.len()).sum();
    let strings_at = dims_at + ndims * 8;
    let mut img = vec![0u8; strings_at];
    let mut relocs = Vec::new();
    let put = |img: &mut Vec<u8>, at: usize, bytes: &[u8]| {
        img[at..at + bytes.len()].copy_from_slice(bytes)
    };
    let mut strings: Vec<u8> = Vec::new();
    let mut string = |s: &str| -> usize {
        let at = strings_at + strings.len();
        // Interior NULs would cut the name short; replace them.
        strings.extend(s.bytes().map(|b| if b == 0 { b'?' } else { b }));
        strings.push(0);
        at
    };
    // ModelInfo
    let name_at = string(&iface.prefix);
    relocs.push((0, name_at));
    put(&mut img, 8, &(iface.inputs.len() as u64).to_le_bytes());
    relocs.push((16, tensors_at));
    put(&mut img, 24, &(iface.outputs.len() as u64).to_le_bytes());
    relocs.push((32, tensors_at + iface.inputs.len() * TENSOR_INFO_SIZE));
    put(&mut img, 40, &(iface.workspace_size as u64).to_le_bytes());
    put(&mut img, 48, &64u64.to_le_bytes());
    put(&mut img, 56, &(iface.worker_workspace as u64).to_le_bytes());
    if let Some(w) = &iface.weights {
        put(&mut img, 64, &(w.size as u64).to_le_bytes());
        put(&mut img, 72, &w.model_hash.to_le_bytes());
        put(&mut img, 80, &w.data_hash.to_le_bytes());
    }
    // TensorInfo records and their extents.
    let mut dim_cursor = dims_at;
    for (i, t) in all.iter().enumerate() {
        let at = tensors_at + i * TENSOR_INFO_SIZE;
        let n = string(&t.name);
        relocs.push((at, n));
        put(&mut img, at + 8, &dtype_code(t.dtype).to_le_bytes());
        put(&mut img, at + 12, &(t.shape.len() as u32).to_le_bytes());
        relocs.push((at + 16, dim_cursor));
        put(&mut img, at + 24, &u32::from(t.batched).to_le_bytes());
        for &d in &t.shape {
            put(&mut img, dim_cursor, &(d as u64).to_le_bytes());
            dim_cursor += 8;
        }
    }
    img.extend(strings);
    (img, relocs)
}

/// Defines the exported `PREFIX_info` data object.
pub(crate) fn define_info(
    module: &mut ObjectModule,
    iface: &ModelInterface,
) -> Result<(), CodegenError> {
    if module.target_config().pointer_bytes() != 8 {
        return Err(CodegenError::Unsupported(
            "model descriptor on a target without 64-bit pointers".into(),
        ));
    }
    let name = format!("{}_info", iface.prefix);
    let id = module
        .declare_data(&name, Linkage::Export, false, false)
        .map_err(|e| CodegenError::Cranelift(format!("{name}: {e}")))?;
    let (img, relocs) = info_image(iface);
    let mut dd = DataDescription::new();
    dd.define(img.into_boxed_slice());
    dd.set_align(8);
    let me = module.declare_data_in_data(id, &mut dd);
    for (at, target) in relocs {
        dd.write_data_addr(at as u32, me, target as i64);
    }
    module
        .define_data(id, &dd)
        .map_err(|e| CodegenError::Cranelift(format!("{name}: {e}")))
}
