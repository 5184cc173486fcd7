//! Fuzz target: `parse_quant` on arbitrary UTF-8 text returns entries or diagnostics,
//! never panics, and every span it reports lies inside the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nnefc_compiler::diag::FileId;
use nnefc_compiler::front::quant::parse_quant;

fuzz_target!(|text: &str| {
    match parse_quant(text, FileId(0)) {
        Ok(entries) => {
            for e in entries {
                assert!(e.span.start <= e.span.end && e.span.end as usize <= text.len());
            }
        }
        Err(diags) => {
            assert!(!diags.0.is_empty());
            for d in &diags.0 {
                if let Some(p) = &d.primary {
                    assert!(p.span.start <= p.span.end && p.span.end as usize <= text.len());
                }
            }
        }
    }
});
