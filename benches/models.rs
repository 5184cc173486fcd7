//! `cargo bench`: criterion benchmarks of compile time and run time per model.
//!
//! Models: the ones shipped in `examples/models` always; the shared corpus
//! (`../shared/models`, see `nnefc::corpus`) when it exists, else a message says it was
//! skipped. `compile/<model>` times `nnefc::compile_model` (front end, passes, code
//! generation, object writing); `run/<model>` times one inference of the compiled code,
//! loaded in-process, on the model's `input.dat` with preallocated outputs.
//! Comparisons with other engines are the `compare` example, not this file.

use criterion::{Criterion, criterion_group, criterion_main};
use nnefc::compiler::session::Options;
use nnefc::corpus::{self, ModelDir};
use nnefc::exec::LoadedModel;
use std::path::Path;
use std::time::Duration;

fn models() -> Vec<ModelDir> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut models = corpus::shipped(repo);
    match corpus::shared_dir(repo) {
        Some(dir) => {
            for m in corpus::models_in(&dir) {
                if !models.iter().any(|x| x.name == m.name) {
                    models.push(m);
                }
            }
        }
        None => println!("skipped shared models: ../shared/models not present"),
    }
    models
}

fn benches(c: &mut Criterion) {
    let models = models();
    let opts = Options::default();

    let mut group = c.benchmark_group("compile");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for m in &models {
        group.bench_function(&m.name, |b| {
            b.iter(|| {
                nnefc::compile_model(&m.nnef(), &opts, None).map(|c| c.artifacts.object.len())
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("run");
    // resnet18 takes ~60 ms per run: fewer samples keep the group within minutes.
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    for m in &models {
        let loaded = nnefc::compile_model(&m.nnef(), &opts, None)
            .map_err(|e| e.render())
            .and_then(|c| LoadedModel::load(&c.artifacts).map_err(|e| e.to_string()));
        let input = nnefc::datfile::read(&m.input()).map_err(|e| e.to_string());
        let (mut model, input) = match (loaded, input) {
            (Ok(model), Ok(input)) => (model, input),
            (Err(e), _) | (_, Err(e)) => {
                println!("skipped run/{}: {e}", m.name);
                continue;
            }
        };
        let inputs = [input];
        let mut outputs = model.output_buffers();
        group.bench_function(&m.name, |b| {
            b.iter(|| model.run_into(&inputs, &mut outputs))
        });
    }
    group.finish();
}

criterion_group!(models_benches, benches);
criterion_main!(models_benches);
