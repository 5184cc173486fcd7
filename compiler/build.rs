//! Build script: generates the NNEF parser from `src/front/syntax/nnef.lalrpop` into
//! `OUT_DIR` (never into the source tree). It does nothing else.

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
}
