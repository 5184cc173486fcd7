//! Repository hygiene checked as a test: every Rust file opens with a `//!` doc, product
//! code has no `todo!`/`unimplemented!`/`dbg!`, no file is a grab-bag (`utils.rs`, …),
//! no test hides behind `#[should_panic]`, and the compiler's layering holds (the IR
//! knows no other stage; the front end knows neither passes nor back end; passes know
//! neither front nor back end). It reads files; it does not build anything.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if p.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&p, out);
            }
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

fn all_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for d in [
        "compiler/src",
        "compiler/build.rs",
        "runtime/src",
        "src",
        "tests",
        "benches",
        "examples",
        "fuzz/fuzz_targets",
        "build.rs",
    ] {
        let p = repo().join(d);
        if p.is_file() {
            files.push(p);
        } else {
            rust_files(&p, &mut files);
        }
    }
    files
}

fn rel(p: &Path) -> String {
    p.strip_prefix(repo()).unwrap_or(p).display().to_string()
}

#[test]
fn every_rust_file_starts_with_a_module_doc() {
    let missing: Vec<String> = all_files()
        .into_iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .map(|p| rel(&p))
        .collect();
    assert!(
        missing.is_empty(),
        "files without a leading `//!` doc:\n{}",
        missing.join("\n")
    );
}

#[test]
fn no_stubs_debug_macros_or_grab_bag_files() {
    let mut problems = Vec::new();
    for p in all_files() {
        let r = rel(&p);
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if ["utils.rs", "helpers.rs", "common.rs", "misc.rs"].contains(&name) {
            problems.push(format!("{r}: name the concept instead of `{name}`"));
        }
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        let is_test_file =
            r.starts_with("tests/") || r.contains("/tests/") || r.ends_with("tests.rs");
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if !is_test_file {
                for m in ["todo!(", "unimplemented!(", "dbg!("] {
                    if code.contains(m) {
                        problems.push(format!("{r}:{}: `{m}` in product code", i + 1));
                    }
                }
            }
            // Spelled in two pieces so this file does not match itself.
            if code.contains(concat!("#[should", "_panic")) {
                problems.push(format!(
                    "{r}:{}: a should-panic attribute (assert on a returned error instead)",
                    i + 1
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn compiler_layering_holds() {
    // (directory, modules it must not use)
    let rules: &[(&str, &[&str])] = &[
        (
            "compiler/src/ir",
            &[
                "crate::front",
                "crate::passes",
                "crate::back",
                "crate::session",
                "cranelift",
            ],
        ),
        (
            "compiler/src/front",
            &["crate::passes", "crate::back", "crate::session"],
        ),
        (
            "compiler/src/passes",
            &["crate::front", "crate::back", "crate::session"],
        ),
        ("compiler/src/back", &["crate::front", "crate::session"]),
    ];
    let mut problems = Vec::new();
    for (dir, banned) in rules {
        let mut files = Vec::new();
        rust_files(&repo().join(dir), &mut files);
        // Tests may reach across layers (e.g. a back-end test lowering a real model).
        for p in files
            .into_iter()
            .filter(|p| !p.components().any(|c| c.as_os_str() == "tests"))
        {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            for (i, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for b in *banned {
                    if code.contains(b) {
                        problems.push(format!("{}:{}: `{dir}` must not use `{b}`", rel(&p), i + 1));
                    }
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "layering violations:\n{}",
        problems.join("\n")
    );
}
