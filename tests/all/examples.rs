//! The examples as a user builds them: `examples/c` through its Makefile (nnefc binary +
//! runtime static library + cc), and `examples/build-rs` through Cargo (`nnefc::Build` in a
//! build script). Both are run on the shipped `tiny_cnn` input and checked against its
//! `expected.dat`.

use crate::e2e::repo;
use nnefc::compiler::ir::Tensor;
use std::path::{Path, PathBuf};
use std::process::Command;

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
        println!("skipped: make or cc not installed");
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
