//! (being written) Returns `CodegenError::Unsupported` for every op of this family.

use super::Lowering;
use crate::back::CodegenError;
use crate::ir::ValueId;

pub(super) fn unsupported(what: &str) -> Result<(), CodegenError> {
    Err(CodegenError::Unsupported(format!("operation `{what}` has no code generator yet")))
}
pub(super) fn reduce(_: &mut Lowering<'_>, _: crate::ir::ReduceOp, _: &[usize], _: &[ValueId], _: &[ValueId]) -> Result<(), CodegenError> { unsupported("reduce") }
pub(super) fn softmax(_: &mut Lowering<'_>, _: &[usize], _: &[ValueId], _: &[ValueId]) -> Result<(), CodegenError> { unsupported("softmax") }
