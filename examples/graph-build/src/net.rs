//! The small CNN's shapes, weights and input, shared by `build.rs` (which builds the
//! graph from them) and `main.rs` (which checks the compiled model against a plain Rust
//! forward pass over the same numbers). Deterministic: a tiny linear congruential
//! generator, no dependencies. It holds data only; no graph is built here.

/// Input extents `[N, C, H, W]`.
pub const INPUT: [usize; 4] = [1, 1, 8, 8];
/// Convolution output channels (3x3 kernel, padding 1, stride 1).
pub const CHANNELS: usize = 4;
/// Classes of the final linear layer.
pub const CLASSES: usize = 3;
/// Features after the 2x2 max pool, flattened: `CHANNELS * 4 * 4`.
pub const FEATURES: usize = CHANNELS * 4 * 4;

/// `n` values in `[-scale, scale)` from a 64-bit LCG (Knuth's MMIX constants) seeded
/// with `seed`; the top bits are used, the low ones of an LCG being poor.
pub fn lcg(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let unit = (s >> 40) as f32 / (1u64 << 24) as f32;
            (2.0 * unit - 1.0) * scale
        })
        .collect()
}

/// Convolution filter `[CHANNELS, 1, 3, 3]`.
pub fn conv_filter() -> Vec<f32> {
    lcg(1, CHANNELS * 9, 0.5)
}

/// Convolution bias `[1, CHANNELS]`.
pub fn conv_bias() -> Vec<f32> {
    lcg(2, CHANNELS, 0.1)
}

/// Linear weights `[CLASSES, FEATURES]`.
pub fn linear_filter() -> Vec<f32> {
    lcg(3, CLASSES * FEATURES, 0.2)
}

/// Linear bias `[1, CLASSES]`.
pub fn linear_bias() -> Vec<f32> {
    lcg(4, CLASSES, 0.1)
}

/// The input the example runs on `[1, 1, 8, 8]`.
pub fn input() -> Vec<f32> {
    lcg(5, INPUT.iter().product(), 1.0)
}
