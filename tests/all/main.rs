//! The integration tests of the `nnefc` package, in one binary (one link, one process):
//! `e2e` runs every shipped and shared model against its expected output, `khronos`
//! compares inferred shapes with the Khronos reference parser, `hostile` feeds the binary
//! hostile inputs under an address-space limit, `tidy` checks repository hygiene.

mod batch;
mod cli;
mod documents;
mod e2e;
mod examples;
mod hostile;
mod khronos;
mod tidy;
