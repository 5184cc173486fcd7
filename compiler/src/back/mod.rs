//! Back end: IR graph → Cranelift loop nests → object file, C header, Rust bindings (in progress).
