//! NNEF syntax: the AST and the lalrpop parser that builds it.

pub mod ast;
