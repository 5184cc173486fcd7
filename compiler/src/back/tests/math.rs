//! Measures the inline polynomial math against f64 `std` on dense sweeps and bounds the
//! error. Print the numbers with
//! `cargo test -p nnefc-compiler --lib math_accuracy -- --nocapture`.

use super::harness::{load, opts};
use crate::ir::{DType, Graph, Op, Tensor, TensorType, UnaryOp};

struct Case {
    op: UnaryOp,
    /// Sweep points (already in f32).
    xs: Vec<f32>,
    exact: fn(f64) -> f64,
    /// Error measure: relative (`true`), or absolute scaled by 1/max(1, |exact|) (`false`).
    rel: bool,
    bound: f64,
}

fn linspace(lo: f32, hi: f32, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| lo + (hi - lo) * i as f32 / (n - 1) as f32)
        .collect()
}
fn logspace(lo: f32, hi: f32, n: usize) -> Vec<f32> {
    linspace(lo, hi, n)
        .into_iter()
        .map(|e| 10f32.powf(e))
        .collect()
}

#[test]
fn math_accuracy() {
    const N: usize = 100_003; // odd: exercises the scalar tail too
    let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
    let cases = vec![
        Case {
            op: UnaryOp::Exp,
            xs: linspace(-87.0, 88.0, N),
            exact: f64::exp,
            rel: true,
            bound: 3e-7,
        },
        Case {
            op: UnaryOp::Log,
            xs: logspace(-30.0, 30.0, N),
            exact: f64::ln,
            rel: false,
            bound: 3e-7,
        },
        Case {
            op: UnaryOp::Log,
            xs: linspace(0.5, 2.0, N),
            exact: f64::ln,
            rel: false,
            bound: 3e-7,
        },
        Case {
            op: UnaryOp::Tanh,
            xs: linspace(-10.0, 10.0, N),
            exact: f64::tanh,
            rel: false,
            bound: 3e-7,
        },
        Case {
            op: UnaryOp::Sigmoid,
            xs: linspace(-30.0, 30.0, N),
            exact: sig,
            rel: false,
            bound: 3e-7,
        },
        Case {
            op: UnaryOp::Sin,
            xs: linspace(-100.0, 100.0, N),
            exact: f64::sin,
            rel: false,
            bound: 1e-6,
        },
        Case {
            op: UnaryOp::Cos,
            xs: linspace(-100.0, 100.0, N),
            exact: f64::cos,
            rel: false,
            bound: 1e-6,
        },
        Case {
            op: UnaryOp::Atan,
            xs: linspace(-100.0, 100.0, N),
            exact: f64::atan,
            rel: false,
            bound: 3e-7,
        },
        Case {
            op: UnaryOp::Asin,
            xs: linspace(-0.999, 0.999, N),
            exact: f64::asin,
            rel: false,
            bound: 1e-5,
        },
        Case {
            op: UnaryOp::Acos,
            xs: linspace(-0.999, 0.999, N),
            exact: f64::acos,
            rel: false,
            bound: 1e-5,
        },
        Case {
            op: UnaryOp::Sinh,
            xs: linspace(-10.0, 10.0, N),
            exact: f64::sinh,
            rel: false,
            bound: 1e-6,
        },
        Case {
            op: UnaryOp::Softplus,
            xs: linspace(-30.0, 30.0, N),
            exact: |x| x.max(0.0) + (-x.abs()).exp().ln_1p(),
            rel: false,
            bound: 1e-6,
        },
        Case {
            op: UnaryOp::Atanh,
            xs: linspace(-0.99, 0.99, N),
            exact: f64::atanh,
            rel: false,
            bound: 1e-6,
        },
        Case {
            op: UnaryOp::Asinh,
            xs: linspace(-100.0, 100.0, N),
            exact: f64::asinh,
            rel: false,
            bound: 1e-6,
        },
    ];
    let mut g = Graph::new("math");
    let mut inputs = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let ty = TensorType::new(DType::F32, &[c.xs.len()]);
        let x = g.add_input(format!("x{i}"), ty.clone());
        let y = g.add_node(Op::Unary(c.op), vec![x], vec![ty])[0];
        g.outputs.push(y);
        inputs.push(Tensor::f32(vec![c.xs.len()], c.xs.clone()));
    }
    let m = load(&g, &opts("math"));
    let got = m.run(&inputs).expect("status 0");
    let mut report = String::new();
    let mut failures = String::new();
    for (c, y) in cases.iter().zip(&got) {
        let y = y.as_f32().expect("f32");
        let mut worst = (0.0f64, 0.0f32);
        for (&x, &v) in c.xs.iter().zip(y) {
            let e = (c.exact)(f64::from(x));
            let err = if c.rel {
                ((f64::from(v) - e) / e.abs().max(f64::MIN_POSITIVE)).abs()
            } else {
                (f64::from(v) - e).abs() / e.abs().max(1.0)
            };
            if err > worst.0 || err.is_nan() {
                worst = (err, x);
            }
        }
        let kind = if c.rel { "rel" } else { "abs/max(1,|y|)" };
        report += &format!(
            "{:8} [{:e}, {:e}] max {kind} error {:.2e} at x={}\n",
            Op::Unary(c.op).mnemonic(),
            c.xs[0],
            c.xs[c.xs.len() - 1],
            worst.0,
            worst.1
        );
        if worst.0 > c.bound || worst.0.is_nan() {
            failures += &format!(
                "{}: error {} at x={} exceeds {}\n",
                Op::Unary(c.op).mnemonic(),
                worst.0,
                worst.1,
                c.bound
            );
        }
    }
    println!("{report}");
    assert!(failures.is_empty(), "{failures}");
}
