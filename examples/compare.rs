//! `cargo run --release --example compare [MODEL...] [--budget-ms N] [--rounds R]
//! [--svg FILE] [--ort-layers N]`: times nnefc and ONNX Runtime (each at 1 thread and all
//! threads) and tract on the same models and inputs in one run, prints a table of medians
//! and ratios, and writes an SVG bar chart. With `--ort-layers N` it also prints, per model, ONNX
//! Runtime's N slowest nodes on one thread (its own profiler, mean over 100 runs), to set
//! beside `nnefc bench MODEL --profile`.
//!
//! Models: `examples/models` plus the shared corpus when present (`nnefc::corpus`);
//! name some to restrict the run. What it needs is installed on first run and cached
//! under `$NNEFC_BENCH_CACHE` (default `~/.cache/nnefc-bench`):
//! - ONNX Runtime: a Python venv (`venv/`) with `pip install onnxruntime numpy`; a small
//!   script times `session.run` on `model.onnx` with `input.dat`;
//! - tract: `cargo install tract-cli --version 0.23.9 --locked --no-default-features
//!   --features onnx --root <cache>/tract`, run as `tract model.nnef -O --machine-friendly
//!   bench -R` (single-threaded build; random input of the declared shape; it prints a
//!   mean per run, so three runs are made and their median is reported).
//!
//! nnefc runs in-process (`nnefc::exec`) on `input.dat`, serially and with the runtime's
//! thread pool at all cores (`LoadedModel::set_threads(0)`).
//!
//! Rounds: a shared machine has slow and fast phases that last seconds, longer than one
//! engine's timing. So nnefc and ONNX Runtime are timed in `R` interleaved rounds (default
//! 3; per round nnefc 1 thread, ORT 1 thread, nnefc all threads, ORT all threads, each
//! with `budget / R`), and each cell is the median of its rounds' medians: both engines
//! see the same mix of phases, and one slow phase moves a cell by at most one round.
//! tract is timed once. The per-round ratios go to stderr, so the spread is visible.
//!
//! An engine that cannot load or run a model is reported as such in the table, never
//! dropped. This is a measurement tool, not a test: numbers move by 10-20% between runs on
//! a shared machine; compare ratios within one run.

use nnefc::compiler::session::Options;
use nnefc::corpus::{self, ModelDir};
use nnefc::exec::LoadedModel;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// One engine's result on one model: a median in ms, or why there is none.
type Cell = Result<f64, String>;

const ENGINES: [&str; 5] = [
    "nnefc 1 thread",
    "nnefc all threads",
    "ORT 1 thread",
    "ORT all threads",
    "tract",
];

const ORT_SCRIPT: &str = r#"
import json, sys, time
import numpy as np
import onnxruntime as ort

def read_dat(path):
    b = open(path, "rb").read()
    u32 = lambda at: int.from_bytes(b[at:at + 4], "little")
    if b[:2] != b"\x4e\xef" or u32(44) != 32 or u32(48) != 0:
        raise SystemExit("only float32 .dat inputs are supported")
    dims = [u32(12 + 4 * i) for i in range(u32(8))]
    return np.frombuffer(b[128:], dtype="<f4", count=int(np.prod(dims))).reshape(dims)

onnx, dat, threads, budget_ms = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
if threads > 0:
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
sess = ort.InferenceSession(onnx, so, providers=["CPUExecutionProvider"])
feed = {sess.get_inputs()[0].name: read_dat(dat)}
for _ in range(10):
    sess.run(None, feed)
t = time.perf_counter(); sess.run(None, feed); one = time.perf_counter() - t
n = max(10, min(2000, int(budget_ms / 1e3 / max(one, 1e-6))))
samples = []
for _ in range(n):
    t = time.perf_counter()
    sess.run(None, feed)
    samples.append(time.perf_counter() - t)
samples.sort()
print(json.dumps({"median_ms": samples[len(samples) // 2] * 1e3, "runs": n, "version": ort.__version__}))
"#;

/// ONNX Runtime's profiler on one thread: the mean time of each node over 100 runs, the
/// `argv[3]` slowest printed as a table (node, op, output shape, ms).
const ORT_PROFILE_SCRIPT: &str = r#"
import collections, json, os, sys, tempfile
import numpy as np
import onnxruntime as ort

def read_dat(path):
    b = open(path, "rb").read()
    u32 = lambda at: int.from_bytes(b[at:at + 4], "little")
    dims = [u32(12 + 4 * i) for i in range(u32(8))]
    return np.frombuffer(b[128:], dtype="<f4", count=int(np.prod(dims))).reshape(dims)

onnx, dat, top = sys.argv[1], sys.argv[2], int(sys.argv[3])
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
so.intra_op_num_threads = 1
so.inter_op_num_threads = 1
so.enable_profiling = True
so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
sess = ort.InferenceSession(onnx, so, providers=["CPUExecutionProvider"])
feed = {sess.get_inputs()[0].name: read_dat(dat)}
runs = 100
for _ in range(runs):
    sess.run(None, feed)
events = json.load(open(sess.end_profiling()))
total = collections.defaultdict(float)
info = {}
for e in events:
    if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
        name = e["name"][: -len("_kernel_time")]
        total[name] += e["dur"]
        info[name] = (e["args"].get("op_name", "?"), e["args"].get("output_type_shape", []))
print(f"  all nodes: {sum(total.values()) / runs / 1e3:.4f} ms")
for name, us in sorted(total.items(), key=lambda x: -x[1])[:top]:
    op, shape = info[name]
    dims = "x".join(str(d) for s in shape for v in s.values() for d in v)
    print(f"  {name[-48:]:48} {op:18} {dims:18} {us / runs / 1e3:.4f} ms")
"#;

fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("NNEFC_BENCH_CACHE") {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    home.join(".cache/nnefc-bench")
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        // The error line (tract logs `[time ERROR tract] message`) and its causes, not
        // the backtrace.
        let mut lines = err
            .lines()
            .map(str::trim)
            .take_while(|l| !l.starts_with("Stack backtrace"))
            .filter(|l| !l.is_empty())
            .map(|l| {
                l.split_once("] ")
                    .filter(|(h, _)| h.starts_with('['))
                    .map_or(l, |(_, m)| m)
            })
            .collect::<Vec<_>>();
        lines.truncate(4);
        Err(format!("{} ({})", lines.join(" / "), out.status))
    }
}

/// The venv's Python with onnxruntime and numpy, installed on first use.
fn ort_python(cache: &Path) -> Result<PathBuf, String> {
    let venv = cache.join("venv");
    let python = venv.join("bin/python");
    let ready = python.is_file()
        && Command::new(&python)
            .args(["-c", "import onnxruntime, numpy"])
            .output()
            .is_ok_and(|o| o.status.success());
    if !ready {
        eprintln!(
            "installing ONNX Runtime into {} (first run only)...",
            venv.display()
        );
        run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
        run(Command::new(venv.join("bin/pip")).args([
            "install",
            "--quiet",
            "onnxruntime",
            "numpy",
        ]))?;
    }
    Ok(python)
}

/// The tract CLI, installed on first use.
fn tract(cache: &Path) -> Result<PathBuf, String> {
    let root = cache.join("tract");
    let exe = root.join("bin/tract");
    if !exe.is_file() {
        eprintln!(
            "installing tract-cli 0.23.9 into {} (first run only, takes minutes)...",
            root.display()
        );
        run(Command::new("cargo")
            .args([
                "install",
                "tract-cli",
                "--version",
                "0.23.9",
                "--locked",
                "--no-default-features",
                "--features",
                "onnx",
                "--root",
            ])
            .arg(&root))?;
    }
    Ok(exe)
}

/// A compiled and loaded nnefc model with its input, ready to time.
struct Nnefc {
    model: LoadedModel,
    inputs: [nnefc::compiler::ir::Tensor; 1],
}

fn load_nnefc(m: &ModelDir) -> Result<Nnefc, String> {
    let compiled = nnefc::compile_model(&m.nnef(), &Options::default(), None).map_err(|e| {
        let text = e.render();
        format!("failed to compile: {}", text.lines().next().unwrap_or(""))
    })?;
    let model =
        LoadedModel::load(&compiled.artifacts).map_err(|e| format!("failed to load: {e}"))?;
    let input = nnefc::datfile::read(&m.input()).map_err(|e| e.to_string())?;
    Ok(Nnefc {
        model,
        inputs: [input],
    })
}

fn time_nnefc(n: &mut Result<Nnefc, String>, threads: usize, budget_ms: f64) -> Cell {
    let n = n.as_mut().map_err(|e| e.clone())?;
    n.model.set_threads(threads).map_err(|e| e.to_string())?;
    let t = Instant::now();
    n.model.time(&n.inputs, 0, 1).map_err(|e| e.to_string())?;
    let one = t.elapsed().as_secs_f64() * 1e3;
    let iterations = ((budget_ms / one.max(1e-4)) as usize).clamp(10, 5000);
    Ok(n.model
        .time(&n.inputs, 10, iterations)
        .map_err(|e| e.to_string())?
        .median_ms)
}

/// The median of a cell's rounds, or the first round's error.
fn median_of(rounds: &[Cell]) -> Cell {
    let mut ms = Vec::with_capacity(rounds.len());
    for r in rounds {
        ms.push(r.clone()?);
    }
    ms.sort_by(f64::total_cmp);
    ms.get(ms.len() / 2)
        .copied()
        .ok_or_else(|| "no rounds".to_string())
}

fn time_ort(
    python: &Result<PathBuf, String>,
    script: &Path,
    m: &ModelDir,
    threads: usize,
    budget_ms: f64,
) -> Cell {
    let python = python.as_ref().map_err(|e| format!("not installed: {e}"))?;
    if !m.onnx().is_file() {
        return Err("no model.onnx".into());
    }
    let out = run(Command::new(python)
        .arg(script)
        .arg(m.onnx())
        .arg(m.input())
        .arg(threads.to_string())
        .arg(budget_ms.to_string()))
    .map_err(|e| format!("failed to load: {e}"))?;
    json_number(&out, "median_ms").ok_or_else(|| format!("unreadable output: {out}"))
}

fn time_tract(exe: &Result<PathBuf, String>, m: &ModelDir, budget_ms: f64) -> Cell {
    let exe = exe.as_ref().map_err(|e| format!("not installed: {e}"))?;
    let mut means = Vec::new();
    for _ in 0..3 {
        let out = run(Command::new(exe)
            .arg(m.nnef())
            .args(["-O", "--machine-friendly", "bench", "-R", "--max-time"])
            .arg(format!("{}", (budget_ms / 3.0).max(50.0) as u64)))
        .map_err(|e| format!("failed to load: {e}"))?;
        let secs = out
            .lines()
            .find_map(|l| {
                l.strip_prefix("real:")
                    .and_then(|v| v.trim().parse::<f64>().ok())
            })
            .ok_or_else(|| format!("unreadable output: {out}"))?;
        means.push(secs * 1e3);
    }
    means.sort_by(f64::total_cmp);
    Ok(means[means.len() / 2])
}

/// The number after `"key":` in a line of JSON.
fn json_number(text: &str, key: &str) -> Option<f64> {
    let at = text.find(&format!("\"{key}\""))?;
    let rest = text
        .get(at + key.len() + 2..)?
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || "+-.eE".contains(c)))
        .unwrap_or(rest.len());
    rest.get(..end)?.parse().ok()
}

fn cell_text(c: &Cell) -> String {
    match c {
        Ok(ms) => format!("{ms:.4}"),
        Err(e) if e.starts_with("failed to load") => "failed to load".into(),
        Err(e) if e.starts_with("failed to compile") => "failed to compile".into(),
        Err(e) if e.starts_with("not installed") => "not installed".into(),
        Err(_) => "failed".into(),
    }
}

fn ratio(ours: &Cell, other: &Cell) -> String {
    match (ours, other) {
        (Ok(a), Ok(b)) if *b > 0.0 => format!("{:.2}", a / b),
        _ => "-".into(),
    }
}

fn svg(rows: &[(String, Vec<Cell>)]) -> String {
    let colors = ["#3a6ea5", "#8fb3d9", "#e07b39", "#f2b134", "#5aa05a"];
    let (left, bar_h, gap, width) = (130.0, 14.0, 14.0, 520.0);
    let group_h = bar_h * ENGINES.len() as f64 + gap;
    let height = 70.0 + group_h * rows.len() as f64 + 30.0;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="Helvetica, Arial, sans-serif" font-size="11">"#,
        left + width + 150.0
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">Time per inference, ms (median; shorter is faster; bars scaled per model)</text>"#
    );
    for (k, name) in ENGINES.iter().enumerate() {
        let x = 10.0 + 130.0 * k as f64;
        let _ = writeln!(
            o,
            r#"<rect x="{x}" y="32" width="12" height="12" fill="{}"/><text x="{}" y="42">{name}</text>"#,
            colors[k],
            x + 16.0
        );
    }
    for (r, (model, cells)) in rows.iter().enumerate() {
        let y0 = 60.0 + group_h * r as f64;
        let _ = writeln!(
            o,
            r#"<text x="10" y="{}" font-weight="bold">{model}</text>"#,
            y0 + bar_h * 2.0 + 4.0
        );
        let max = cells
            .iter()
            .filter_map(|c| c.as_ref().ok())
            .fold(0f64, |m, &x| m.max(x));
        for (k, c) in cells.iter().enumerate() {
            let y = y0 + bar_h * k as f64;
            match c {
                Ok(ms) if max > 0.0 => {
                    let w = (ms / max * width).max(1.0);
                    let _ = writeln!(
                        o,
                        r#"<rect x="{left}" y="{y}" width="{w:.1}" height="{}" fill="{}"/>"#,
                        bar_h - 2.0,
                        colors[k]
                    );
                    let _ = writeln!(
                        o,
                        r#"<text x="{:.1}" y="{}">{ms:.4}</text>"#,
                        left + w + 4.0,
                        y + bar_h - 4.0
                    );
                }
                _ => {
                    let _ = writeln!(
                        o,
                        r##"<text x="{left}" y="{}" fill="#a00">{}</text>"##,
                        y + bar_h - 4.0,
                        cell_text(c)
                    );
                }
            }
        }
    }
    o.push_str("</svg>\n");
    o
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut budget_ms = 1000.0;
    let mut rounds = 3usize;
    let mut svg_path = PathBuf::from("nnefc-compare.svg");
    let mut ort_layers = 0usize;
    let mut wanted = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--budget-ms" => match it.next().and_then(|v| v.parse().ok()) {
                Some(v) => budget_ms = v,
                None => {
                    eprintln!("--budget-ms needs a number of milliseconds");
                    std::process::exit(2);
                }
            },
            "--rounds" => match it.next().and_then(|v| v.parse().ok()) {
                Some(v) if v > 0 => rounds = v,
                _ => {
                    eprintln!("--rounds needs a positive number");
                    std::process::exit(2);
                }
            },
            "--svg" => match it.next() {
                Some(v) => svg_path = PathBuf::from(v),
                None => {
                    eprintln!("--svg needs a file name");
                    std::process::exit(2);
                }
            },
            "--ort-layers" => match it.next().and_then(|v| v.parse().ok()) {
                Some(v) => ort_layers = v,
                None => {
                    eprintln!("--ort-layers needs a number of nodes");
                    std::process::exit(2);
                }
            },
            "-h" | "--help" => {
                println!(
                    "usage: cargo run --release --example compare [MODEL...] [--budget-ms N] [--rounds R] [--svg FILE] [--ort-layers N]"
                );
                return;
            }
            name => wanted.push(name.to_string()),
        }
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut models = corpus::shipped(repo);
    match corpus::shared_dir(repo) {
        Some(dir) => {
            for m in corpus::models_in(&dir) {
                if let Some(k) = models.iter().position(|x| x.name == m.name) {
                    models[k] = m; // the shared copy is the reference
                } else {
                    models.push(m);
                }
            }
        }
        None => {
            eprintln!("shared models: ../shared/models not present; timing the shipped models only")
        }
    }
    if !wanted.is_empty() {
        models.retain(|m| wanted.contains(&m.name));
    }
    if models.is_empty() {
        eprintln!("no models to time");
        std::process::exit(2);
    }

    let cache = cache_dir();
    if let Err(e) = std::fs::create_dir_all(&cache) {
        eprintln!("cannot create {}: {e}", cache.display());
        std::process::exit(4);
    }
    let python = ort_python(&cache);
    let tract = tract(&cache);
    let script = cache.join("time_ort.py");
    let python = python.and_then(|p| {
        std::fs::write(&script, ORT_SCRIPT)
            .map(|_| p)
            .map_err(|e| e.to_string())
    });
    for (what, r) in [
        ("ONNX Runtime", python.as_ref().map(|_| ())),
        ("tract", tract.as_ref().map(|_| ())),
    ] {
        if let Err(e) = r {
            eprintln!("{what} is not available: {e}");
        }
    }
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);

    let mut rows = Vec::new();
    for m in &models {
        eprintln!("timing {} ...", m.name);
        // Per round: nnefc 1 thread, ORT 1 thread, nnefc all, ORT all (see the module doc).
        let mut nnefc = load_nnefc(m);
        let per_round = budget_ms / rounds as f64;
        let mut timed: [Vec<Cell>; 4] = Default::default();
        for round in 0..rounds {
            timed[0].push(time_nnefc(&mut nnefc, 1, per_round));
            timed[2].push(time_ort(&python, &script, m, 1, per_round));
            timed[1].push(time_nnefc(&mut nnefc, threads, per_round));
            timed[3].push(time_ort(&python, &script, m, 0, per_round));
            if rounds > 1 {
                let r = |i: usize, j: usize| ratio(&timed[i][round], &timed[j][round]);
                eprintln!(
                    "  round {}: 1 thr nnefc/ORT {}, all {}",
                    round + 1,
                    r(0, 2),
                    r(1, 3)
                );
            }
        }
        let mut cells: Vec<Cell> = timed.iter().map(|t| median_of(t)).collect();
        cells.push(time_tract(&tract, m, budget_ms));
        for (engine, c) in ENGINES.iter().zip(&cells) {
            if let Err(e) = c {
                eprintln!("  {engine}: {e}");
            }
        }
        rows.push((m.name.clone(), cells));
    }

    println!("\nmedian ms per inference (tract: 1 thread; all threads = {threads})\n");
    println!(
        "| model | {} | 1 thr: nnefc/ORT | all: nnefc/ORT | nnefc/tract (1 thr) | nnefc speed-up |",
        ENGINES.join(" | ")
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, c) in &rows {
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell_text(&c[0]),
            cell_text(&c[1]),
            cell_text(&c[2]),
            cell_text(&c[3]),
            cell_text(&c[4]),
            ratio(&c[0], &c[2]),
            ratio(&c[1], &c[3]),
            ratio(&c[0], &c[4]),
            ratio(&c[1], &c[0])
                .parse::<f64>()
                .map_or("-".into(), |r| format!("{:.2}×", 1.0 / r))
        );
    }
    println!("\nratios < 1: nnefc is faster.");
    if ort_layers > 0 {
        let profiler = cache.join("profile_ort.py");
        match (&python, std::fs::write(&profiler, ORT_PROFILE_SCRIPT)) {
            (Ok(py), Ok(())) => {
                for m in models.iter().filter(|m| m.onnx().is_file()) {
                    println!(
                        "\nONNX Runtime's {ort_layers} slowest nodes of {} (1 thread):",
                        m.name
                    );
                    match run(Command::new(py)
                        .arg(&profiler)
                        .arg(m.onnx())
                        .arg(m.input())
                        .arg(ort_layers.to_string()))
                    {
                        Ok(out) => print!("{out}"),
                        Err(e) => println!("  failed: {e}"),
                    }
                }
            }
            (Err(e), _) => eprintln!("no ONNX Runtime node profile: {e}"),
            (_, Err(e)) => eprintln!("cannot write {}: {e}", profiler.display()),
        }
    }
    match std::fs::write(&svg_path, svg(&rows)) {
        Ok(()) => println!("chart: {}", svg_path.display()),
        Err(e) => eprintln!("cannot write {}: {e}", svg_path.display()),
    }
}
