//! The examples as a user builds them: `examples/c` through its Makefile (nnefc binary +
//! runtime static library + cc), and `examples/build-rs` through Cargo (`nnefc::Build` in a
//! build script). Both are run on the shipped `tiny_cnn` input and checked against its
//! `expected.dat`. `examples/graph-build` (a CNN built with `nnefc::graph` in its build
//! script) is built and run the same way; it checks its own output.
//!
//! Then every shipped and shared model (`nnefc::corpus`) the way a user links one: compiled
//! by the `nnefc` binary, linked statically (no dlopen) into the C program of `examples/c`
//! and into a Rust program around the generated bindings (`link_driver.rs`, built by
//! `rustc`), each run on `input.dat` and checked against `expected.dat` by the program
//! itself. Each model is compiled once for both linking tests.

use crate::e2e::repo;
use nnefc::compiler::ir::Tensor;
use nnefc::corpus::{self, ModelDir};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Instant;

/// The directory of the executables of this build (`target/debug` or `target/release`).
fn bin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nnefc"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Runs `cargo build` for `packages` in the profile this test binary was built with.
fn cargo_build(packages: &[&str]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build").current_dir(repo());
    for p in packages {
        cmd.args(["-p", p]);
    }
    if bin_dir().file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    // The executables of this build live in bin_dir; build the others into the same place.
    if let Some(target) = bin_dir().parent() {
        cmd.env("CARGO_TARGET_DIR", target);
    }
    let out = cmd.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo build {packages:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn tool_exists(name: &str) -> bool {
    Command::new(name)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn expected_tiny_cnn() -> Vec<f32> {
    let t: Tensor = nnefc::datfile::read(&repo().join("examples/models/tiny_cnn/expected.dat"))
        .expect("expected.dat");
    t.as_f32().expect("f32 output").to_vec()
}

fn tolerance_ok(ours: &[f32], expected: &[f32]) -> bool {
    let max = expected.iter().fold(0f32, |m, x| m.max(x.abs()));
    ours.len() == expected.len()
        && ours
            .iter()
            .zip(expected)
            .all(|(a, b)| (a - b).abs() <= 1e-4 * max.max(1.0))
}

#[test]
fn c_example_prints_the_expected_top5() {
    if !tool_exists("make") || !tool_exists("cc") {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            (format!("skipped: make or cc not installed") + "\n").as_bytes(),
        );
        return;
    }
    cargo_build(&["nnefc-runtime"]);
    let build = tempfile::tempdir().expect("temp dir");
    let out = Command::new("make")
        .current_dir(repo().join("examples/c"))
        .arg(format!("NNEFC={}", env!("CARGO_BIN_EXE_nnefc")))
        .arg(format!(
            "RUNTIME={}",
            bin_dir().join("libnnefc_runtime.a").display()
        ))
        .arg(format!("BUILD={}", build.path().display()))
        .output()
        .expect("make runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "make failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // "  class 3: -1.994958" lines, best first.
    let top: Vec<(usize, f32)> = stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("class "))
        .filter_map(|l| l.split_once(": "))
        .filter_map(|(k, v)| Some((k.parse().ok()?, v.parse().ok()?)))
        .collect();
    let expected = expected_tiny_cnn();
    let mut order: Vec<usize> = (0..expected.len()).collect();
    order.sort_by(|&i, &j| expected[j].total_cmp(&expected[i]));
    assert_eq!(
        top.iter().map(|t| t.0).collect::<Vec<_>>(),
        order[..5],
        "{stdout}"
    );
    for (k, v) in &top {
        assert!(
            (v - expected[*k]).abs() <= 1e-4 * 2.8,
            "class {k}: {v} vs {}",
            expected[*k]
        );
    }
    assert!(stdout.contains("ms per inference"), "{stdout}");
}

#[test]
fn build_rs_example_matches_expected() {
    cargo_build(&["nnefc-example-build-rs"]);
    let exe = bin_dir().join("nnefc-example-build-rs");
    let out = Command::new(&exe)
        .arg("--raw")
        .output()
        .expect("example runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ours: Vec<f32> = stdout
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    let expected = expected_tiny_cnn();
    assert!(
        tolerance_ok(&ours, &expected),
        "ours {ours:?}\nexpected {expected:?}"
    );
    // Without --raw it prints the top-5.
    let out = Command::new(&exe).output().expect("example runs");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("top-5 of `output` [1, 10]:"));
}

/// `examples/graph-build`: a CNN built with `nnefc::graph` in a build script, compiled by
/// `nnefc::Build`; the program checks itself against a plain Rust forward pass.
#[test]
fn graph_build_example_prints_probabilities() {
    cargo_build(&["nnefc-example-graph-build"]);
    let exe = bin_dir().join("nnefc-example-graph-build");
    let out = Command::new(&exe).output().expect("example runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let probs: Vec<f32> = stdout
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert_eq!(probs.len(), 3, "{stdout}");
    assert!(probs.iter().all(|p| *p > 0.0 && *p < 1.0), "{stdout}");
    assert!((probs.iter().sum::<f32>() - 1.0).abs() < 1e-5, "{stdout}");
}

/// A model compiled by the `nnefc` binary for the linking tests: `model.o`, `model.h` and
/// `model.rs` (prefix `model`) in `dir`.
struct Compiled {
    /// `examples/tiny_cnn` or `shared/resnet18`.
    label: String,
    model: ModelDir,
    /// `model.o`, `.h`, `.rs` with embedded weights, in `ext/` the same compiled with
    /// `--weights external` (plus `model.weights`), in `batch/` with a run-time batch.
    dir: PathBuf,
    /// Seconds `nnefc` took (all three compiles).
    compile_secs: f64,
}

fn output_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `cmd`; an error (with everything it printed) unless it exits with status 0.
fn run_ok(cmd: &mut Command, what: &str) -> Result<Output, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run: {e}"))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "{what} failed ({}):\n{}",
            out.status,
            output_text(&out)
        ))
    }
}

/// `NAME=?,d1,d2,...` for input 0 of a compiled model, from its header (`MODEL_INPUT0_NAME`,
/// `MODEL_INPUT0_SHAPE`): the run-time batch variant of the model.
fn batch_spec(header: &Path) -> Option<String> {
    let h = std::fs::read_to_string(header).ok()?;
    let value = |key: &str| {
        h.lines()
            .find_map(|l| l.strip_prefix(&format!("#define MODEL_INPUT0_{key} ")))
            .map(|v| v.split("/*").next().unwrap_or("").trim().to_string())
    };
    let name = value("NAME")?.trim_matches('"').to_string();
    let shape = value("SHAPE")?;
    let dims: Vec<&str> = shape
        .trim_matches(['{', '}'])
        .split(',')
        .map(str::trim)
        .collect();
    Some(format!("{name}=?,{}", dims.get(1..)?.join(",")))
}

/// The three builds of each model the link tests run: embedded weights, external weights,
/// run-time batch.
fn variants(m: &Compiled) -> [(PathBuf, &'static str); 3] {
    [
        (m.dir.clone(), "embedded"),
        (m.dir.join("ext"), "external"),
        (m.dir.join("batch"), "batch"),
    ]
}

/// Every shipped model and, when `../shared/models` is present, every shared one, each
/// compiled once per test run (whichever linking test comes first compiles, the other
/// waits) into `<target>/<profile>/e2e-link/<label>/`.
fn compiled_models() -> &'static [Result<Compiled, String>] {
    static COMPILED: OnceLock<Vec<Result<Compiled, String>>> = OnceLock::new();
    COMPILED.get_or_init(|| {
        let mut models: Vec<(String, ModelDir)> = corpus::shipped(&repo())
            .into_iter()
            .map(|m| (format!("examples/{}", m.name), m))
            .collect();
        if let Some(shared) = corpus::shared_dir(&repo()) {
            models.extend(
                corpus::models_in(&shared)
                    .into_iter()
                    .map(|m| (format!("shared/{}", m.name), m)),
            );
        }
        let root = bin_dir().join("e2e-link");
        models
            .into_iter()
            .map(|(label, model)| {
                let dir = root.join(label.replace('/', "-"));
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                let t0 = Instant::now();
                run_ok(
                    Command::new(env!("CARGO_BIN_EXE_nnefc"))
                        .arg(model.nnef())
                        .args(["--prefix", "model", "--emit", "obj,header,rust", "-o"])
                        .arg(dir.join("model.o")),
                    &format!("{label}: nnefc"),
                )?;
                let ext = dir.join("ext");
                std::fs::create_dir_all(&ext).map_err(|e| format!("{}: {e}", ext.display()))?;
                run_ok(
                    Command::new(env!("CARGO_BIN_EXE_nnefc"))
                        .arg(model.nnef())
                        .args(["--prefix", "model", "--emit", "obj,header,rust"])
                        .args(["--weights", "external", "-o"])
                        .arg(ext.join("model.o")),
                    &format!("{label}: nnefc --weights external"),
                )?;
                let batch = dir.join("batch");
                std::fs::create_dir_all(&batch).map_err(|e| format!("{}: {e}", batch.display()))?;
                let spec = batch_spec(&dir.join("model.h"))
                    .ok_or_else(|| format!("{label}: no input name or shape in model.h"))?;
                run_ok(
                    Command::new(env!("CARGO_BIN_EXE_nnefc"))
                        .arg(model.nnef())
                        .args(["--prefix", "model", "--emit", "obj,header,rust"])
                        .args(["--input-shape", &spec, "-o"])
                        .arg(batch.join("model.o")),
                    &format!("{label}: nnefc --input-shape {spec}"),
                )?;
                Ok(Compiled {
                    label,
                    model,
                    dir,
                    compile_secs: t0.elapsed().as_secs_f64(),
                })
            })
            .collect()
    })
}

fn shared_skip_notice() {
    if corpus::shared_dir(&repo()).is_none() {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            (format!("skipped: ../shared/models not present (shipped models only)") + "\n")
                .as_bytes(),
        );
    }
}

/// Runs `link_and_run` on every compiled model, printing one line per model (with the
/// seconds nnefc took, then those linking and running took); fails with every model's
/// error at the end.
fn for_every_model(link_and_run: impl Fn(&Compiled) -> Result<String, String>) {
    shared_skip_notice();
    let models = compiled_models();
    assert!(models.len() >= 2, "no models found");
    let mut failures = Vec::new();
    for m in models {
        let t0 = Instant::now();
        match m
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|m| link_and_run(m).map(|line| (line, m.compile_secs)))
        {
            Ok((line, compile)) => println!(
                "{line} (nnefc {compile:.1} s, link+run {:.1} s)",
                t0.elapsed().as_secs_f64()
            ),
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

/// `examples/c/main.c` linked with each model's object and `libnnefc_runtime.a`, run on
/// `input.dat` with `expected.dat` (the program compares and exits non-zero on a mismatch).
#[test]
fn c_program_links_every_model() {
    if !tool_exists("cc") {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            (format!("skipped: cc not installed") + "\n").as_bytes(),
        );
        return;
    }
    cargo_build(&["nnefc-runtime"]);
    let runtime = bin_dir().join("libnnefc_runtime.a");
    let main_c = repo().join("examples/c/main.c");
    for_every_model(|m| {
        let mut verdicts = Vec::new();
        for (dir, kind) in variants(m) {
            let exe = dir.join("main-c");
            run_ok(
                Command::new("cc")
                    .args(["-O2", "-Wall", "-Wextra", "-std=c11", "-I"])
                    .arg(&dir)
                    .arg(&main_c)
                    .arg(dir.join("model.o"))
                    .arg(&runtime)
                    .args(["-lm", "-lpthread", "-ldl", "-o"])
                    .arg(&exe),
                &format!("{}: cc", m.label),
            )?;
            // One timed run after main.c's warm-up runs: this checks results, not speed. With
            // 2 and 3 threads the program also checks its outputs against a serial run.
            for threads in ["1", "2", "3"] {
                let out = run_ok(
                    Command::new(&exe)
                        .arg(m.model.input())
                        .arg("1")
                        .arg(m.model.expected())
                        .arg(threads)
                        .arg(dir.join("model.weights")),
                    &format!(
                        "{}: C program ({kind} weights), {threads} thread(s)",
                        m.label
                    ),
                )?;
                let stdout = String::from_utf8_lossy(&out.stdout);
                let verdict = stdout
                    .lines()
                    .find(|l| l.starts_with("expected: match"))
                    .ok_or_else(|| format!("{}: no match line:\n{stdout}", m.label))?;
                if threads != "1" && !stdout.contains("byte-identical to the serial run") {
                    return Err(format!("{}: {threads} threads:\n{stdout}", m.label));
                }
                if kind == "external" && !stdout.contains("weights: ") {
                    return Err(format!("{}: external weights not read:\n{stdout}", m.label));
                }
                if kind == "batch" && !stdout.contains("each byte-identical to the single run") {
                    return Err(format!(
                        "{}: run-time batch not checked:\n{stdout}",
                        m.label
                    ));
                }
                verdicts.push(format!("{kind} {threads} thr: {verdict}"));
            }
        }
        Ok(format!("C    {}: {}", m.label, verdicts.join("; ")))
    });
}

/// A Rust program (`link_driver.rs`) that `include!`s each model's generated bindings,
/// built by `rustc` against the runtime rlib with the object as a link argument, run on
/// `input.dat` and `expected.dat`.
#[test]
fn rust_program_links_every_model() {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    if !Command::new(&rustc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            (format!("skipped: rustc not installed") + "\n").as_bytes(),
        );
        return;
    }
    cargo_build(&["nnefc-runtime"]);
    let rlib = bin_dir().join("libnnefc_runtime.rlib");
    let deps = bin_dir().join("deps");
    for_every_model(|m| {
        let mut lines = Vec::new();
        for (dir, kind) in variants(m) {
            let src = dir.join("driver.rs");
            std::fs::write(&src, include_str!("link_driver.rs"))
                .map_err(|e| format!("{}: {e}", src.display()))?;
            let exe = dir.join("main-rs");
            run_ok(
                Command::new(&rustc)
                    .current_dir(&dir)
                    .args(["--edition", "2024", "-C", "debuginfo=0"])
                    .arg(&src)
                    .arg("-o")
                    .arg(&exe)
                    .arg("-C")
                    .arg(format!("link-arg={}", dir.join("model.o").display()))
                    .arg("--extern")
                    .arg(format!("nnefc_runtime={}", rlib.display()))
                    .arg("-L")
                    .arg(format!("dependency={}", deps.display())),
                &format!("{}: rustc", m.label),
            )?;
            let mut cmd = Command::new(&exe);
            cmd.arg(m.model.input()).arg(m.model.expected());
            if kind == "external" {
                cmd.arg(dir.join("model.weights"));
            }
            let out = run_ok(&mut cmd, &format!("{}: Rust program ({kind})", m.label))?;
            lines.push(format!(
                "{kind}: {}",
                String::from_utf8_lossy(&out.stdout).trim()
            ));
        }
        Ok(format!("Rust {}: {}", m.label, lines.join("; ")))
    });
}
