//! The C ABI of a compiled model: status codes the entry point returns.
//!
//! `int PREFIX_run(const void *const *inputs, void *const *outputs, void *workspace)`
//! returns 0 on success or one of [`Status`]. (These codes mirror the runtime crate's
//! status codes; they are checked against each other by a test once both exist.)

/// Non-zero results of `PREFIX_run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Status {
    Ok = 0,
    /// `inputs`, `outputs`, `workspace` or one of the tensor pointers is null.
    NullPointer = 1,
    /// `workspace` is not aligned to `PREFIX_WORKSPACE_ALIGN` (64) bytes.
    MisalignedWorkspace = 2,
}
