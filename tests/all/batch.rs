//! Run-time batch: every shipped and shared model compiled with its input's leading extent
//! left to run time (`--input-shape input=?,...`) runs batches of 1, 2, 7 and 32 samples,
//! and its outputs match those of the same model compiled for that fixed batch (under the
//! tolerance rule: a fixed batch of 32 may pick other kernels, so bits may differ), with
//! batch 1 matching `expected.dat`. Sample 0 (the model's `input.dat`) gives the same bytes
//! whatever the batch: samples are independent runs of one program. Plus the rejections:
//! graphs that mix samples get a diagnostic at the offending statement.

use crate::e2e::repo;
use nnefc::compiler::ir::{Tensor, TensorData};
use nnefc::compiler::session::Options;
use nnefc::corpus::{self, ModelDir};
use nnefc::exec::LoadedModel;
use nnefc::{datfile, tolerance};
use std::collections::BTreeMap;

/// Batch sizes the issue names.
const BATCHES: [usize; 4] = [1, 2, 7, 32];

fn options(name: &str, dims: Vec<Option<usize>>) -> Options {
    let mut o = Options::default();
    o.front.input_shapes = BTreeMap::from([(name.to_string(), dims)]);
    o
}

/// `n` samples: sample 0 is `first`, the others deterministic pseudo-random values in
/// the range of `first`'s values.
fn batch_of(first: &Tensor, n: usize) -> Tensor {
    let TensorData::F32(d) = &first.data else {
        panic!("float32 inputs only");
    };
    let (lo, hi) = d
        .iter()
        .fold((f32::MAX, f32::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut data = d.clone();
    for _ in 1..n {
        for _ in 0..d.len() {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let u = (state >> 40) as f32 / (1u64 << 24) as f32;
            data.push(lo + (hi - lo) * u);
        }
    }
    let mut shape = first.shape.clone();
    shape[0] *= n;
    Tensor::f32(shape, data)
}

fn load(m: &ModelDir, opts: &Options, prefix: &str) -> Result<LoadedModel, String> {
    let c = nnefc::compile_model(&m.nnef(), opts, Some(prefix))
        .map_err(|e| format!("{}: {prefix}: {}", m.name, e.render()))?;
    LoadedModel::load(&c.artifacts).map_err(|e| format!("{}: {prefix}: {e}", m.name))
}

fn check_model(m: &ModelDir) -> Result<String, String> {
    let name = &m.name;
    let input = datfile::read(&m.input()).map_err(|e| format!("{name}: {e}"))?;
    let expected = datfile::read(&m.expected()).map_err(|e| format!("{name}: {e}"))?;
    // The input's name and per-sample shape, from the fixed model as shipped.
    let mut fixed1 = load(m, &Options::default(), "fixed1")?;
    let iface = fixed1.interface().inputs.clone();
    let [info] = iface.as_slice() else {
        return Err(format!("{name}: one input expected"));
    };
    if info.shape.first() != Some(&1) {
        return Err(format!(
            "{name}: leading extent 1 expected, got {:?}",
            info.shape
        ));
    }
    let rest: Vec<Option<usize>> = info.shape[1..].iter().map(|&d| Some(d)).collect();
    let dims = |n: Option<usize>| std::iter::once(n).chain(rest.iter().copied()).collect();
    let mut batched = load(m, &options(&info.name, dims(None)), "batched")?;
    let bi = &batched.interface().inputs[0];
    if !bi.batched || bi.shape != info.shape || !batched.interface().outputs[0].batched {
        return Err(format!(
            "{name}: interface not marked batched: {:?}",
            batched.interface()
        ));
    }
    let mut sample0: Option<Vec<u8>> = None;
    let mut line = Vec::new();
    for n in BATCHES {
        let x = batch_of(&input, n);
        let ours = batched
            .run(std::slice::from_ref(&x))
            .map_err(|e| format!("{name}: batch {n}: {e}"))?;
        let [ours] = ours.as_slice() else {
            return Err(format!("{name}: one output expected"));
        };
        if ours.shape[0] != n * expected.shape[0] {
            return Err(format!("{name}: batch {n}: output shape {:?}", ours.shape));
        }
        let per = ours.len() / n;
        let bytes = ours.to_le_bytes();
        let first = bytes[..per * 4].to_vec();
        match &sample0 {
            None => sample0 = Some(first),
            Some(s) if *s != first => {
                return Err(format!(
                    "{name}: batch {n}: sample 0 differs from batch 1's"
                ));
            }
            Some(_) => {}
        }
        let reference = if n == 1 {
            let c = tolerance::compare(ours, &expected).map_err(|e| format!("{name}: {e}"))?;
            if !c.passed() {
                return Err(format!("{name}: batch 1 vs expected.dat: {c}"));
            }
            fixed1.run(std::slice::from_ref(&x))
        } else {
            load(m, &options(&info.name, dims(Some(n))), "fixed")?.run(std::slice::from_ref(&x))
        }
        .map_err(|e| format!("{name}: fixed batch {n}: {e}"))?;
        let c = tolerance::compare(ours, &reference[0]).map_err(|e| format!("{name}: {e}"))?;
        if !c.passed() {
            return Err(format!("{name}: batch {n} vs fixed batch {n}: {c}"));
        }
        line.push(format!("{n}: {:.1e}", c.max_abs_diff));
    }
    Ok(format!(
        "{name}: max |diff| vs fixed batch {}",
        line.join(", ")
    ))
}

#[test]
fn run_time_batch_matches_fixed_batches() {
    let mut dirs = corpus::shipped(&repo());
    match corpus::shared_dir(&repo()) {
        Some(shared) => dirs.extend(corpus::models_in(&shared)),
        None => eprintln!("skipped: ../shared/models not present (shipped models only)"),
    }
    let mut failures = Vec::new();
    for m in &dirs {
        match check_model(m) {
            Ok(line) => println!("{line}"),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Graphs that mix samples are refused at the statement that does it.
#[test]
fn graphs_that_mix_samples_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cases = [
        ("reduce", "output = sum_reduce(input, axes = [0]);"),
        ("reshape", "output = reshape(input, shape = [-1]);"),
        ("softmax", "output = softmax(input, axes = [0, 1]);"),
        (
            "pool",
            "output = max_pool(input, size = [3, 1], padding = [(1, 1), (0, 0)], border = 'ignore');",
        ),
        ("transpose", "output = transpose(input, axes = [1, 0]);"),
        (
            "attribute",
            "output = tile(input, repeats = [1, shape_of(input)[0]]);",
        ),
    ];
    let mut report = String::new();
    for (name, stmt) in cases {
        let path = dir.path().join(format!("{name}.nnef"));
        std::fs::write(
            &path,
            format!(
                "version 1.0;\nextension KHR_enable_operator_expressions;\n\ngraph G( input ) -> ( output )\n{{\n    input = external<scalar>(shape = [1, 4]);\n    {stmt}\n}}\n"
            ),
        )
        .expect("write");
        let opts = options("input", vec![None, Some(4)]);
        let err = match nnefc::compile_model(&path, &opts, Some("m")) {
            Ok(_) => panic!("{name}: accepted"),
            Err(e) => e.render(),
        };
        report += &format!(
            "--- {name}\n{}",
            err.replace(&dir.path().display().to_string(), "$DIR")
        );
    }
    expect_test::expect_file!["batch_refusals.txt"].assert_eq(&report);
}
