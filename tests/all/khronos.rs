//! Differential shape test against the Khronos reference parser (`nnef` from PyPI, installed
//! by `.ci/setup`): for the in-repo models, the shared models and every valid front-end test
//! document, each tensor named in both must get the same shape from the reference's
//! `infer_shapes` and from nnefc's front end. Skips, saying so, when python3 or the package
//! is missing. It checks shapes only, not values.

use nnefc_compiler::front::{self, FrontOptions};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn documents() -> Vec<PathBuf> {
    let mut docs = Vec::new();
    let mut push_models = |root: &Path| {
        if let Ok(rd) = std::fs::read_dir(root) {
            let mut v: Vec<_> = rd
                .filter_map(|e| e.ok())
                .map(|e| e.path().join("model.nnef"))
                .filter(|p| p.is_dir())
                .collect();
            v.sort();
            docs.extend(v);
        }
    };
    push_models(&repo().join("examples/models"));
    push_models(&repo().join("../shared/models"));
    if let Ok(rd) = std::fs::read_dir(repo().join("compiler/src/front/tests/lower")) {
        let mut v: Vec<_> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "nnef"))
            .collect();
        v.sort();
        docs.extend(v);
    }
    docs
}

#[test]
fn shapes_agree_with_the_khronos_reference_parser() {
    let has_nnef = Command::new("python3")
        .args(["-c", "import nnef"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_nnef {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            (format!(
                "skipped: the Khronos `nnef` Python package is not installed (run .ci/setup)"
            ) + "\n")
                .as_bytes(),
        );
        return;
    }
    let docs = documents();
    let out = Command::new("python3")
        .arg(repo().join("tests/khronos/shapes.py"))
        .args(&docs)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "shapes.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut reference: BTreeMap<String, BTreeMap<String, Result<Vec<usize>, String>>> =
        BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let parts: Vec<&str> = line.splitn(3, '\t').collect();
        let [path, name, rest] = parts[..] else {
            continue;
        };
        let entry = reference.entry(path.to_string()).or_default();
        if name == "!error" {
            entry.insert(name.to_string(), Err(rest.to_string()));
        } else {
            let dims = rest
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|d| d.parse().expect("integer extent"))
                .collect();
            entry.insert(name.to_string(), Ok(dims));
        }
    }
    let opts = FrontOptions {
        allow_missing_variables: true,
        ..FrontOptions::default()
    };
    let (mut compared_docs, mut compared_tensors) = (0, 0);
    let mut mismatches = Vec::new();
    for doc in &docs {
        let key = doc.display().to_string();
        let Some(theirs) = reference.get(&key) else {
            continue;
        };
        if let Some(Err(e)) = theirs.get("!error") {
            println!("note: the reference rejects {}: {e}", doc.display());
            continue;
        }
        let ours = match front::load_and_lower(doc, &opts) {
            Ok(l) => l,
            Err(e) => {
                mismatches.push(format!(
                    "{}: accepted by the reference, rejected by nnefc:\n{}",
                    doc.display(),
                    e.render()
                ));
                continue;
            }
        };
        compared_docs += 1;
        for v in &ours.graph.values {
            let Some(name) = &v.name else { continue };
            let Some(Ok(dims)) = theirs.get(name) else {
                continue;
            };
            compared_tensors += 1;
            if v.ty.shape().as_ref() != Some(dims) {
                mismatches.push(format!(
                    "{}: `{name}`: nnefc {} vs reference {dims:?}",
                    doc.display(),
                    v.ty
                ));
            }
        }
    }
    println!(
        "compared {compared_tensors} tensors in {compared_docs} documents with the Khronos reference"
    );
    assert!(compared_docs > 0, "no document was compared");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
