//! The NNEF front end: load → parse → resolve → evaluate → expand → lower.
//!
//! Input is a model on disk (folder, `.tgz`/`.tar`, or a bare `graph.nnef`); output is
//! an `ir::Graph` of primitive ops with every shape inferred, or diagnostics that point
//! at file, line and column. Nothing here knows about Cranelift or optimization.

pub mod dat;
pub mod load;
pub mod quant;
pub mod syntax;
