//! The `nnefc` executable: each test runs it as a user would and checks the exit code, what
//! it printed and the files it wrote. Diagnostics are compared as text (expect-test).

use crate::e2e::repo;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nnefc(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nnefc"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("nnefc runs")
}

fn tiny_cnn() -> String {
    repo()
        .join("examples/models/tiny_cnn/model.nnef")
        .display()
        .to_string()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Exit code, stdout and stderr on one string, with the scratch directory replaced.
fn summary(out: &Output, dir: &Path) -> String {
    format!(
        "exit {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr)
    )
    .replace(&dir.display().to_string(), "$DIR")
}

/// A model whose graph uses a misspelled name.
fn broken_model(dir: &Path) -> PathBuf {
    let m = dir.join("broken");
    std::fs::create_dir_all(&m).expect("mkdir");
    std::fs::write(
        m.join("graph.nnef"),
        "version 1.0;\n\ngraph g( input ) -> ( output )\n{\n    input = external<scalar>(shape = [1, 4]);\n    output = relu(inptu);\n}\n",
    )
    .expect("write graph");
    m
}

#[test]
fn default_action_writes_an_object() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = nnefc(&[&tiny_cnn(), "-o", "model.o"], dir.path());
    assert!(out.status.success(), "{}", summary(&out, dir.path()));
    let obj = std::fs::read(dir.path().join("model.o")).expect("model.o written");
    assert!(
        obj.starts_with(b"\x7fELF") || obj.len() > 4,
        "not an object"
    );
    // Nothing else is written by default.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("ls")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["model.o"]);
}

#[test]
fn emit_header_and_rust_next_to_the_object() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = nnefc(
        &[
            "compile",
            &tiny_cnn(),
            "-o",
            "out/net.o",
            "--prefix",
            "net",
            "--emit",
            "obj,header,rust,ir,dot",
        ],
        dir.path(),
    );
    // out/ does not exist: an I/O error, exit 4.
    assert_eq!(out.status.code(), Some(4), "{}", summary(&out, dir.path()));
    std::fs::create_dir(dir.path().join("out")).expect("mkdir");
    let out = nnefc(
        &[
            "compile",
            &tiny_cnn(),
            "-o",
            "out/net.o",
            "--prefix",
            "net",
            "--emit",
            "obj,header,rust,ir,dot",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", summary(&out, dir.path()));
    let read = |name: &str| std::fs::read_to_string(dir.path().join("out").join(name)).expect(name);
    let h = read("net.h");
    assert!(
        h.contains(
            "int net_run(const void *const *inputs, void *const *outputs, void *workspace);"
        ),
        "{h}"
    );
    assert!(h.contains("#define NET_INPUT0_SHAPE {1, 1, 28, 28}"), "{h}");
    let rs = read("net.rs");
    assert!(
        rs.contains("pub mod net {") && rs.contains("pub const INPUT0_DTYPE: DType = DType::F32;"),
        "{rs}"
    );
    assert!(read("net.nnefir").starts_with("nnefir 1\n"));
    assert!(read("net.dot").starts_with("digraph "));
    assert!(dir.path().join("out/net.o").is_file());
}

#[test]
fn check_prints_the_lowered_graph() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = nnefc(&["check", &tiny_cnn()], dir.path());
    assert!(out.status.success(), "{}", summary(&out, dir.path()));
    let ir = text(&out.stdout);
    assert!(
        ir.starts_with("nnefir 1\ngraph main_graph(%v0 \"input\": f32[1,1,28,28])"),
        "{ir}"
    );
    assert!(
        text(&out.stderr).contains("is a valid model (18 nodes, 1 inputs, 1 outputs)"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn broken_model_shows_the_diagnostic() {
    let dir = tempfile::tempdir().expect("temp dir");
    let m = broken_model(dir.path());
    let out = nnefc(&["check", &m.display().to_string()], dir.path());
    expect_test::expect![[r#"
        exit 1
        --- stdout
        --- stderr
        error: undeclared identifier `inptu`
          ┌─ $DIR/broken/graph.nnef:6:19
          │
        6 │     output = relu(inptu);
          │                   ^^^^^ not assigned before this use
          │
          = identifiers must be assigned (`name = ...;`) before they are used

    "#]]
    .assert_eq(&summary(&out, dir.path()));
    // The same diagnostic from the default action.
    let out = nnefc(&[&m.join("graph.nnef").display().to_string()], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("graph.nnef:6:19"));
}

#[test]
fn exit_codes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let code = |args: &[&str]| nnefc(args, dir.path()).status.code();
    let tc = tiny_cnn();
    assert_eq!(code(&["--help"]), Some(0));
    assert_eq!(code(&["check", "--help"]), Some(0));
    assert_eq!(code(&[]), Some(2), "no model");
    assert_eq!(
        code(&[&tc, "--input-shape", "oops"]),
        Some(2),
        "bad shape syntax"
    );
    assert_eq!(
        code(&["dump", "--stage", "nope", &tc]),
        Some(2),
        "bad stage"
    );
    assert_eq!(
        code(&[&tc, "--prefix", "1x"]),
        Some(3),
        "prefix is not a C identifier"
    );
    assert_eq!(
        code(&[&tc, "--target", "foo-bar-baz"]),
        Some(3),
        "unknown target"
    );
    assert_eq!(code(&["check", "no/such/model"]), Some(4), "missing model");
    let run_missing_input = nnefc(&["run", &tc], dir.path());
    assert_eq!(run_missing_input.status.code(), Some(2));
    assert!(
        text(&run_missing_input.stderr)
            .contains("missing --input input=FILE.dat (f32[1, 1, 28, 28])")
    );
}

#[test]
fn help_explains_the_options() {
    let dir = tempfile::tempdir().expect("temp dir");
    let help = text(&nnefc(&["--help"], dir.path()).stdout);
    for needle in [
        "Usage: nnefc [OPTIONS] <MODEL>",
        "--emit <KINDS>",
        "--input-shape <NAME=DIMS>",
        "--target <TRIPLE>",
        "--prefix <NAME>",
        "-O <LEVEL>",
        "Exit codes:",
        "  3  cannot generate code",
    ] {
        assert!(help.contains(needle), "--help lacks {needle:?}:\n{help}");
    }
    let run_help = text(&nnefc(&["run", "--help"], dir.path()).stdout);
    assert!(
        run_help.contains("--output-dir <DIR>") && run_help.contains("--compare <NAME=FILE>"),
        "{run_help}"
    );
}

#[test]
fn run_writes_outputs_and_compares() {
    let dir = tempfile::tempdir().expect("temp dir");
    let m = repo().join("examples/models/tiny_cnn");
    let input = format!("input={}", m.join("input.dat").display());
    let expected = m.join("expected.dat").display().to_string();
    let out = nnefc(
        &[
            "run",
            &m.join("model.nnef").display().to_string(),
            "--input",
            &input,
            "--output-dir",
            "outs",
            "--compare",
            &expected,
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", summary(&out, dir.path()));
    let ours = nnefc::datfile::read(&dir.path().join("outs/output.dat")).expect("output written");
    let reference = nnefc::datfile::read(Path::new(&expected)).expect("expected");
    assert!(
        nnefc::tolerance::compare(&ours, &reference)
            .expect("same shape")
            .passed()
    );
    assert!(
        text(&out.stdout).contains("output vs"),
        "{}",
        text(&out.stdout)
    );

    // A reference that differs: exit 6.
    let mut wrong = reference.clone();
    if let nnefc::compiler::ir::TensorData::F32(v) = &mut wrong.data {
        v[0] += 1.0;
    }
    nnefc::datfile::write(&dir.path().join("wrong.dat"), &wrong).expect("write");
    let out = nnefc(
        &[
            "run",
            &m.join("model.nnef").display().to_string(),
            "-i",
            &input,
            "--output-dir",
            "outs",
            "--compare",
            "wrong.dat",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(6), "{}", summary(&out, dir.path()));
    assert!(text(&out.stdout).contains("MISMATCH"));
}

#[test]
fn bench_and_dump() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = nnefc(
        &["bench", &tiny_cnn(), "--warmup", "1", "-n", "3"],
        dir.path(),
    );
    assert!(out.status.success(), "{}", summary(&out, dir.path()));
    assert!(
        text(&out.stdout).contains("ms per inference (3 runs after 1 warm-up"),
        "{}",
        text(&out.stdout)
    );
    for stage in ["ast", "lowered", "optimized", "plan", "kernels"] {
        let out = nnefc(&["dump", "--stage", stage, &tiny_cnn()], dir.path());
        assert!(
            out.status.success() && !out.stdout.is_empty(),
            "stage {stage}: {}",
            summary(&out, dir.path())
        );
    }
    let out = nnefc(
        &["dump", "-O0", "--stage", "optimized", &tiny_cnn()],
        dir.path(),
    );
    let lowered = nnefc(&["dump", "--stage", "lowered", &tiny_cnn()], dir.path());
    assert_eq!(
        text(&out.stdout),
        text(&lowered.stdout),
        "-O0 leaves the graph as lowered"
    );
}

/// `bench --threads` and `--profile`: the thread count is reported, the profile has a row
/// per layer with every column, and the shares add up to about 100 %.
#[test]
fn bench_threads_and_profile() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = nnefc(
        &[
            "bench",
            &tiny_cnn(),
            "--warmup",
            "1",
            "-n",
            "3",
            "--threads",
            "2",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", summary(&out, dir.path()));
    assert!(
        text(&out.stdout).contains("1 warm-up, 2 threads"),
        "{}",
        text(&out.stdout)
    );
    for per_step in [false, true] {
        let mut args = vec!["bench", "--profile", "-n", "3", "--warmup", "1"];
        if per_step {
            args.push("--per-step");
        }
        let model = tiny_cnn();
        args.push(&model);
        let out = nnefc(&args, dir.path());
        assert!(out.status.success(), "{}", summary(&out, dir.path()));
        let stdout = text(&out.stdout);
        let mut lines = stdout.lines();
        let head = lines.next().unwrap_or_default();
        let unit = if per_step { " steps" } else { " layers" };
        assert!(head.ends_with(unit), "{stdout}");
        let cols: Vec<&str> = lines
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        assert_eq!(cols, ["node", "op", "shape", "ms", "share", "GFLOP/s"]);
        let rows: Vec<&str> = lines.collect();
        assert!(
            rows.iter()
                .any(|r| r.starts_with("conv1 ") && r.contains(" conv ")),
            "{stdout}"
        );
        let share: f64 = rows
            .iter()
            .filter_map(|r| r.split_whitespace().nth(4))
            .filter_map(|s| s.trim_end_matches('%').parse::<f64>().ok())
            .sum();
        assert!(
            (share - 100.0).abs() < 1.0,
            "shares sum to {share}: {stdout}"
        );
    }
    // --per-step without --profile is a usage error.
    let out = nnefc(&["bench", "--per-step", &tiny_cnn()], dir.path());
    assert_eq!(out.status.code(), Some(2), "{}", summary(&out, dir.path()));
}

#[test]
fn input_shape_override_is_applied() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A graph whose input extent is left open is fixed on the command line.
    let m = dir.path().join("open");
    std::fs::create_dir_all(&m).expect("mkdir");
    std::fs::write(
        m.join("graph.nnef"),
        "version 1.0;\n\ngraph g( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1, 4]);\n    y = relu(x);\n}\n",
    )
    .expect("write");
    let out = nnefc(
        &["check", "--input-shape", "x=2,4", &m.display().to_string()],
        dir.path(),
    );
    assert!(out.status.success(), "{}", summary(&out, dir.path()));
    assert!(
        text(&out.stdout).contains("f32[2,4]"),
        "{}",
        text(&out.stdout)
    );
}

/// `--weights external`: the object is code only, `<stem>.weights` holds the constants,
/// the kernel dump addresses them as `weights @offset`, and `run` with the same option
/// still matches `expected.dat` (the in-process loader passes the file).
#[test]
fn external_weights_are_written_next_to_the_object() {
    let dir = tempfile::tempdir().expect("temp dir");
    let m = repo().join("examples/models/tiny_cnn");
    let model = m.join("model.nnef").display().to_string();
    let out = nnefc(
        &[&model, "--weights", "external", "-o", "net.o"],
        dir.path(),
    );
    assert!(out.status.success(), "{}", summary(&out, dir.path()));
    let weights = std::fs::read(dir.path().join("net.weights")).expect("weights written");
    assert_eq!(&weights[..8], b"NNEFCWT\0");
    assert_eq!(weights.len() % 64, 0);
    nnefc_runtime::Weights::from_bytes(&weights).expect("a valid weights file");
    let object = std::fs::metadata(dir.path().join("net.o"))
        .expect("object")
        .len();
    assert!(object < weights.len() as u64, "object {object} bytes");
    // Embedded (the default) writes no weights file.
    let out = nnefc(&[&model, "-o", "emb.o"], dir.path());
    assert!(out.status.success(), "{}", summary(&out, dir.path()));
    assert!(!dir.path().join("emb.weights").exists());

    let out = nnefc(
        &[
            "dump",
            &model,
            "--stage",
            "kernels",
            "--weights",
            "external",
        ],
        dir.path(),
    );
    let dump = text(&out.stdout);
    assert!(
        out.status.success() && dump.contains("weights @64"),
        "{dump}"
    );
    assert!(!dump.contains(" const "), "{dump}");

    let input = format!("input={}", m.join("input.dat").display());
    let expected = m.join("expected.dat").display().to_string();
    let out = nnefc(
        &[
            "run",
            &model,
            "--weights",
            "external",
            "-i",
            &input,
            "--compare",
            &expected,
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", summary(&out, dir.path()));
    assert!(text(&out.stdout).contains("match"), "{}", text(&out.stdout));
}

/// A run-time batch through the CLI: `run` takes a file of 3 samples and writes 3
/// outputs (each the single sample's), `bench --batch` times runs of several samples.
#[test]
fn run_and_bench_with_a_run_time_batch() {
    let dir = tempfile::tempdir().expect("temp dir");
    let m = repo().join("examples/models/tiny_cnn");
    let model = m.join("model.nnef").display().to_string();
    let one = nnefc::datfile::read(&m.join("input.dat")).expect("input");
    let nnefc::compiler::ir::TensorData::F32(d) = &one.data else {
        panic!("f32 input")
    };
    let three: Vec<f32> = d.iter().chain(d).chain(d).copied().collect();
    let mut shape = one.shape.clone();
    shape[0] = 3;
    nnefc::datfile::write(
        &dir.path().join("three.dat"),
        &nnefc::compiler::ir::Tensor::f32(shape, three),
    )
    .expect("write");
    let out = nnefc(
        &[
            "run",
            &model,
            "--input-shape",
            "input=?,1,28,28",
            "-i",
            "three.dat",
            "--output-dir",
            "outs",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", summary(&out, dir.path()));
    assert!(
        text(&out.stdout).contains("output: f32[3, 10]"),
        "{}",
        text(&out.stdout)
    );
    let got = nnefc::datfile::read(&dir.path().join("outs/output.dat")).expect("output");
    assert_eq!(got.shape, [3, 10]);
    let expected = nnefc::datfile::read(&m.join("expected.dat")).expect("expected");
    let (nnefc::compiler::ir::TensorData::F32(g), nnefc::compiler::ir::TensorData::F32(e)) =
        (&got.data, &expected.data)
    else {
        panic!("f32 outputs")
    };
    for s in 0..3 {
        let c = nnefc::tolerance::compare(
            &nnefc::compiler::ir::Tensor::f32(vec![1, 10], g[s * 10..(s + 1) * 10].to_vec()),
            &nnefc::compiler::ir::Tensor::f32(vec![1, 10], e.clone()),
        )
        .expect("same shape");
        assert!(c.passed(), "sample {s}: {c}");
    }
    let out = nnefc(
        &[
            "bench",
            &model,
            "--input-shape",
            "input=?,1,28,28",
            "--batch",
            "4",
            "-n",
            "3",
            "--warmup",
            "1",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", summary(&out, dir.path()));
    assert!(
        text(&out.stdout).contains("per run of 4 samples"),
        "{}",
        text(&out.stdout)
    );
    // Profiling a batch: steps repeat per sample; the table is per run of the batch.
    let out = nnefc(
        &[
            "bench",
            &model,
            "--input-shape",
            "input=?,1,28,28",
            "--batch",
            "2",
            "--profile",
            "-n",
            "3",
            "--warmup",
            "1",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", summary(&out, dir.path()));
    assert!(
        text(&out.stdout).contains("per run of 2 samples"),
        "{}",
        text(&out.stdout)
    );
    // A fixed-batch model refuses a file of 3 samples, naming the shape it needs.
    let out = nnefc(&["run", &model, "-i", "three.dat"], dir.path());
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("[1, 1, 28, 28]"),
        "{}",
        text(&out.stderr)
    );
}

/// A reader that closes the pipe early (`nnefc dump m | head -1`) ends the command quietly
/// with status 0, never with a panic (exit 101) or a signal.
#[test]
fn closed_stdout_ends_quietly() {
    let model = tiny_cnn();
    for args in [
        vec!["dump", model.as_str()],
        vec!["bench", model.as_str(), "-n", "2", "--profile"],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_nnefc"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("nnefc runs");
        // Closed before nnefc has compiled anything, so its first write finds no reader.
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("nnefc ends");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(!text(&out.stderr).contains("panicked"), "{args:?}");
    }
}
