//! Example: a model compiled at build time by `nnefc::Build` (see `build.rs`), run through
//! its generated safe bindings.
//!
//! `nnefc-example-build-rs [INPUT.dat] [--raw]` reads a float32 `.dat` tensor (default: the
//! shipped `tiny_cnn` input), runs the model on two threads at once (each with its own
//! `Model`, hence its own workspace) and prints the top-5 classes, or with `--raw` every
//! output value, one per line. It only reads plain float32 `.dat` files.

use std::error::Error;
use std::path::PathBuf;

include!(concat!(env!("OUT_DIR"), "/tiny_cnn.rs"));

/// Reads a float32 NNEF `.dat` file: a 128-byte header (magic `4e ef`, rank at byte 8,
/// extents from byte 12, bits at 44, item code at 48) followed by little-endian data.
fn read_f32_dat(path: &PathBuf) -> Result<(Vec<usize>, Vec<f32>), Box<dyn Error>> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let word = |at: usize| -> Result<usize, String> {
        let b = bytes
            .get(at..at + 4)
            .ok_or_else(|| format!("{}: truncated header", path.display()))?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    if bytes.get(..2) != Some(&[0x4e, 0xef][..]) {
        return Err(format!("{}: not an NNEF .dat file", path.display()).into());
    }
    let rank = word(8)?;
    if rank > 8 || word(44)? != 32 || word(48)? != 0 {
        return Err(format!(
            "{}: only float32 tensors of rank <= 8 are read here",
            path.display()
        )
        .into());
    }
    let shape = (0..rank)
        .map(|i| word(12 + 4 * i))
        .collect::<Result<Vec<_>, _>>()?;
    let data: Vec<f32> = bytes
        .get(128..)
        .unwrap_or_default()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if data.len() != shape.iter().product::<usize>() {
        return Err(format!(
            "{}: data length does not match the shape {shape:?}",
            path.display()
        )
        .into());
    }
    Ok((shape, data))
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let raw = args.iter().any(|a| a == "--raw");
    let path = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/tiny_cnn/input.dat")
        });
    let (shape, input) = read_f32_dat(&path)?;
    if shape != tiny_cnn::INPUT0_SHAPE {
        return Err(format!(
            "input shape {shape:?}, the model takes {:?}",
            tiny_cnn::INPUT0_SHAPE
        )
        .into());
    }

    // The inputs and outputs as the object's exported descriptor lists them at run time.
    for t in tiny_cnn::inputs() {
        eprintln!("input `{}`: {:?} {:?}", t.name, t.dtype, t.dims);
    }
    for t in tiny_cnn::outputs() {
        eprintln!("output `{}`: {:?} {:?}", t.name, t.dtype, t.dims);
    }

    // Two threads, two models (two workspaces), the same compiled code.
    let outputs = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let input = &input;
                s.spawn(move || tiny_cnn::Model::new().infer(input))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "a worker thread panicked"))
            .collect::<Result<Vec<_>, _>>()
    })?;
    let [a, b] = <[_; 2]>::try_from(outputs).map_err(|_| "expected two results")?;
    let (a, b) = (a?, b?);
    if a != b {
        return Err("the two threads disagree".into());
    }

    // The same with a fixed-size output array and the slice API.
    let mut scores = [0f32; tiny_cnn::OUTPUT0_SIZE];
    tiny_cnn::Model::new().run(&input, &mut scores)?;
    if scores[..] != a.data()[..] {
        return Err("run and infer disagree".into());
    }

    if raw {
        for v in a.data() {
            println!("{v:e}");
        }
        return Ok(());
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&i, &j| scores[j].total_cmp(&scores[i]));
    println!("top-5 of `{}` {:?}:", tiny_cnn::OUTPUT0_NAME, a.dims());
    for &k in order.iter().take(5) {
        println!("  class {k}: {:.6}", scores[k]);
    }
    Ok(())
}
