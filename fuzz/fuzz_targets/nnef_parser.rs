//! Fuzz target: the NNEF parser (document and library mode) on arbitrary UTF-8 text
//! returns an AST or one diagnostic, never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nnefc_compiler::diag::FileId;
use nnefc_compiler::front::syntax::{parse_document, parse_library};

fuzz_target!(|text: &str| {
    let _ = parse_document(FileId(0), text);
    let _ = parse_library(FileId(0), text);
});
