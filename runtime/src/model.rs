//! The run-time descriptor of a compiled model: element types ([`DType`]), one
//! [`TensorInfo`] per input and output, and the [`ModelInfo`] that ties them together.
//!
//! These are `#[repr(C)]` so the back end can emit them as read-only data in the object
//! and the C header can declare them. This module only reads descriptors; it does not
//! validate a model's tensors against them (the safe bindings do that).

use core::ffi::{CStr, c_char};

/// Element type of a model tensor. The numeric values are ABI.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit IEEE float (NNEF `scalar`).
    F32 = 0,
    /// 32-bit signed integer (NNEF `integer`).
    I32 = 1,
    /// Boolean stored as one byte, 0 or 1 (NNEF `logical`).
    Bool = 2,
}

impl DType {
    /// The dtype with numeric value `code`, or `None` for an unknown code.
    pub fn from_code(code: u32) -> Option<DType> {
        match code {
            0 => Some(DType::F32),
            1 => Some(DType::I32),
            2 => Some(DType::Bool),
            _ => None,
        }
    }

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::Bool => 1,
        }
    }

    /// The name used in headers and messages (`f32`, `i32`, `bool`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::I32 => "i32",
            DType::Bool => "bool",
        }
    }
}

/// Describes one input or output tensor of a compiled model.
///
/// Emitted by nnefc as static read-only data; `name` is NUL-terminated UTF-8 and `dims`
/// points to `rank` extents (row-major, outermost first).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TensorInfo {
    /// NUL-terminated tensor name (the NNEF graph's parameter or result name).
    pub name: *const c_char,
    /// Element type as a [`DType`] code (kept as `u32` so foreign data can never be an
    /// invalid enum value; read it with [`TensorInfo::dtype`]).
    pub dtype: u32,
    /// Number of dimensions.
    pub rank: u32,
    /// Pointer to `rank` extents (with a run-time batch, of one sample).
    pub dims: *const usize,
    /// 1 if the tensor carries the model's run-time batch along axis 0 (it then holds
    /// `batch` samples of `dims`), 0 otherwise.
    pub batched: u32,
}

impl TensorInfo {
    /// The element type, or `None` if the code is unknown to this runtime.
    pub fn dtype(&self) -> Option<DType> {
        DType::from_code(self.dtype)
    }

    /// The tensor's name.
    ///
    /// # Safety
    /// `name` must point to a NUL-terminated string valid for the returned lifetime (always
    /// true for descriptors emitted by nnefc).
    pub unsafe fn name(&self) -> &CStr {
        // SAFETY: the caller guarantees `name` is a valid NUL-terminated string.
        unsafe { CStr::from_ptr(self.name) }
    }

    /// The tensor's extents.
    ///
    /// # Safety
    /// `dims` must point to `rank` readable `usize`s (or `rank` must be 0), valid for the
    /// returned lifetime (always true for descriptors emitted by nnefc).
    pub unsafe fn dims(&self) -> &[usize] {
        if self.rank == 0 {
            return &[];
        }
        // SAFETY: the caller guarantees `dims` points to `rank` valid extents.
        unsafe { core::slice::from_raw_parts(self.dims, self.rank as usize) }
    }

    /// Number of elements (product of extents; 1 for a scalar).
    ///
    /// # Safety
    /// As for [`TensorInfo::dims`].
    pub unsafe fn num_elements(&self) -> usize {
        // SAFETY: forwarded to the caller.
        unsafe { self.dims() }.iter().product()
    }
}

/// Describes a compiled model: its inputs, outputs and workspace requirement.
///
/// A compiled model with prefix `net` exports one of these as `net_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ModelInfo {
    /// NUL-terminated model name (the prefix).
    pub name: *const c_char,
    /// Number of inputs.
    pub num_inputs: usize,
    /// Pointer to `num_inputs` descriptors, in graph order.
    pub inputs: *const TensorInfo,
    /// Number of outputs.
    pub num_outputs: usize,
    /// Pointer to `num_outputs` descriptors, in graph order.
    pub outputs: *const TensorInfo,
    /// Bytes of workspace the caller must provide to each run.
    pub workspace_size: usize,
    /// Required alignment of the workspace in bytes.
    pub workspace_align: usize,
    /// Bytes of workspace each worker beyond the first adds for `PREFIX_run_parallel`.
    pub workspace_per_worker: usize,
    /// Bytes of the external weights file the model reads (header included), or 0 when
    /// its weights are embedded in the object.
    pub weights_size: usize,
    /// The model hash an external weights file must carry (0 when embedded).
    pub weights_model_hash: u64,
    /// The checksum of an external weights file's data (0 when embedded).
    pub weights_data_hash: u64,
}

impl ModelInfo {
    /// Bytes of workspace a run with `workers` workers needs (`workers` 0 counts as 1).
    pub fn workspace_size_for(&self, workers: usize) -> usize {
        self.workspace_size
            .saturating_add(self.workspace_per_worker.saturating_mul(workers.max(1) - 1))
    }

    /// The model's name.
    ///
    /// # Safety
    /// `name` must be a valid NUL-terminated string (always true for nnefc descriptors).
    pub unsafe fn name(&self) -> &CStr {
        // SAFETY: the caller guarantees `name` is valid.
        unsafe { CStr::from_ptr(self.name) }
    }

    /// The input descriptors.
    ///
    /// # Safety
    /// `inputs` must point to `num_inputs` descriptors (always true for nnefc descriptors).
    pub unsafe fn inputs(&self) -> &[TensorInfo] {
        if self.num_inputs == 0 {
            return &[];
        }
        // SAFETY: the caller guarantees the pointer and count are valid.
        unsafe { core::slice::from_raw_parts(self.inputs, self.num_inputs) }
    }

    /// The output descriptors.
    ///
    /// # Safety
    /// `outputs` must point to `num_outputs` descriptors (always true for nnefc descriptors).
    pub unsafe fn outputs(&self) -> &[TensorInfo] {
        if self.num_outputs == 0 {
            return &[];
        }
        // SAFETY: the caller guarantees the pointer and count are valid.
        unsafe { core::slice::from_raw_parts(self.outputs, self.num_outputs) }
    }
}

// SAFETY: descriptors are immutable static data; the raw pointers only ever point to
// read-only data, so sharing them between threads is sound.
unsafe impl Sync for TensorInfo {}
// SAFETY: as above.
unsafe impl Send for TensorInfo {}
// SAFETY: as above.
unsafe impl Sync for ModelInfo {}
// SAFETY: as above.
unsafe impl Send for ModelInfo {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_codes_and_sizes() {
        for (code, d, size) in [(0, DType::F32, 4), (1, DType::I32, 4), (2, DType::Bool, 1)] {
            assert_eq!(DType::from_code(code), Some(d));
            assert_eq!(d as u32, code);
            assert_eq!(d.size(), size);
        }
        assert_eq!(DType::from_code(3), None);
    }

    #[test]
    fn descriptor_accessors() {
        static DIMS: [usize; 2] = [2, 3];
        let input = TensorInfo {
            name: c"x".as_ptr(),
            dtype: 0,
            rank: 2,
            dims: DIMS.as_ptr(),
            batched: 0,
        };
        let inputs = [input];
        let info = ModelInfo {
            name: c"net".as_ptr(),
            num_inputs: 1,
            inputs: inputs.as_ptr(),
            num_outputs: 0,
            outputs: core::ptr::null(),
            workspace_size: 64,
            workspace_align: 64,
            workspace_per_worker: 0,
            weights_size: 0,
            weights_model_hash: 0,
            weights_data_hash: 0,
        };
        // SAFETY: every pointer above points to live, correctly sized data.
        unsafe {
            assert_eq!(info.name().to_bytes(), b"net");
            assert_eq!(info.inputs().len(), 1);
            assert_eq!(info.outputs().len(), 0);
            let t = &info.inputs()[0];
            assert_eq!(t.name().to_bytes(), b"x");
            assert_eq!(t.dims(), &[2, 3]);
            assert_eq!(t.num_elements(), 6);
            assert_eq!(t.dtype(), Some(DType::F32));
        }
    }
}
