//! The Rust program of the `rust_program_links_every_model` test (in `examples.rs`), built
//! by `rustc` next to a model compiled with `nnefc --prefix model --emit obj,rust`: it
//! `include!`s the generated bindings, runs the model once through the safe wrapper
//! (`model::Model::infer`) on `INPUT.dat` and compares output 0 with `EXPECTED.dat` under
//! `|ours − expected| ≤ 1e-4 · max(1, max|expected|)`, and checks that `Model::with_threads`
//! at 2 and 3 threads gives byte-identical outputs. For a model compiled with external
//! weights it reads them (`nnefc_runtime::Weights::from_file`), checks that a run without
//! them is refused, and gives them to every `Model`. It is not a module of the test
//! binary, and it handles only models with one float32 input and one float32 output.
//!
//! A model compiled with a run-time batch also runs three copies of the input in one call
//! and must give the single run's bytes for each.
//!
//! Usage: `driver INPUT.dat EXPECTED.dat [WEIGHTS]`; prints the largest difference, exits non-zero on
//! a mismatch or an unreadable file.

include!("model.rs");

/// Reads a float32 NNEF `.dat` file: a 128-byte header (magic `4e ef`, rank at byte 8,
/// extents from byte 12, bits per item at 44, item code at 48) then little-endian data.
fn read_f32_dat(path: &str) -> Result<(Vec<usize>, Vec<f32>), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let word = |at: usize| -> Result<usize, String> {
        let b = bytes
            .get(at..at + 4)
            .ok_or_else(|| format!("{path}: truncated header"))?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    };
    if bytes.get(..2) != Some(&[0x4e, 0xef][..]) {
        return Err(format!("{path}: not an NNEF .dat file"));
    }
    let rank = word(8)?;
    if rank > 8 || word(44)? != 32 || word(48)? != 0 {
        return Err(format!("{path}: not a float32 tensor of rank <= 8"));
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
        return Err(format!("{path}: {} values for shape {shape:?}", data.len()));
    }
    Ok((shape, data))
}

fn check() -> Result<String, String> {
    let args: Vec<String> = std::env::args().collect();
    let (input, expected, weights_path) = match args.as_slice() {
        [_, i, e] => (i, e, None),
        [_, i, e, w] => (i, e, Some(w)),
        _ => return Err("usage: driver INPUT.dat EXPECTED.dat [WEIGHTS]".into()),
    };
    // A model compiled with external weights needs its file; one with embedded weights
    // refuses any.
    let weights = match weights_path {
        Some(p) => Some(nnefc_runtime::Weights::from_file(p).map_err(|e| format!("{p}: {e}"))?),
        None => None,
    };
    if model::WEIGHTS_EXTERNAL != weights.is_some() {
        return Err(format!("WEIGHTS_EXTERNAL is {}", model::WEIGHTS_EXTERNAL));
    }
    let with_weights = |m: model::Model| -> Result<model::Model, String> {
        match &weights {
            Some(w) => {
                let w = nnefc_runtime::Weights::from_bytes(w.as_bytes()).map_err(|e| e.to_string())?;
                m.with_weights(w).map_err(|e| e.to_string())
            }
            None => Ok(m),
        }
    };
    let (in_shape, input) = read_f32_dat(input)?;
    let (out_shape, expected) = read_f32_dat(expected)?;
    if in_shape != model::INPUT0_SHAPE || out_shape != model::OUTPUT0_SHAPE {
        // (With a run-time batch the shapes are one sample's, as the files are.)
        return Err(format!(
            "files hold {in_shape:?} -> {out_shape:?}, the model is {:?} -> {:?}",
            model::INPUT0_SHAPE,
            model::OUTPUT0_SHAPE
        ));
    }
    if model::WEIGHTS_EXTERNAL {
        // Without its weights the model says so instead of running.
        let e = model::Model::new().infer(&input).unwrap_err();
        if e != model::Error::NoWeights {
            return Err(format!("run without weights: {e}"));
        }
        // A corrupted file and another model's file get their documented statuses.
        use nnefc_runtime::{Error, Status};
        let good = weights.as_ref().map(|w| w.as_bytes().to_vec()).unwrap_or_default();
        let mut bad = good.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        if nnefc_runtime::Weights::from_bytes(&bad).err() != Some(Error::Status(Status::InvalidWeights)) {
            return Err("a corrupted weights file was not refused as InvalidWeights".into());
        }
        if model::check_weights(&bad).err() != Some(model::Error::Model(Error::Status(Status::InvalidWeights))) {
            return Err("check_weights accepted a corrupted file".into());
        }
        let (other, _) = nnefc_runtime::weights::write_file(&[&[1u8, 2, 3]]);
        let other = nnefc_runtime::Weights::from_bytes(&other).map_err(|e| e.to_string())?;
        match model::Model::new().with_weights(other) {
            Err(model::Error::Model(Error::Status(Status::WrongWeights))) => {}
            _ => return Err("another model's weights were not refused as WrongWeights".into()),
        }
    }
    let mut m = with_weights(model::Model::new())?;
    let ours = m.infer(&input).map_err(|e| e.to_string())?;
    // The same through the runtime's thread pool, at 2 and 3 threads: byte-identical.
    for threads in [2, 3] {
        let mut mt = with_weights(model::Model::with_threads(threads).map_err(|e| e.to_string())?)?;
        let theirs = mt.infer(&input).map_err(|e| e.to_string())?;
        let same = ours
            .data()
            .iter()
            .zip(theirs.data())
            .all(|(a, b)| a.to_bits() == b.to_bits());
        if !same {
            return Err(format!("{threads} threads: outputs differ from the serial run"));
        }
    }
    if model::RUNTIME_BATCH {
        // Three copies of the input in one call: every sample gives the single run's bytes.
        let three: Vec<f32> = input.iter().chain(&input).chain(&input).copied().collect();
        let out3 = m.infer(&three).map_err(|e| e.to_string())?;
        if out3.dims()[0] != 3 * model::OUTPUT0_SHAPE[0] {
            return Err(format!("batch of 3: output shape {:?}", out3.dims()));
        }
        let per = ours.data().len();
        for i in 0..3 {
            let same = out3.data()[i * per..(i + 1) * per]
                .iter()
                .zip(ours.data())
                .all(|(a, b)| a.to_bits() == b.to_bits());
            if !same {
                return Err(format!("batch of 3: sample {i} differs from the single run"));
            }
        }
        // A length that is not a whole number of samples is refused.
        if m.infer(&three[1..]).is_ok() {
            return Err("a partial sample was accepted".into());
        }
    }
    let max_ref = expected.iter().fold(0f32, |m, x| m.max(x.abs()));
    let tolerance = 1e-4 * max_ref.max(1.0);
    // `!(d <= max)` also catches NaN, which must count as a mismatch.
    let max_diff = ours
        .data()
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, |m, d| if d <= m { m } else { d });
    let line = format!(
        "max |diff| {max_diff:.3e}, tolerance {tolerance:.3e}, {} values",
        expected.len()
    );
    if max_diff <= tolerance {
        Ok(line)
    } else {
        Err(format!("MISMATCH: {line}"))
    }
}

fn main() -> std::process::ExitCode {
    match check() {
        Ok(line) => {
            println!("{line}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}
