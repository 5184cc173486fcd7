//! Front-end tests: data-driven cases under `front/tests/` (NNEF text in, text IR or
//! rendered diagnostics out, blessed with `UPDATE_EXPECT=1`), and the shared model
//! corpus (every model lowers; output shape equals `meta.json`).
//!
//! Case files may start with directives: `#! input NAME d,d,?` overrides an external's
//! shape (`?` leaves the extent open), `#! depth N` sets the recursion limit, `#! nodes N`
//! the expansion size limit. Variables
//! without data become zeros (with a warning) so cases need no `.dat` files.

use super::*;
use std::path::{Path, PathBuf};

fn run_case(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut opts = FrontOptions {
        allow_missing_variables: true,
        ..FrontOptions::default()
    };
    for line in text.lines().filter_map(|l| l.strip_prefix("#!")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["input", name, dims] => {
                let dims = dims.split(',').map(|d| d.parse().ok()).collect();
                opts.input_shapes.insert(name.to_string(), dims);
            }
            ["depth", n] => opts.max_recursion_depth = n.parse().unwrap_or(64),
            ["nodes", n] => opts.max_nodes = n.parse().unwrap_or(64),
            _ => return format!("bad directive `{line}`"),
        }
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match lower_source(&name, &text, &|_| None, &opts) {
        Ok(l) => {
            if let Err(errs) = ir::verify::verify(&l.graph) {
                return format!(
                    "IR verifier rejects the lowered graph:\n{}",
                    ir::verify::render_errors(&errs)
                );
            }
            // Literal constants show their data; variables (zeros here) only their label.
            let printed =
                ir::print::print_with(&l.graph, ir::print::PrintOptions { const_data: true });
            let mut out = String::new();
            for line in printed.lines() {
                match line
                    .find("= const \"")
                    .and_then(|at| line[at + 9..].find("\" [").map(|k| at + 9 + k + 1))
                {
                    Some(cut) => out.push_str(&line[..cut]),
                    None => out.push_str(line),
                }
                out.push('\n');
            }
            let warnings: Vec<_> = l
                .warnings
                .iter()
                .filter(|w| !w.message.starts_with("no data for variable"))
                .cloned()
                .collect();
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
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/front/tests")
        .join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "nnef"))
                .collect()
        })
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

/// The shared model corpus: the repo sits next to `shared/` (main) or two levels below it
/// (worktrees). `None` (after saying so on stderr) when neither exists.
fn shared_models() -> Option<std::path::PathBuf> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = [
        manifest.join("../../shared/models"),
        manifest.join("../../../shared/models"),
    ]
    .into_iter()
    .find(|d| d.is_dir());
    if found.is_none() {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"skipped: ../shared/models not present\n",
        );
    }
    found
}

#[test]
fn shared_models_lower() {
    let Some(Ok(entries)) = shared_models().map(std::fs::read_dir) else {
        return;
    };
    let mut names: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    names.sort();
    for m in names {
        let l = match load_and_lower(&m.join("model.nnef"), &FrontOptions::default()) {
            Ok(l) => l,
            Err(e) => panic!("{}: {}", m.display(), e.render()),
        };
        if let Err(errs) = ir::verify::verify(&l.graph) {
            panic!("{}: {}", m.display(), ir::verify::render_errors(&errs));
        }
        let meta = std::fs::read_to_string(m.join("meta.json")).unwrap_or_default();
        let expected = json_int_array(&meta, "output_shape");
        let out = l.graph.outputs.first().map(|o| l.graph.ty(*o).shape());
        assert_eq!(
            out,
            Some(expected),
            "{}: output shape differs from meta.json",
            m.display()
        );
        assert!(
            l.open_extents.is_empty(),
            "{}: {:?}",
            m.display(),
            l.open_extents
        );
    }
}

/// An open batch extent propagates to the output and is reported.
#[test]
fn open_extent_from_override() {
    let Some(models) = shared_models() else {
        return;
    };
    let model = models.join("mlp/model.nnef");
    let mut opts = FrontOptions::default();
    opts.input_shapes
        .insert("input".into(), vec![None, Some(784)]);
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
    rest[open + 1..close]
        .split(',')
        .map(|x| x.trim().parse().ok())
        .collect()
}

fn lower_with_quant(
    graph: &str,
    quant: &str,
    vars: &(dyn Fn(&str) -> quantize::VarData + Sync),
) -> String {
    let opts = FrontOptions::default();
    match lower_model(
        "graph.nnef",
        graph,
        Some(("graph.quant", quant)),
        vars,
        &opts,
    ) {
        Ok(l) => ir::print::print_with(&l.graph, ir::print::PrintOptions { const_data: true }),
        Err(e) => e.render(),
    }
}

/// graph.quant: quantized codes are decoded with the entry, and every named tensor gets
/// the quantization fragment inserted after it (simulated quantization).
#[test]
fn graph_quant_dequantizes_and_simulates() {
    let graph = "version 1.0;\ngraph g( x ) -> ( y )\n{\n    x = external(shape = [2]);\n    w = variable(shape = [2], label = 'w');\n    y = mul(x, w);\n}\n";
    let quant = "\"w\": zero_point_linear_quantize(zero_point = 128, scale = 0.5, bits = 8, signed = false, symmetric = false);\n\"y\": linear_quantize(min = -1.0, max = 1.0, bits = 4);\n";
    let vars = |label: &str| match label {
        "w" => quantize::VarData::Quantized(dat::DatTensor {
            shape: vec![2],
            item: dat::ItemType {
                kind: dat::ItemKind::QuantizedUnsigned,
                bits: 8,
            },
            data: ir::Tensor::f32(vec![2], vec![130.0, 126.0]),
            quant: Some(dat::QuantParams::GraphQuant),
        }),
        _ => quantize::VarData::Missing,
    };
    expect_test::expect![[r#"
        nnefir 1
        graph g(%v0 "x": f32[2]) -> (%v20) {
          %c0 "w": f32[2] = const "w" [1.0,-1.0]
          %c1: i32[] = const [128]
          %c2: f32[] = const [0.5]
          %c3: f32[] = const [0.0]
          %c4: f32[] = const [255.0]
          %c5: f32[] = const [-1.0]
          %c6: f32[] = const [1.0]
          %c7: f32[] = const [15.0]
          %c8: f32[] = const [0.0]
          %c9: f32[] = const [0.0]
          %c10: f32[] = const [15.0]
          %v1: f32[] = cast(%c1) to=f32
          %v2: f32[2] = div(%c0, %c2)
          %v3: f32[2] = round(%v2)
          %v4: f32[2] = add(%v3, %v1)
          %v5: f32[2] = clamp(%v4, %c3, %c4)
          %v6: f32[2] = sub(%v5, %v1)
          %v7 "w.quantized": f32[2] = mul(%v6, %c2)
          %v8 "y": f32[2] = mul(%v0, %v7)
          %v9: f32[2] = clamp(%v8, %c5, %c6)
          %v10: f32[2] = sub(%v9, %c5)
          %v11: f32[] = sub(%c6, %c5)
          %v12: f32[2] = div(%v10, %v11)
          %v13: f32[2] = mul(%v12, %c7)
          %v14: f32[2] = round(%v13)
          %v15: f32[2] = sub(%v14, %c8)
          %v16: f32[2] = add(%v15, %c9)
          %v17: f32[2] = div(%v16, %c10)
          %v18: f32[] = sub(%c6, %c5)
          %v19: f32[2] = mul(%v17, %v18)
          %v20 "y.quantized": f32[2] = add(%v19, %c5)
        }
    "#]]
    .assert_eq(&lower_with_quant(graph, quant, &vars));
}

#[test]
fn graph_quant_unknown_tensor() {
    let graph = "version 1.0;\ngraph g( x ) -> ( y )\n{\n    x = external(shape = [2]);\n    y = relu(x);\n}\n";
    let quant = "\"z\": linear_quantize(min = -1.0, max = 1.0, bits = 8);\n";
    expect_test::expect![[r#"
        error: graph.quant names `z`, which the graph does not assign
          ┌─ graph.quant:1:1
          │
        1 │ "z": linear_quantize(min = -1.0, max = 1.0, bits = 8);
          │ ^^^ unknown tensor identifier
          │
          = keys are graph identifiers (the left-hand side of an assignment), not variable labels

    "#]]
    .assert_eq(&lower_with_quant(graph, quant, &|_| {
        quantize::VarData::Missing
    }));
}

/// Documents built to make a naive compiler allocate without bound or run for ever: each
/// must come back as a diagnostic, quickly.
#[test]
fn resource_bombs_are_diagnostics() {
    let cases = [
        (
            "array repetition",
            "n = length_of([0] * 1000000000);\n    y = add(x, scalar(n));",
            "compile-time value too large",
        ),
        (
            "string repetition",
            "s = 'ab' * 2000000000;\n    y = copy(x);",
            "compile-time value too large",
        ),
        (
            "huge range",
            "n = length_of(range_of([0] * 100000000));\n    y = copy(x);",
            "compile-time value too large",
        ),
        (
            "huge comprehension",
            "a = [for i in range_of([0] * 100000000) yield i];\n    y = copy(x);",
            "compile-time value too large",
        ),
        (
            "fragment doubling per level",
            "y = twice(x, n = 60);",
            "expanding `twice` creates more than 65536 fragment calls",
        ),
        (
            "attribute fragment doubling per level",
            "y = add(x, scalar(count(n = 60)));",
            "expanding `count` creates more than 65536 fragment calls",
        ),
        (
            "huge constant",
            "c = constant(shape = [100000, 100000, 100000], value = [1.0]);\n    y = add(x, c);",
            "is too large to materialize",
        ),
    ];
    for (what, body, expected) in cases {
        let text = format!(
            "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n\
             fragment twice(x: tensor<scalar>, n: integer) -> (y: tensor<scalar>)\n\
             {{ y = twice(x, n = n - 1) + twice(x, n = n - 1) if n > 0 else x; }}\n\
             fragment count(n: integer) -> (c: integer)\n\
             {{ c = count(n = n - 1) + count(n = n - 1) if n > 0 else 1; }}\n\
             graph g(x) -> (y)\n{{\n    x = external(shape = [2]);\n    {body}\n}}\n"
        );
        let start = std::time::Instant::now();
        // The default size limit (MAX_NODES) takes seconds to reach in a debug build;
        // a smaller one exercises the same checks. Time grows linearly with the limit.
        let opts = FrontOptions {
            max_nodes: 1 << 16,
            ..FrontOptions::default()
        };
        let result = lower_source("bomb.nnef", &text, &|_| None, &opts);
        match result {
            Ok(_) => panic!("{what}: accepted"),
            Err(e) => assert!(e.render().contains(expected), "{what}: {}", e.render()),
        }
        assert!(
            start.elapsed().as_secs() < 5,
            "{what}: took {:?}",
            start.elapsed()
        );
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]
    /// Mutated valid documents (bytes deleted, duplicated or replaced) never make the
    /// front end panic: they lower or give diagnostics that render.
    #[test]
    fn mutated_documents_never_panic(doc in 0usize..64, edits in proptest::collection::vec((0usize..10_000, 0u8..3, 0u8..128), 1..6)) {
        let mut docs: Vec<PathBuf> = Vec::new();
        for dir in ["lower", "models"] {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/front/tests").join(dir);
            if let Ok(rd) = std::fs::read_dir(root) {
                docs.extend(rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "nnef")));
            }
        }
        docs.sort();
        proptest::prop_assume!(!docs.is_empty());
        let mut bytes = std::fs::read(&docs[doc % docs.len()]).unwrap_or_default();
        for (pos, kind, byte) in edits {
            if bytes.is_empty() { break; }
            let at = pos % bytes.len();
            match kind {
                0 => { bytes.remove(at); }
                1 => { let b = bytes[at]; bytes.insert(at, b); }
                _ => bytes[at] = byte,
            }
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let opts = FrontOptions { allow_missing_variables: true, ..FrontOptions::default() };
        if let Err(e) = lower_source("mutated.nnef", &text, &|_| None, &opts) {
            proptest::prop_assert!(!e.render().is_empty());
        }
    }
}

/// Documents at the nesting and recursion limits lower without overflowing the stack
/// (the front end runs on a thread with `FRONT_STACK_BYTES`), and one level past each
/// limit is a diagnostic. Debug builds have the largest frames, so this runs there.
#[test]
fn deep_documents_at_the_limits() {
    let head = "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n";
    let graph = |body: &str| {
        format!(
            "{head}fragment chain(x: tensor<scalar>, n: integer) -> (y: tensor<scalar>)\n\
             {{ y = relu(chain(x, n = n - 1)) if n > 0 else x; }}\n\
             fragment depth(n: integer) -> (d: integer)\n\
             {{ d = depth(n = n - 1) + 1 if n > 0 else 0; }}\n\
             graph g(x) -> (y)\n{{\n    x = external(shape = [2]);\n    {body}\n}}\n"
        )
    };
    let n = syntax::MAX_NESTING - 8;
    let sum = format!("y = x{};", " + x".repeat(n));
    let negs = format!("y = {}x{};", "-(".repeat(n / 2), ")".repeat(n / 2));
    let arrays = format!(
        "y = mul(x, scalar(length_of({}0{})));",
        "[".repeat(n),
        "]".repeat(n)
    );
    let recursion = format!("y = chain(x, n = {});", MAX_RECURSION_DEPTH - 1);
    let attr_recursion = format!(
        "y = mul(x, scalar(depth(n = {})));",
        MAX_RECURSION_DEPTH - 1
    );
    for (what, body) in [
        ("sum", &sum),
        ("negations", &negs),
        ("arrays", &arrays),
        ("recursion", &recursion),
        ("attribute recursion", &attr_recursion),
    ] {
        if let Err(e) = lower_source(
            "deep.nnef",
            &graph(body),
            &|_| None,
            &FrontOptions::default(),
        ) {
            panic!("{what}: {}", e.render());
        }
    }
    let too_deep = format!("y = x{};", " + x".repeat(syntax::MAX_NESTING + 1));
    let too_many = format!("y = chain(x, n = {});", MAX_RECURSION_DEPTH + 1);
    for (what, body, expected) in [
        ("sum", &too_deep, "nested too deeply"),
        ("recursion", &too_many, "fragment expansion deeper than"),
    ] {
        match lower_source(
            "deep.nnef",
            &graph(body),
            &|_| None,
            &FrontOptions::default(),
        ) {
            Ok(_) => panic!("{what}: accepted past the limit"),
            Err(e) => assert!(e.render().contains(expected), "{what}: {}", e.render()),
        }
    }
}

/// Nesting and recursion multiply: each of 4000 recursive calls sits at the bottom of a
/// 2000-term chain. The stack budget stops it with a diagnostic, not an overflow.
#[test]
fn deep_expressions_inside_deep_recursion_are_a_diagnostic() {
    let text = format!(
        "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n\
         fragment chain(x: tensor<scalar>, n: integer) -> (y: tensor<scalar>)\n\
         {{ y = (chain(x, n = n - 1){} if n > 0 else x); }}\n\
         graph g(x) -> (y)\n{{\n    x = external(shape = [2]);\n    y = chain(x, n = 4000);\n}}\n",
        " + x".repeat(2000)
    );
    let opts = FrontOptions::default();
    match lower_source("deep.nnef", &text, &|_| None, &opts) {
        Ok(_) => panic!("accepted"),
        Err(e) => assert!(e.render().contains("nests too deeply"), "{}", e.render()),
    }
}
