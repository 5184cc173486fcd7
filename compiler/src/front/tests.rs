//! Front-end tests: data-driven cases under `front/tests/` (NNEF text in, text IR or
//! rendered diagnostics out, blessed with `UPDATE_EXPECT=1`), and the shared model
//! corpus (every model lowers; output shape equals `meta.json`).
//!
//! Case files may start with directives: `#! input NAME d,d,?` overrides an external's
//! shape (`?` leaves the extent open), `#! depth N` sets the recursion limit. Variables
//! without data become zeros (with a warning) so cases need no `.dat` files.

use super::*;
use std::path::{Path, PathBuf};

fn run_case(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut opts = FrontOptions { allow_missing_variables: true, ..FrontOptions::default() };
    for line in text.lines().filter_map(|l| l.strip_prefix("#!")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["input", name, dims] => {
                let dims = dims.split(',').map(|d| d.parse().ok()).collect();
                opts.input_shapes.insert(name.to_string(), dims);
            }
            ["depth", n] => opts.max_recursion_depth = n.parse().unwrap_or(64),
            _ => return format!("bad directive `{line}`"),
        }
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match lower_source(&name, &text, &|_| None, &opts) {
        Ok(l) => {
            // Literal constants show their data; variables (zeros here) only their label.
            let printed = ir::print::print_with(&l.graph, ir::print::PrintOptions { const_data: true });
            let mut out = String::new();
            for line in printed.lines() {
                match line.find("= const \"").and_then(|at| line[at + 9..].find("\" [").map(|k| at + 9 + k + 1)) {
                    Some(cut) => out.push_str(&line[..cut]),
                    None => out.push_str(line),
                }
                out.push('\n');
            }
            let warnings: Vec<_> = l.warnings.iter().filter(|w| !w.message.starts_with("no data for variable")).cloned().collect();
            if !warnings.is_empty() {
                out.push_str("\nwarnings:\n");
                out.push_str(&crate::diag::render_all(&warnings, &l.sources));
            }
            if !l.open_extents.is_empty() {
                out.push_str("\nopen extents:\n");
                for e in &l.open_extents {
                    out.push_str(&format!("  {e}\n"));
                }
            }
            out
        }
        Err(e) => e.render(),
    }
}

fn run_dir(dir: &str) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/front/tests").join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "nnef")).collect())
        .unwrap_or_default();
    files.sort();
    assert!(!files.is_empty(), "no cases in {}", root.display());
    for f in files {
        let actual = run_case(&f);
        expect_test::expect_file![f.with_extension("out")].assert_eq(&actual);
    }
}

/// Valid documents and their lowered IR: one case per lowering rule.
#[test]
fn lower_cases() {
    run_dir("lower");
}

/// Invalid documents: one case per validity rule, each with message and position.
#[test]
fn error_cases() {
    run_dir("errors");
}

/// Models written as a user would: custom fragments, recursion, comprehensions,
/// operator expressions, several inputs and outputs, integer and logical tensors.
#[test]
fn model_cases() {
    run_dir("models");
}

#[test]
fn shared_models_lower() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The repo sits next to `shared/` (main) or two levels below it (worktrees).
    let candidates = [manifest.join("../../shared/models"), manifest.join("../../../shared/models")];
    let Some(Ok(entries)) = candidates.iter().find(|d| d.is_dir()).map(std::fs::read_dir) else {
        println!("skipped: ../shared/models not present");
        return;
    };
    let mut names: Vec<_> = entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    names.sort();
    for m in names {
        let l = match load_and_lower(&m.join("model.nnef"), &FrontOptions::default()) {
            Ok(l) => l,
            Err(e) => panic!("{}: {}", m.display(), e.render()),
        };
        let meta = std::fs::read_to_string(m.join("meta.json")).unwrap_or_default();
        let expected = json_int_array(&meta, "output_shape");
        let out = l.graph.outputs.first().map(|o| l.graph.ty(*o).shape());
        assert_eq!(out, Some(expected), "{}: output shape differs from meta.json", m.display());
        assert!(l.open_extents.is_empty(), "{}: {:?}", m.display(), l.open_extents);
    }
}

/// An open batch extent propagates to the output and is reported.
#[test]
fn open_extent_from_override() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let model = manifest.join("../../../shared/models/mlp/model.nnef");
    if !model.is_dir() {
        println!("skipped: ../shared/models not present");
        return;
    }
    let mut opts = FrontOptions::default();
    opts.input_shapes.insert("input".into(), vec![None, Some(784)]);
    let l = load_and_lower(&model, &opts).unwrap_or_else(|e| panic!("{}", e.render()));
    expect_test::expect![[r#"
        input `input`: f32[?,784]
        output `output`: f32[?,10]"#]]
    .assert_eq(&l.open_extents.join("\n"));
}

/// `"key": [1, 2, 3]` from a JSON text (enough for meta.json; no JSON dependency).
fn json_int_array(text: &str, key: &str) -> Option<Vec<usize>> {
    let at = text.find(&format!("\"{key}\""))?;
    let rest = &text[at..];
    let open = rest.find('[')?;
    let close = rest.find(']')?;
    rest[open + 1..close].split(',').map(|x| x.trim().parse().ok()).collect()
}
