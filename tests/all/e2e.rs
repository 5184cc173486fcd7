//! End to end: every model shipped in `examples/models` and, when present, every model in
//! the shared corpus (`../shared/models` next to the repository, see `nnefc::corpus`) is compiled, loaded into
//! this process, run on its `input.dat`, and compared with `expected.dat` under
//! `|ours − expected| ≤ 1e-4 · max(1, max|expected|)`; runs with 2 and 3 worker threads
//! must give the same bytes as the serial run.
//!
//! The interpreter is not run here (it is slow on the large models); the compiled code is
//! checked against the outputs ONNX Runtime produced.

use nnefc::compiler::session::Options;
use nnefc::corpus::{self, ModelDir};
use nnefc::exec::LoadedModel;
use nnefc::{datfile, tolerance};
use std::path::PathBuf;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compiles, runs and compares one model folder; returns a one-line summary.
fn check_model(m: &ModelDir) -> Result<String, String> {
    let name = &m.name;
    let compiled = nnefc::compile_model(&m.nnef(), &Options::default(), None)
        .map_err(|e| format!("{name}: compile failed:\n{}", e.render()))?;
    let mut model = LoadedModel::load(&compiled.artifacts).map_err(|e| format!("{name}: {e}"))?;
    let input = datfile::read(&m.input()).map_err(|e| format!("{name}: {e}"))?;
    let expected = datfile::read(&m.expected()).map_err(|e| format!("{name}: {e}"))?;
    let outputs = model
        .run(std::slice::from_ref(&input))
        .map_err(|e| format!("{name}: {e}"))?;
    // Threads: the runtime pool at 2 and 3 workers gives the same bytes.
    for threads in [2, 3] {
        model
            .set_threads(threads)
            .map_err(|e| format!("{name}: {e}"))?;
        let theirs = model
            .run(std::slice::from_ref(&input))
            .map_err(|e| format!("{name}: {e}"))?;
        let bytes = |ts: &[nnefc::compiler::ir::Tensor]| {
            ts.iter().map(|t| t.to_le_bytes()).collect::<Vec<_>>()
        };
        if bytes(&outputs) != bytes(&theirs) {
            return Err(format!(
                "{name}: outputs with {threads} threads differ from the serial run"
            ));
        }
    }
    let [ours] = outputs.as_slice() else {
        return Err(format!(
            "{name}: expected one output, got {}",
            outputs.len()
        ));
    };
    let c = tolerance::compare(ours, &expected).map_err(|e| format!("{name}: {e}"))?;
    if !c.passed() {
        return Err(format!("{name}: {c}"));
    }
    // The descriptor the object exports agrees with what the compiler reported.
    let info = model.info();
    // SAFETY: nnefc descriptors have valid names and dims.
    let (inputs, outputs) = unsafe { (info.inputs(), info.outputs()) };
    let iface = model.interface();
    assert_eq!(inputs.len(), iface.inputs.len(), "{name}");
    assert_eq!(outputs.len(), iface.outputs.len(), "{name}");
    for (d, t) in inputs
        .iter()
        .chain(outputs)
        .zip(iface.inputs.iter().chain(&iface.outputs))
    {
        // SAFETY: as above.
        let (dname, dims) = unsafe { (d.name().to_string_lossy().into_owned(), d.dims().to_vec()) };
        assert_eq!(
            (dname.as_str(), dims.as_slice()),
            (t.name.as_str(), t.shape.as_slice()),
            "{name}"
        );
    }
    assert_eq!(info.workspace_size, iface.workspace_size, "{name}");
    assert_eq!(info.workspace_per_worker, iface.worker_workspace, "{name}");
    Ok(format!("{name}: {c}"))
}

fn check_all(dirs: &[ModelDir]) {
    let mut failures = Vec::new();
    for d in dirs {
        match check_model(d) {
            Ok(line) => println!("{line}"),
            Err(e) => failures.push(e),
        }
    }
    assert!(
        failures.is_empty(),
        "{} model(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn shipped_models_match_expected() {
    let dirs = corpus::shipped(&repo());
    assert!(
        dirs.len() >= 2,
        "examples/models should hold tiny_cnn and unetish: {dirs:?}"
    );
    check_all(&dirs);
}

#[test]
fn shared_models_match_expected() {
    let Some(shared) = corpus::shared_dir(&repo()) else {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            (format!("skipped: ../shared/models not present") + "\n").as_bytes(),
        );
        return;
    };
    let dirs = corpus::models_in(&shared);
    assert!(!dirs.is_empty(), "no models in {}", shared.display());
    check_all(&dirs);
}

/// Two loaded copies of one model run on two threads at once and agree.
#[test]
fn concurrent_runs_agree() {
    let dir = repo().join("examples/models/tiny_cnn");
    let compiled = nnefc::compile_model(&dir.join("model.nnef"), &Options::default(), Some("par"))
        .expect("compiles");
    let input = datfile::read(&dir.join("input.dat")).expect("input");
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let mut m = LoadedModel::load(&compiled.artifacts).expect("loads");
                let input = input.clone();
                s.spawn(move || {
                    (0..20)
                        .map(|_| m.run(std::slice::from_ref(&input)).expect("runs"))
                        .last()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    assert_eq!(results[0], results[1]);
}

/// Inputs of the wrong shape are an error, not a crash.
#[test]
fn wrong_input_is_an_error() {
    let dir = repo().join("examples/models/tiny_cnn");
    let compiled =
        nnefc::compile_model(&dir.join("model.nnef"), &Options::default(), None).expect("compiles");
    let mut m = LoadedModel::load(&compiled.artifacts).expect("loads");
    let bad = nnefc::compiler::ir::Tensor::f32(vec![1, 28, 28], vec![0.0; 784]);
    let e = m.run(&[bad]).expect_err("shape mismatch");
    expect_test::expect!["input `input` must be f32[1, 1, 28, 28], got f32[1, 28, 28]"]
        .assert_eq(&e.to_string());
}

/// Every shipped model and, when present, every shared one packs its intermediates into an
/// arena no larger than their peak of live bytes, the lower bound of any placement
/// (`passes::memory_plan`).
#[test]
fn memory_plans_reach_the_peak_live_bound() {
    let mut dirs = corpus::shipped(&repo());
    match corpus::shared_dir(&repo()) {
        Some(shared) => dirs.extend(corpus::models_in(&shared)),
        None => {
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                (format!("skipped: ../shared/models not present (shipped models only)") + "\n")
                    .as_bytes(),
            );
        }
    }
    for m in &dirs {
        let mut lowered = nnefc::compiler::front::load_and_lower(
            &m.nnef(),
            &nnefc::compiler::front::FrontOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{}: {:?}", m.name, e.diagnostics));
        nnefc::compiler::passes::optimize(&mut lowered.graph, &Default::default())
            .expect("optimizes");
        let p = nnefc::compiler::passes::memory_plan::plan(&lowered.graph).expect("plans");
        assert_eq!(p.arena_size, p.peak_live, "{}", m.name);
    }
}
