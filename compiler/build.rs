//! Build script: generates the NNEF parser from `src/front/syntax/nnef.lalrpop` into
//! `OUT_DIR` (never into the source tree), next to a copy of the grammar it was
//! generated from. It does nothing else.
//!
//! The copy exists because worktrees that share one `CARGO_TARGET_DIR` also share this
//! crate's `OUT_DIR`: cargo may reuse a parser generated from another checkout's
//! grammar. A syntax test compares the copy with the grammar in the source tree and
//! says to `touch` the grammar when they differ.

use std::path::Path;

fn main() {
    // `emit_rerun_directives` makes cargo rerun this only when a grammar changes.
    if let Err(e) = lalrpop::Configuration::new()
        .use_cargo_dir_conventions()
        .emit_rerun_directives(true)
        .process()
    {
        eprintln!("lalrpop failed: {e}");
        std::process::exit(1);
    }
    let Ok(out_dir) = std::env::var("OUT_DIR") else {
        eprintln!("OUT_DIR is not set");
        std::process::exit(1);
    };
    let copy = Path::new(&out_dir).join("front/syntax/nnef.lalrpop.source");
    if let Err(e) = std::fs::copy("src/front/syntax/nnef.lalrpop", &copy) {
        eprintln!("cannot copy the grammar to {}: {e}", copy.display());
        std::process::exit(1);
    }
}
