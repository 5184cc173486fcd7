//! Example: a CNN built in Rust with `nnefc::graph` and compiled at build time (see
//! `build.rs`), run through its generated safe bindings.
//!
//! `nnefc-example-graph-build` runs the model on a deterministic input (`net::input`),
//! prints the three class probabilities one per line, and fails (non-zero exit) unless
//! they sum to 1 within 1e-5 and agree with a plain Rust forward pass over the same
//! weights. It takes no arguments and reads no files.

use std::error::Error;

mod net;

include!(concat!(env!("OUT_DIR"), "/small_cnn.rs"));

/// The network written out by hand: 3x3 conv (padding 1) + bias, relu, 2x2 max pool
/// (stride 2), flatten in `[C, H, W]` order, linear + bias, softmax.
fn reference(input: &[f32]) -> Vec<f32> {
    let (h, w) = (net::INPUT[2], net::INPUT[3]);
    let (filter, bias) = (net::conv_filter(), net::conv_bias());
    let mut conv = vec![0f32; net::CHANNELS * h * w];
    for c in 0..net::CHANNELS {
        for y in 0..h {
            for x in 0..w {
                let mut s = bias[c];
                for ky in 0..3 {
                    for kx in 0..3 {
                        let (iy, ix) = ((y + ky) as isize - 1, (x + kx) as isize - 1);
                        if (0..h as isize).contains(&iy) && (0..w as isize).contains(&ix) {
                            s += filter[c * 9 + ky * 3 + kx] * input[iy as usize * w + ix as usize];
                        }
                    }
                }
                conv[(c * h + y) * w + x] = s.max(0.0);
            }
        }
    }
    let (ph, pw) = (h / 2, w / 2);
    let mut pooled = vec![0f32; net::FEATURES];
    for c in 0..net::CHANNELS {
        for y in 0..ph {
            for x in 0..pw {
                let at = |dy: usize, dx: usize| conv[(c * h + 2 * y + dy) * w + 2 * x + dx];
                pooled[(c * ph + y) * pw + x] = at(0, 0).max(at(0, 1)).max(at(1, 0)).max(at(1, 1));
            }
        }
    }
    let (fw, fb) = (net::linear_filter(), net::linear_bias());
    let logits: Vec<f32> = (0..net::CLASSES)
        .map(|k| {
            fb[k]
                + (0..net::FEATURES)
                    .map(|i| fw[k * net::FEATURES + i] * pooled[i])
                    .sum::<f32>()
        })
        .collect();
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let exps: Vec<f32> = logits.iter().map(|v| (v - max).exp()).collect();
    let total: f32 = exps.iter().sum();
    exps.iter().map(|e| e / total).collect()
}

fn main() -> Result<(), Box<dyn Error>> {
    let input = net::input();
    let mut probs = [0f32; small_cnn::OUTPUT0_SIZE];
    small_cnn::Model::new().run(&input, &mut probs)?;
    for p in &probs {
        println!("{p:.6}");
    }
    let sum: f32 = probs.iter().sum();
    if (sum - 1.0).abs() > 1e-5 {
        return Err(format!("the probabilities sum to {sum}, not 1").into());
    }
    let expected = reference(&input);
    if probs
        .iter()
        .zip(&expected)
        .any(|(a, b)| (a - b).abs() > 1e-5)
    {
        return Err(format!(
            "the compiled model gives {probs:?}, the Rust forward pass {expected:?}"
        )
        .into());
    }
    Ok(())
}
