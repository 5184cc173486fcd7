//! (being written) Returns `CodegenError::Unsupported` for every op of this family.

use super::Lowering;
use crate::back::CodegenError;
use crate::ir::ValueId;

pub(super) fn unsupported(what: &str) -> Result<(), CodegenError> {
    Err(CodegenError::Unsupported(format!("operation `{what}` has no code generator yet")))
}
pub(super) fn matmul(_: &mut Lowering<'_>, _: bool, _: bool, _: &[ValueId], _: &[ValueId]) -> Result<(), CodegenError> { unsupported("matmul") }
pub(super) fn linear(_: &mut Lowering<'_>, _: &[ValueId], _: &[ValueId]) -> Result<(), CodegenError> { unsupported("linear") }
