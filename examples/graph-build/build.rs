//! Builds a small CNN in Rust with `nnefc::graph` (input `[1,1,8,8]` → 3x3 conv with 4
//! channels, padding 1, bias → relu → 2x2 max pool, stride 2 → reshape → linear to 3
//! classes → softmax), weights from `src/net.rs`; writes it as an NNEF model folder in
//! `OUT_DIR` and compiles that with `nnefc::Build` into a static library and the typed
//! module `small_cnn.rs` that `src/main.rs` includes. Nothing else happens here.

use nnefc::compiler::ir::{DType, Tensor};
use nnefc::graph::{Arg, Graph, Result, ops};
use std::path::PathBuf;

// The input is for `main.rs`; the graph uses the rest.
#[allow(dead_code)]
#[path = "src/net.rs"]
mod net;

fn small_cnn() -> Result<Graph> {
    let g = Graph::new("small_cnn");
    let x = g.input("input", DType::F32, &net::INPUT)?;
    let w = g.variable(
        "conv/filter",
        Tensor::f32(vec![net::CHANNELS, 1, 3, 3], net::conv_filter()),
    )?;
    let b = g.variable(
        "conv/bias",
        Tensor::f32(vec![1, net::CHANNELS], net::conv_bias()),
    )?;
    let conv = ops::conv(
        &x,
        &w,
        ops::ConvAttrs {
            bias: Some(Arg::from(&b)),
            padding: vec![(1, 1), (1, 1)],
            ..Default::default()
        },
    )?;
    let relu = ops::relu(&conv)?;
    let pool = ops::max_pool(
        &relu,
        vec![1, 1, 2, 2],
        ops::MaxPoolAttrs {
            stride: vec![1, 1, 2, 2],
            ..Default::default()
        },
    )?;
    let flat = ops::reshape(&pool, vec![1, -1], ops::ReshapeAttrs::default())?;
    let fw = g.variable(
        "fc/filter",
        Tensor::f32(vec![net::CLASSES, net::FEATURES], net::linear_filter()),
    )?;
    let fb = g.variable(
        "fc/bias",
        Tensor::f32(vec![1, net::CLASSES], net::linear_bias()),
    )?;
    let logits = ops::linear(
        &flat,
        &fw,
        ops::LinearAttrs {
            bias: Some(fb.into()),
        },
    )?;
    let probs = ops::softmax(&logits, ops::SoftmaxAttrs { axes: vec![1] })?;
    g.output("probabilities", &probs)?;
    Ok(g)
}

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let doc = small_cnn()
        .and_then(|g| g.finish())
        .unwrap_or_else(|e| panic!("building the graph: {e}"));
    for w in &doc.warnings {
        println!("cargo:warning={w}");
    }
    let model = out_dir.join("small_cnn.nnef");
    doc.write(&model)
        .unwrap_or_else(|e| panic!("writing {}: {e}", model.display()));
    // The model is written by this script, so it changes on every run: only the script
    // (and the weights it includes) decide whether to run again. `cargo_metadata(false)`
    // keeps `Build` from watching the written files, which would rerun it every build;
    // the link directives it would print are printed here.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/net.rs");
    nnefc::Build::new()
        .model(&model)
        .prefix("small_cnn")
        .cargo_metadata(false)
        .compile();
    println!("cargo:rustc-link-search=native={}", out_dir.display());
    println!("cargo:rustc-link-lib=static=small_cnn");
}
