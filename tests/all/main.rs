//! The integration tests of the `nnefc` package, in one binary (one link, one process):
//! `e2e` runs every shipped and shared model against its expected output, `cli` drives the
//! `nnefc` executable, `examples` builds and runs the C and build.rs examples.

mod cli;
mod e2e;
mod examples;
