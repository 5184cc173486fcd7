//! Back-end tests. `harness` compiles a graph to an object, links it with the runtime
//! into a shared library, loads it and runs it; the op tests compare that with the
//! reference interpreter. `math_accuracy` measures the inline polynomials.

mod abi;
mod block;
mod fast_paths;
mod gemm;
mod harness;
mod int_bool;
mod lanes;
mod math;
mod models_smoke;
mod ops;
mod perf;
mod random;
mod resample;
mod special;
mod window;
