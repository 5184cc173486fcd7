//! Build script of the root package: exports the executables' symbols to shared libraries
//! they load, and nothing else.
//!
//! `nnefc run`, `nnefc bench`, the tests, the benchmarks and the `compare` example load a
//! compiled model as a shared library (`nnefc::exec`) whose runtime symbols
//! (`nnefc_sgemm`, ...) are left undefined; they resolve against the running executable,
//! which therefore has to export its symbols: `-rdynamic`.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os != "windows" {
        for kind in ["bins", "tests", "benches", "examples"] {
            println!("cargo:rustc-link-arg-{kind}=-rdynamic");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
