//! Times `nnefc_dwconv` on one thread, warm caches, on mobilenet_v2's distinct depthwise
//! layers (a whole 3×3 map per call, clamped to [0, 6]) and on a few layers of the same
//! widths with few planes, whose input stays in L2 as a block's band buffer does, and prints
//! µs per call and ns per 16 outputs (the vector the AVX-512 kernels store). Run with
//! `cargo run --release -p nnefc-runtime --example dw_shapes [iterations]`; `ONLY=8@112s2`
//! times one layer (channels@side, stride), `ACT=0` drops the clamp.
//!
//! Not here: threads, cold caches, the band geometry the blocks call the kernel with, other
//! filters.

use nnefc_runtime::{DwArgs, nnefc_dwconv};
use std::time::Instant;

/// (channels, input side, stride) of mobilenet_v2's depthwise layers, one per shape.
const SHAPES: [(usize, usize, usize); 9] = [
    (32, 112, 1),
    (96, 112, 2),
    (144, 56, 1),
    (144, 56, 2),
    (192, 28, 1),
    (192, 28, 2),
    (384, 14, 1),
    (576, 14, 1),
    (576, 14, 2),
];
/// 960 planes of 7×7, then layers of few planes (inputs of at most 400 KB).
const MORE: [(usize, usize, usize); 6] = [
    (960, 7, 1),
    (4, 112, 1),
    (8, 112, 2),
    (16, 56, 1),
    (16, 56, 2),
    (64, 28, 2),
];

fn main() {
    let iters: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    println!("| channels | map | stride | µs per call | ns per 16 outputs |");
    println!("|---:|---|---:|---:|---:|");
    let only = std::env::var("ONLY").ok();
    for &(c, h, s) in SHAPES.iter().chain(MORE.iter()) {
        if only.as_ref().is_some_and(|o| *o != format!("{c}@{h}s{s}")) {
            continue;
        }
        let oh = h.div_ceil(s);
        let x: Vec<f32> = (0..c * h * h)
            .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let f: Vec<f32> = (0..c * 9)
            .map(|i| ((i * 31) % 17) as f32 / 17.0 - 0.5)
            .collect();
        let b: Vec<f32> = (0..c).map(|i| i as f32 / c as f32).collect();
        let mut y = vec![0f32; c * oh * oh];
        let a = DwArgs {
            n: 1,
            c,
            h,
            w: h,
            oh,
            ow: oh,
            kh: 3,
            kw: 3,
            sh: s,
            sw: s,
            dh: 1,
            dw: 1,
            pt: if s == 1 { 1 } else { 0 },
            pl: if s == 1 { 1 } else { 0 },
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
            y_sc: (oh * oh) as isize,
            y_sh: oh as isize,
            act: std::env::var("ACT")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(2),
            lo: 0.0,
            hi: 6.0,
        };
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..iters {
                // SAFETY: the buffers have the extents `a` states; null `par` is serial.
                unsafe { nnefc_dwconv(&a, core::ptr::null()) };
            }
            best = best.min(t.elapsed().as_secs_f64() / iters as f64);
        }
        let vectors = (c * oh * oh) as f64 / 16.0;
        println!(
            "| {c} | {h}² | {s} | {:.2} | {:.2} |",
            best * 1e6,
            best * 1e9 / vectors
        );
        std::hint::black_box(&y);
    }
}
