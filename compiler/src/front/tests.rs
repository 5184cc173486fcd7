//! Front-end tests.

use super::*;

#[test]
fn shared_models_lower() {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
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
        println!("{}: {} nodes, output {:?}", m.display(), l.graph.nodes.len(), out);
    }
}

/// `"key": [1, 2, 3]` from a JSON text (enough for meta.json; no JSON dependency).
fn json_int_array(text: &str, key: &str) -> Option<Vec<usize>> {
    let at = text.find(&format!("\"{key}\""))?;
    let rest = &text[at..];
    let open = rest.find('[')?;
    let close = rest.find(']')?;
    rest[open + 1..close].split(',').map(|x| x.trim().parse().ok()).collect()
}
