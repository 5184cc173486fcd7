//! Loading NNEF models into the graph builder (`nnefc::graph::from_nnef`): shipped and
//! shared models replayed into a `Graph`, finished, compiled and run in this process, match
//! their `expected.dat`; statements the builder cannot represent are refused with the
//! file, line and column. The big shared CNNs are left to `e2e` (too slow here).

use nnefc::graph::{Graph, from_nnef, from_nnef_with_values, ops};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Loads `model/model.nnef`, finishes, runs on `input.dat`, compares with `expected.dat`.
fn load_and_check(model: &Path) -> Graph {
    let g = from_nnef(&model.join("model.nnef")).unwrap_or_else(|e| panic!("{e}"));
    let doc = g.finish().unwrap_or_else(|e| panic!("{e}"));
    assert!(doc.warnings.is_empty(), "{:?}", doc.warnings);
    let input = nnefc::datfile::read(&model.join("input.dat")).expect("input");
    let expected = nnefc::datfile::read(&model.join("expected.dat")).expect("expected");
    let mut loaded = doc.load().expect("compile and load");
    let out = loaded.run(&[input]).expect("run");
    let c = nnefc::tolerance::compare(&out[0], &expected).expect("comparable");
    assert!(c.passed(), "{}: {c:?}", model.display());
    g
}

#[test]
fn graph_load_shipped_models_match_expected() {
    for m in ["tiny_cnn", "unetish"] {
        let g = load_and_check(&repo().join("examples/models").join(m));
        // The loaded graph is an ordinary builder graph: it can be extended.
        let doc = g.finish().unwrap();
        assert_eq!(doc.inputs[0].0, "input");
        assert_eq!(doc.outputs[0].0, "output");
    }
}

#[test]
fn graph_load_shared_models_match_expected() {
    let Some(shared) = nnefc::corpus::shared_dir(&repo()) else {
        eprintln!("skipped: ../shared/models is absent (mlp and encoder live there)");
        return;
    };
    for m in ["mlp", "encoder"] {
        load_and_check(&shared.join(m));
    }
}

/// A loaded graph extended in Rust: a second output computed from one of its values.
#[test]
fn graph_load_then_extend() {
    let model = repo().join("examples/models/tiny_cnn");
    let (g, values) = from_nnef_with_values(&model.join("model.nnef")).unwrap();
    let logits = &values["linear1"];
    assert_eq!(logits.shape(), vec![Some(1), Some(10)]);
    let top = ops::argmax_reduce(logits, vec![1]).unwrap();
    g.output("top", &top).unwrap();
    let doc = g.finish().unwrap();
    assert_eq!(doc.outputs.len(), 2);
    let input = nnefc::datfile::read(&model.join("input.dat")).unwrap();
    let expected = nnefc::datfile::read(&model.join("expected.dat")).unwrap();
    let out = doc.load().unwrap().run(&[input]).unwrap();
    let scores = expected.as_f32().unwrap();
    let best = (0..scores.len())
        .max_by(|&i, &j| scores[i].total_cmp(&scores[j]))
        .unwrap();
    assert_eq!(out[1].as_i32().unwrap(), &[best as i32]);
}

fn write_model(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("graph.nnef");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn graph_load_refuses_operator_expressions_with_position() {
    let tmp = tempfile::tempdir().unwrap();
    let p = write_model(
        tmp.path(),
        "version 1.0;\nextension KHR_enable_operator_expressions;\n\ngraph g( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1, 4]);\n    y = x + 1.0;\n}\n",
    );
    let e = from_nnef(&p).unwrap_err();
    let shown = p.display().to_string();
    assert!(
        e.message.starts_with(&format!(
            "{shown}:7:5: the graph builder can only load invocations"
        )),
        "{e}"
    );
    assert!(
        e.message.contains("an operator expression (`x + 1.0`)"),
        "{e}"
    );
    assert!(e.location.unwrap().file().ends_with("graph_load.rs"));
}

/// Compositional syntax, negative literals, array and tuple results, fragments.
#[test]
fn graph_load_nested_calls_patterns_and_fragments() {
    let tmp = tempfile::tempdir().unwrap();
    let p = write_model(
        tmp.path(),
        "version 1.0;\nextension KHR_enable_fragment_definitions;\n\n\
         fragment twice( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n    y = add(x, x);\n}\n\n\
         graph g( x ) -> ( y, m )\n{\n    x = external<scalar>(shape = [1, 4]);\n\
         [a, b] = split(x, axis = 1, ratios = [1, 1]);\n\
         (m, v) = moments(x, axes = [1]);\n\
         y = twice(concat([relu(a), clamp(b, -1.0, 1.0)], axis = 1));\n}\n",
    );
    let g = from_nnef(&p).unwrap_or_else(|e| panic!("{e}"));
    let doc = g.finish().unwrap_or_else(|e| panic!("{e}"));
    // `v` is unused, but its statement computes `m`: nothing is dropped.
    assert_eq!(doc.warnings.len(), 0, "{:?}", doc.warnings);
    let mut m = doc.load().unwrap();
    let x = nnefc::compiler::ir::Tensor::f32(vec![1, 4], vec![-2.0, 3.0, -3.0, 0.5]);
    let out = m.run(&[x]).unwrap();
    assert_eq!(out[0].as_f32().unwrap(), &[0.0, 6.0, -2.0, 1.0]);
    assert_eq!(out[1].as_f32().unwrap(), &[-0.375]);
}

#[test]
fn graph_load_variable_shape_mismatch_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    write_model(
        tmp.path(),
        "version 1.0;\n\ngraph g( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1, 4]);\n    w = variable<scalar>(shape = [2, 4], label = 'w');\n    y = linear(x, w);\n}\n",
    );
    let w = nnefc::compiler::ir::Tensor::f32(vec![4, 2], vec![0.0; 8]);
    nnefc::datfile::write(&tmp.path().join("w.dat"), &w).unwrap();
    let e = from_nnef(tmp.path()).unwrap_err();
    assert!(
        e.message
            .contains(":6:5: variable `w` does not match its data file"),
        "{e}"
    );
}

/// A bare `graph.nnef` has no data: a model with variables is refused, naming the label.
#[test]
fn graph_load_bare_graph_with_variables_is_an_error() {
    let e = from_nnef(&repo().join("examples/models/tiny_cnn/model.nnef/graph.nnef")).unwrap_err();
    assert!(
        e.message.contains("no data for variable 'variable1'"),
        "{e}"
    );
    assert!(e.message.contains("graph.nnef:6:5: "), "{e}");
}

/// A `.tgz` of a model folder loads like the folder.
#[test]
fn graph_load_archive() {
    let model = repo().join("examples/models/tiny_cnn");
    let tmp = tempfile::tempdir().unwrap();
    let tgz = tmp.path().join("tiny_cnn.tgz");
    let gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&tgz).unwrap(),
        flate2::Compression::fast(),
    );
    let mut tar = tar::Builder::new(gz);
    tar.append_dir_all("tiny_cnn", model.join("model.nnef"))
        .unwrap();
    tar.into_inner().unwrap().finish().unwrap();
    let from_tgz = from_nnef(&tgz).unwrap_or_else(|e| panic!("{e}"));
    let from_dir = from_nnef(&model.join("model.nnef")).unwrap();
    assert_eq!(
        from_tgz.finish().unwrap().text(),
        from_dir.finish().unwrap().text()
    );
}

/// A builder error in a loaded file names the statement: position and text.
#[test]
fn graph_load_shape_error_names_the_statement() {
    let tmp = tempfile::tempdir().unwrap();
    write_model(
        tmp.path(),
        "version 1.0;\n\ngraph g( a, b ) -> ( y )\n{\n    a = external<scalar>(shape = [1, 3]);\n    b = external<scalar>(shape = [1, 4]);\n    y = add(a, b);\n}\n",
    );
    let e = from_nnef(tmp.path()).unwrap_err();
    assert!(e.message.ends_with(":7:5: invalid operands for `add`: cannot broadcast f32[1,3] with f32[1,4]: extent 3 vs 4 at axis 1"), "{e}");
    assert!(
        e.notes.contains(&"statement: `y = add(a, b);`".to_string()),
        "{e}"
    );
}

/// A finished document declares only fragment definitions: a fragment written with
/// operator expressions is refused at load, naming it.
#[test]
fn graph_load_fragment_with_operators_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    write_model(
        tmp.path(),
        "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n\n\
         fragment twice( x: tensor<scalar> ) -> ( y: tensor<scalar> )\n{\n    y = x + x;\n}\n\n\
         graph g( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1, 4]);\n    y = twice(x);\n}\n",
    );
    let e = from_nnef(tmp.path()).unwrap_err();
    assert!(
        e.message.ends_with(
            ":4:1: fragment `twice` uses operator expressions, which the graph builder cannot write"
        ),
        "{e}"
    );
}
