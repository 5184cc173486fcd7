//! Shared models through the back-end harness: correctness against expected.dat and the
//! median run time of the entry point (ignored: a measuring tool for back-end work,
//! `cargo test -p nnefc-compiler --lib shared_models_smoke -- --ignored --nocapture`;
//! the end-to-end tests live in the root crate's test binary).

use super::harness::{load, opts};
use crate::front::{self, FrontOptions};
use crate::ir::Tensor;

#[test]
#[ignore]
fn shared_models_smoke() {
    // `NNEFC_MODELS` overrides the location (worktrees live elsewhere than /work/main).
    let root = match std::env::var_os("NNEFC_MODELS") {
        Some(d) => std::path::PathBuf::from(d),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/models"),
    };
    let mut names: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    names.sort();
    // `NNEFC_SMOKE_ONLY=a,b` restricts the run to those models.
    if let Ok(only) = std::env::var("NNEFC_SMOKE_ONLY") {
        names.retain(|n| only.split(',').any(|o| o == n));
    }
    for name in names {
        let dir = root.join(&name);
        let mut lowered =
            match front::load_and_lower(&dir.join("model.nnef"), &FrontOptions::default()) {
                Ok(l) => l,
                Err(e) => {
                    println!("{name}: FRONT {}", e.render());
                    continue;
                }
            };
        crate::passes::optimize(&mut lowered.graph, &Default::default()).unwrap();
        let t0 = std::time::Instant::now();
        let loaded = std::panic::catch_unwind(|| load(&lowered.graph, &opts(&name)));
        let Ok(loaded) = loaded else {
            println!("{name}: COMPILE FAILED");
            continue;
        };
        let ct = t0.elapsed();
        // `NNEFC_DUMP_KERNELS=DIR` writes each model's kernel program to DIR/NAME.kernels.
        if let Some(d) = std::env::var_os("NNEFC_DUMP_KERNELS") {
            let _ = std::fs::write(
                std::path::Path::new(&d).join(format!("{name}.kernels")),
                &loaded.art.kernels,
            );
        }
        let input = front::dat::read_dat(&std::fs::read(dir.join("input.dat")).unwrap())
            .unwrap()
            .data;
        let expected = front::dat::read_dat(&std::fs::read(dir.join("expected.dat")).unwrap())
            .unwrap()
            .data;
        let out: Vec<Tensor> = loaded.run(&[input.clone()]).unwrap();
        let iters = std::env::var("NNEFC_SMOKE_ITERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20);
        let (rt, cpu) = loaded.time_stats(&[input.clone()], iters);
        let (g, w) = (out[0].as_f32().unwrap(), expected.as_f32().unwrap());
        let scale = w.iter().fold(1.0f32, |m, v| m.max(v.abs()));
        let err = g
            .iter()
            .zip(w)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        println!(
            "{name}: compile {ct:?} run {rt:?} (cpu {cpu:?}) maxerr {err:e} ok={}",
            err <= 1e-4 * scale
        );
    }
}
