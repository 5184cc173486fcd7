//! The integration tests of the `nnefc` package, in one binary (one link, one process):
//! `e2e` runs every shipped and shared model against its expected output, `khronos`
//! compares inferred shapes with the Khronos reference parser, `hostile` feeds the binary
//! hostile inputs under an address-space limit, `runtime_aarch64` runs the runtime's unit
//! tests for aarch64 under qemu, `tidy` checks repository hygiene, `graph*` test the graph
//! builder (`nnefc::graph`): rebuilt models, generated op functions, gradients.

mod batch;
mod cli;
mod documents;
mod e2e;
mod examples;
mod graph;
mod graph_errors;
mod graph_grad;
mod graph_load;
mod graph_ops;
mod hostile;
mod khronos;
mod runtime_aarch64;
mod tidy;
