//! Every front-end test document (`compiler/src/front/tests/{models,lower}/*.nnef`: user-style
//! models with custom fragments, recursion, comprehensions, operator expressions, integer and
//! logical tensors, the quantization fragments, …) is compiled to native code, run on random
//! inputs with random weights, and compared with the reference interpreter on the same graph.
//! This ties the front end's lowering to the back end's code for the whole language, not only
//! for the converter-written shared models. Documents whose graph the interpreter itself
//! rejects on the random data (e.g. an out-of-range gather index) are reported and skipped.

use nnefc::compiler::front::{self, FrontOptions};
use nnefc::compiler::ir::{self, DType, Tensor, TensorData};
use nnefc::compiler::{back, passes};
use nnefc::exec::LoadedModel;
use nnefc::tolerance;
use std::path::PathBuf;

fn documents() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("compiler/src/front/tests");
    let mut docs = Vec::new();
    for dir in ["models", "lower"] {
        if let Ok(rd) = std::fs::read_dir(root.join(dir)) {
            docs.extend(
                rd.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "nnef")),
            );
        }
    }
    docs.sort();
    docs
}

/// Deterministic values: f32 in [-1, 1), i32 in 0..3, alternating-ish bools.
fn random(dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let n: usize = shape.iter().product();
    match dtype {
        DType::F32 => Tensor::f32(
            shape.to_vec(),
            (0..n)
                .map(|_| (next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
                .collect(),
        ),
        DType::I32 => Tensor::i32(
            shape.to_vec(),
            (0..n).map(|_| (next() % 3) as i32).collect(),
        ),
        DType::Bool => Tensor::bool(shape.to_vec(), (0..n).map(|_| next() % 2 == 0).collect()),
    }
}

#[test]
fn every_test_document_compiles_and_matches_the_interpreter() {
    let opts = FrontOptions {
        allow_missing_variables: true,
        ..FrontOptions::default()
    };
    let (mut checked, mut failures) = (0, Vec::new());
    for (k, doc) in documents().iter().enumerate() {
        let name = doc
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Ok(mut lowered) = front::load_and_lower(doc, &opts) else {
            continue; // documents written to fail are covered by the front-end tests
        };
        if !lowered.open_extents.is_empty() {
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                (format!("{name}: skipped (open extents)") + "\n").as_bytes(),
            );
            continue;
        }
        // Variables default to zeros in these documents: give them random data so the
        // comparison means something. Weights are drawn from [0.5, 1.5) so that variances,
        // square roots and logarithms of weights stay finite: NaN propagation through
        // max/relu is not specified alike by every path (see the notes on data edge cases
        // in back/mod.rs). Literal constants keep their values.
        for (i, c) in lowered.graph.consts.iter_mut().enumerate() {
            if c.label.is_some() && matches!(c.tensor.data, TensorData::F32(_)) {
                let mut t = random(DType::F32, &c.tensor.shape, 1000 + i as u64);
                if let TensorData::F32(v) = &mut t.data {
                    v.iter_mut().for_each(|x| *x = x.abs() + 0.5);
                }
                c.tensor = t;
            }
        }
        let mut graph = lowered.graph;
        if let Err(e) = passes::optimize(
            &mut graph,
            &passes::PassOptions {
                verify_each: true,
                ..Default::default()
            },
        ) {
            failures.push(format!("{name}: optimization failed: {e}"));
            continue;
        }
        let inputs: Vec<Tensor> = graph
            .inputs
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let ty = graph.ty(v);
                random(
                    ty.dtype,
                    &ty.shape().unwrap_or_default(),
                    7 + (k * 31 + i) as u64,
                )
            })
            .collect();
        let expected = match ir::interp::run(&graph, &inputs) {
            Ok(o) => o,
            Err(e) => {
                let _ = std::io::Write::write_all(
                    &mut std::io::stderr(),
                    (format!("{name}: skipped (the interpreter rejects the random data: {e})")
                        + "\n")
                        .as_bytes(),
                );
                continue;
            }
        };
        let back_opts = back::BackendOptions {
            prefix: format!("doc{k}"),
            ..Default::default()
        };
        let artifacts = match back::compile(&graph, &back_opts) {
            Ok(a) => a,
            Err(e) => {
                failures.push(format!("{name}: code generation failed: {e}"));
                continue;
            }
        };
        let ours = match LoadedModel::load(&artifacts).and_then(|mut m| m.run(&inputs)) {
            Ok(o) => o,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        // Outputs are ABI: one per declared result, each under its own name.
        let declared: Vec<Option<&str>> = graph
            .outputs
            .iter()
            .map(|&v| graph.value(v).name.as_deref())
            .collect();
        let names: Vec<&str> = artifacts
            .interface
            .outputs
            .iter()
            .map(|o| o.name.as_str())
            .collect();
        if ours.len() != expected.len()
            || declared
                .iter()
                .map(|n| n.unwrap_or(""))
                .ne(names.iter().copied())
        {
            failures.push(format!(
                "{name}: outputs {names:?} ({} written), the graph declares {declared:?}",
                ours.len()
            ));
        }
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        if unique.len() != names.len() {
            failures.push(format!("{name}: output names repeat: {names:?}"));
        }
        for (j, (o, e)) in ours.iter().zip(&expected).enumerate() {
            match tolerance::compare(o, e) {
                Ok(c) if c.passed() => {}
                Ok(c) => failures.push(format!("{name}: output {j}: {c}")),
                Err(err) => failures.push(format!("{name}: output {j}: {err}")),
            }
        }
        checked += 1;
        println!("{name}: {} outputs match the interpreter", ours.len());
    }
    println!("{checked} documents compiled and checked");
    assert!(checked >= 10, "only {checked} documents were checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
