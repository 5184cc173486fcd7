//! `nnefc-runtime`: the crate a user's binary links together with an nnefc-compiled object.
//!
//! It holds what generated code cannot do well itself and the vocabulary the generated
//! bindings speak:
//!
//! - [`gemm`]: the contraction engine (matmul, linear, convolution via im2col) that generated
//!   code calls through the C ABI ([`nnefc_sgemm`], [`nnefc_sgemm_packed_a`]), with
//!   hand-vectorized micro-kernels (AVX-512F, AVX2+FMA, NEON, portable Rust) chosen once
//!   by CPU detection;
//! - [`Parallel`] (`nnefc_parallel`): the parallel-for a caller hands a model's
//!   `PREFIX_run_parallel`, and (with `std`) [`ThreadPool`], the default implementation;
//! - [`Status`] / [`Error`]: the status codes a compiled `*_run` function returns;
//! - [`DType`], [`TensorInfo`], [`ModelInfo`]: the descriptor a compiled model exposes;
//! - [`TensorView`], [`TensorViewMut`] (and, with `std`, [`Tensor`]): safe shaped views the
//!   generated Rust bindings hand out;
//! - [`weights`]: the external weights file of a model compiled with `--weights external`
//!   (format, checkers, and with `std` the aligned [`Weights`] buffer).
//!
//! It does not allocate at run time (a [`ThreadPool`] allocates and starts its threads once,
//! when created), start threads of its own accord or hold global mutable state other than
//! the cached kernel choice. It builds for `no_std` (disable the default `std` feature); CPU
//! detection then falls back to the features enabled at compile time (`-C target-feature`),
//! and [`pack_a`] / [`pack_a_lanes`] / [`Tensor`] (which allocate) are left out. A `no_std`
//! user links the rlib (the staticlib needs the panic handler that only a final binary
//! provides):
//! `cargo rustc -p nnefc-runtime --no-default-features --lib --crate-type rlib`.
#![cfg_attr(not(feature = "std"), no_std)]
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

/// `unroll!(i in [0, 1, …] { body })`: the body once per listed value, `i` a constant in
/// each copy. The vector kernels index their register blocks of sums by loop variables;
/// LLVM leaves such loops rolled when they are long, and the sums then live in memory,
/// stored after every multiply-add.
#[cfg(target_arch = "x86_64")]
macro_rules! unroll {
    ($i:ident in [$($n:literal),*] $body:block) => {
        $( { let $i: usize = $n; $body } )*
    };
}

mod block;
mod conv;
#[cfg(target_arch = "x86_64")]
mod conv_flat;
mod conv_pool;
mod dwconv;
#[cfg(target_arch = "x86_64")]
mod dwconv_lanes;
pub mod gemm;
mod maxpool;
mod model;
pub mod parallel;
mod status;
mod tensor;
pub mod weights;
mod winograd;
mod winograd4;
mod winograd_banded;
mod winograd_fused;

pub use block::{
    BlockArgs, EXPAND_DIRECT, block_scratch_bytes, block_serial_scratch_bytes,
    nnefc_inverted_residual,
};
#[cfg(feature = "std")]
pub use conv::pack_conv_filter;
pub use conv::{CONV_CO_TILE, ConvArgs, conv_filter_len, conv_supported, nnefc_conv};
#[cfg(feature = "std")]
pub use conv_pool::pack_conv_pool_filter;
pub use conv_pool::{
    CONV_POOL_CO_TILE, ConvPoolArgs, conv_pool_filter_len, conv_pool_takes, nnefc_conv_pool,
};
pub use dwconv::{DwArgs, nnefc_dwconv};
pub use gemm::{
    ACT_CLAMP, ACT_HARDSWISH, ACT_NONE, ACT_RELU, ACT_SIGMOID, ACT_SWISH, GemmArgs, GemmEpilogue,
    nnefc_sgemm, nnefc_sgemm_batch_parallel, nnefc_sgemm_batch_prefetch, nnefc_sgemm_packed_a,
    nnefc_sgemm_parallel, packed_a_lanes_len, packed_a_len, sgemm_scratch_bytes,
};
#[cfg(feature = "std")]
pub use gemm::{pack_a, pack_a_lanes, try_pack_a, try_pack_a_lanes};
pub use maxpool::nnefc_maxpool;
pub use model::{DType, ModelInfo, TensorInfo};
pub use parallel::{Parallel, ParallelForFn, TaskFn};
#[cfg(feature = "std")]
pub use parallel::{ThreadPool, nnefc_pool_free, nnefc_pool_new, nnefc_pool_parallel};
pub use status::{Error, Status, check};
#[cfg(feature = "std")]
pub use tensor::Tensor;
pub use tensor::{Element, TensorView, TensorViewMut};
#[cfg(feature = "std")]
pub use weights::Weights;
pub use winograd::{nnefc_winograd_in, nnefc_winograd_out};
pub use winograd_banded::{WinogradBandArgs, nnefc_winograd_banded, winograd_band_scratch_bytes};
pub use winograd_fused::nnefc_winograd_fused;
