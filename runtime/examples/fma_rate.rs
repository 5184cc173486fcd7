//! Measures the core's multiply-add throughput: one thread runs 12 independent chains of
//! 512-bit fused multiply-adds (256-bit where the CPU lacks AVX-512) on registers for
//! about 50 ms, five times, and prints the best and worst rate in GFLOP/s, with the CPU's
//! family and model from `/proc/cpuinfo` (Linux). No memory is touched, so the number moves
//! only with the core's clock, its FMA pipes and what shares them. The development VM's
//! kind has run on AMD Zen 5 (family 26: two 512-bit FMA pipes) and on Zen 4 (family 25,
//! model 17: one 512-bit FMA a cycle, 117 GFLOP/s here), where every FMA-bound nnefc layer
//! takes about twice as long and ONNX Runtime's less; timings from the two are not
//! comparable. Run with `cargo run --release -p nnefc-runtime --example fma_rate` next to
//! a timing.
//!
//! Not here: memory bandwidth or latency, or more than one core.

use std::time::Instant;

/// Independent chains: more than the FMA latency times the pipes, so the loop is
/// throughput-bound.
const CHAINS: usize = 12;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::CHAINS;
    use core::arch::x86_64::*;

    /// `iters` rounds of one multiply-add on each chain; returns a sum so nothing is
    /// optimized away.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn run512(iters: u64) -> f32 {
        let (m, a) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
        let mut v = [_mm512_set1_ps(1.0); CHAINS];
        for _ in 0..iters {
            for x in v.iter_mut() {
                *x = _mm512_fmadd_ps(*x, m, a);
            }
        }
        v.iter().map(|&x| _mm512_reduce_add_ps(x)).sum()
    }

    /// As [`run512`] with 256-bit vectors.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn run256(iters: u64) -> f32 {
        let (m, a) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
        let mut v = [_mm256_set1_ps(1.0); CHAINS];
        for _ in 0..iters {
            for x in v.iter_mut() {
                *x = _mm256_fmadd_ps(*x, m, a);
            }
        }
        let mut out = [0f32; 8];
        let mut s = _mm256_setzero_ps();
        for x in v {
            s = _mm256_add_ps(s, x);
        }
        // SAFETY: 8 floats.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), s) };
        out.iter().sum()
    }
}

/// The first CPU's family and model, from `/proc/cpuinfo`.
fn cpu() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == name))
            .and_then(|l| l.split(':').nth(1))
            .map_or("?".to_string(), |v| v.trim().to_string())
    };
    format!(
        "cpu family {}, model {}",
        field("cpu family"),
        field("model")
    )
}

fn main() {
    #[cfg(target_arch = "x86_64")]
    {
        let (lanes, run): (u64, unsafe fn(u64) -> f32) = if std::is_x86_feature_detected!("avx512f")
        {
            (16, x86::run512)
        } else if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            (8, x86::run256)
        } else {
            println!("fma_rate: no AVX2+FMA on this CPU");
            return;
        };
        // Calibrate to about 50 ms a run.
        let mut iters = 1u64 << 16;
        loop {
            let t = Instant::now();
            // SAFETY: the CPU has the features `run` needs (detected above).
            std::hint::black_box(unsafe { run(iters) });
            if t.elapsed().as_secs_f64() > 0.02 {
                break;
            }
            iters *= 2;
        }
        let mut rates = Vec::new();
        let mut sink = 0.0;
        for _ in 0..5 {
            let t = Instant::now();
            // SAFETY: as above.
            sink += unsafe { run(iters) };
            let flops = (iters * CHAINS as u64 * lanes * 2) as f64;
            rates.push(flops / t.elapsed().as_secs_f64() / 1e9);
        }
        rates.sort_by(f64::total_cmp);
        println!(
            "fma rate, one thread, {}-bit: best {:.1} GFLOP/s, worst {:.1} ({}); {}",
            lanes * 32,
            rates[4],
            rates[0],
            if sink.is_nan() { "nan" } else { "ok" },
            cpu()
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    println!("fma_rate: x86-64 only");
}
