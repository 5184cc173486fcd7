//! Per-op-family differential tests: each builds one graph with many outputs (one per
//! case), compiles it (vectorized and, for some, scalar-only), runs it on random inputs
//! and compares every output with `ir::interp::run`.

use super::harness::{Rng, assert_close, load, opts};
use crate::back::BackendOptions;
use crate::ir::{
    BinaryOp, Border, DType, Graph, Op, ReduceOp, Tensor, TensorType, UnaryOp, ValueId,
};

/// Appends `op(ins)` with types from `ir::infer`.
fn node(g: &mut Graph, op: Op, ins: &[ValueId]) -> Vec<ValueId> {
    let tys: Vec<TensorType> = ins.iter().map(|v| g.ty(*v).clone()).collect();
    let refs: Vec<&TensorType> = tys.iter().collect();
    let out = crate::ir::infer::infer(&op, &refs)
        .unwrap_or_else(|e| panic!("infer {}: {e}", op.mnemonic()));
    g.add_node(op, ins.to_vec(), out)
}

fn input(g: &mut Graph, name: &str, dt: DType, shape: &[usize]) -> ValueId {
    g.add_input(name, TensorType::new(dt, shape))
}

/// Compiles `g` with `o`, runs it on `inputs`, compares with the interpreter.
fn check_with(g: &Graph, inputs: &[Tensor], o: &BackendOptions) {
    let want = crate::ir::interp::run(g, inputs).unwrap_or_else(|e| panic!("interp: {e}"));
    let m = load(g, o);
    let got = m.run(inputs).unwrap_or_else(|s| panic!("status {s}"));
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        let name = g.value(g.outputs[i]).name.clone().unwrap_or_default();
        assert_close(&format!("{} output {i} {name}", o.prefix), a, b);
    }
}

/// Both the vectorized and the scalar-only code.
fn check(g: &Graph, inputs: &[Tensor], prefix: &str) {
    check_with(g, inputs, &opts(prefix));
    let scalar = BackendOptions {
        vectorize: false,
        ..opts(&format!("{prefix}_s"))
    };
    check_with(g, inputs, &scalar);
}

fn out(g: &mut Graph, v: ValueId, name: String) {
    g.values[v.index()].name = Some(name);
    g.outputs.push(v);
}

#[test]
fn unary_float_ops() {
    use UnaryOp as U;
    // (op, lo, hi) input range where the function is defined and well-conditioned.
    let cases: Vec<(UnaryOp, f32, f32)> = vec![
        (U::Copy, -3.0, 3.0),
        (U::Neg, -3.0, 3.0),
        (U::Rcp, 0.5, 3.0),
        (U::Exp, -20.0, 20.0),
        (U::Log, 0.01, 100.0),
        (U::Sin, -10.0, 10.0),
        (U::Cos, -10.0, 10.0),
        (U::Tan, -1.2, 1.2),
        (U::Asin, -0.95, 0.95),
        (U::Acos, -0.95, 0.95),
        (U::Atan, -20.0, 20.0),
        (U::Sinh, -5.0, 5.0),
        (U::Cosh, -5.0, 5.0),
        (U::Tanh, -6.0, 6.0),
        (U::Asinh, -20.0, 20.0),
        (U::Acosh, 1.01, 20.0),
        (U::Atanh, -0.9, 0.9),
        (U::Abs, -3.0, 3.0),
        (U::Sign, -3.0, 3.0),
        (U::Floor, -3.0, 3.0),
        (U::Ceil, -3.0, 3.0),
        (U::Round, -3.0, 3.0),
        (U::Sqr, -3.0, 3.0),
        (U::Sqrt, 0.0, 9.0),
        (U::Rsqr, 0.5, 3.0),
        (U::Rsqrt, 0.1, 9.0),
        (U::Log2, 0.01, 100.0),
        (U::Relu, -3.0, 3.0),
        (U::Sigmoid, -10.0, 10.0),
        (U::Softplus, -20.0, 20.0),
        (U::Silu, -8.0, 8.0),
        (U::Gelu, -8.0, 8.0),
        (U::Elu { alpha: 0.7 }, -4.0, 4.0),
        (
            U::Selu {
                alpha: 1.673_263_2,
                lambda: 1.050_701,
            },
            -4.0,
            4.0,
        ),
        (U::LeakyRelu { alpha: 0.1 }, -4.0, 4.0),
    ];
    let mut rng = Rng::new(1);
    for shape in [vec![3usize, 7], vec![1, 1], vec![2, 9]] {
        let mut g = Graph::new("unary");
        let mut inputs = Vec::new();
        for (i, (op, lo, hi)) in cases.iter().enumerate() {
            let x = input(&mut g, &format!("x{i}"), DType::F32, &shape);
            let y = node(&mut g, Op::Unary(*op), &[x])[0];
            out(&mut g, y, Op::Unary(*op).mnemonic().to_string());
            inputs.push(rng.tensor(DType::F32, &shape, *lo, *hi));
        }
        check(
            &g,
            &inputs,
            &format!("unary{}", shape.iter().product::<usize>()),
        );
    }
}

#[test]
fn unary_int_and_bool_ops() {
    let mut g = Graph::new("ui");
    let x = input(&mut g, "x", DType::I32, &[3, 5]);
    let b = input(&mut g, "b", DType::Bool, &[3, 5]);
    for op in [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Sign, UnaryOp::Copy] {
        let y = node(&mut g, Op::Unary(op), &[x])[0];
        out(&mut g, y, op_name(&Op::Unary(op)));
    }
    let y = node(&mut g, Op::Unary(UnaryOp::Not), &[b])[0];
    out(&mut g, y, "not".into());
    let mut rng = Rng::new(2);
    let inputs = vec![
        rng.tensor(DType::I32, &[3, 5], -50.0, 50.0),
        rng.tensor(DType::Bool, &[3, 5], 0.0, 1.0),
    ];
    check(&g, &inputs, "unary_int");
}

fn op_name(op: &Op) -> String {
    op.mnemonic().to_string()
}

#[test]
fn binary_ops_with_broadcasting() {
    use BinaryOp as B;
    let shapes: [(&[usize], &[usize]); 6] = [
        (&[2, 3, 5], &[2, 3, 5]),
        (&[2, 3, 5], &[2, 1, 5]),
        (&[2, 3, 5], &[2]),
        (&[1], &[4, 3]),
        (&[4, 1], &[1, 6]),
        (&[7], &[]),
    ];
    let mut rng = Rng::new(3);
    for (si, (sa, sb)) in shapes.iter().enumerate() {
        let mut g = Graph::new("bin");
        let mut inputs = Vec::new();
        let fa = input(&mut g, "fa", DType::F32, sa);
        let fb = input(&mut g, "fb", DType::F32, sb);
        let ia = input(&mut g, "ia", DType::I32, sa);
        let ib = input(&mut g, "ib", DType::I32, sb);
        let ba = input(&mut g, "ba", DType::Bool, sa);
        let bb = input(&mut g, "bb", DType::Bool, sb);
        inputs.push(rng.tensor(DType::F32, sa, 0.5, 3.0));
        inputs.push(rng.tensor(DType::F32, sb, -2.0, 2.0));
        inputs.push(rng.tensor(DType::I32, sa, -20.0, 20.0));
        // Nonzero divisors (the interpreter rejects division by zero).
        let mut ibv = rng.tensor(DType::I32, sb, 1.0, 9.0);
        if let crate::ir::TensorData::I32(v) = &mut ibv.data {
            for (i, x) in v.iter_mut().enumerate() {
                if i % 2 == 1 {
                    *x = -*x;
                }
            }
        }
        inputs.push(ibv);
        inputs.push(rng.tensor(DType::Bool, sa, 0.0, 1.0));
        inputs.push(rng.tensor(DType::Bool, sb, 0.0, 1.0));
        for op in [
            B::Add,
            B::Sub,
            B::Mul,
            B::Div,
            B::Pow,
            B::Min,
            B::Max,
            B::Lt,
            B::Gt,
            B::Le,
            B::Ge,
            B::Eq,
            B::Ne,
        ] {
            let y = node(&mut g, Op::Binary(op), &[fa, fb])[0];
            out(&mut g, y, format!("f_{}", op_name(&Op::Binary(op))));
        }
        for op in [
            B::Add,
            B::Sub,
            B::Mul,
            B::Div,
            B::Min,
            B::Max,
            B::Lt,
            B::Ge,
            B::Eq,
            B::Ne,
        ] {
            let y = node(&mut g, Op::Binary(op), &[ia, ib])[0];
            out(&mut g, y, format!("i_{}", op_name(&Op::Binary(op))));
        }
        for op in [B::And, B::Or] {
            let y = node(&mut g, Op::Binary(op), &[ba, bb])[0];
            out(&mut g, y, format!("b_{}", op_name(&Op::Binary(op))));
        }
        check(&g, &inputs, &format!("bin{si}"));
    }
}

#[test]
fn select_clamp_cast_batchnorm() {
    let mut g = Graph::new("misc");
    let c = input(&mut g, "c", DType::Bool, &[2, 6]);
    let x = input(&mut g, "x", DType::F32, &[2, 6]);
    let y = input(&mut g, "y", DType::F32, &[2]);
    let i = input(&mut g, "i", DType::I32, &[2, 6]);
    let s = node(&mut g, Op::Select, &[c, x, y])[0];
    out(&mut g, s, "select".into());
    let lo = g.add_const(Tensor::f32(vec![], vec![-0.5]), None, None);
    let hi = g.add_const(Tensor::f32(vec![], vec![0.7]), None, None);
    let cl = node(&mut g, Op::Clamp, &[x, lo, hi])[0];
    out(&mut g, cl, "clamp".into());
    for (v, to) in [
        (x, DType::I32),
        (x, DType::Bool),
        (i, DType::F32),
        (i, DType::Bool),
        (c, DType::F32),
        (c, DType::I32),
        (x, DType::F32),
    ] {
        let r = node(&mut g, Op::Cast { to }, &[v])[0];
        out(&mut g, r, format!("cast_{to}"));
    }
    // batch norm over [2, 3, 4] with [1, 3] parameters.
    let bx = input(&mut g, "bx", DType::F32, &[2, 3, 4]);
    let mean = g.add_const(Tensor::f32(vec![1, 3], vec![0.1, -0.2, 0.3]), None, None);
    let var = g.add_const(Tensor::f32(vec![1, 3], vec![1.0, 0.5, 2.0]), None, None);
    let off = g.add_const(Tensor::f32(vec![1, 3], vec![0.0, 1.0, -1.0]), None, None);
    let sc = g.add_const(Tensor::f32(vec![1, 3], vec![1.5, 0.5, 1.0]), None, None);
    let bn = node(
        &mut g,
        Op::BatchNorm { epsilon: 1e-3 },
        &[bx, mean, var, off, sc],
    )[0];
    out(&mut g, bn, "batch_norm".into());
    let mut rng = Rng::new(4);
    let inputs = vec![
        rng.tensor(DType::Bool, &[2, 6], 0.0, 1.0),
        rng.tensor(DType::F32, &[2, 6], -5.0, 5.0),
        rng.tensor(DType::F32, &[2], -1.0, 1.0),
        rng.tensor(DType::I32, &[2, 6], -3.0, 3.0),
        rng.tensor(DType::F32, &[2, 3, 4], -2.0, 2.0),
    ];
    check(&g, &inputs, "misc");
}

#[test]
fn reductions() {
    let mut rng = Rng::new(5);
    let axes_list: Vec<Vec<usize>> = vec![
        vec![],
        vec![0],
        vec![1],
        vec![2],
        vec![0, 2],
        vec![1, 2],
        vec![0, 1, 2],
    ];
    for shape in [vec![3usize, 4, 9], vec![1, 5, 1], vec![2, 1, 17]] {
        let mut g = Graph::new("red");
        let x = input(&mut g, "x", DType::F32, &shape);
        let b = input(&mut g, "b", DType::Bool, &shape);
        for axes in &axes_list {
            for op in [
                ReduceOp::Sum,
                ReduceOp::Mean,
                ReduceOp::Max,
                ReduceOp::Min,
                ReduceOp::ArgMax,
                ReduceOp::ArgMin,
            ] {
                let y = node(
                    &mut g,
                    Op::Reduce {
                        op,
                        axes: axes.clone(),
                    },
                    &[x],
                )[0];
                out(
                    &mut g,
                    y,
                    format!("{}{axes:?}", Op::Reduce { op, axes: vec![] }.mnemonic()),
                );
            }
            for op in [ReduceOp::Any, ReduceOp::All] {
                let y = node(
                    &mut g,
                    Op::Reduce {
                        op,
                        axes: axes.clone(),
                    },
                    &[b],
                )[0];
                out(
                    &mut g,
                    y,
                    format!("{}{axes:?}", Op::Reduce { op, axes: vec![] }.mnemonic()),
                );
            }
        }
        let inputs = vec![
            rng.tensor(DType::F32, &shape, -4.0, 4.0),
            rng.tensor(DType::Bool, &shape, 0.0, 1.0),
        ];
        check(
            &g,
            &inputs,
            &format!("red{}", shape.iter().product::<usize>()),
        );
    }
}

#[test]
fn softmax() {
    let mut g = Graph::new("sm");
    let x = input(&mut g, "x", DType::F32, &[2, 5, 6]);
    for axes in [vec![1usize], vec![2], vec![1, 2], vec![0]] {
        let y = node(&mut g, Op::Softmax { axes: axes.clone() }, &[x])[0];
        out(&mut g, y, format!("softmax{axes:?}"));
    }
    let inputs = vec![Rng::new(6).tensor(DType::F32, &[2, 5, 6], -8.0, 8.0)];
    check(&g, &inputs, "softmax");
}

#[test]
fn movement_ops() {
    let mut g = Graph::new("mv");
    let x = input(&mut g, "x", DType::F32, &[2, 3, 4]);
    let xi = input(&mut g, "xi", DType::I32, &[2, 3, 4]);
    let xb = input(&mut g, "xb", DType::Bool, &[2, 3, 4]);
    let z = input(&mut g, "z", DType::F32, &[2, 2, 4]);
    let idx = g.add_const(Tensor::i32(vec![2, 2], vec![2, 0, 1, 1]), None, None);
    let add = |g: &mut Graph, op: Op, ins: &[ValueId], name: &str| {
        for (k, y) in node(g, op, ins).into_iter().enumerate() {
            out(g, y, format!("{name}{k}"));
        }
    };
    add(
        &mut g,
        Op::Reshape {
            shape: vec![4, 0, -1],
            axis_start: 0,
            axis_count: -1,
        },
        &[x],
        "reshape",
    );
    add(
        &mut g,
        Op::Transpose {
            axes: vec![2, 0, 1],
        },
        &[x],
        "transpose",
    );
    add(
        &mut g,
        Op::Transpose { axes: vec![1, 0] },
        &[xi],
        "transpose_i",
    );
    add(
        &mut g,
        Op::Transpose {
            axes: vec![0, 2, 1],
        },
        &[xb],
        "transpose_b",
    );
    add(
        &mut g,
        Op::Split {
            axis: 2,
            ratios: vec![1, 3],
        },
        &[x],
        "split",
    );
    add(&mut g, Op::Concat { axis: 1 }, &[x, z], "concat");
    add(&mut g, Op::Stack { axis: 1 }, &[x, x], "stack");
    add(&mut g, Op::Unstack { axis: 1 }, &[x], "unstack");
    add(
        &mut g,
        Op::Slice {
            axes: vec![1, 2],
            begin: vec![1, -1],
            end: vec![3, 0],
            stride: vec![1, -2],
        },
        &[x],
        "slice",
    );
    add(
        &mut g,
        Op::Slice {
            axes: vec![2],
            begin: vec![1],
            end: vec![0],
            stride: vec![],
        },
        &[x],
        "slice_to_end",
    );
    add(
        &mut g,
        Op::Tile {
            repeats: vec![2, 1, 3],
        },
        &[x],
        "tile",
    );
    add(&mut g, Op::Gather { axis: 1 }, &[x, idx], "gather");
    let u = node(&mut g, Op::Unsqueeze { axes: vec![0, 3] }, &[x])[0];
    out(&mut g, u, "unsqueeze".into());
    add(&mut g, Op::Squeeze { axes: vec![0, 3] }, &[u], "squeeze");
    for border in [
        Border::Constant,
        Border::Replicate,
        Border::Reflect,
        Border::ReflectEven,
    ] {
        add(
            &mut g,
            Op::Pad {
                padding: vec![(0, 1), (2, 1), (1, 3)],
                border,
                value: 0.5,
            },
            &[x],
            border.mnemonic(),
        );
    }
    add(
        &mut g,
        Op::Pad {
            padding: vec![(1, 0), (0, 0), (0, 2)],
            border: Border::Constant,
            value: 7.0,
        },
        &[x],
        "pad_front",
    );
    add(
        &mut g,
        Op::Pad {
            padding: vec![(0, 0), (2, 2), (0, 0)],
            border: Border::Reflect,
            value: 0.0,
        },
        &[x],
        "pad_middle_dim",
    );
    let mut rng = Rng::new(7);
    let inputs = vec![
        rng.tensor(DType::F32, &[2, 3, 4], -1.0, 1.0),
        rng.tensor(DType::I32, &[2, 3, 4], -9.0, 9.0),
        rng.tensor(DType::Bool, &[2, 3, 4], 0.0, 1.0),
        rng.tensor(DType::F32, &[2, 2, 4], -1.0, 1.0),
    ];
    check(&g, &inputs, "movement");
}

#[test]
fn matmul_and_linear() {
    let mut g = Graph::new("mm");
    let a = input(&mut g, "a", DType::F32, &[5, 7]);
    let b = input(&mut g, "b", DType::F32, &[7, 9]);
    let at = input(&mut g, "at", DType::F32, &[7, 5]);
    let bt = input(&mut g, "bt", DType::F32, &[9, 7]);
    let ba = input(&mut g, "ba", DType::F32, &[2, 1, 3, 4]);
    let bb = input(&mut g, "bb", DType::F32, &[1, 3, 4, 6]);
    let mut rng = Rng::new(8);
    let wa = g.add_const(
        rng.tensor(DType::F32, &[5, 7], -1.0, 1.0),
        Some("w".into()),
        None,
    );
    let add = |g: &mut Graph, op: Op, ins: &[ValueId], name: &str| {
        let y = node(g, op, ins)[0];
        out(g, y, name.into());
    };
    add(
        &mut g,
        Op::MatMul {
            transpose_a: false,
            transpose_b: false,
        },
        &[a, b],
        "nn",
    );
    add(
        &mut g,
        Op::MatMul {
            transpose_a: true,
            transpose_b: false,
        },
        &[at, b],
        "tn",
    );
    add(
        &mut g,
        Op::MatMul {
            transpose_a: false,
            transpose_b: true,
        },
        &[a, bt],
        "nt",
    );
    add(
        &mut g,
        Op::MatMul {
            transpose_a: true,
            transpose_b: true,
        },
        &[at, bt],
        "tt",
    );
    add(
        &mut g,
        Op::MatMul {
            transpose_a: false,
            transpose_b: false,
        },
        &[ba, bb],
        "batched",
    );
    add(
        &mut g,
        Op::MatMul {
            transpose_a: false,
            transpose_b: false,
        },
        &[wa, b],
        "packed_const_a",
    );
    // linear: x [5,7], W [9,7], bias [1,9] and scalar bias.
    let w = g.add_const(
        rng.tensor(DType::F32, &[9, 7], -1.0, 1.0),
        Some("lw".into()),
        None,
    );
    let bias = g.add_const(rng.tensor(DType::F32, &[1, 9], -1.0, 1.0), None, None);
    let sbias = g.add_const(Tensor::f32(vec![1, 1], vec![0.25]), None, None);
    add(&mut g, Op::Linear, &[a, w, bias], "linear");
    add(&mut g, Op::Linear, &[a, w, sbias], "linear_scalar_bias");
    let inputs = vec![
        rng.tensor(DType::F32, &[5, 7], -1.0, 1.0),
        rng.tensor(DType::F32, &[7, 9], -1.0, 1.0),
        rng.tensor(DType::F32, &[7, 5], -1.0, 1.0),
        rng.tensor(DType::F32, &[9, 7], -1.0, 1.0),
        rng.tensor(DType::F32, &[2, 1, 3, 4], -1.0, 1.0),
        rng.tensor(DType::F32, &[1, 3, 4, 6], -1.0, 1.0),
    ];
    check_with(&g, &inputs, &opts("matmul"));
}

#[test]
fn chain_uses_arena_and_outputs_of_inputs() {
    // x → relu → softmax → neg → exp → (+ x) → out0; out1 = x (an input listed as output);
    // out2 = out0 again. The softmax keeps the relu out of a fusion group, so it is placed.
    let mut g = Graph::new("chain");
    let x = input(&mut g, "x", DType::F32, &[3, 11]);
    let r = node(&mut g, Op::Unary(UnaryOp::Relu), &[x])[0];
    let r = node(&mut g, Op::Softmax { axes: vec![1] }, &[r])[0];
    let e = node(&mut g, Op::Unary(UnaryOp::Neg), &[r])[0];
    let e = node(&mut g, Op::Unary(UnaryOp::Exp), &[e])[0];
    let s = node(&mut g, Op::Binary(BinaryOp::Add), &[e, x])[0];
    g.outputs.extend([s, x, s]);
    let inputs = vec![Rng::new(9).tensor(DType::F32, &[3, 11], -2.0, 2.0)];
    let m = load(&g, &opts("chain"));
    assert!(m.art.workspace_size > 0);
    let got = m.run(&inputs).expect("status 0");
    let want = crate::ir::interp::run(&g, &inputs).expect("interp");
    for (a, b) in got.iter().zip(&want) {
        assert_close("chain", a, b);
    }
}

/// `softmax(relu(conv(s) + s))` with `s = softmax(x)`: the residual is the conv's own
/// input, which the fused kernel reads while it writes, so the memory plan must not give
/// the chain's output the residual's slot (`passes::memory_plan`). Through the direct
/// kernel (8 channels), Winograd (40) and im2col + GEMM (40 channels, 1×1 filter).
#[test]
fn residual_that_is_the_conv_input() {
    let mut r = Rng::new(73);
    for (c, k) in [(8usize, 3usize), (40, 3), (40, 1)] {
        let mut g = Graph::new("ri");
        let xs = [1usize, c, 9, 7];
        let x = input(&mut g, "x", DType::F32, &xs);
        let f = g.add_const(r.tensor(DType::F32, &[c, c, k, k], -0.3, 0.3), None, None);
        let bias = g.add_const(r.tensor(DType::F32, &[1, c], -1.0, 1.0), None, None);
        let conv = Op::Conv(crate::ir::ConvAttrs {
            padding: vec![(k / 2, k / 2); 2],
            ..Default::default()
        });
        let s = node(&mut g, Op::Softmax { axes: vec![1] }, &[x])[0];
        let cv = node(&mut g, conv, &[s, f, bias])[0];
        let a = node(&mut g, Op::Binary(BinaryOp::Add), &[cv, s])[0];
        let y = node(&mut g, Op::Unary(UnaryOp::Relu), &[a])[0];
        let z = node(&mut g, Op::Softmax { axes: vec![1] }, &[y])[0];
        g.outputs.push(z);
        let inputs = vec![r.tensor(DType::F32, &xs, -2.0, 2.0)];
        check_with(&g, &inputs, &opts(&format!("ri{c}_{k}")));
    }
}

#[test]
fn object_is_deterministic() {
    let mut g = Graph::new("det");
    let x = input(&mut g, "x", DType::F32, &[2, 17]);
    let w = g.add_const(
        Rng::new(3).tensor(DType::F32, &[17, 4], -1.0, 1.0),
        None,
        None,
    );
    let y = node(&mut g, Op::Unary(UnaryOp::Tanh), &[x])[0];
    let z = node(
        &mut g,
        Op::MatMul {
            transpose_a: false,
            transpose_b: false,
        },
        &[y, w],
    )[0];
    let s = node(&mut g, Op::Softmax { axes: vec![1] }, &[z])[0];
    g.outputs.push(s);
    let a = crate::back::compile(&g, &opts("det")).unwrap();
    let b = crate::back::compile(&g, &opts("det")).unwrap();
    assert!(a.object == b.object, "two compiles differ");
}

#[test]
fn null_and_misaligned_pointers_give_status() {
    let mut g = Graph::new("st");
    let x = input(&mut g, "x", DType::F32, &[4]);
    let r = node(&mut g, Op::Unary(UnaryOp::Relu), &[x])[0];
    // Not element-wise: the relu output is not fused away, so the workspace is used.
    let y = node(&mut g, Op::Softmax { axes: vec![0] }, &[r])[0];
    g.outputs.push(y);
    let m = load(&g, &opts("st"));
    assert!(m.art.workspace_size >= 64);
    let xv = [0f32; 4];
    let mut yv = [0f32; 4];
    let ip = [xv.as_ptr() as *const u8];
    let op = [yv.as_mut_ptr() as *mut u8];
    #[repr(align(64))]
    struct Ws([u8; 256]);
    let mut ws = Ws([0; 256]);
    let wp = ws.0.as_mut_ptr();
    // SAFETY: pointers cover what the model touches (4 floats, ≤ 256 bytes of workspace).
    unsafe {
        assert_eq!(m.run_raw(std::ptr::null(), op.as_ptr(), wp), 1);
        assert_eq!(m.run_raw(ip.as_ptr(), std::ptr::null(), wp), 1);
        assert_eq!(m.run_raw(ip.as_ptr(), op.as_ptr(), std::ptr::null_mut()), 1);
        let nul = [std::ptr::null::<u8>()];
        assert_eq!(m.run_raw(nul.as_ptr(), op.as_ptr(), wp), 1);
        assert_eq!(m.run_raw(ip.as_ptr(), op.as_ptr(), wp.add(4)), 2);
        assert_eq!(m.run_raw(ip.as_ptr(), op.as_ptr(), wp), 0);
    }
    assert_eq!(yv, [0.25; 4]);
}

/// In-place concatenation (`passes::memory_plan`): pieces produced by a conv with a fused
/// relu, a fused element-wise chain and a plain op are written straight into the concat's
/// slot; a piece's second use in the same concat, a graph input, a piece that also feeds
/// a second concat, pieces at offsets that are not 64-byte aligned, and a concat along an
/// inner axis are copied; a piece read again after the concat keeps its value. Checked against the
/// interpreter (serial and through the reverse-order pool), and the plan is checked to
/// have aliased what it should.
#[test]
fn in_place_concat() {
    let mut g = Graph::new("cat");
    let x = input(&mut g, "x", DType::F32, &[1, 4, 6, 6]);
    let mut rng = Rng::new(31);
    let w = g.add_const(
        rng.tensor(DType::F32, &[16, 4, 3, 3], -0.5, 0.5),
        None,
        None,
    );
    let b = g.add_const(rng.tensor(DType::F32, &[1, 16], -0.5, 0.5), None, None);
    let conv = Op::Conv(crate::ir::ConvAttrs {
        border: Border::Constant,
        padding: vec![(1, 1), (1, 1)],
        stride: vec![],
        dilation: vec![],
        groups: 1,
        output_shape: vec![],
    });
    let c = node(&mut g, conv, &[x, w, b])[0];
    let c = node(&mut g, Op::Unary(UnaryOp::Relu), &[c])[0]; // [1,16,6,6]: 2304 bytes
    let e = node(&mut g, Op::Unary(UnaryOp::Exp), &[x])[0];
    let e = node(&mut g, Op::Binary(BinaryOp::Mul), &[e, x])[0]; // [1,4,6,6]: 576 bytes
    let n = node(&mut g, Op::Unary(UnaryOp::Neg), &[c])[0];
    // c at 0, e at 2304 (aligned), n at 2880 (aligned), e again (copied), x (input).
    let cat = node(&mut g, Op::Concat { axis: 1 }, &[c, e, n, e, x])[0];
    let s = node(&mut g, Op::Unary(UnaryOp::Sqrt), &[x])[0]; // [1,4,6,6]
    let t = node(&mut g, Op::Unary(UnaryOp::Abs), &[x])[0]; // [1,4,6,6]
    let odd = node(&mut g, Op::Unary(UnaryOp::Tanh), &[x])[0];
    // A 1-channel piece (144 bytes) first makes the next ones start unaligned (144, 720).
    let one = node(
        &mut g,
        Op::Slice {
            axes: vec![1],
            begin: vec![0],
            end: vec![1],
            stride: vec![],
        },
        &[odd],
    )[0];
    let cat2 = node(&mut g, Op::Concat { axis: 1 }, &[one, s, t, c])[0];
    let inner = node(&mut g, Op::Concat { axis: 2 }, &[s, t])[0];
    let after = node(&mut g, Op::Binary(BinaryOp::Add), &[e, x])[0];
    let after_n = node(&mut g, Op::Unary(UnaryOp::Exp), &[n])[0];
    let r1 = node(&mut g, Op::Unary(UnaryOp::Relu), &[cat])[0];
    let r2 = node(&mut g, Op::Unary(UnaryOp::Relu), &[cat2])[0];
    let r3 = node(&mut g, Op::Unary(UnaryOp::Relu), &[inner])[0];
    out(&mut g, r1, "cat".into());
    out(&mut g, r2, "cat2".into());
    out(&mut g, r3, "inner".into());
    out(&mut g, after, "after".into());
    out(&mut g, after_n, "after_n".into());
    let plan = crate::passes::memory_plan::plan(&g).expect("plan");
    let at = |v: ValueId| plan.slot(v).expect("in the arena").offset;
    assert_eq!(at(c), at(cat), "conv piece in place");
    assert_eq!(at(e), at(cat) + 2304, "element-wise piece in place");
    assert_eq!(at(n), at(cat) + 2880, "plain piece in place");
    assert!(
        at(s) != at(cat2) + 144 && at(t) != at(cat2) + 720,
        "unaligned pieces copied"
    );
    assert_eq!(at(one), at(cat2), "aligned first piece in place");
    assert!(
        !(at(cat2)..at(cat2) + 3600).contains(&at(c)),
        "c is in one group only"
    );
    let inputs = vec![Rng::new(5).tensor(DType::F32, &[1, 4, 6, 6], 0.0, 2.0)];
    check(&g, &inputs, "cat");
}
