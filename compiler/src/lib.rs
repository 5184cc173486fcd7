//! nnefc-compiler: NNEF in, native object files out.
//!
//! Pipeline (see ARCHITECTURE.md): `front` loads a model (folder, tarball or bare
//! `graph.nnef`), parses, resolves, evaluates and lowers it to an `ir::Graph` of
//! primitive ops with inferred shapes; `passes` optimize the graph; `back` turns it into
//! Cranelift loop nests in a relocatable object plus a C header and Rust bindings.
//! `diag` holds the spans and diagnostics every stage reports with.

pub mod back;
pub mod diag;
pub mod front;
pub mod ir;
pub mod passes;
pub mod session;
