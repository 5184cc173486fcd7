//! (being written) Returns `CodegenError::Unsupported` for every op of this family.

use super::Lowering;
use crate::back::CodegenError;
use crate::ir::ValueId;

pub(super) fn unsupported(what: &str) -> Result<(), CodegenError> {
    Err(CodegenError::Unsupported(format!("operation `{what}` has no code generator yet")))
}
type R = Result<(), CodegenError>;
pub(super) fn reshape(_: &mut Lowering<'_>, _: &[ValueId], _: &[ValueId]) -> R { unsupported("reshape") }
pub(super) fn transpose(_: &mut Lowering<'_>, _: &[usize], _: &[ValueId], _: &[ValueId]) -> R { unsupported("transpose") }
pub(super) fn split(_: &mut Lowering<'_>, _: usize, _: &[ValueId], _: &[ValueId]) -> R { unsupported("split") }
pub(super) fn concat(_: &mut Lowering<'_>, _: usize, _: &[ValueId], _: &[ValueId]) -> R { unsupported("concat") }
pub(super) fn stack(_: &mut Lowering<'_>, _: usize, _: &[ValueId], _: &[ValueId]) -> R { unsupported("stack") }
pub(super) fn unstack(_: &mut Lowering<'_>, _: usize, _: &[ValueId], _: &[ValueId]) -> R { unsupported("unstack") }
pub(super) fn slice(_: &mut Lowering<'_>, _: &[usize], _: &[i64], _: &[i64], _: &[i64], _: &[ValueId], _: &[ValueId]) -> R { unsupported("slice") }
pub(super) fn tile(_: &mut Lowering<'_>, _: &[ValueId], _: &[ValueId]) -> R { unsupported("tile") }
pub(super) fn pad(_: &mut Lowering<'_>, _: &[(usize, usize)], _: crate::ir::Border, _: f32, _: &[ValueId], _: &[ValueId]) -> R { unsupported("pad") }
pub(super) fn gather(_: &mut Lowering<'_>, _: usize, _: &[ValueId], _: &[ValueId]) -> R { unsupported("gather") }
