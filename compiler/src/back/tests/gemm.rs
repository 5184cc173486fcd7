//! The self-contained tiled GEMM (`emit::gemm`) against `ir::interp`: matmuls with every
//! tile remainder, transposes, batches, constant (packed) A, `linear` with bias, and
//! convolutions with fused bias/residual/activation (the accumulate epilogue) — natively
//! with `self_contained` forced on, and on aarch64 under qemu. Plus a timing probe
//! (ignored) comparing it with the runtime's GEMM.

use super::harness::{Rng, load, opts};
use super::window::{Arg, Batch, Below, aarch64_tools, check_on_aarch64};
use crate::back::BackendOptions;
use crate::ir::{BinaryOp, ConvAttrs, DType, Graph, Op, Tensor, TensorType, UnaryOp};

pub(super) fn self_contained(prefix: &str) -> BackendOptions {
    BackendOptions {
        self_contained: Some(true),
        ..opts(prefix)
    }
}

fn matmul(ta: bool, tb: bool) -> Op {
    Op::MatMul {
        transpose_a: ta,
        transpose_b: tb,
    }
}

fn gemm_batch(seed: u64) -> Batch {
    let mut r = Rng::new(seed);
    let mut b = Batch::new();
    let sizes = [1usize, 3, 4, 5, 6, 7, 8, 9, 12, 13, 17];
    for case in 0..14 {
        let m = sizes[r.below(sizes.len())];
        let n = sizes[r.below(sizes.len())];
        let k = sizes[r.below(sizes.len())];
        let (ta, tb) = (r.below(2) == 1, r.below(2) == 1);
        let sa = if ta { [k, m] } else { [m, k] };
        let sb = if tb { [n, k] } else { [k, n] };
        let a = r.tensor(DType::F32, &sa, -1.0, 1.0);
        let bt = r.tensor(DType::F32, &sb, -1.0, 1.0);
        let a_arg = if case % 3 == 0 {
            Arg::Const(a)
        } else {
            Arg::In(a)
        };
        assert!(b.add(
            format!("matmul {m}x{n}x{k} ta={ta} tb={tb}"),
            matmul(ta, tb),
            vec![a_arg, Arg::In(bt)],
        ));
    }
    // Batched, with broadcasting of A.
    let a = r.tensor(DType::F32, &[3, 5, 7], -1.0, 1.0);
    let bt = r.tensor(DType::F32, &[3, 7, 10], -1.0, 1.0);
    assert!(b.add(
        "batched matmul".into(),
        matmul(false, false),
        vec![Arg::In(a), Arg::In(bt)],
    ));
    // linear with bias (A = x, B = Wᵀ: non-contiguous B columns).
    let x = r.tensor(DType::F32, &[5, 11], -1.0, 1.0);
    let w = r.tensor(DType::F32, &[9, 11], -1.0, 1.0);
    let bias = r.tensor(DType::F32, &[1, 9], -1.0, 1.0);
    assert!(b.add(
        "linear".into(),
        Op::Linear,
        vec![Arg::In(x), Arg::Const(w), Arg::Const(bias)],
    ));
    b
}

#[test]
fn tiled_gemm_matches_interp() {
    let b = gemm_batch(61);
    let o = self_contained("tg");
    let art = crate::back::compile(&b.g, &o).expect("compile");
    assert!(art.kernels.contains("tiled gemm"), "{}", art.kernels);
    assert!(!art.object.windows(11).any(|w| w == b"nnefc_sgemm"));
    b.check_with(&o);
}

/// conv (GEMM path, filter packed at compile time) + bias, then `add` of a residual and
/// `relu`, fused into the GEMM epilogue (accumulate) in a self-contained object.
fn fused_conv_graph(r: &mut Rng, groups: usize) -> (Graph, Vec<Tensor>) {
    let mut g = Graph::new("fc");
    let xs = [1usize, 4, 7, 6];
    let x = g.add_input("x", TensorType::new(DType::F32, &xs));
    let res = g.add_input("res", TensorType::new(DType::F32, &[1, 6, 7, 6]));
    let f = g.add_const(
        r.tensor(DType::F32, &[6, 4 / groups, 3, 3], -1.0, 1.0),
        None,
        None,
    );
    let bias = g.add_const(r.tensor(DType::F32, &[1, 6], -1.0, 1.0), None, None);
    let attrs = ConvAttrs {
        border: crate::ir::Border::Constant,
        padding: Vec::new(),
        stride: Vec::new(),
        dilation: Vec::new(),
        groups,
        output_shape: Vec::new(),
    };
    let node = |g: &mut Graph, op: Op, ins: Vec<crate::ir::ValueId>| {
        let tys: Vec<_> = ins.iter().map(|v| g.ty(*v).clone()).collect();
        let refs: Vec<_> = tys.iter().collect();
        let out = crate::ir::infer::infer(&op, &refs).expect("infer");
        g.add_node(op, ins, out)[0]
    };
    let c = node(&mut g, Op::Conv(attrs), vec![x, f, bias]);
    let s = node(&mut g, Op::Binary(BinaryOp::Add), vec![c, res]);
    let y = node(&mut g, Op::Unary(UnaryOp::Relu), vec![s]);
    g.outputs.push(y);
    let inputs = vec![
        r.tensor(DType::F32, &xs, -1.0, 1.0),
        r.tensor(DType::F32, &[1, 6, 7, 6], -1.0, 1.0),
    ];
    (g, inputs)
}

#[test]
fn tiled_gemm_fused_conv_accumulates() {
    let mut r = Rng::new(62);
    for groups in [1, 2] {
        let (g, inputs) = fused_conv_graph(&mut r, groups);
        let o = self_contained(&format!("tgc{groups}"));
        let art = crate::back::compile(&g, &o).expect("compile");
        assert!(art.kernels.contains("accumulate=true"), "{}", art.kernels);
        let want = crate::ir::interp::run(&g, &inputs).expect("interp");
        let got = load(&g, &o).run(&inputs).expect("status 0");
        super::harness::assert_close("fused conv", &got[0], &want[0]);
    }
}

#[test]
fn tiled_gemm_on_aarch64_under_qemu() {
    if !aarch64_tools() {
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            (format!("skipped: aarch64 cross tools not installed (run .ci/setup)") + "\n")
                .as_bytes(),
        );
        return;
    }
    check_on_aarch64(gemm_batch(63), "xg");
}

/// GFLOP/s of a square matmul with constant A: tiled (self-contained) vs runtime GEMM.
/// `cargo test -p nnefc-compiler --lib back::tests::gemm::bench -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_tiled_vs_runtime() {
    for s in [64usize, 128, 256, 512] {
        let mut r = Rng::new(1);
        let mut g = Graph::new("bench");
        let a = g.add_const(r.tensor(DType::F32, &[s, s], -1.0, 1.0), None, None);
        let b = g.add_input("b", TensorType::new(DType::F32, &[s, s]));
        let y = g.add_node(
            matmul(false, false),
            vec![a, b],
            vec![TensorType::new(DType::F32, &[s, s])],
        );
        g.outputs.extend(y);
        let input = [r.tensor(DType::F32, &[s, s], -1.0, 1.0)];
        let flops = 2.0 * (s * s * s) as f64;
        let iters = (2_000_000_000 / (s * s * s)).clamp(3, 200);
        let tiled = load(&g, &self_contained("bt")).time(&input, iters);
        let rt = load(&g, &opts("br")).time(&input, iters);
        println!(
            "matmul {s}³: tiled {:.2} GFLOP/s, runtime {:.2} GFLOP/s",
            flops / tiled.as_secs_f64() / 1e9,
            flops / rt.as_secs_f64() / 1e9
        );
    }
}
