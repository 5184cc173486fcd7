//! Prints GFLOP/s of the GEMM engine for each kernel available on this CPU, on the shapes
//! that matter for CNN inference: a square 256³ product, a ResNet-like conv as GEMM
//! (m = 64 output channels, n = 56·56 pixels, k = 64·3·3), and batch-1 linear layers as
//! GEMV. Run with `cargo run --release -p nnefc-runtime --example gemm_bench [kernel|all] [shape]`;
//! `gemm_bench KERNEL custom M N K` times one shape with A in 6-row panels, and
//! `gemm_bench lanes custom M N K` the same shape with A in lane panels (the CPU's
//! selected kernel, the route the compiler's `lanes_pay` weighs against 6-row panels).
//! A trailing `relu6` adds what a network's convolution has, a row bias and a clamp to
//! [0, 6] (the tiles' fast epilogue), `swish` a row bias and swish (EfficientNet's);
//! without either C gets the bare product.
//! It measures single-threaded throughput only (best of several timed batches).

use nnefc_runtime::gemm::{KernelId, available_kernels, sgemm_with_kernel};
use nnefc_runtime::{
    GemmArgs, GemmEpilogue, Parallel, nnefc_sgemm_parallel, pack_a, pack_a_lanes,
    sgemm_scratch_bytes,
};
use std::time::{Duration, Instant};

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

/// One benchmark shape and operand layout.
struct Shape {
    name: &'static str,
    m: usize,
    n: usize,
    k: usize,
    packed: bool,
    /// B stored transposed (k contiguous per column).
    b_transposed: bool,
}

/// A (`m×k`, row-major) and B (`k×n`) with small repeating values.
fn operands(m: usize, n: usize, k: usize) -> (Vec<f32>, Vec<f32>) {
    let a = (0..m * k)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.1)
        .collect();
    let b = (0..k * n)
        .map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.1)
        .collect();
    (a, b)
}

/// The epilogue a run uses: none, or a row bias of `m` values and activation code `act`
/// (2 with [0, 6]: `relu6`; 4: `swish`); the bias lives in `bias`.
fn epilogue(act: Option<u32>, bias: &[f32]) -> GemmEpilogue {
    if let Some(act) = act {
        GemmEpilogue {
            bias: bias.as_ptr(),
            bias_kind: 1,
            activation: act,
            lo: 0.0,
            hi: 6.0,
            accumulate: 0,
        }
    } else {
        GemmEpilogue::NONE
    }
}

fn bench(id: KernelId, s: &Shape, act: Option<u32>) -> f64 {
    let (m, n, k) = (s.m, s.n, s.k);
    let (a, b) = operands(m, n, k);
    let packed = pack_a(m, k, &a, k, 1);
    let (rsb, csb) = if s.b_transposed {
        (1, k as isize)
    } else {
        (n as isize, 1)
    };
    let mut c = vec![0.0f32; m * n];
    let mut scratch = vec![Line([0; 64]); sgemm_scratch_bytes(m, n, k).div_ceil(64).max(1)];
    let bias = vec![0.5f32; m];
    let epi = epilogue(act, &bias);
    let run = || {
        let ap = if s.packed {
            packed.as_ptr()
        } else {
            a.as_ptr()
        };
        // SAFETY: buffers are sized for the row-major (or transposed-B) shapes above.
        unsafe {
            sgemm_with_kernel(
                id,
                m,
                n,
                k,
                ap,
                k as isize,
                1,
                s.packed,
                b.as_ptr(),
                rsb,
                csb,
                c.as_mut_ptr(),
                n as isize,
                &epi,
                scratch.as_mut_ptr().cast(),
            );
        }
    };
    let rate = gflops(2.0 * (m * n * k) as f64, run);
    std::hint::black_box(&c);
    rate
}

/// GFLOP/s of `run`, which does `flops` operations: one call to warm up, then short
/// batches, best of many (the machine is shared, so the best batch is the one that ran
/// undisturbed).
fn gflops(flops: f64, mut run: impl FnMut()) -> f64 {
    run();
    let reps = ((2e7 / flops) as usize).max(1);
    let mut best = Duration::MAX;
    for _ in 0..60 {
        let t = Instant::now();
        for _ in 0..reps {
            run();
        }
        best = best.min(t.elapsed() / reps as u32);
    }
    flops / best.as_secs_f64() / 1e9
}

/// GFLOP/s of `m×n×k` with A in lane panels, through the serial parallel entry.
fn bench_lanes(m: usize, n: usize, k: usize, act: Option<u32>) -> f64 {
    let (a, b) = operands(m, n, k);
    let packed = pack_a_lanes(m, k, &a, k, 1);
    let mut c = vec![0.0f32; m * n];
    let bias = vec![0.5f32; m];
    let epi = epilogue(act, &bias);
    let run = || {
        let args = GemmArgs {
            m,
            n,
            k,
            a: packed.as_ptr(),
            rsa: 0,
            csa: 0,
            a_packed: 2,
            b: b.as_ptr(),
            rsb: n as isize,
            csb: 1,
            c: c.as_mut_ptr(),
            rsc: n as isize,
            epilogue: &epi,
        };
        // SAFETY: operands sized for their strides; lane panels use no scratch.
        unsafe { nnefc_sgemm_parallel(&args, &Parallel::SERIAL, std::ptr::null_mut(), 0) };
    };
    let rate = gflops(2.0 * (m * n * k) as f64, run);
    std::hint::black_box(&c);
    rate
}

fn main() {
    let shapes = [
        Shape {
            name: "256x256x256",
            m: 256,
            n: 256,
            k: 256,
            packed: false,
            b_transposed: false,
        },
        Shape {
            name: "256x256x256 packed A",
            m: 256,
            n: 256,
            k: 256,
            packed: true,
            b_transposed: false,
        },
        Shape {
            name: "conv m=64 n=3136 k=576 packed A",
            m: 64,
            n: 3136,
            k: 576,
            packed: true,
            b_transposed: false,
        },
        Shape {
            name: "conv m=64 n=3136 k=576",
            m: 64,
            n: 3136,
            k: 576,
            packed: false,
            b_transposed: false,
        },
        Shape {
            name: "gemv m=1 n=1000 k=512 (B row-major)",
            m: 1,
            n: 1000,
            k: 512,
            packed: false,
            b_transposed: false,
        },
        Shape {
            name: "gemv m=1 n=1000 k=512 (B = Wᵀ)",
            m: 1,
            n: 1000,
            k: 512,
            packed: false,
            b_transposed: true,
        },
        Shape {
            name: "gemv m=1000 n=1 k=512 packed A",
            m: 1000,
            n: 1,
            k: 512,
            packed: true,
            b_transposed: false,
        },
    ];
    // Optional filters: `gemm_bench [kernel] [shape substring]`.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let kernel_filter = args.first().map(|s| s.to_lowercase());
    let shape_filter = args.get(1);
    // `gemm_bench KERNEL custom M N K`: one ad-hoc shape with packed A.
    let custom: Vec<usize> = args.iter().skip(2).filter_map(|a| a.parse().ok()).collect();
    let act = if args.iter().any(|a| a == "relu6") {
        Some(2)
    } else if args.iter().any(|a| a == "swish") {
        Some(4)
    } else {
        None
    };
    if let (Some("lanes"), [m, n, k]) = (kernel_filter.as_deref(), &custom[..]) {
        println!(
            "lanes    {m}x{n}x{k} {:7.1} GFLOP/s",
            bench_lanes(*m, *n, *k, act)
        );
        return;
    }
    let shapes = if let [m, n, k] = custom[..] {
        vec![Shape {
            name: "custom",
            m,
            n,
            k,
            packed: true,
            b_transposed: false,
        }]
    } else {
        shapes.into_iter().collect()
    };
    for id in available_kernels() {
        if kernel_filter
            .as_ref()
            .is_some_and(|f| f != "all" && !format!("{id:?}").to_lowercase().contains(f.as_str()))
        {
            continue;
        }
        for s in shapes
            .iter()
            .filter(|s| shape_filter.is_none_or(|f| s.name.contains(f.as_str())))
        {
            println!(
                "{:<8} {:<40} {:7.1} GFLOP/s",
                format!("{id:?}"),
                s.name,
                bench(id, s, act)
            );
        }
    }
}
