//! i32 and bool coverage: every op the spec defines on integer or logical tensors
//! (comparisons, select, logic, integer arithmetic, arg reductions, any/all, gather, cast
//! of every dtype pair, the movement ops) compiled and compared with `ir::interp`; and the
//! documented integer-division-by-zero behaviour (see `back` module docs).

use super::harness::{Rng, load, opts};
use super::window::{Arg, Batch};
use crate::ir::{BinaryOp, DType, Graph, Op, ReduceOp, Tensor, TensorType, UnaryOp};

fn add(b: &mut Batch, what: &str, op: Op, args: Vec<Arg>) {
    assert!(
        b.add(what.to_string(), op, args),
        "{what}: rejected by infer"
    );
}

/// i32 values without zeros (so division is defined) in [-9, 9].
fn nonzero_i32(r: &mut Rng, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::i32(
        shape.to_vec(),
        (0..n)
            .map(|_| {
                let v = r.f32(1.0, 10.0).floor() as i32;
                if r.next() & 1 == 0 { v } else { -v }
            })
            .collect(),
    )
}

#[test]
fn elementwise_int_and_bool() {
    let mut r = Rng::new(21);
    let mut b = Batch::new();
    let shapes: [(&[usize], &[usize]); 3] = [
        (&[2, 5], &[2, 5]),
        (&[3, 1, 4], &[3, 2, 1]),
        (&[1], &[4, 7]),
    ];
    for (sa, sb) in shapes {
        let xi = r.tensor(DType::I32, sa, -20.0, 20.0);
        let yi = nonzero_i32(&mut r, sb);
        let xf = r.tensor(DType::F32, sa, -2.0, 2.0);
        let yf = r.tensor(DType::F32, sb, -2.0, 2.0);
        let xb = r.tensor(DType::Bool, sa, 0.0, 1.0);
        let yb = r.tensor(DType::Bool, sb, 0.0, 1.0);
        use BinaryOp as B;
        for op in [B::Add, B::Sub, B::Mul, B::Div, B::Min, B::Max] {
            add(
                &mut b,
                &format!("i32 {op:?} {sa:?} {sb:?}"),
                Op::Binary(op),
                vec![Arg::In(xi.clone()), Arg::In(yi.clone())],
            );
        }
        for op in [B::Lt, B::Gt, B::Le, B::Ge, B::Eq, B::Ne] {
            add(
                &mut b,
                &format!("i32 {op:?}"),
                Op::Binary(op),
                vec![Arg::In(xi.clone()), Arg::In(yi.clone())],
            );
            add(
                &mut b,
                &format!("f32 {op:?}"),
                Op::Binary(op),
                vec![Arg::In(xf.clone()), Arg::In(yf.clone())],
            );
        }
        for op in [B::And, B::Or] {
            add(
                &mut b,
                &format!("bool {op:?}"),
                Op::Binary(op),
                vec![Arg::In(xb.clone()), Arg::In(yb.clone())],
            );
        }
        add(
            &mut b,
            "not",
            Op::Unary(UnaryOp::Not),
            vec![Arg::In(xb.clone())],
        );
        for u in [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Sign, UnaryOp::Copy] {
            add(
                &mut b,
                &format!("i32 {u:?}"),
                Op::Unary(u),
                vec![Arg::Const(xi.clone())],
            );
        }
        add(
            &mut b,
            "bool copy",
            Op::Unary(UnaryOp::Copy),
            vec![Arg::In(xb.clone())],
        );
        // select over every value dtype, condition broadcast.
        for (t, f) in [
            (xi.clone(), yi.clone()),
            (xf.clone(), yf.clone()),
            (xb.clone(), yb.clone()),
        ] {
            add(
                &mut b,
                &format!("select {:?}", t.dtype()),
                Op::Select,
                vec![Arg::In(yb.clone()), Arg::In(t), Arg::In(f)],
            );
        }
        add(
            &mut b,
            "clamp i32",
            Op::Clamp,
            vec![
                Arg::In(xi.clone()),
                Arg::Const(Tensor::i32(vec![], vec![-5])),
                Arg::Const(Tensor::i32(vec![], vec![7])),
            ],
        );
        // cast: all nine pairs.
        for (src, what) in [(&xi, "i32"), (&xf, "f32"), (&xb, "bool")] {
            for to in [DType::I32, DType::F32, DType::Bool] {
                add(
                    &mut b,
                    &format!("cast {what} → {to:?}"),
                    Op::Cast { to },
                    vec![Arg::In(src.clone())],
                );
            }
        }
    }
    b.check("intel");
}

#[test]
fn reductions_int_and_bool() {
    let mut r = Rng::new(22);
    let mut b = Batch::new();
    for shape in [vec![3usize, 4, 5], vec![1, 7, 1], vec![2, 1, 9]] {
        let x = r.tensor(DType::F32, &shape, -3.0, 3.0);
        // Ties: small integers as f32 (first maximum wins).
        let t = Tensor::f32(
            shape.clone(),
            r.tensor(DType::I32, &shape, -2.0, 2.0)
                .to_le_bytes()
                .chunks(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f32)
                .collect(),
        );
        let xb = r.tensor(DType::Bool, &shape, 0.0, 1.0);
        for axes in [vec![], vec![0], vec![2], vec![0, 2], vec![0, 1, 2], vec![1]] {
            for (op, src) in [
                (ReduceOp::ArgMax, &x),
                (ReduceOp::ArgMin, &x),
                (ReduceOp::ArgMax, &t),
                (ReduceOp::ArgMin, &t),
                (ReduceOp::Any, &xb),
                (ReduceOp::All, &xb),
            ] {
                add(
                    &mut b,
                    &format!("{op:?} {shape:?} {axes:?}"),
                    Op::Reduce {
                        op,
                        axes: axes.clone(),
                    },
                    vec![Arg::In(src.clone())],
                );
            }
        }
    }
    b.check("intred");
}

#[test]
fn movement_int_and_bool() {
    let mut r = Rng::new(23);
    let mut b = Batch::new();
    for dt in [DType::I32, DType::Bool] {
        let x = r.tensor(dt, &[2, 3, 4], -50.0, 50.0);
        let y = r.tensor(dt, &[2, 1, 4], -50.0, 50.0);
        let n = format!("{dt:?}");
        add(
            &mut b,
            &format!("{n} reshape"),
            Op::Reshape {
                shape: vec![4, -1],
                axis_start: 0,
                axis_count: -1,
            },
            vec![Arg::In(x.clone())],
        );
        add(
            &mut b,
            &format!("{n} squeeze"),
            Op::Squeeze { axes: vec![1] },
            vec![Arg::In(y.clone())],
        );
        add(
            &mut b,
            &format!("{n} unsqueeze"),
            Op::Unsqueeze { axes: vec![0, 3] },
            vec![Arg::In(y.clone())],
        );
        add(
            &mut b,
            &format!("{n} transpose"),
            Op::Transpose {
                axes: vec![2, 0, 1],
            },
            vec![Arg::In(x.clone())],
        );
        add(
            &mut b,
            &format!("{n} concat"),
            Op::Concat { axis: 1 },
            vec![Arg::In(x.clone()), Arg::Const(y.clone())],
        );
        add(
            &mut b,
            &format!("{n} stack"),
            Op::Stack { axis: 1 },
            vec![Arg::In(x.clone()), Arg::In(x.clone())],
        );
        add(
            &mut b,
            &format!("{n} unstack"),
            Op::Unstack { axis: 2 },
            vec![Arg::In(x.clone())],
        );
        add(
            &mut b,
            &format!("{n} split"),
            Op::Split {
                axis: 2,
                ratios: vec![1, 3],
            },
            vec![Arg::In(x.clone())],
        );
        add(
            &mut b,
            &format!("{n} slice"),
            Op::Slice {
                axes: vec![1, 2],
                begin: vec![1, -1],
                end: vec![3, 0],
                stride: vec![1, -2],
            },
            vec![Arg::In(x.clone())],
        );
        add(
            &mut b,
            &format!("{n} tile"),
            Op::Tile {
                repeats: vec![2, 1, 3],
            },
            vec![Arg::In(y.clone())],
        );
        let idx = Tensor::i32(vec![2, 3], vec![0, 3, 1, 1, 2, 3]);
        add(
            &mut b,
            &format!("{n} gather"),
            Op::Gather { axis: 2 },
            vec![Arg::In(x.clone()), Arg::In(idx)],
        );
        add(
            &mut b,
            &format!("{n} copy const"),
            Op::Unary(UnaryOp::Copy),
            vec![Arg::Const(x.clone())],
        );
    }
    b.check("intmov");
}

/// Integer division by zero: the interpreter reports an error, compiled code yields 0
/// (and `i32::MIN / −1` yields 0) without trapping; the run still returns status 0.
#[test]
fn integer_division_by_zero_gives_zero() {
    let mut g = Graph::new("idiv");
    let t = TensorType::new(DType::I32, &[5]);
    let x = g.add_input("x", t.clone());
    let y = g.add_input("y", t.clone());
    let z = g.add_node(Op::Binary(BinaryOp::Div), vec![x, y], vec![t]);
    g.outputs.extend(z);
    let inputs = [
        Tensor::i32(vec![5], vec![7, -7, i32::MIN, 9, 0]),
        Tensor::i32(vec![5], vec![0, 2, -1, -2, 0]),
    ];
    assert!(crate::ir::interp::run(&g, &inputs).is_err());
    let m = load(&g, &opts("idiv"));
    let got = m.run(&inputs).expect("status 0");
    assert_eq!(got[0], Tensor::i32(vec![5], vec![0, -3, 0, -4, 0]));
}
