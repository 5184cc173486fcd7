//! Rough throughput of a few generated kernels (ignored by default; run with
//! `cargo test -p nnefc-compiler --lib back::tests::perf -- --ignored --nocapture`).
//! Numbers are wall time per element of the raw entry point, best of 20 runs; measured
//! here (2 vCPU Zen 4 VM, n = 2^20, f32x4): relu 0.13 ns, exp 0.88 ns, tanh 1.7 ns,
//! sum 0.054 ns. Later, on a loaded shared VM, NaN-propagating min/max (relu, max reduce)
//! and exact exp(±∞)/sin(∞), before → after: relu 0.27 → 0.28, exp 0.59 → 0.61, tanh
//! 1.02 → 1.01, sum 0.13 → 0.13, max 0.13 → 0.13–0.14, sin 1.76 → 1.75, log 1.60 →
//! 1.60 ns (denormal handling in `log` would have made it 2.0 and was left out).

use super::harness::{Rng, load, opts};
use crate::ir::{DType, Graph, Op, ReduceOp, TensorType, UnaryOp};

fn time(g: &Graph, name: &str, n: usize) {
    let m = load(g, &opts(name));
    let x = Rng::new(1)
        .tensor(DType::F32, &[n], -3.0, 3.0)
        .to_le_bytes();
    let mut y = vec![0u8; m.art.interface.outputs[0].volume() * 4];
    #[repr(C, align(64))]
    #[derive(Clone, Copy)]
    struct B([u8; 64]);
    let mut ws = vec![B([0; 64]); m.art.workspace_size.div_ceil(64).max(1)];
    let ip = [x.as_ptr()];
    let op = [y.as_mut_ptr()];
    let mut best = f64::MAX;
    for _ in 0..20 {
        let t = std::time::Instant::now();
        // SAFETY: buffers sized from the interface, workspace aligned.
        let s = unsafe { m.run_raw(ip.as_ptr(), op.as_ptr(), ws.as_mut_ptr() as *mut u8) };
        best = best.min(t.elapsed().as_secs_f64());
        assert_eq!(s, 0);
    }
    println!("{name:6} n={n} {:.3} ns/element", best * 1e9 / n as f64);
}

#[test]
#[ignore]
fn perf() {
    let n = 1 << 20;
    for (name, op) in [
        ("relu", Op::Unary(UnaryOp::Relu)),
        ("exp", Op::Unary(UnaryOp::Exp)),
        ("tanh", Op::Unary(UnaryOp::Tanh)),
        (
            "sum",
            Op::Reduce {
                op: ReduceOp::Sum,
                axes: vec![0],
            },
        ),
        (
            "max",
            Op::Reduce {
                op: ReduceOp::Max,
                axes: vec![0],
            },
        ),
        ("sin", Op::Unary(UnaryOp::Sin)),
        ("log", Op::Unary(UnaryOp::Log)),
    ] {
        let mut g = Graph::new(name);
        let x = g.add_input("x", TensorType::new(DType::F32, &[n]));
        let oty = if name == "sum" || name == "max" {
            TensorType::new(DType::F32, &[1])
        } else {
            TensorType::new(DType::F32, &[n])
        };
        let y = g.add_node(op, vec![x], vec![oty])[0];
        g.outputs.push(y);
        time(&g, name, n);
    }
}
