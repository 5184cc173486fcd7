//! The runtime's own unit tests (GEMM kernels with NEON among them, their NaN/∞ epilogues,
//! the thread pool, the ABI types) built for aarch64-linux and run under qemu:
//! `cargo test -p nnefc-runtime --release --target aarch64-unknown-linux-gnu` with the
//! cross linker and qemu as the target's runner. Without that test nothing would ever
//! compile `runtime/src/gemm/kernels/neon.rs` on an x86-64 machine. When the Rust target or
//! the cross tools are missing (`.ci/setup` installs them), the test says `skipped: ...`
//! and passes.
//!
//! The inner cargo builds into `target/aarch64-runtime`, a directory of its own: the outer
//! `cargo test` keeps its own build directory, and the two never wait for each other's lock.

use crate::e2e::repo;
use std::path::PathBuf;
use std::process::Command;

const TRIPLE: &str = "aarch64-unknown-linux-gnu";

fn skip(why: &str) {
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        (format!("skipped: {why} (run .ci/setup)") + "\n").as_bytes(),
    );
}

fn tool(name: &str) -> bool {
    Command::new(name)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The cargo that runs this test (so the inner build uses the same toolchain).
fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// The rustc next to that cargo (a rustup toolchain's `bin/`), or the one on `PATH`.
fn rustc() -> PathBuf {
    if let Ok(r) = std::env::var("RUSTC") {
        return r.into();
    }
    let beside = PathBuf::from(cargo()).with_file_name("rustc");
    if beside.is_file() {
        beside
    } else {
        "rustc".into()
    }
}

/// Whether the toolchain has the aarch64 standard library (`rustup target add`): its
/// target library directory exists and holds `libcore`.
fn rust_target_installed() -> bool {
    let Ok(out) = Command::new(rustc())
        .args(["--print", "target-libdir", "--target", TRIPLE])
        .output()
    else {
        return false;
    };
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    out.status.success()
        && std::fs::read_dir(&dir).is_ok_and(|entries| {
            entries
                .filter_map(|e| e.ok())
                .any(|e| e.file_name().to_string_lossy().starts_with("libcore-"))
        })
}

#[test]
fn runtime_unit_tests_pass_on_aarch64_under_qemu() {
    if !tool("aarch64-linux-gnu-gcc") || !tool("qemu-aarch64") {
        skip("aarch64 cross tools not installed");
        return;
    }
    if !rust_target_installed() {
        skip("Rust target aarch64-unknown-linux-gnu not installed");
        return;
    }
    let out = Command::new(cargo())
        .current_dir(repo())
        .args([
            "test",
            "-p",
            "nnefc-runtime",
            "--release",
            "--target",
            TRIPLE,
        ])
        .env("CARGO_TARGET_DIR", repo().join("target/aarch64-runtime"))
        .env(
            "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER",
            "aarch64-linux-gnu-gcc",
        )
        .env(
            "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER",
            "qemu-aarch64 -L /usr/aarch64-linux-gnu",
        )
        // Flags meant for the host build (e.g. `-C target-cpu=native`) would break the
        // cross build.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the runtime's tests failed on aarch64:\n{stdout}\n{stderr}"
    );
    // The unit-test binary really ran (not, say, an empty filter): its summary is there.
    assert!(
        stdout.contains("test gemm::tests::epilogues_propagate_nan_and_infinity ... ok"),
        "{stdout}"
    );
}
