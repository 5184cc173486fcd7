//! `nnefc`: the user-facing crate of the NNEF ahead-of-time compiler.
//!
//! It holds three things built on the compiler driver
//! ([`nnefc_compiler::session`]):
//!
//! - [`Build`]: compile a model from a build script, in the style of `cc::Build`, into a
//!   static library plus a typed Rust module the crate `include!`s;
//! - [`exec`]: load a compiled model into the running process and run it
//!   ([`exec::LoadedModel`]), used by `nnefc run`, `nnefc bench`, the benchmarks and the
//!   tests;
//! - small pieces the command line and the tests share: reading and writing `.dat` tensors
//!   ([`datfile`]), the model corpus of tests and benchmarks ([`corpus`]), the numeric acceptance rule ([`tolerance`]), Graphviz output
//!   ([`dot`]) and the `ar` archive writer ([`archive`]).
//!
//! The command-line tool `nnefc` is the binary of this package (`src/main.rs`). This crate
//! does not parse, optimize or generate code itself; that is `nnefc-compiler`.

#![warn(missing_docs)]

pub mod archive;
mod build;
pub mod corpus;
pub mod datfile;
pub mod dot;
pub mod exec;
pub mod graph;
pub mod tolerance;

pub use build::{Build, BuildError, BuildOutput, c_identifier, compile_model};
pub use nnefc_compiler as compiler;
pub use nnefc_runtime as runtime;
