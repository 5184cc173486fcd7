//! `nnefc-runtime`: the crate a user's binary links together with an nnefc-compiled object.
//!
//! It holds what generated code cannot do well itself and the vocabulary the generated
//! bindings speak:
//!
//! - [`gemm`]: the contraction engine (matmul, linear, convolution via im2col) that generated
//!   code calls through the C ABI ([`nnefc_sgemm`], [`nnefc_sgemm_packed_a`]), with
//!   hand-vectorized micro-kernels (AVX-512F, AVX2+FMA, NEON, portable Rust) chosen once
//!   by CPU detection;
//! - [`Status`] / [`Error`]: the status codes a compiled `*_run` function returns;
//! - [`DType`], [`TensorInfo`], [`ModelInfo`]: the descriptor a compiled model exposes;
//! - [`TensorView`], [`TensorViewMut`] (and, with `std`, [`Tensor`]): safe shaped views the
//!   generated Rust bindings hand out.
//!
//! It does not allocate at run time, start threads or hold global mutable state other than
//! the cached kernel choice. It builds for `no_std` (disable the default `std` feature); CPU
//! detection then falls back to the features enabled at compile time (`-C target-feature`),
//! and [`pack_a`] / [`Tensor`] (which allocate) are left out. A `no_std` user links the rlib
//! (the staticlib needs the panic handler that only a final binary provides):
//! `cargo rustc -p nnefc-runtime --no-default-features --lib --crate-type rlib`.
#![cfg_attr(not(feature = "std"), no_std)]
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod gemm;
mod model;
mod status;
mod tensor;

pub use gemm::{
    GemmEpilogue, nnefc_sgemm, nnefc_sgemm_packed_a, packed_a_len, sgemm_scratch_bytes,
};
#[cfg(feature = "std")]
pub use gemm::{pack_a, try_pack_a};
pub use model::{DType, ModelInfo, TensorInfo};
pub use status::{Error, Status, check};
#[cfg(feature = "std")]
pub use tensor::Tensor;
pub use tensor::{Element, TensorView, TensorViewMut};
