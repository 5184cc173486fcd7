//! Placeholder CLI entry (replaced by the surfaces work).
fn main() {}
