//! Times `nnefc_conv` (the direct convolution of a network's first layer) on one thread,
//! warm caches, on the first layers of the shared CNNs and on the bands of rows an
//! inverted-residual block runs it over, and prints µs per call and GFLOP/s (two per
//! multiply-add of the window). Run with
//! `cargo run --release -p nnefc-runtime --example conv_shapes [iterations]`; `ONLY=NAME`
//! times one shape.
//!
//! Not here: threads, cold caches, the GEMM route the compiler keeps for other shapes.

use nnefc_runtime::{ConvArgs, DwArgs, nnefc_conv, pack_conv_filter};
use std::time::Instant;

/// One first layer: input channels, output channels, input side, output rows (fewer than
/// the map's for a block's band), window side, stride, padding.
struct Layer {
    name: &'static str,
    cin: usize,
    cout: usize,
    h: usize,
    oh: usize,
    k: usize,
    s: usize,
    p: usize,
}

const fn layer(name: &'static str, cin: usize, cout: usize, h: usize, oh: usize) -> Layer {
    Layer {
        name,
        cin,
        cout,
        h,
        oh,
        k: 3,
        s: 2,
        p: 1,
    }
}

const SHAPES: [Layer; 5] = [
    layer("mobilenet_v2", 3, 32, 224, 112),
    layer("mobilenet_v2-band24", 3, 32, 224, 24),
    Layer {
        p: 0,
        ..layer("squeezenet1_1", 3, 64, 224, 111)
    },
    Layer {
        k: 7,
        p: 3,
        ..layer("resnet18", 3, 64, 224, 112)
    },
    Layer {
        s: 1,
        ..layer("3x3s1-64", 3, 32, 112, 112)
    },
];

fn main() {
    let iters: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    println!("| layer | µs per call | GFLOP/s |");
    println!("|---|---:|---:|");
    let only = std::env::var("ONLY").ok();
    for &Layer {
        name,
        cin,
        cout,
        h,
        oh,
        k,
        s,
        p,
    } in &SHAPES
    {
        if only.as_ref().is_some_and(|o| o != name) {
            continue;
        }
        let ow = (h + 2 * p - k) / s + 1;
        let x: Vec<f32> = (0..cin * h * h)
            .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let f: Vec<f32> = (0..cout * cin * k * k)
            .map(|i| ((i * 31) % 17) as f32 / 17.0 - 0.5)
            .collect();
        let f = pack_conv_filter(cout, cin, k, k, &f).expect("filter");
        let b: Vec<f32> = (0..cout).map(|i| i as f32 / cout as f32).collect();
        let mut y = vec![0f32; cout * oh * ow];
        let a = ConvArgs {
            geo: DwArgs {
                n: 1,
                c: cout,
                h,
                w: h,
                oh,
                ow,
                kh: k,
                kw: k,
                sh: s,
                sw: s,
                dh: 1,
                dw: 1,
                pt: p,
                pl: p,
                x: x.as_ptr(),
                x_sn: 0,
                x_sc: (h * h) as isize,
                x_sh: h as isize,
                filter: f.as_ptr(),
                bias: b.as_ptr(),
                bias_sc: 1,
                res: core::ptr::null(),
                y: y.as_mut_ptr(),
                y_sn: 0,
                y_sc: (oh * ow) as isize,
                y_sh: ow as isize,
                act: 2,
                lo: 0.0,
                hi: 6.0,
            },
            cin,
            filter_sn: 0,
            bias_sn: 0,
        };
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..iters {
                // SAFETY: the buffers have the extents `a` states; null `par` is serial.
                unsafe { nnefc_conv(&a, core::ptr::null()) };
            }
            best = best.min(t.elapsed().as_secs_f64() / iters as f64);
        }
        let flop = 2.0 * (cout * oh * ow * cin * k * k) as f64;
        println!("| {name} | {:.1} | {:.1} |", best * 1e6, flop / best / 1e9);
        std::hint::black_box(&y);
    }
}
