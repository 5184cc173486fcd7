//! Hostile inputs through the `nnefc` executable, one per resource class (archives,
//! files, special files, expansion, sizes, options): each must end with the documented
//! exit code and a message that names the problem, quickly, and within a bounded
//! address space (`ulimit -v`), so that a regression to "read it all first" fails here
//! instead of swapping. Big inputs are made on the fly: sparse files cost no disk.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Address-space limit for the runs, in KiB: room for the binary, the front end's
/// reserved stack and a real model, far below what any of these inputs would take if
/// read or expanded whole.
const ADDRESS_SPACE_KIB: u64 = 3 << 20;

fn nnefc_limited(args: &[&str], cwd: &Path) -> (Output, Duration) {
    let start = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {ADDRESS_SPACE_KIB} && exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_nnefc"))
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("sh runs");
    (out, start.elapsed())
}

fn mkfifo(p: &Path) {
    let ok = Command::new("mkfifo")
        .arg(p)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "mkfifo {}", p.display());
}

/// A `.dat` header for `n` f32 items, followed by `len` bytes of file in total (sparse).
fn sparse_dat(path: &Path, n: usize, len: u64) {
    let t = nnefc::compiler::ir::Tensor::f32(vec![n], vec![0.0; n]);
    let mut bytes =
        nnefc::compiler::front::dat::write_dat(&t, nnefc::datfile::item_type(t.dtype()))
            .expect("dat");
    bytes.truncate(nnefc::compiler::front::dat::HEADER_LEN);
    std::fs::write(path, bytes).expect("write");
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|f| f.set_len(len))
        .expect("set_len");
}

/// A gzip-compressed tar whose one entry's header claims 3 GiB.
fn header_bomb(path: &Path) {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_path("w.dat").expect("path");
    h.set_size(3 << 30);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    b.append(&h, &b"abc"[..]).expect("append");
    let tar = b.into_inner().expect("tar");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &tar).expect("gzip");
    std::fs::write(path, gz.finish().expect("gzip")).expect("write");
}

fn model(dir: &Path, name: &str, graph: &str) -> String {
    let m = dir.join(name);
    std::fs::create_dir_all(&m).expect("mkdir");
    std::fs::write(m.join("graph.nnef"), graph).expect("write");
    m.display().to_string()
}

const SMALL: &str = "version 1.0;\ngraph g( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1, 4]);\n    y = relu(x);\n}\n";

#[test]
fn hostile_inputs_fail_fast_with_a_message() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    let small = model(dir, "small", SMALL);
    header_bomb(&dir.join("bomb.tgz"));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, SMALL.as_bytes()).expect("gzip");
    std::fs::write(dir.join("graph.nnef.gz"), gz.finish().expect("gzip")).expect("write");
    mkfifo(&dir.join("model.fifo"));
    mkfifo(&dir.join("input.fifo"));
    sparse_dat(&dir.join("huge_input.dat"), 4, 3 << 30);
    let weights = model(
        dir,
        "weights",
        "version 1.0;\ngraph g( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1, 4]);\n    w = variable<scalar>(shape = [1, 4], label = 'w');\n    y = add(x, w);\n}\n",
    );
    sparse_dat(&Path::new(&weights).join("w.dat"), 4, 3 << 30);
    let huge_graph = dir.join("huge_graph");
    std::fs::create_dir_all(&huge_graph).expect("mkdir");
    std::fs::File::create(huge_graph.join("graph.nnef"))
        .and_then(|f| f.set_len(2 << 30))
        .expect("sparse graph");
    let padding = model(
        dir,
        "padding",
        "version 1.0;\ngraph g( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1, 4]);\n    y = pad(x, padding = [(0, 0), (4611686018427387904, 4611686018427387904)]);\n}\n",
    );
    let expansion = model(
        dir,
        "expansion",
        "version 1.0;\nextension KHR_enable_fragment_definitions, KHR_enable_operator_expressions;\n\
         fragment twice(x: tensor<scalar>, n: integer) -> (y: tensor<scalar>)\n\
         { y = twice(x, n = n - 1) + twice(x, n = n - 1) if n > 0 else x; }\n\
         graph g( x ) -> ( y )\n{\n    x = external<scalar>(shape = [1, 4]);\n    y = twice(x, n = 64);\n}\n",
    );
    let cases: Vec<(&str, Vec<String>, i32, &str)> = vec![
        (
            "gzip bomb",
            vec!["check".into(), "bomb.tgz".into()],
            1,
            "refused as a decompression bomb",
        ),
        (
            "gzip that is not a tar",
            vec!["check".into(), "graph.nnef.gz".into()],
            1,
            "is gzip-compressed but does not hold a tar archive",
        ),
        (
            "FIFO as the model",
            vec!["check".into(), "model.fifo".into()],
            1,
            "is a FIFO, not a regular file",
        ),
        (
            "2 GiB graph.nnef",
            vec!["check".into(), "huge_graph".into()],
            1,
            "bytes, more than the 268435456 bytes allowed",
        ),
        (
            "3 GiB .dat whose header says 16 bytes",
            vec!["check".into(), weights.clone()],
            1,
            "header says 4 items of float32 (16 bytes) but the file has",
        ),
        (
            "FIFO as an input",
            vec![
                "run".into(),
                small.clone(),
                "-i".into(),
                "x=input.fifo".into(),
                "--output-dir".into(),
                "out".into(),
            ],
            4,
            "is a FIFO, not a regular file",
        ),
        (
            "3 GiB input whose header says 16 bytes",
            vec![
                "run".into(),
                small.clone(),
                "-i".into(),
                "x=huge_input.dat".into(),
                "--output-dir".into(),
                "out".into(),
            ],
            4,
            "header says 4 items of float32 (16 bytes) but the file has",
        ),
        (
            "absurd padding",
            vec!["check".into(), padding],
            1,
            "would take more than 2^64 bytes, more than the 16 GiB allowed for one tensor",
        ),
        (
            "fragment that doubles per level",
            vec!["check".into(), expansion],
            1,
            "expanding `twice` creates more than 1048576 fragment calls",
        ),
        (
            "--input-shape for a name that is not an input",
            vec![
                "check".into(),
                small.clone(),
                "--input-shape".into(),
                "nope=1,4".into(),
            ],
            2,
            "an input shape is given for `nope`, which is not an input of graph `g`",
        ),
    ];
    let mut failures = Vec::new();
    for (what, args, code, message) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (out, took) = nnefc_limited(&args, dir);
        let stderr = String::from_utf8_lossy(&out.stderr);
        // A debug build expands 2^20 fragment calls in several seconds; everything else
        // is refused before any real work.
        if out.status.code() != Some(code) || !stderr.contains(message) || took.as_secs() > 60 {
            failures.push(format!(
                "{what}: exit {:?} after {took:?} (expected {code}, \"{message}\")\n{stderr}",
                out.status.code()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
